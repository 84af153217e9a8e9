package coordinator

import (
	"bufio"
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
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
	opDelete
	opEvents
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
	case opDelete:
		return "delete"
	case opEvents:
		return "events"
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
	// Message is the text of the state's event ("started", ...); Error if empty.
	Message string
	Time    time.Time
}

// checkpointCmd replaces the job's checkpoint: by the bytes in Checkpoint (a small one), or
// by the chunks of upload Upload (Chunks chunks, Size bytes, sha256 SHA256).
type checkpointCmd struct {
	ID         string
	Iteration  int
	Objective  float64
	Checkpoint []byte
	Upload     uint64
	Chunks     int
	Size       int64
	SHA256     string
	Time       time.Time
}

// deleteCmd removes finished jobs with their models, checkpoints and events. Retention
// deletes skip the jobs that are gone or not finished.
type deleteCmd struct {
	IDs       []string
	Retention bool
	Time      time.Time
}

// eventsCmd records progress events.
type eventsCmd struct {
	Events []eventRec
}

// modelChunkCmd carries chunk Seq of a model or checkpoint upload. Chunk 0 starts the
// upload; later chunks name it by Upload, the ID that chunk 0's Apply returned.
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

// fsm is the raft.FSM over state. Apply, Snapshot and Restore run on raft's FSM goroutine;
// the reads run on any goroutine and see a consistent state under mu. Models and checkpoints
// are files in blobs (see blobStore), written and deleted under mu; snapshots carry their
// hashes, not their bytes, and a member that lacks a blob the state references (it installed
// a snapshot from the leader) gets it through fetch.
type fsm struct {
	log   zerolog.Logger
	blobs *blobStore
	// fetch, if set, gets a blob this member lacks from another member.
	fetch BlobFetcher

	mu      sync.RWMutex
	st      *state
	applied uint64        // index of the last command applied (or the snapshot's)
	changed chan struct{} // closed and replaced after every applied command

	// sinceSnap counts the command bytes applied since the last snapshot (see Node's
	// byte-triggered snapshots).
	sinceSnap atomic.Int64
	// hold, when set, makes Apply wait until the channel is closed: tests use it to make a
	// member lag behind the log.
	hold atomic.Pointer[chan struct{}]
}

var _ raft.FSM = (*fsm)(nil)

// BlobFetcher gets the bytes of blob hash (size bytes, sha256 hash) from another member.
type BlobFetcher func(ctx context.Context, hash string, size int64) ([]byte, error)

// newFSM returns an empty fsm whose blobs live in blobDir (created if needed; blobs already
// there are kept, and the ones the restored state does not reference are swept later).
func newFSM(log zerolog.Logger, blobDir string, fetch BlobFetcher) (*fsm, error) {
	blobs, err := newBlobStore(blobDir)
	if err != nil {
		return nil, err
	}
	f := &fsm{log: log, blobs: blobs, fetch: fetch, changed: make(chan struct{})}
	f.st = newState(f)
	return f, nil
}

// write implements blobHooks; f.mu is held.
func (f *fsm) write(hash string, data []byte) {
	if err := f.blobs.put(hash, data); err != nil {
		// The state must change the same way on every member, so the reference stays;
		// reading the blob on this member will fail and say so.
		f.log.Error().Err(err).Str("blob", hash).Msg("cannot store a model or checkpoint on this member")
	}
}

// drop implements blobHooks; f.mu is held.
func (f *fsm) drop(hash string) {
	if err := f.blobs.remove(hash); err != nil {
		f.log.Warn().Err(err).Msg("removing an unreferenced blob failed")
	}
}

