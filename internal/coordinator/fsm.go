package coordinator

import (
	"bufio"
	"bytes"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rs/zerolog"
)

// A command is one raft log entry: a one-byte op tag followed by the gob encoding of the op's
// payload struct. Times in commands are stamped by the proposing leader, so applying the log
// gives the same state on every member and on every replay.
type op byte

const (
	opSubmit op = iota + 1
	opSetState
	opCheckpoint
	opModelChunk
	opModelCommit
	opCancel
	opMember
)

func (o op) String() string {
	switch o {
	case opSubmit:
		return "submit"
	case opSetState:
		return "set-state"
	case opCheckpoint:
		return "checkpoint"
	case opModelChunk:
		return "model-chunk"
	case opModelCommit:
		return "model-commit"
	case opCancel:
		return "cancel"
	case opMember:
		return "member"
	default:
		return fmt.Sprintf("op(%d)", byte(o))
	}
}

type submitCmd struct {
	ID   string
	Spec []byte
	Time time.Time
}

type setStateCmd struct {
	ID    string
	State JobState
	Error string
	Time  time.Time
}

type checkpointCmd struct {
	ID         string
	Iteration  int
	Objective  float64
	Checkpoint []byte
	Time       time.Time
}

// modelChunkCmd carries chunk Seq of a model upload. Chunk 0 starts the upload; later chunks
// name it by Upload, the ID that chunk 0's Apply returned.
type modelChunkCmd struct {
	ID     string
	Upload uint64
	Seq    int
	Data   []byte
}

type modelCommitCmd struct {
	ID      string
	Upload  uint64
	Chunks  int
	Size    int64
	SHA256  string
	Metrics []byte
	Time    time.Time
}

type cancelCmd struct {
	ID   string
	Time time.Time
}

// memberCmd records (or, with Remove, forgets) the API address of coordinator ID.
type memberCmd struct {
	ID      string
	APIAddr string
	Remove  bool
}

// encodeCommand returns the log entry for payload under tag o.
func encodeCommand(o op, payload any) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte(byte(o))
	if err := gob.NewEncoder(&buf).Encode(payload); err != nil {
		return nil, fmt.Errorf("encode %s command: %w", o, err)
	}
	return buf.Bytes(), nil
}

func decodeCommand[T any](o op, data []byte) (T, error) {
	var c T
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&c); err != nil {
		return c, fmt.Errorf("decode %s command: %w", o, err)
	}
	return c, nil
}

// applyResponse is what Apply returns through the ApplyFuture to the proposing node.
type applyResponse struct {
	Upload uint64 // for model chunks: the upload ID
	Err    error  // the command's deterministic rejection, if any
}

// fsm is the raft.FSM over state. Apply and Snapshot run on raft's FSM goroutine; the reads
// run on any goroutine and see a consistent state under mu.
type fsm struct {
	log zerolog.Logger

	mu sync.RWMutex
	st *state
}

var _ raft.FSM = (*fsm)(nil)

func newFSM(log zerolog.Logger) *fsm {
	return &fsm{log: log, st: newState()}
}

// Apply applies one committed command. It returns an applyResponse; an invalid command (bad
// transition, unknown job, ...) leaves the state unchanged and returns the error.
func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return applyResponse{}
	}
	resp := f.apply(l.Index, l.Data)
	if resp.Err != nil {
		f.log.Debug().Uint64("index", l.Index).Err(resp.Err).Msg("command rejected")
	}
	return resp
}

