package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"maps"
	"math"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/rs/zerolog"
)

// fsmHarness applies commands to an fsm as raft would, with increasing log indexes.
type fsmHarness struct {
	t     *testing.T
	f     *fsm
	index uint64
}

func newHarness(t *testing.T) *fsmHarness {
	return &fsmHarness{t: t, f: mustFSM(t)}
}

// mustFSM returns an empty fsm with its blobs in a temporary directory.
func mustFSM(t *testing.T) *fsm {
	t.Helper()
	f, err := newFSM(zerolog.Nop(), filepath.Join(t.TempDir(), "blobs"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (h *fsmHarness) apply(o op, payload any) applyResponse {
	h.t.Helper()
	data, err := encodeCommand(o, payload)
	if err != nil {
		h.t.Fatal(err)
	}
	h.index++
	resp, ok := h.f.Apply(&raft.Log{Index: h.index, Type: raft.LogCommand, Data: data}).(applyResponse)
	if !ok {
		h.t.Fatalf("Apply returned %T", resp)
	}
	return resp
}

func (h *fsmHarness) mustApply(o op, payload any) applyResponse {
	h.t.Helper()
	resp := h.apply(o, payload)
	if resp.Err != nil {
		h.t.Fatalf("%s: %v", o, resp.Err)
	}
	return resp
}

func (h *fsmHarness) putModel(id string, model []byte, chunk int, at time.Time) {
	h.t.Helper()
	var upload uint64
	n := 0
	for off := 0; off < len(model); off += chunk {
		r := h.mustApply(opModelChunk, modelChunkCmd{ID: id, Upload: upload, Seq: n, Data: model[off:min(off+chunk, len(model))]})
		upload = r.Upload
		n++
	}
	sum := sha256.Sum256(model)
	h.mustApply(opModelCommit, modelCommitCmd{ID: id, Upload: upload, Chunks: n, Size: int64(len(model)),
		SHA256: hex.EncodeToString(sum[:]), Metrics: []byte(`{"rmse":1}`), Time: at})
}

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func TestJobStateString(t *testing.T) {
	want := map[JobState]string{JobPending: "pending", JobRunning: "running", JobSucceeded: "succeeded",
		JobFailed: "failed", JobCanceled: "canceled", 0: "JobState(0)"}
	for s, w := range want {
		if s.String() != w {
			t.Errorf("%d.String() = %q, want %q", int(s), s.String(), w)
		}
	}
}

func TestFSMTransitions(t *testing.T) {
	h := newHarness(t)
	h.mustApply(opSubmit, submitCmd{ID: "a", Spec: []byte("spec"), Time: t0})
	if err := h.apply(opSubmit, submitCmd{ID: "a", Time: t0}).Err; !errors.Is(err, ErrJobExists) {
		t.Fatalf("duplicate submit: %v, want ErrJobExists", err)
	}
	if err := h.apply(opSubmit, submitCmd{ID: "", Time: t0}).Err; !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("empty ID: %v, want ErrInvalidArgument", err)
	}
	steps := []struct {
		o    op
		cmd  any
		want error
	}{
		{opSetState, setStateCmd{ID: "nope", State: JobRunning}, ErrJobNotFound},
		{opSetState, setStateCmd{ID: "a", State: JobSucceeded}, ErrInvalidTransition},
		{opSetState, setStateCmd{ID: "a", State: JobPending}, ErrInvalidTransition},
		{opSetState, setStateCmd{ID: "a", State: JobState(42)}, ErrInvalidTransition},
		{opCheckpoint, checkpointCmd{ID: "a", Iteration: 1}, ErrJobNotRunning},
		{opModelChunk, modelChunkCmd{ID: "a", Data: []byte{1}}, ErrJobNotRunning},
		{opSetState, setStateCmd{ID: "a", State: JobRunning, Time: t0.Add(time.Second)}, nil},
		{opSetState, setStateCmd{ID: "a", State: JobRunning}, ErrInvalidTransition},
		{opSetState, setStateCmd{ID: "a", State: JobSucceeded}, ErrNoModel},
		{opCheckpoint, checkpointCmd{ID: "a", Iteration: 3, Objective: -1.5, Checkpoint: []byte("ck"), Time: t0.Add(2 * time.Second)}, nil},
		{opSetState, setStateCmd{ID: "a", State: JobFailed, Error: "boom", Time: t0.Add(3 * time.Second)}, nil},
		{opSetState, setStateCmd{ID: "a", State: JobRunning}, ErrInvalidTransition},
		{opCancel, cancelCmd{ID: "a"}, ErrInvalidTransition},
		{opCheckpoint, checkpointCmd{ID: "a", Iteration: 4}, ErrJobNotRunning},
	}
	for i, s := range steps {
		if err := h.apply(s.o, s.cmd).Err; !errors.Is(err, s.want) || (s.want == nil) != (err == nil) {
			t.Fatalf("step %d (%s %+v): err %v, want %v", i, s.o, s.cmd, err, s.want)
		}
	}
	j, err := h.f.job("a")
	if err != nil {
		t.Fatal(err)
	}
	want := Job{ID: "a", Spec: []byte("spec"), State: JobFailed, Error: "boom", CreatedAt: t0,
		UpdatedAt: t0.Add(3 * time.Second), Iteration: 3, Objective: -1.5} // a finished job's checkpoint is dropped
	if !reflect.DeepEqual(j, want) {
		t.Fatalf("job = %+v\nwant  %+v", j, want)
	}

	// Cancel from pending and from running; then a canceled job stays canceled.
	h.mustApply(opSubmit, submitCmd{ID: "b", Time: t0})
	h.mustApply(opCancel, cancelCmd{ID: "b", Time: t0})
	h.mustApply(opSubmit, submitCmd{ID: "c", Time: t0})
	h.mustApply(opSetState, setStateCmd{ID: "c", State: JobRunning, Time: t0})
	h.mustApply(opCancel, cancelCmd{ID: "c", Time: t0})
	for _, id := range []string{"b", "c"} {
		if err := h.apply(opCancel, cancelCmd{ID: id}).Err; !errors.Is(err, ErrInvalidTransition) {
			t.Fatalf("second cancel of %s: %v", id, err)
		}
		if err := h.apply(opSetState, setStateCmd{ID: id, State: JobRunning}).Err; !errors.Is(err, ErrInvalidTransition) {
			t.Fatalf("run canceled %s: %v", id, err)
		}
	}

	// Garbage never panics.
	if resp := h.f.Apply(&raft.Log{Index: 99, Type: raft.LogCommand, Data: []byte{byte(opSubmit), 1, 2, 3}}).(applyResponse); resp.Err == nil {
		t.Fatal("garbage payload accepted")
	}
	if resp := h.f.Apply(&raft.Log{Index: 100, Type: raft.LogCommand, Data: []byte{200}}).(applyResponse); !errors.Is(resp.Err, ErrInvalidArgument) {
		t.Fatalf("unknown op: %v", resp.Err)
	}
	if resp := h.f.Apply(&raft.Log{Index: 101, Type: raft.LogCommand}).(applyResponse); !errors.Is(resp.Err, ErrInvalidArgument) {
		t.Fatalf("empty command: %v", resp.Err)
	}
}

func TestFSMModelUpload(t *testing.T) {
	h := newHarness(t)
	h.mustApply(opSubmit, submitCmd{ID: "m", Time: t0})
	h.mustApply(opSetState, setStateCmd{ID: "m", State: JobRunning, Time: t0})

	model := bytes.Repeat([]byte("0123456789"), 25) // 250 bytes, 3 chunks of 100
	first := h.mustApply(opModelChunk, modelChunkCmd{ID: "m", Seq: 0, Data: model[:100]})
	if first.Upload != h.index {
		t.Fatalf("upload ID %d, want the log index %d", first.Upload, h.index)
	}
	// Wrong upload ID, out-of-order chunk.
	if err := h.apply(opModelChunk, modelChunkCmd{ID: "m", Upload: first.Upload + 7, Seq: 1, Data: model[100:200]}).Err; !errors.Is(err, ErrModelUpload) {
		t.Fatalf("stale upload: %v", err)
	}
	if err := h.apply(opModelChunk, modelChunkCmd{ID: "m", Upload: first.Upload, Seq: 2, Data: model[200:]}).Err; !errors.Is(err, ErrModelUpload) {
		t.Fatalf("chunk out of order: %v", err)
	}
	h.mustApply(opModelChunk, modelChunkCmd{ID: "m", Upload: first.Upload, Seq: 1, Data: model[100:200]})
	h.mustApply(opModelChunk, modelChunkCmd{ID: "m", Upload: first.Upload, Seq: 2, Data: model[200:]})
	// A commit whose hash does not match the chunks is rejected and ends the upload.
	bad := sha256.Sum256([]byte("something else"))
	err := h.apply(opModelCommit, modelCommitCmd{ID: "m", Upload: first.Upload, Chunks: 3, Size: 250, SHA256: hex.EncodeToString(bad[:])}).Err
	if !errors.Is(err, ErrModelUpload) {
		t.Fatalf("hash mismatch: %v", err)
	}
	if _, err := h.f.model("m"); !errors.Is(err, ErrNoModel) {
		t.Fatalf("model after failed commit: %v", err)
	}
	good := sha256.Sum256(model)
	if err := h.apply(opModelCommit, modelCommitCmd{ID: "m", Upload: first.Upload, Chunks: 3, Size: 250, SHA256: hex.EncodeToString(good[:])}).Err; !errors.Is(err, ErrModelUpload) {
		t.Fatalf("commit of an ended upload: %v", err)
	}

	// Size mismatch.
	r := h.mustApply(opModelChunk, modelChunkCmd{ID: "m", Seq: 0, Data: model})
	if err := h.apply(opModelCommit, modelCommitCmd{ID: "m", Upload: r.Upload, Chunks: 1, Size: 249, SHA256: hex.EncodeToString(good[:])}).Err; !errors.Is(err, ErrModelUpload) {
		t.Fatalf("size mismatch: %v", err)
	}

	// A new chunk 0 restarts the upload; the full sequence commits.
	h.mustApply(opModelChunk, modelChunkCmd{ID: "m", Seq: 0, Data: []byte("abandoned")})
	h.putModel("m", model, 100, t0.Add(time.Minute))
	got, err := h.f.model("m")
	if err != nil || !bytes.Equal(got, model) {
		t.Fatalf("model = %q, %v", got, err)
	}
	j, _ := h.f.job("m")
	if j.ModelSize != 250 || j.ModelHash != hex.EncodeToString(good[:]) || string(j.Metrics) != `{"rmse":1}` || !j.UpdatedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("job after commit: %+v", j)
	}
	// Returned values are copies.
	got[0] = 'X'
	again, _ := h.f.model("m")
	if again[0] != '0' {
		t.Fatal("Model returned shared memory")
	}
	h.mustApply(opSetState, setStateCmd{ID: "m", State: JobSucceeded, Time: t0})
}

func TestFSMSnapshotRestore(t *testing.T) {
	h := newHarness(t)
	for i, id := range []string{"z", "y", "x"} {
		h.mustApply(opSubmit, submitCmd{ID: id, Spec: []byte("spec-" + id), Time: t0.Add(time.Duration(i) * time.Second)})
		h.mustApply(opSetState, setStateCmd{ID: id, State: JobRunning, Time: t0})
	}
	h.mustApply(opSubmit, submitCmd{ID: "empty", Time: t0}) // a job with no byte fields at all
	h.mustApply(opCheckpoint, checkpointCmd{ID: "z", Iteration: 17, Objective: math.Inf(-1), Checkpoint: bytes.Repeat([]byte{7}, 5000), Time: t0})
	model := make([]byte, 1234)
	for i := range model {
		model[i] = byte(i * 31)
	}
	h.putModel("y", model, 100, t0)
	h.mustApply(opSetState, setStateCmd{ID: "y", State: JobSucceeded, Time: t0})
	// Leave an upload in progress on x: it must survive the snapshot.
	up := h.mustApply(opModelChunk, modelChunkCmd{ID: "x", Seq: 0, Data: model[:600]}).Upload

	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// The snapshot names blobs, which a new member fetches from another; keep them as they
	// are now (the next command replaces z's checkpoint and deletes the old one).
	atSnap := map[string][]byte{}
	for _, j := range h.f.jobs(nil) {
		for _, hash := range []string{j.ModelHash, j.CheckpointHash} {
			if b, err := h.f.localBlob(hash); err == nil {
				atSnap[hash] = b
			}
		}
	}
	// Apply goes on while the snapshot is persisted; the snapshot must not see it.
	h.mustApply(opCheckpoint, checkpointCmd{ID: "z", Iteration: 18, Checkpoint: []byte("later"), Time: t0})
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil || !sink.closed || sink.canceled {
		t.Fatalf("Persist: %v (closed %v, canceled %v)", err, sink.closed, sink.canceled)
	}
	snap.Release()

	r := mustFSM(t)
	// The snapshot names the blobs; the new member fetches them from the old one.
	r.fetch = func(_ context.Context, hash string, _ int64) ([]byte, error) {
		if b, ok := atSnap[hash]; ok {
			return b, nil
		}
		return nil, errors.New("no such blob")
	}
	if err := r.Restore(io.NopCloser(bytes.NewReader(sink.buf))); err != nil {
		t.Fatal(err)
	}
	jobs := r.jobs(nil)
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	if want := []string{"empty", "z", "y", "x"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("restored jobs %v, want %v", ids, want)
	}
	z, _ := r.job("z")
	if z.Iteration != 17 || !math.IsInf(z.Objective, -1) || !bytes.Equal(z.Checkpoint, bytes.Repeat([]byte{7}, 5000)) || string(z.Spec) != "spec-z" {
		t.Fatalf("restored z: iteration %d objective %v checkpoint %d bytes", z.Iteration, z.Objective, len(z.Checkpoint))
	}
	if got, err := r.model("y"); err != nil || !bytes.Equal(got, model) {
		t.Fatalf("restored model: %v", err)
	}
	for _, id := range []string{"y", "x", "empty"} {
		a, _ := h.f.job(id)
		b, _ := r.job(id)
		if a.ID != b.ID || a.State != b.State || !a.CreatedAt.Equal(b.CreatedAt) || a.ModelHash != b.ModelHash || !bytes.Equal(a.Spec, b.Spec) || !bytes.Equal(a.Metrics, b.Metrics) {
			t.Fatalf("job %s: restored %+v, want %+v", id, b, a)
		}
	}
	// The restored upload can be finished.
	h2 := &fsmHarness{t: t, f: r, index: h.index}
	h2.mustApply(opModelChunk, modelChunkCmd{ID: "x", Upload: up, Seq: 1, Data: model[600:]})
	sum := sha256.Sum256(model)
	h2.mustApply(opModelCommit, modelCommitCmd{ID: "x", Upload: up, Chunks: 2, Size: int64(len(model)), SHA256: hex.EncodeToString(sum[:])})
	if got, err := r.model("x"); err != nil || !bytes.Equal(got, model) {
		t.Fatalf("model finished after restore: %v", err)
	}

	// Restore replaces, not merges; a corrupt stream leaves the state alone.
	if err := r.Restore(io.NopCloser(bytes.NewReader(sink.buf[:len(sink.buf)/2]))); err == nil {
		t.Fatal("truncated snapshot restored")
	}
	if len(r.jobs(nil)) != 4 {
		t.Fatal("failed restore changed the state")
	}
}

func TestHclogAdapter(t *testing.T) {
	var buf bytes.Buffer
	a := newHclogAdapter(zerolog.New(&buf).Level(zerolog.InfoLevel), "raft")
	a.Debug("hidden")
	a.Named("net").With("peer", "p1").Warn("failed", "error", errors.New("boom"), "n", 3, "dur", time.Second)
	out := buf.String()
	for _, want := range []string{`"level":"warn"`, `"logger":"raft.net"`, `"peer":"p1"`, `"error":"boom"`, `"n":3`, `"dur":"1s"`, `"message":"failed"`} {
		if !bytes.Contains([]byte(out), []byte(want)) {
			t.Errorf("log %s lacks %s", out, want)
		}
	}
	if bytes.Contains(buf.Bytes(), []byte("hidden")) || a.IsDebug() || !a.IsInfo() {
		t.Errorf("level filtering: %s", out)
	}
	buf.Reset()
	a.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}).Print("[ERR] bad thing")
	if !bytes.Contains(buf.Bytes(), []byte(`"level":"error"`)) || !bytes.Contains(buf.Bytes(), []byte(`"message":"bad thing"`)) {
		t.Errorf("standard logger: %s", buf.String())
	}
}