// Apply applies one committed command. It returns an applyResponse; an invalid command (bad
// transition, unknown job, ...) leaves the state unchanged and returns the error.
func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return applyResponse{}
	}
	if h := f.hold.Load(); h != nil {
		<-*h
	}
	resp := f.apply(l.Index, l.Data)
	if resp.Err != nil {
		f.log.Debug().Uint64("index", l.Index).Err(resp.Err).Msg("command rejected")
	}
	f.sinceSnap.Add(int64(len(l.Data)))
	f.mu.Lock()
	f.applied = l.Index
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
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
		err = applyCmd(f, o, body, (*state).submit)
	case opSetState:
		err = applyCmd(f, o, body, (*state).setState)
	case opCheckpoint:
		err = applyCmd(f, o, body, (*state).checkpoint)
	case opModelChunk:
		err = applyCmd(f, o, body, func(s *state, c modelChunkCmd) (err error) {
			upload, err = s.modelChunk(index, c)
			return err
		})
	case opModelCommit:
		err = applyCmd(f, o, body, (*state).modelCommit)
	case opCancel:
		err = applyCmd(f, o, body, (*state).cancel)
	case opMember:
		err = applyCmd(f, o, body, (*state).member)
	case opDelete:
		err = applyCmd(f, o, body, (*state).deleteJobs)
	case opEvents:
		err = applyCmd(f, o, body, (*state).appendEvents)
	default:
		err = fmt.Errorf("apply log %d: unknown command %s: %w", index, o, ErrInvalidArgument)
	}
	return applyResponse{Upload: upload, Err: err}
}

// applyCmd decodes a command of type T and applies it with fn under the lock.
func applyCmd[T any](f *fsm, o op, body []byte, fn func(*state, T) error) error {
	c, err := decodeCommand[T](o, body)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return fn(f.st, c)
}

// appliedIndex returns the index of the last command applied to this member's state.
func (f *fsm) appliedIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.applied
}

// waitApplied waits until the state has applied index, or ctx ends.
func (f *fsm) waitApplied(ctx context.Context, index uint64) error {
	for {
		f.mu.RLock()
		applied, changed := f.applied, f.changed
		f.mu.RUnlock()
		if applied >= index {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("applied index %d of %d: %w", applied, index, ctx.Err())
		}
	}
}

// updates returns a channel closed when the next command is applied.
func (f *fsm) updates() <-chan struct{} {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.changed
}

// job returns a copy of job id with its checkpoint.
func (f *fsm) job(id string) (Job, error) {
	f.mu.RLock()
	e, err := f.st.get(id)
	if err != nil {
		f.mu.RUnlock()
		return Job{}, err
	}
	j := e.job.clone()
	f.mu.RUnlock()
	return f.withCheckpoint(j)
}

// withCheckpoint fills j.Checkpoint from the blob store. A checkpoint dropped meanwhile (the
// job finished) leaves it empty.
func (f *fsm) withCheckpoint(j Job) (Job, error) {
	if j.CheckpointHash == "" {
		return j, nil
	}
	b, err := f.blob(context.Background(), j.CheckpointHash, j.CheckpointSize)
	if err != nil {
		if cur, cerr := f.jobView(j.ID); cerr == nil && cur.CheckpointHash != j.CheckpointHash {
			return j, nil
		}
		return j, fmt.Errorf("checkpoint of job %q: %w", j.ID, err)
	}
	j.Checkpoint = b
	return j, nil
}

// jobs returns copies of the jobs for which keep returns true (all if keep is nil), ordered
// by CreatedAt, then ID, with their checkpoints.
func (f *fsm) jobs(keep func(*Job) bool) []Job {
	f.mu.RLock()
	var out []Job
	for _, e := range f.st.sortedEntries() {
		if keep == nil || keep(&e.job) {
			out = append(out, e.job.clone())
		}
	}
	f.mu.RUnlock()
	for i, j := range out {
		if j2, err := f.withCheckpoint(j); err == nil {
			out[i] = j2
		} else {
			f.log.Error().Err(err).Msg("checkpoint unreadable; the job restarts from the beginning")
		}
	}
	return out
}

// model returns the model of job id.
func (f *fsm) model(id string) ([]byte, error) {
	j, err := f.jobView(id)
	if err != nil {
		return nil, err
	}
	if j.ModelHash == "" {
		return nil, fmt.Errorf("job %q: %w", id, ErrNoModel)
	}
	b, err := f.blob(context.Background(), j.ModelHash, j.ModelSize)
	if err != nil {
		return nil, fmt.Errorf("model of job %q: %w", id, err)
	}
	return b, nil
}

// blobFetchTimeout bounds the fetch of a missing blob on a read.
const blobFetchTimeout = 30 * time.Second