func (f *fsm) apply(index uint64, data []byte) applyResponse {
	if len(data) == 0 {
		return applyResponse{Err: fmt.Errorf("apply log %d: empty command: %w", index, ErrInvalidArgument)}
	}
	o, body := op(data[0]), data[1:]
	// Decode outside the lock: payloads can be large.
	var (
		upload uint64
		err    error
	)
	switch o {
	case opSubmit:
		var c submitCmd
		if c, err = decodeCommand[submitCmd](o, body); err == nil {
			err = f.locked(func(s *state) error { return s.submit(c) })
		}
	case opSetState:
		var c setStateCmd
		if c, err = decodeCommand[setStateCmd](o, body); err == nil {
			err = f.locked(func(s *state) error { return s.setState(c) })
		}
	case opCheckpoint:
		var c checkpointCmd
		if c, err = decodeCommand[checkpointCmd](o, body); err == nil {
			err = f.locked(func(s *state) error { return s.checkpoint(c) })
		}
	case opModelChunk:
		var c modelChunkCmd
		if c, err = decodeCommand[modelChunkCmd](o, body); err == nil {
			err = f.locked(func(s *state) (err error) {
				upload, err = s.modelChunk(index, c)
				return err
			})
		}
	case opModelCommit:
		var c modelCommitCmd
		if c, err = decodeCommand[modelCommitCmd](o, body); err == nil {
			err = f.locked(func(s *state) error { return s.modelCommit(c) })
		}
	case opCancel:
		var c cancelCmd
		if c, err = decodeCommand[cancelCmd](o, body); err == nil {
			err = f.locked(func(s *state) error { return s.cancel(c) })
		}
	case opMember:
		var c memberCmd
		if c, err = decodeCommand[memberCmd](o, body); err == nil {
			err = f.locked(func(s *state) error { return s.member(c) })
		}
	default:
		err = fmt.Errorf("apply log %d: unknown command %s: %w", index, o, ErrInvalidArgument)
	}
	return applyResponse{Upload: upload, Err: err}
}

func (f *fsm) locked(fn func(*state) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fn(f.st)
}

// job returns a copy of job id.
func (f *fsm) job(id string) (Job, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	e, err := f.st.get(id)
	if err != nil {
		return Job{}, err
	}
	return e.job.clone(), nil
}

// jobs returns copies of the jobs for which keep returns true (all if keep is nil), ordered
// by CreatedAt, then ID.
func (f *fsm) jobs(keep func(*Job) bool) []Job {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Job, 0, len(f.st.jobs))
	for _, e := range f.st.sortedEntries() {
		if keep == nil || keep(&e.job) {
			out = append(out, e.job.clone())
		}
	}
	return out
}

// model returns the reassembled model of job id.
func (f *fsm) model(id string) ([]byte, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	e, err := f.st.get(id)
	if err != nil {
		return nil, err
	}
	if e.model == nil {
		return nil, fmt.Errorf("job %q: %w", id, ErrNoModel)
	}
	out := make([]byte, 0, e.job.ModelSize)
	for _, c := range e.model {
		out = append(out, c...)
	}
	return out, nil
}

// members returns a copy of the API addresses by server ID.
func (f *fsm) members() map[string]string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return maps.Clone(f.st.members)
}

// memberAPI returns the API address of server id, "" if unknown.
func (f *fsm) memberAPI(id string) string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.members[id]
}

// Snapshot captures the state. Byte slices in the state are never modified in place, so the
// capture copies only the job structs and slice headers; Persist then streams it while Apply
// goes on.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	entries := f.st.sortedEntries()
	snap := &fsmSnapshot{entries: make([]jobEntry, len(entries)), members: snapMembers(f.st.members)}
	for i, e := range entries {
		c := jobEntry{job: e.job, model: slices.Clone(e.model)}
		if e.upload != nil {
			c.upload = &upload{id: e.upload.id, chunks: slices.Clone(e.upload.chunks), size: e.upload.size}
		}
		snap.entries[i] = c
	}
	return snap, nil
}

// Restore replaces the state with the one in the snapshot.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st, err := readSnapshot(rc)
	if err != nil {
		return fmt.Errorf("restore snapshot: %w", err)
	}
	f.mu.Lock()
	f.st = st
	f.mu.Unlock()
	return nil
}

// Snapshot stream format (gob values, one after another on one encoder):
//
//	snapHeader
//	per job, ordered by CreatedAt then ID:
//	  snapJob
//	  snapJob.ModelChunks × snapChunk   (the committed model)
//	  snapJob.UploadChunks × snapChunk  (the model upload in progress)
//
// Each value is encoded on its own, so memory stays bounded by the largest chunk or
// checkpoint rather than the whole state.
const snapshotVersion = 1

type snapHeader struct {
	Version int
	Jobs    int
	// Members are the coordinators' API addresses, ordered by ID. Snapshots written before
	// they were replicated decode with none.
	Members []snapMember
}