// TestFSMMembers: API addresses are recorded, replaced, forgotten, and kept in snapshots.
func TestFSMMembers(t *testing.T) {
	h := newHarness(t)
	h.mustApply(opMember, memberCmd{ID: "a", APIAddr: "h:1"})
	h.mustApply(opMember, memberCmd{ID: "b", APIAddr: "h:2"})
	h.mustApply(opMember, memberCmd{ID: "a", APIAddr: "h:3"})
	h.mustApply(opMember, memberCmd{ID: "c", APIAddr: "h:4"})
	h.mustApply(opMember, memberCmd{ID: "c", Remove: true})
	for _, bad := range []memberCmd{{APIAddr: "h:5"}, {ID: "d"}} {
		if err := h.apply(opMember, bad).Err; !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("apply %+v: %v", bad, err)
		}
	}
	want := map[string]string{"a": "h:3", "b": "h:2"}
	if got := h.f.members(); !maps.Equal(got, want) || h.f.memberAPI("a") != "h:3" || h.f.memberAPI("c") != "" {
		t.Fatalf("members %v, want %v", got, want)
	}
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	r := mustFSM(t)
	if err := r.Restore(io.NopCloser(bytes.NewReader(sink.buf))); err != nil {
		t.Fatal(err)
	}
	if got := r.members(); !maps.Equal(got, want) {
		t.Fatalf("restored members %v, want %v", got, want)
	}
}