// blob returns the bytes of blob hash: from this member's store, or else fetched from
// another member (and then stored, if the state still references it).
func (f *fsm) blob(ctx context.Context, hash string, size int64) ([]byte, error) {
	b, err := f.blobs.get(hash, size)
	if err == nil || f.fetch == nil {
		return b, err
	}
	ctx, cancel := context.WithTimeout(ctx, blobFetchTimeout)
	defer cancel()
	b, ferr := f.fetch(ctx, hash, size)
	if ferr == nil && (int64(len(b)) != size || blobHash(b) != hash) {
		ferr = fmt.Errorf("got %d bytes that do not match the sha256", len(b))
	}
	if ferr != nil {
		return nil, fmt.Errorf("%w; fetching it from the other members failed: %w", err, ferr)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.st.refs[hash] > 0 {
		if err := f.blobs.put(hash, b); err != nil {
			f.log.Warn().Err(err).Msg("storing a fetched blob failed")
		}
	}
	return b, nil
}

// localBlob returns blob hash from this member's store only (what GetBlob serves).
func (f *fsm) localBlob(hash string) ([]byte, error) {
	b, err := os.ReadFile(f.blobs.path(hash))
	if err != nil || blobHash(b) != hash {
		return nil, fmt.Errorf("blob %s is not on this member: %w", hash, ErrNoModel)
	}
	return b, nil
}

// repairBlobs fetches the referenced blobs this member lacks (after it installed a
// snapshot) and deletes the blob files nothing references (left by a crash or an earlier
// state). It returns the number of blobs still missing.
func (f *fsm) repairBlobs(ctx context.Context) int {
	f.mu.Lock()
	entries, err := os.ReadDir(f.blobs.dir)
	if err == nil {
		for _, e := range entries {
			if f.st.refs[e.Name()] == 0 {
				_ = f.blobs.remove(e.Name())
			}
		}
	}
	sizes := f.referencedSizes()
	f.mu.Unlock()
	missing := 0
	for h, size := range sizes {
		if fi, err := os.Stat(f.blobs.path(h)); err == nil && fi.Size() == size {
			continue
		}
		if _, err := f.blob(ctx, h, size); err != nil {
			missing++
			if ctx.Err() == nil {
				f.log.Debug().Err(err).Str("blob", h).Msg("blob still missing")
			}
		}
	}
	return missing
}

// referencedSizes maps each referenced blob to its size; f.mu is held.
func (f *fsm) referencedSizes() map[string]int64 {
	sizes := map[string]int64{}
	for _, e := range f.st.jobs {
		if h := e.job.ModelHash; h != "" {
			sizes[h] = e.job.ModelSize
		}
		if h := e.job.CheckpointHash; h != "" {
			sizes[h] = e.job.CheckpointSize
		}
	}
	return sizes
}

// events returns job id's events from number from on and the number to ask for next.
func (f *fsm) events(id string, from uint64) ([]eventRec, uint64, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	e, err := f.st.get(id)
	if err != nil {
		return nil, 0, err
	}
	evs, next := e.events.since(from)
	return evs, next, nil
}

// blobUsage returns the number and total size of the blobs the state references.
func (f *fsm) blobUsage() (n int, bytes int64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	seen := map[string]bool{}
	for _, e := range f.st.jobs {
		for _, b := range []struct {
			h string
			n int64
		}{{e.job.ModelHash, e.job.ModelSize}, {e.job.CheckpointHash, e.job.CheckpointSize}} {
			if b.h != "" && !seen[b.h] {
				seen[b.h] = true
				n++
				bytes += b.n
			}
		}
	}
	return n, bytes
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

// Snapshot captures the state: the job records, uploads in progress and events (copied),
// and the list of referenced blobs. Persist then streams it while Apply goes on.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sinceSnap.Store(0)
	entries := f.st.sortedEntries()
	snap := &fsmSnapshot{f: f, applied: f.applied, entries: make([]jobEntry, len(entries)), members: snapMembers(f.st.members)}
	for i, e := range entries {
		c := jobEntry{job: e.job, events: e.events.clone()}
		if e.upload != nil {
			c.upload = &upload{id: e.upload.id, chunks: slices.Clone(e.upload.chunks), size: e.upload.size}
		}
		snap.entries[i] = c
	}
	sizes := f.referencedSizes()
	for _, h := range slices.Sorted(maps.Keys(sizes)) {
		snap.blobs = append(snap.blobs, snapBlob{Hash: h, Size: sizes[h]})
	}
	return snap, nil
}

// Restore replaces the state with the one in the snapshot. Blobs the new state references
// but this member lacks are fetched later (repairBlobs) or when read.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st, applied, err := f.readSnapshot(rc)
	if err != nil {
		return fmt.Errorf("restore snapshot: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st = st
	f.applied = max(f.applied, applied)
	close(f.changed)
	f.changed = make(chan struct{})
	return nil
}

// Snapshot stream format (gob values, one after another on one encoder):
//
//	snapHeader
//	snapHeader.Blobs × snapBlob       (version 2: each followed by its bytes in snapChunks)
//	per job, ordered by CreatedAt then ID:
//	  snapJob
//	  snapJob.ModelChunks × snapChunk   (version 1 only: the committed model)
//	  snapJob.UploadChunks × snapChunk  (the upload in progress)
//
// Version 3 names the blobs and leaves their bytes in the blob store, so a snapshot is small
// and the data directory holds each model once. Each value is encoded on its own, so memory
// stays bounded by the largest chunk rather than the whole state. Versions 1 (models in the
// jobs, checkpoints in Job.Checkpoint) and 2 (blob bytes in the snapshot) are read too.
const snapshotVersion = 3

type snapHeader struct {
	Version int
	Jobs    int
	// Members are the coordinators' API addresses, ordered by ID. Snapshots written before
	// they were replicated decode with none.
	Members []snapMember
	// Applied is the index of the last command applied (version 2).
	Applied uint64
	// Blobs is the number of blobs that follow (version 2).
	Blobs int
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

type snapBlob struct {
	Hash string
	Size int64
}

type snapJob struct {
	Job          Job
	ModelChunks  int // version 1
	HasUpload    bool
	UploadID     uint64
	UploadChunks int
	Events       []eventRec // oldest first
	EventsNext   uint64
}

type snapChunk struct {
	Data []byte
}

type fsmSnapshot struct {
	f       *fsm
	applied uint64
	entries []jobEntry
	members []snapMember
	blobs   []snapBlob
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
	h := snapHeader{Version: snapshotVersion, Jobs: len(s.entries), Members: s.members, Applied: s.applied, Blobs: len(s.blobs)}
	if err := enc.Encode(h); err != nil {
		return fmt.Errorf("write header: %w", err)
	}
	for _, b := range s.blobs {
		if err := enc.Encode(b); err != nil {
			return fmt.Errorf("write blob %s: %w", b.Hash, err)
		}
	}
	for _, e := range s.entries {
		rec := snapJob{Job: e.job, Events: e.events.ordered(), EventsNext: e.events.next}
		if e.upload != nil {
			rec.HasUpload, rec.UploadID, rec.UploadChunks = true, e.upload.id, len(e.upload.chunks)
		}
		if err := enc.Encode(rec); err != nil {
			return fmt.Errorf("write job %q: %w", e.job.ID, err)
		}
		if e.upload != nil {
			for _, c := range e.upload.chunks {
				if err := enc.Encode(snapChunk{Data: c}); err != nil {
					return fmt.Errorf("write upload of job %q: %w", e.job.ID, err)
				}
			}
		}
	}
	return nil
}

// Release is a no-op: the capture holds no resources.
func (s *fsmSnapshot) Release() {}

// chunkReader reads the snapChunks of a blob of a known size as one stream.
type chunkReader struct {
	dec  *gob.Decoder
	left int64
	cur  []byte
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		if r.left <= 0 {
			return 0, io.EOF
		}
		var c snapChunk
		if err := r.dec.Decode(&c); err != nil {
			return 0, err
		}
		if len(c.Data) == 0 || int64(len(c.Data)) > r.left {
			return 0, fmt.Errorf("blob chunk of %d bytes with %d left", len(c.Data), r.left)
		}
		r.cur = c.Data
		r.left -= int64(len(c.Data))
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// readSnapshot decodes a snapshot into a new state, writing its blobs to f's store. It
// returns the state and the snapshot's applied index.
func (f *fsm) readSnapshot(r io.Reader) (*state, uint64, error) {
	dec := gob.NewDecoder(bufio.NewReaderSize(r, 1<<20))
	var h snapHeader
	if err := dec.Decode(&h); err != nil {
		return nil, 0, fmt.Errorf("read header: %w", err)
	}
	if h.Version < 1 || h.Version > snapshotVersion {
		return nil, 0, fmt.Errorf("unsupported snapshot version %d (want %d)", h.Version, snapshotVersion)
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
	have := map[string]bool{}
	for i := range h.Blobs {
		var b snapBlob
		if err := dec.Decode(&b); err != nil {
			return nil, 0, fmt.Errorf("read blob %d of %d: %w", i+1, h.Blobs, err)
		}
		if h.Version == 2 {
			if err := f.blobs.putStream(b.Hash, b.Size, &chunkReader{dec: dec, left: b.Size}); err != nil {
				return nil, 0, fmt.Errorf("read blob %d of %d: %w", i+1, h.Blobs, err)
			}
		}
		have[b.Hash] = true
	}
	st := newState(f)
	for _, m := range h.Members {
		st.members[m.ID] = m.APIAddr
	}
	for range h.Jobs {
		var rec snapJob
		if err := dec.Decode(&rec); err != nil {
			return nil, 0, fmt.Errorf("read job %d of %d: %w", len(st.jobs)+1, h.Jobs, err)
		}
		id := rec.Job.ID
		if _, dup := st.jobs[id]; dup {
			return nil, 0, fmt.Errorf("job %q appears twice", id)
		}
		e := &jobEntry{job: rec.Job}
		if rec.ModelChunks > 0 { // version 1: the model inline
			chunks, size, err := readChunks(rec.ModelChunks)
			if err != nil {
				return nil, 0, fmt.Errorf("read model of job %q: %w", id, err)
			}
			u := upload{chunks: chunks, size: size}
			data := u.bytes()
			if size != rec.Job.ModelSize || blobHash(data) != rec.Job.ModelHash {
				return nil, 0, fmt.Errorf("model of job %q has %d bytes, want %d, or a wrong sha256", id, size, rec.Job.ModelSize)
			}
			if err := f.blobs.put(rec.Job.ModelHash, data); err != nil {
				return nil, 0, err
			}
			have[rec.Job.ModelHash] = true
		}
		if ck := e.job.Checkpoint; len(ck) > 0 { // version 1: the checkpoint inline
			hash := blobHash(ck)
			if err := f.blobs.put(hash, ck); err != nil {
				return nil, 0, err
			}
			have[hash] = true
			e.job.CheckpointHash, e.job.CheckpointSize, e.job.Checkpoint = hash, int64(len(ck)), nil
		}
		if rec.HasUpload {
			chunks, size, err := readChunks(rec.UploadChunks)
			if err != nil {
				return nil, 0, fmt.Errorf("read upload of job %q: %w", id, err)
			}
			e.upload = &upload{id: rec.UploadID, chunks: chunks, size: size}
		}
		if n := uint64(len(rec.Events)); n > 0 {
			if n > eventsPerJob || rec.EventsNext < n || (n < eventsPerJob && rec.EventsNext != n) {
				return nil, 0, fmt.Errorf("job %q: %d events, next %d", id, n, rec.EventsNext)
			}
			// Event i sits at ring[i%eventsPerJob] (see eventRing).
			e.events.ring = make([]eventRec, n)
			for k, ev := range rec.Events {
				e.events.ring[(rec.EventsNext-n+uint64(k))%eventsPerJob] = ev
			}
			e.events.next = rec.EventsNext
		}
		for _, b := range []string{e.job.ModelHash, e.job.CheckpointHash} {
			if b == "" {
				continue
			}
			if !have[b] {
				return nil, 0, fmt.Errorf("job %q references blob %s, which the snapshot lacks", id, b)
			}
			st.refs[b]++
		}
		st.jobs[id] = e
	}
	return st, h.Applied, nil
}
