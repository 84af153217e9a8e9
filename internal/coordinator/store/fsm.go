package store

import (
	"context"
	"fmt"
	"maps"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rs/zerolog"
)

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
	if o >= opCount || commands[o].apply == nil {
		return applyResponse{Err: fmt.Errorf("apply log %d: unknown command %s: %w", index, o, ErrInvalidArgument)}
	}
	upload, err := commands[o].apply(f, index, body)
	return applyResponse{Upload: upload, Err: err}
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
	if ferr == nil && (int64(len(b)) != size || BlobHash(b) != hash) {
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
	if err != nil || BlobHash(b) != hash {
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
func (f *fsm) events(id string, from uint64) ([]Event, uint64, error) {
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
