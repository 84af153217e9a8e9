package coordinator

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/gpreduce/gpreduce/internal/coordinator/store"
	"github.com/gpreduce/gpreduce/internal/testutil"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// smallJob is a quick Gauss-Legendre job on its own data (seed), so its model differs from
// other jobs'.
func smallJob(t testing.TB, seed uint64) *pb.JobSpec {
	js := glSpec(writeCSV(t, t.TempDir(), "d.csv", 300, seed), 5, 2)
	js.MaxIter = 12
	return js
}

// apis returns the servers' API addresses.
func apis(servers []*runningServer) []string {
	var out []string
	for _, s := range servers {
		out = append(out, s.APIAddr())
	}
	return out
}

// blobFiles lists the blobs in s's store.
func blobFiles(t testing.TB, s *Server) []string {
	t.Helper()
	entries, err := os.ReadDir(s.node.BlobDir())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// referenced lists the blobs s's state references, sorted.
func referenced(s *Server) []string {
	var out []string
	for _, j := range s.node.JobViews() {
		for _, h := range []string{j.ModelHash, j.CheckpointHash} {
			if h != "" && !slices.Contains(out, h) {
				out = append(out, h)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestRetentionBoundsState runs 20 jobs on three members keeping the newest 3 finished ones:
// every member ends with 3 jobs, no checkpoint, exactly their 3 models on disk, and a raft
// log compacted by snapshots.
func TestRetentionBoundsState(t *testing.T) {
	t.Parallel()
	servers := startCluster(t, 3, func(cfg *ServerConfig) {
		cfg.RetainJobs = 3
		cfg.CheckpointInterval = time.Nanosecond // a checkpoint per iteration
		cfg.Raft.SnapshotInterval = 200 * time.Millisecond
		cfg.Raft.SnapshotThreshold = 64
		cfg.Raft.SnapshotBytes = 64 << 10
		cfg.Raft.TrailingLogs = 16
	})
	startWorkers(t, 2, apis(servers), "")
	leader := leaderOf(t, servers)
	waitWorkers(t, leader.Server, 2)
	ctx := testContext(t)

	const jobs = 20
	for i := range jobs {
		// Over 20 jobs an election under load is likely enough to plan for.
		submitToLeader(t, ctx, servers, &pb.SubmitJobRequest{Spec: smallJob(t, uint64(i)), Id: fmt.Sprintf("r%02d", i)})
		if i%5 == 4 { // in waves, to spare the machine
			eventually(t, 2*time.Minute, "the wave finishes", func() error {
				for _, j := range leader.node.Jobs() {
					if !j.State.Finished() {
						return fmt.Errorf("job %s %s", j.ID, j.State)
					}
				}
				return nil
			})
		}
	}
	for _, s := range servers {
		eventually(t, time.Minute, s.node.ID()+" keeps the newest 3 jobs and their models only", func() error {
			js := s.node.Jobs()
			if len(js) != 3 {
				return fmt.Errorf("%d jobs", len(js))
			}
			for _, j := range js {
				if j.State != store.JobSucceeded || j.CheckpointHash != "" {
					return fmt.Errorf("job %s %s, checkpoint %q", j.ID, j.State, j.CheckpointHash)
				}
			}
			if files, refs := blobFiles(t, s.Server), referenced(s.Server); !slices.Equal(files, refs) || len(refs) != 3 {
				return fmt.Errorf("blob files %v, referenced %v", files, refs)
			}
			return nil
		})
		// The log was compacted: snapshots were taken and the early entries are gone.
		first, last, snapIdx, err := s.node.LogIndexes()
		if err != nil {
			t.Fatal(err)
		}
		if snapIdx == 0 || first <= 1 {
			t.Errorf("%s: no compaction: snapshot at %d, log %d..%d", s.node.ID(), snapIdx, first, last)
		}
		fi, err := os.Stat(filepath.Join(s.cfg.DataDir, raftDBFile))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: log %d..%d, snapshot at %d, raft.db %d bytes", s.node.ID(), first, last, snapIdx, fi.Size())
		if fi.Size() > 16<<20 {
			t.Errorf("%s: raft.db is %d bytes", s.node.ID(), fi.Size())
		}
	}
}

// TestDeleteJob: a running job cannot be deleted; a finished one is deleted with its model
// from every member, and the other job's model stays everywhere.
func TestDeleteJob(t *testing.T) {
	t.Parallel()
	servers := startCluster(t, 3, nil)
	leader := leaderOf(t, servers)
	c := dial(t, leader.APIAddr(), "")
	ctx := testContext(t)
	for i, id := range []string{"a", "b"} {
		if _, err := c.SubmitJob(ctx, &pb.SubmitJobRequest{Spec: smallJob(t, uint64(i)), Id: id}); err != nil {
			t.Fatal(err)
		}
	}
	// No workers yet: the jobs wait, and cannot be deleted.
	if _, err := c.DeleteJob(ctx, &pb.DeleteJobRequest{Ids: []string{"a"}}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("delete of an unfinished job: %v, want FailedPrecondition", err)
	}
	if _, err := c.DeleteJob(ctx, &pb.DeleteJobRequest{Ids: []string{"nope"}}); status.Code(err) != codes.NotFound {
		t.Fatalf("delete of an unknown job: %v, want NotFound", err)
	}
	startWorkers(t, 2, apis(servers), "")
	a := waitState(t, c, "a", pb.JobState_JOB_STATE_SUCCEEDED, time.Minute)
	waitState(t, c, "b", pb.JobState_JOB_STATE_SUCCEEDED, time.Minute)
	ja, _ := leader.node.Job("a")
	jb, _ := leader.node.Job("b")
	if ja.ModelHash == jb.ModelHash || a.GetModelBytes() == 0 {
		t.Fatal("the two jobs have the same model; the test needs two")
	}
	for _, s := range servers {
		eventually(t, 10*time.Second, "both models on "+s.node.ID(), func() error {
			if files := blobFiles(t, s.Server); !slices.Contains(files, ja.ModelHash) || !slices.Contains(files, jb.ModelHash) {
				return fmt.Errorf("blobs %v", files)
			}
			return nil
		})
	}

	if _, err := c.DeleteJob(ctx, &pb.DeleteJobRequest{Ids: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		mc := dial(t, s.APIAddr(), "")
		// Every member's reads wait for the delete (read barrier), so no retry is needed.
		if _, err := mc.GetJob(ctx, &pb.GetJobRequest{Id: "a"}); status.Code(err) != codes.NotFound {
			t.Errorf("%s: GetJob of the deleted job: %v, want NotFound", s.node.ID(), err)
		}
		if _, err := s.node.Model("a"); !errorsIsNotFound(err) {
			t.Errorf("%s: the deleted job's model is still readable: %v", s.node.ID(), err)
		}
		if files := blobFiles(t, s.Server); slices.Contains(files, ja.ModelHash) || !slices.Contains(files, jb.ModelHash) {
			t.Errorf("%s: blobs %v: want b's model %s and not a's %s", s.node.ID(), files, jb.ModelHash, ja.ModelHash)
		}
		if got := fetchModel(t, mc, "b"); blobHash(got) != jb.ModelHash {
			t.Errorf("%s serves another model for b", s.node.ID())
		}
	}
}

func errorsIsNotFound(err error) bool {
	return err != nil && (status.Code(err) == codes.NotFound || bytes.Contains([]byte(err.Error()), []byte(store.ErrJobNotFound.Error())))
}

// checkHonest calls GetJob on c for each job and fails the test on a stale answer: a job
// missing or unfinished. A redirect to the leader or "no leader yet" is honest. It returns
// whether every job was answered as succeeded.
func checkHonest(t *testing.T, c pb.CoordinatorClient, ids []string) bool {
	t.Helper()
	ok := true
	for _, id := range ids {
		var tr metadata.MD
		j, err := c.GetJob(t.Context(), &pb.GetJobRequest{Id: id}, grpc.Trailer(&tr))
		switch {
		case err == nil && j.GetState() == pb.JobState_JOB_STATE_SUCCEEDED:
		case err == nil:
			t.Fatalf("job %s reported %s, but it succeeded", id, j.GetState())
		case status.Code(err) == codes.NotFound:
			t.Fatalf("job %s reported missing, but it succeeded: %v", id, err)
		case status.Code(err) == codes.FailedPrecondition && len(tr.Get(LeaderTrailer)) == 1,
			status.Code(err) == codes.Unavailable:
			ok = false
		default:
			t.Fatalf("GetJob(%s): %v", id, err)
		}
	}
	return ok
}

// TestRestartedFollowerReadsHonestly restarts a follower that missed a job and queries it at
// once, over and over: it never calls a succeeded job missing or running.
func TestRestartedFollowerReadsHonestly(t *testing.T) {
	t.Parallel()
	cfgs := map[string]*ServerConfig{}
	servers := startCluster(t, 3, func(cfg *ServerConfig) { cfgs[cfg.ID] = cfg })
	startWorkers(t, 2, apis(servers), "")
	leader := leaderOf(t, servers)
	waitWorkers(t, leader.Server, 2)
	c := dial(t, leader.APIAddr(), "")
	ctx := testContext(t)

	if _, err := c.SubmitJob(ctx, &pb.SubmitJobRequest{Spec: smallJob(t, 1), Id: "before"}); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, "before", pb.JobState_JOB_STATE_SUCCEEDED, time.Minute)
	var f *runningServer
	for _, s := range servers {
		if s != leader {
			f = s
			break
		}
	}
	cfg := *cfgs[f.node.ID()]
	cfg.RaftAddr, cfg.APIAddr, cfg.Bootstrap, cfg.Join = f.node.Addr(), f.APIAddr(), false, nil
	if err := f.close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SubmitJob(ctx, &pb.SubmitJobRequest{Spec: smallJob(t, 2), Id: "while-down"}); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, "while-down", pb.JobState_JOB_STATE_SUCCEEDED, time.Minute)

	again := startServer(t, cfg)
	fc := dial(t, again.APIAddr(), "")
	answered := false
	deadline := time.Now().Add(testutil.MinWait) // only bounds a hang
	for !answered && time.Now().Before(deadline) {
		answered = checkHonest(t, fc, []string{"before", "while-down"})
	}
	if !answered {
		t.Fatal("the restarted follower never answered")
	}
	if again.node.IsLeader() {
		t.Log("the restarted member became the leader; the reads were still checked")
	}
}

// TestLaggingFollowerReadsHonestly holds a follower's state behind the log while a job
// finishes: its reads redirect to the leader (or wait) instead of answering from the stale
// state, and once it catches up it answers itself.
func TestLaggingFollowerReadsHonestly(t *testing.T) {
	t.Parallel()
	servers := startCluster(t, 3, nil)
	startWorkers(t, 2, apis(servers), "")
	leader := leaderOf(t, servers)
	waitWorkers(t, leader.Server, 2)
	var f *runningServer
	for _, s := range servers {
		if s != leader {
			f = s
			break
		}
	}
	release := f.node.PauseApply()
	t.Cleanup(release)

	c := dial(t, leader.APIAddr(), "")
	ctx := testContext(t)
	if _, err := c.SubmitJob(ctx, &pb.SubmitJobRequest{Spec: smallJob(t, 6), Id: "lag"}); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, "lag", pb.JobState_JOB_STATE_SUCCEEDED, time.Minute)
	if _, err := f.node.JobView("lag"); err == nil {
		t.Fatal("the held follower applied the job; the test needs a lagging member")
	}
	fc := dial(t, f.APIAddr(), "")
	if checkHonest(t, fc, []string{"lag"}) {
		t.Fatal("the lagging follower answered from a state that lacks the job")
	}
	release()
	eventually(t, time.Minute, "the follower answers once caught up", func() error {
		if !checkHonest(t, fc, []string{"lag"}) {
			return fmt.Errorf("still redirecting")
		}
		return nil
	})
}

// TestLogsSurviveLeaderChange: a job's events are replicated, so after the leader that ran
// part of it is gone the new leader replays its whole history, from the submission on.
func TestLogsSurviveLeaderChange(t *testing.T) {
	t.Parallel()
	servers := startCluster(t, 3, func(cfg *ServerConfig) { cfg.CheckpointInterval = time.Nanosecond })
	startWorkers(t, 2, apis(servers), "")
	leader := leaderOf(t, servers)
	waitWorkers(t, leader.Server, 2)
	ctx := testContext(t)
	js := glSpec(writeCSV(t, t.TempDir(), "d.csv", 2000, 7), 12, 4)
	if _, err := dial(t, leader.APIAddr(), "").SubmitJob(ctx, &pb.SubmitJobRequest{Spec: js, Id: "h"}); err != nil {
		t.Fatal(err)
	}
	var before []store.Event
	// The leader goes while the job is early in its run (two progress events of the
	// hyperparameter search or later phases in), so that the new leader must resume it.
	eventually(t, time.Minute, "progress events replicated", func() error {
		evs, _, err := leader.node.Events("h", 0)
		if err != nil {
			return err
		}
		n := 0
		for _, ev := range evs {
			if ev.Phase != "state" {
				n++
			}
		}
		if n < 2 {
			return fmt.Errorf("%d progress events", n)
		}
		before = evs
		return nil
	})
	if j, err := leader.node.Job("h"); err != nil || j.State != store.JobRunning {
		t.Fatalf("the job is not running when its leader goes (%+v, %v): the test needs a longer job", j, err)
	}
	oldID := leader.node.ID()
	if err := leader.close(); err != nil {
		t.Fatal(err)
	}
	var rest []*runningServer
	for _, s := range servers {
		if s != leader {
			rest = append(rest, s)
		}
	}
	var next *runningServer
	var evs []*pb.JobEvent
	eventually(t, time.Minute, "a watch on the new leader to the job's end", func() error {
		next = leaderOf(t, rest)
		var err error
		evs, err = watch(t, dial(t, next.APIAddr(), ""), "h")
		if err != nil && status.Code(err) != codes.Unavailable && status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("watch on the new leader: %v", err)
		}
		return err
	})
	if len(evs) < len(before)+2 {
		t.Fatalf("the new leader replays %d events, fewer than the %d seen before the change", len(evs), len(before))
	}
	for i, ev := range before {
		if got := evs[i]; got.GetUnixNano() != ev.UnixNano || got.GetMessage() != ev.Message || got.GetIteration() != ev.Iteration || got.GetPhase() != ev.Phase {
			t.Fatalf("event %d after the change: %v, before: %+v", i, got, ev)
		}
	}
	if evs[0].GetMessage() != "submitted" || evs[1].GetMessage() != "started by "+oldID {
		t.Fatalf("the history does not start with the submission and the old leader's start: %v, %v", evs[0], evs[1])
	}
	resumed := slices.ContainsFunc(evs, func(ev *pb.JobEvent) bool {
		return ev.GetMessage() == "resumed by "+next.node.ID()+" from iteration "+strconv.Itoa(int(ev.GetIteration()))
	})
	if !resumed || evs[len(evs)-1].GetState() != pb.JobState_JOB_STATE_SUCCEEDED {
		t.Fatalf("the history lacks the resumption by %s or the success: %v", next.node.ID(), evs[len(evs)-3:])
	}
}

// TestRaftAndGRPCMetrics: /metrics carries hashicorp/raft's metrics (through the go-metrics
// Prometheus sink) and the gRPC server's calls by method and code. Not parallel: raft reports
// to the process-wide sink of the last server opened.
func TestRaftAndGRPCMetrics(t *testing.T) {
	s := startSingle(t, nil)
	c := dial(t, s.APIAddr(), "")
	ctx := testContext(t)
	if _, err := c.ListJobs(ctx, &pb.ListJobsRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetJob(ctx, &pb.GetJobRequest{Id: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "raft and gRPC metrics", func() error {
		rec := httptest.NewRecorder()
		s.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		body := rec.Body.String()
		for _, want := range []string{
			`grpc_server_handled_total{grpc_code="OK",grpc_method="ListJobs",grpc_service="gpreduce.v1.Coordinator",grpc_type="unary"} 1`,
			`grpc_server_handled_total{grpc_code="NotFound",grpc_method="GetJob"`,
			`grpc_server_handling_seconds_bucket{grpc_method="ListJobs"`,
			"gpreduce_raft_barrier", // raft's own metrics: the read barriers
			"gpreduce_raft_applied_index", "gpreduce_stored_blobs 0",
		} {
			if !strings.Contains(body, want) {
				return fmt.Errorf("metrics lack %s", want)
			}
		}
		return nil
	})
}

// TestNewMemberFetchesBlobs: a member that joins after the log was compacted installs a
// snapshot, which names the models without their bytes, and fetches them from the others
// over GetBlob; then it serves them itself.
func TestNewMemberFetchesBlobs(t *testing.T) {
	t.Parallel()
	tweak := func(cfg *ServerConfig) { cfg.Raft.TrailingLogs = 1 }
	servers := startCluster(t, 2, tweak)
	startWorkers(t, 1, apis(servers), "")
	leader := leaderOf(t, servers)
	waitWorkers(t, leader.Server, 1)
	c := dial(t, leader.APIAddr(), "")
	ctx := testContext(t)
	if _, err := c.SubmitJob(ctx, &pb.SubmitJobRequest{Spec: smallJob(t, 8), Id: "m"}); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, "m", pb.JobState_JOB_STATE_SUCCEEDED, time.Minute)
	want, err := leader.node.Model("m")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		eventually(t, 10*time.Second, "the job reaches "+s.node.ID(), func() error { _, err := s.node.JobView("m"); return err })
		if err := s.node.Snapshot(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cfg := testServerConfig(t, "late", testLogger(t))
	cfg.Join = []string{leader.APIAddr()}
	tweak(&cfg)
	late := startServer(t, cfg)
	eventually(t, time.Minute, "the late member holds the model", func() error {
		if _, err := late.node.Blob(blobHash(want)); err != nil {
			return err
		}
		return nil
	})
	if snaps, _ := filepath.Glob(filepath.Join(cfg.DataDir, "snapshots", "*", "state.bin")); len(snaps) == 0 {
		t.Fatal("the late member caught up without installing a snapshot")
	}
	if got := fetchModel(t, dial(t, late.APIAddr(), ""), "m"); !bytes.Equal(got, want) {
		t.Fatal("the late member serves another model")
	}
}