type snapMember struct {
	ID, APIAddr string
}

func snapMembers(m map[string]string) []snapMember {
	out := make([]snapMember, 0, len(m))
	for _, id := range slices.Sorted(maps.Keys(m)) {
		out = append(out, snapMember{ID: id, APIAddr: m[id]})
	}
	return out
}

type snapJob struct {
	Job          Job
	ModelChunks  int
	HasUpload    bool
	UploadID     uint64
	UploadChunks int
}

type snapChunk struct {
	Data []byte
}

type fsmSnapshot struct {
	entries []jobEntry
	members []snapMember
}

// Persist streams the captured state to sink.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	bw := bufio.NewWriterSize(sink, 1<<20)
	err := s.write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return errors.Join(fmt.Errorf("persist snapshot: %w", err), sink.Cancel())
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("persist snapshot: close sink: %w", err)
	}
	return nil
}

func (s *fsmSnapshot) write(w io.Writer) error {
	enc := gob.NewEncoder(w)
	if err := enc.Encode(snapHeader{Version: snapshotVersion, Jobs: len(s.entries), Members: s.members}); err != nil {
		return fmt.Errorf("write header: %w", err)
	}
	for _, e := range s.entries {
		rec := snapJob{Job: e.job, ModelChunks: len(e.model)}
		if e.upload != nil {
			rec.HasUpload, rec.UploadID, rec.UploadChunks = true, e.upload.id, len(e.upload.chunks)
		}
		if err := enc.Encode(rec); err != nil {
			return fmt.Errorf("write job %q: %w", e.job.ID, err)
		}
		for _, c := range e.model {
			if err := enc.Encode(snapChunk{Data: c}); err != nil {
				return fmt.Errorf("write model of job %q: %w", e.job.ID, err)
			}
		}
		if e.upload != nil {
			for _, c := range e.upload.chunks {
				if err := enc.Encode(snapChunk{Data: c}); err != nil {
					return fmt.Errorf("write model upload of job %q: %w", e.job.ID, err)
				}
			}
		}
	}
	return nil
}

// Release is a no-op: the capture holds no resources.
func (s *fsmSnapshot) Release() {}

func readSnapshot(r io.Reader) (*state, error) {
	dec := gob.NewDecoder(bufio.NewReaderSize(r, 1<<20))
	var h snapHeader
	if err := dec.Decode(&h); err != nil {
		return nil, fmt.Errorf("read header: %w", err)
	}
	if h.Version != snapshotVersion {
		return nil, fmt.Errorf("unsupported snapshot version %d (want %d)", h.Version, snapshotVersion)
	}
	readChunks := func(n int) ([][]byte, int64, error) {
		chunks := make([][]byte, n)
		var size int64
		for i := range chunks {
			var c snapChunk
			if err := dec.Decode(&c); err != nil {
				return nil, 0, err
			}
			chunks[i] = c.Data
			size += int64(len(c.Data))
		}
		return chunks, size, nil
	}
	st := newState()
	for _, m := range h.Members {
		st.members[m.ID] = m.APIAddr
	}
	for range h.Jobs {
		var rec snapJob
		if err := dec.Decode(&rec); err != nil {
			return nil, fmt.Errorf("read job %d of %d: %w", len(st.jobs)+1, h.Jobs, err)
		}
		id := rec.Job.ID
		if _, dup := st.jobs[id]; dup {
			return nil, fmt.Errorf("job %q appears twice", id)
		}
		e := &jobEntry{job: rec.Job}
		if rec.ModelChunks > 0 {
			chunks, size, err := readChunks(rec.ModelChunks)
			if err != nil {
				return nil, fmt.Errorf("read model of job %q: %w", id, err)
			}
			if size != rec.Job.ModelSize {
				return nil, fmt.Errorf("model of job %q has %d bytes, want %d", id, size, rec.Job.ModelSize)
			}
			e.model = chunks
		}
		if rec.HasUpload {
			chunks, size, err := readChunks(rec.UploadChunks)
			if err != nil {
				return nil, fmt.Errorf("read model upload of job %q: %w", id, err)
			}
			e.upload = &upload{id: rec.UploadID, chunks: chunks, size: size}
		}
		st.jobs[id] = e
	}
	return st, nil
}
