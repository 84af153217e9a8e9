package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/gpreduce/gpreduce/internal/testutil"
)

func openSingle(t *testing.T, tweak func(*Config)) (*Node, Config) {
	t.Helper()
	cfg := testConfig(t, "solo", testLogger(t))
	cfg.Bootstrap = true
	if tweak != nil {
		tweak(&cfg)
	}
	n := mustOpen(t, cfg)
	cfg.RaftAddr = n.Addr()
	waitSelfLeader(t, n)
	return n, cfg
}

func TestConfigDefaults(t *testing.T) {
	cfg := Config{ID: "a", RaftAddr: "127.0.0.1:0", DataDir: t.TempDir()}
	rc, err := cfg.raftConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxCheckpointBytes != 64<<20 || cfg.ModelChunkBytes != 1<<20 || cfg.MaxModelBytes != 512<<20 || cfg.ApplyTimeout != DefaultApplyTimeout ||
		rc.SnapshotThreshold != DefaultSnapshotThreshold || cfg.SnapshotBytes != 8<<20 || rc.TrailingLogs != 16 || rc.HeartbeatTimeout != time.Second {
		t.Fatalf("defaults: %+v", cfg)
	}
	// Setting only a short heartbeat keeps the raft config valid.
	cfg = Config{ID: "a", RaftAddr: "x", DataDir: "d", HeartbeatTimeout: 200 * time.Millisecond}
	if _, err := cfg.raftConfig(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Config{{RaftAddr: "x", DataDir: "d"}, {ID: "a", DataDir: "d"}, {ID: "a", RaftAddr: "x"}} {
		if _, err := Open(t.Context(), bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Open(%+v): %v, want ErrInvalidArgument", bad, err)
		}
	}
}

func TestSingleNodeSubmitAndRead(t *testing.T) {
	n, _ := openSingle(t, nil)
	ctx := testContext(t)

	changes := n.LeadershipChanges()
	select {
	case v := <-changes:
		if !v {
			t.Fatal("LeadershipChanges: first value false on the leader")
		}
	case <-time.After(testutil.MinWait): // only bounds a hang
		t.Fatal("no leadership value")
	}
	if addr, id := n.Leader(); addr != n.Addr() || id != "solo" {
		t.Fatalf("Leader() = %s, %s", addr, id)
	}
	servers, err := n.Servers(ctx)
	if err != nil || len(servers) != 1 || servers[0] != (Member{ID: "solo", Addr: n.Addr(), Voter: true, Leader: true}) {
		t.Fatalf("Servers() = %+v, %v", servers, err)
	}

	// CreatedAt orders the listing, ID breaks ties.
	if err := n.SubmitJob(ctx, "b", []byte(`{"method":"gl"}`), t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := n.SubmitJob(ctx, "a", []byte("spec-a"), t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := n.SubmitJob(ctx, "c", nil, t0); err != nil {
		t.Fatal(err)
	}
	if err := n.SubmitJob(ctx, "a", nil, t0); !errors.Is(err, ErrJobExists) {
		t.Fatalf("duplicate submit: %v", err)
	}
	if err := n.SubmitJob(ctx, "", nil, t0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("empty ID: %v", err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := n.SubmitJob(canceled, "canceled", nil, t0); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled context: %v", err)
	}
	// A zero time is stamped by the leader.
	before := time.Now()
	if err := n.SubmitJob(ctx, "now", nil, time.Time{}); err != nil {
		t.Fatal(err)
	}

	var ids []string
	for _, j := range n.Jobs() {
		ids = append(ids, j.ID)
	}
	if want := []string{"c", "a", "b", "now"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("Jobs() order %v, want %v", ids, want)
	}
	j, err := n.Job("b")
	if err != nil {
		t.Fatal(err)
	}
	if j.State != JobPending || string(j.Spec) != `{"method":"gl"}` || !j.CreatedAt.Equal(t0.Add(time.Second)) || !j.UpdatedAt.Equal(j.CreatedAt) {
		t.Fatalf("Job(b) = %+v", j)
	}
	j.Spec[0] = 'X' // a copy
	if j2, _ := n.Job("b"); j2.Spec[0] != '{' {
		t.Fatal("Job returned shared memory")
	}
	if j, _ := n.Job("now"); j.CreatedAt.Before(before.Add(-time.Second)) || j.CreatedAt.After(time.Now()) {
		t.Fatalf("zero time stamped as %v", j.CreatedAt)
	}
	if _, err := n.Job("missing"); !errors.Is(err, ErrJobNotFound) {
		t.Fatalf("Job(missing): %v", err)
	}

	if err := n.SetState(ctx, "a", JobRunning, "", t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	running := n.JobsInState(JobRunning)
	if len(running) != 1 || running[0].ID != "a" {
		t.Fatalf("JobsInState(running) = %+v", running)
	}
	if got := n.JobsInState(JobPending, JobRunning); len(got) != 4 {
		t.Fatalf("JobsInState(pending, running) has %d jobs", len(got))
	}
	if err := n.Barrier(ctx); err != nil {
		t.Fatal(err)
	}

	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	// The subscription ends with false and is closed.
	var last bool
	for v := range changes {
		last = v
	}
	if last {
		t.Fatal("last leadership value after Close is true")
	}
	if err := n.SubmitJob(ctx, "late", nil, t0); !errors.Is(err, ErrClosed) {
		t.Fatalf("submit after Close: %v", err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestInvalidTransitionsRejected(t *testing.T) {
	n, _ := openSingle(t, nil)
	ctx := testContext(t)
	if err := n.SubmitJob(ctx, "j", nil, t0); err != nil {
		t.Fatal(err)
	}
	if err := n.SetState(ctx, "j", JobSucceeded, "", t0); !errors.Is(err, ErrInvalidTransition) {
		t.Fatalf("pending -> succeeded: %v", err)
	}
	if err := n.SaveCheckpoint(ctx, "j", 1, 0, []byte("ck"), t0); !errors.Is(err, ErrJobNotRunning) {
		t.Fatalf("checkpoint of pending job: %v", err)
	}
	if err := n.SetState(ctx, "j", JobRunning, "", t0); err != nil {
		t.Fatal(err)
	}
	if err := n.SetState(ctx, "j", JobSucceeded, "", t0); !errors.Is(err, ErrNoModel) {
		t.Fatalf("succeeded without model: %v", err)
	}
	if err := n.SetState(ctx, "j", JobFailed, "diverged", t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, s := range []JobState{JobRunning, JobPending, JobSucceeded, JobCanceled, JobFailed} {
		if err := n.SetState(ctx, "j", s, "", t0); !errors.Is(err, ErrInvalidTransition) {
			t.Fatalf("failed -> %s: %v", s, err)
		}
	}
	if err := n.CancelJob(ctx, "j", t0); !errors.Is(err, ErrInvalidTransition) {
		t.Fatalf("cancel of failed job: %v", err)
	}
	if err := n.CancelJob(ctx, "missing", t0); !errors.Is(err, ErrJobNotFound) {
		t.Fatalf("cancel of missing job: %v", err)
	}
	j, _ := n.Job("j")
	if j.State != JobFailed || j.Error != "diverged" || !j.UpdatedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("rejected proposals changed the job: %+v", j)
	}

	if err := n.SubmitJob(ctx, "k", nil, t0); err != nil {
		t.Fatal(err)
	}
	if err := n.CancelJob(ctx, "k", t0); err != nil {
		t.Fatal(err)
	}
	if err := n.CancelJob(ctx, "k", t0); !errors.Is(err, ErrInvalidTransition) {
		t.Fatalf("second cancel: %v", err)
	}
	if j, _ := n.Job("k"); j.State != JobCanceled {
		t.Fatalf("k is %s", j.State)
	}
}

func TestCheckpointSizeLimit(t *testing.T) {
	n, _ := openSingle(t, func(c *Config) { c.MaxCheckpointBytes = 1024 })
	ctx := testContext(t)
	if err := n.SubmitJob(ctx, "j", nil, t0); err != nil {
		t.Fatal(err)
	}
	if err := n.SetState(ctx, "j", JobRunning, "", t0); err != nil {
		t.Fatal(err)
	}
	if err := n.SaveCheckpoint(ctx, "j", 5, 1.25, make([]byte, 1025), t0); !errors.Is(err, ErrCheckpointTooLarge) {
		t.Fatalf("1025-byte checkpoint: %v", err)
	}
	ck := bytes.Repeat([]byte{0xab}, 1024)
	if err := n.SaveCheckpoint(ctx, "j", 5, 1.25, ck, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	j, _ := n.Job("j")
	if j.Iteration != 5 || j.Objective != 1.25 || !bytes.Equal(j.Checkpoint, ck) || !j.UpdatedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("after checkpoint: iteration %d objective %v checkpoint %d bytes", j.Iteration, j.Objective, len(j.Checkpoint))
	}
}

func TestModelChunkRoundTrip(t *testing.T) {
	n, _ := openSingle(t, nil) // 1000-byte chunks
	ctx := testContext(t)
	if err := n.SubmitJob(ctx, "j", nil, t0); err != nil {
		t.Fatal(err)
	}
	model := make([]byte, 40_500) // 41 chunks: more than the pipeline window
	rand.Read(model)
	if err := n.PutModel(ctx, "j", model, []byte(`{"rmse":0.5}`), t0); !errors.Is(err, ErrJobNotRunning) {
		t.Fatalf("model of pending job: %v", err)
	}
	if err := n.SetState(ctx, "j", JobRunning, "", t0); err != nil {
		t.Fatal(err)
	}
	if err := n.PutModel(ctx, "j", nil, nil, t0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("empty model: %v", err)
	}
	if err := n.PutModel(ctx, "j", model, []byte(`{"rmse":0.5}`), t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	got, err := n.Model("j")
	if err != nil || !bytes.Equal(got, model) {
		t.Fatalf("Model: %d bytes, %v", len(got), err)
	}
	sum := sha256.Sum256(model)
	j, _ := n.Job("j")
	if j.ModelSize != int64(len(model)) || j.ModelHash != hex.EncodeToString(sum[:]) || string(j.Metrics) != `{"rmse":0.5}` {
		t.Fatalf("job: size %d hash %s metrics %s", j.ModelSize, j.ModelHash, j.Metrics)
	}
	// A second put replaces the model; a model of exactly one chunk works.
	small := []byte("tiny model")
	if err := n.PutModel(ctx, "j", small, nil, t0); err != nil {
		t.Fatal(err)
	}
	if got, _ := n.Model("j"); !bytes.Equal(got, small) {
		t.Fatalf("replaced model = %q", got)
	}
	if err := n.SetState(ctx, "j", JobSucceeded, "", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := n.PutModel(ctx, "j", model, nil, t0); !errors.Is(err, ErrJobNotRunning) {
		t.Fatalf("model of finished job: %v", err)
	}
	if _, err := n.Model("missing"); !errors.Is(err, ErrJobNotFound) {
		t.Fatalf("Model(missing): %v", err)
	}
	if err := n.SubmitJob(ctx, "nomodel", nil, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Model("nomodel"); !errors.Is(err, ErrNoModel) {
		t.Fatalf("Model(nomodel): %v", err)
	}
}

// TestSnapshotRestart forces a snapshot that compacts the log, writes more after it, and
// restarts: the state comes back from the snapshot plus the log tail, and the restarted
// node with Bootstrap still set does not bootstrap again.
func TestSnapshotRestart(t *testing.T) {
	n, cfg := openSingle(t, func(c *Config) { c.TrailingLogs = 1 })
	ctx := testContext(t)
	model := make([]byte, 5500)
	rand.Read(model)
	mustDo(t, n.SubmitJob(ctx, "a", []byte("spec-a"), t0))
	mustDo(t, n.SetState(ctx, "a", JobRunning, "", t0))
	mustDo(t, n.SaveCheckpoint(ctx, "a", 9, 0.125, []byte("checkpoint-a"), t0))
	mustDo(t, n.PutModel(ctx, "a", model, []byte(`{"nll":1}`), t0))
	mustDo(t, n.SetState(ctx, "a", JobSucceeded, "", t0))
	mustDo(t, n.SubmitJob(ctx, "b", nil, t0.Add(time.Second)))

	for range 3 {
		mustDo(t, n.Snapshot(ctx))
	}
	snaps, err := filepath.Glob(filepath.Join(cfg.DataDir, "snapshots", "*", "state.bin"))
	if err != nil || len(snaps) != snapshotsRetained {
		t.Fatalf("snapshots on disk: %v %v", snaps, err)
	}
	first, err := n.store.FirstIndex()
	if err != nil || first <= 5 {
		t.Fatalf("log not compacted: first index %d, %v", first, err)
	}
	// After the snapshot: more log entries.
	mustDo(t, n.SetState(ctx, "b", JobRunning, "", t0))
	mustDo(t, n.SaveCheckpoint(ctx, "b", 2, 3.5, []byte("checkpoint-b"), t0))
	want := n.Jobs()

	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n2 := mustOpen(t, cfg) // Bootstrap is still set
	waitSelfLeader(t, n2)
	mustDo(t, n2.Barrier(ctx)) // the log tail is applied after the election
	if got := n2.Jobs(); !reflect.DeepEqual(normalize(got), normalize(want)) {
		t.Fatalf("after restart:\n got %+v\nwant %+v", got, want)
	}
	if got, err := n2.Model("a"); err != nil || !bytes.Equal(got, model) {
		t.Fatalf("model after restart: %v", err)
	}
	servers, err := n2.Servers(ctx)
	if err != nil || len(servers) != 1 {
		t.Fatalf("servers after restart: %+v %v", servers, err)
	}
	mustDo(t, n2.CancelJob(ctx, "b", t0))
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// normalize makes jobs comparable with reflect.DeepEqual: gob turns empty byte slices into
// nil, and times lose their location pointer identity.
func normalize(jobs []Job) []Job {
	out := make([]Job, len(jobs))
	for i, j := range jobs {
		for _, b := range []*[]byte{&j.Spec, &j.Checkpoint, &j.Metrics} {
			if len(*b) == 0 {
				*b = nil
			}
		}
		j.CreatedAt = j.CreatedAt.UTC()
		j.UpdatedAt = j.UpdatedAt.UTC()
		out[i] = j
	}
	return out
}

// The raft transport replicates without pipelining (transportInFlight): hashicorp/raft's
// pipeline can deadlock a leader's shutdown after a follower rejects an entry.
func TestRaftTransportDoesNotPipeline(t *testing.T) {
	n, _ := openSingle(t, nil)
	if _, err := n.trans.AppendEntriesPipeline("peer", "127.0.0.1:1"); !errors.Is(err, raft.ErrPipelineReplicationNotSupported) {
		t.Fatalf("AppendEntriesPipeline: %v, want %v", err, raft.ErrPipelineReplicationNotSupported)
	}
}
