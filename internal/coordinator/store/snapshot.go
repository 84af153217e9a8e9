package store

import (
	"bufio"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/hashicorp/raft"
)

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
	Events       []Event // oldest first
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
			if size != rec.Job.ModelSize || BlobHash(data) != rec.Job.ModelHash {
				return nil, 0, fmt.Errorf("model of job %q has %d bytes, want %d, or a wrong sha256", id, size, rec.Job.ModelSize)
			}
			if err := f.blobs.put(rec.Job.ModelHash, data); err != nil {
				return nil, 0, err
			}
			have[rec.Job.ModelHash] = true
		}
		if ck := e.job.Checkpoint; len(ck) > 0 { // version 1: the checkpoint inline
			hash := BlobHash(ck)
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
			e.events.ring = make([]Event, n)
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
