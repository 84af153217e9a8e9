package store

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// Errors returned by the proposing and reading methods of Node. They are wrapped with the job
// and operation, so test them with errors.Is.
var (
	// ErrJobNotFound means no job has the given ID.
	ErrJobNotFound = errors.New("job not found")
	// ErrJobExists means a job with the given ID was already submitted.
	ErrJobExists = errors.New("job already exists")
	// ErrInvalidTransition means the requested state change is not allowed from the job's
	// current state (for example a finished job cannot run again or be canceled).
	ErrInvalidTransition = errors.New("invalid job state transition")
	// ErrJobNotRunning means a checkpoint or model was offered for a job that is not running.
	ErrJobNotRunning = errors.New("job is not running")
	// ErrCheckpointTooLarge means a checkpoint exceeds Config.MaxCheckpointBytes.
	ErrCheckpointTooLarge = errors.New("checkpoint too large")
	// ErrNoModel means the job has no complete model.
	ErrNoModel = errors.New("job has no model")
	// ErrModelUpload means a model chunk or commit did not match the upload in progress
	// (wrong upload, chunk out of order, size or sha256 mismatch).
	ErrModelUpload = errors.New("model upload rejected")
	// ErrInvalidArgument means a proposal was malformed (empty job ID, empty model, ...).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrModelTooLarge means a model exceeds Config.MaxModelBytes.
	ErrModelTooLarge = errors.New("model too large")
	// ErrJobActive means a pending or running job was asked to be deleted.
	ErrJobActive = errors.New("job is still pending or running")
)

// JobState is the life-cycle state of a job. A job starts Pending, runs, and ends in exactly
// one of the finished states Succeeded, Failed or Canceled, which it never leaves.
type JobState int

// Job states. The zero JobState is not a valid state.
const (
	JobPending JobState = iota + 1
	JobRunning
	JobSucceeded
	JobFailed
	JobCanceled
)

// String returns the lower-case name of the state ("pending", "running", ...).
func (s JobState) String() string {
	switch s {
	case JobPending:
		return "pending"
	case JobRunning:
		return "running"
	case JobSucceeded:
		return "succeeded"
	case JobFailed:
		return "failed"
	case JobCanceled:
		return "canceled"
	default:
		return fmt.Sprintf("JobState(%d)", int(s))
	}
}

// Finished reports whether s is a final state (Succeeded, Failed or Canceled); see
// pb.JobState.Finished, the one definition.
func (s JobState) Finished() bool { return s.Proto().Finished() }

// Proto is the API form of s (JOB_STATE_UNSPECIFIED for an invalid state).
func (s JobState) Proto() pb.JobState {
	switch s {
	case JobPending:
		return pb.JobState_JOB_STATE_PENDING
	case JobRunning:
		return pb.JobState_JOB_STATE_RUNNING
	case JobSucceeded:
		return pb.JobState_JOB_STATE_SUCCEEDED
	case JobFailed:
		return pb.JobState_JOB_STATE_FAILED
	case JobCanceled:
		return pb.JobState_JOB_STATE_CANCELED
	}
	return pb.JobState_JOB_STATE_UNSPECIFIED
}

// canMove reports whether a job may go from state s to state to.
func (s JobState) canMove(to JobState) bool {
	switch s {
	case JobPending:
		return to == JobRunning || to == JobFailed || to == JobCanceled
	case JobRunning:
		return to == JobSucceeded || to == JobFailed || to == JobCanceled
	default:
		return false
	}
}

// Job is one training job as replicated by raft. The byte fields are opaque to this package:
// the caller encodes the spec, the checkpoint and the metrics. Values returned by Node are
// copies and may be modified freely.
type Job struct {
	// ID is the job's unique, caller-chosen identifier.
	ID string
	// Spec is the job specification, encoded by the caller.
	Spec []byte
	// State is the job's life-cycle state.
	State JobState
	// Error is the reason given with the last state change (set for failed jobs).
	Error string
	// CreatedAt is the leader's time at submission.
	CreatedAt time.Time
	// UpdatedAt is the leader's time at the last change of the job.
	UpdatedAt time.Time
	// Iteration is the optimizer iteration of the last checkpoint.
	Iteration int
	// Objective is the objective value at the last checkpoint.
	Objective float64
	// Checkpoint is the last checkpoint (opaque, at most Config.MaxCheckpointBytes). Only
	// the reads that resume a job (Node.Job, Node.JobsInState) fill it; the replicated state
	// keeps the bytes in the blob store, under CheckpointHash. A job holds at most one
	// checkpoint, replaced by each later one and dropped when the job finishes.
	Checkpoint []byte
	// CheckpointHash is the hex sha256 of the checkpoint, "" if there is none.
	CheckpointHash string
	// CheckpointSize is the size in bytes of the checkpoint.
	CheckpointSize int64
	// Metrics are the finished model's metrics (opaque JSON), set with the model.
	Metrics []byte
	// ModelSize is the size in bytes of the committed model, 0 if there is none.
	ModelSize int64
	// ModelHash is the hex sha256 of the committed model, "" if there is none.
	ModelHash string
}

// clone returns a deep copy of j.
func (j Job) clone() Job {
	j.Spec = bytes.Clone(j.Spec)
	j.Checkpoint = bytes.Clone(j.Checkpoint)
	j.Metrics = bytes.Clone(j.Metrics)
	return j
}

// jobEntry is a job with its upload in progress and its recent events. Byte slices held
// here are never modified in place, only replaced, so a snapshot can share them.
type jobEntry struct {
	job    Job
	upload *upload // model or checkpoint upload in progress, nil if none
	events eventRing
}

// upload is a model or checkpoint being written chunk by chunk. Its id is the raft index of
// its first chunk.
type upload struct {
	id     uint64
	chunks [][]byte
	size   int64
}

// finishUpload ends e's upload id, which must be in progress, and returns its bytes once
// they match the announced chunk count, size and sha256; whatever the outcome, the upload is
// over. what names the command in errors.
func (e *jobEntry) finishUpload(what string, id uint64, chunks int, size int64, sha string) ([]byte, error) {
	u := e.upload
	if u == nil || u.id != id {
		return nil, fmt.Errorf("%s: upload %d is not in progress: %w", what, id, ErrModelUpload)
	}
	e.upload = nil
	if len(u.chunks) != chunks || u.size != size {
		return nil, fmt.Errorf("%s: have %d chunks, %d bytes, want %d chunks, %d bytes: %w",
			what, len(u.chunks), u.size, chunks, size, ErrModelUpload)
	}
	data := u.bytes()
	if sum := BlobHash(data); sum != sha {
		return nil, fmt.Errorf("%s: sha256 %s, want %s: %w", what, sum, sha, ErrModelUpload)
	}
	return data, nil
}

// bytes returns the upload's chunks joined.
func (u *upload) bytes() []byte {
	out := make([]byte, 0, u.size)
	for _, c := range u.chunks {
		out = append(out, c...)
	}
	return out
}

// state is the replicated state: all jobs by ID, and the API address of each coordinator
// by raft server ID (so that a follower can name the leader's API to redirect to). Its methods are the deterministic effects of
// the commands; they depend only on the state and the command, never on the clock or the
// local configuration. The FSM serializes access.
//
// Models and checkpoints live in blobs, counted by refs (the same bytes can belong to two
// jobs: the same job submitted twice trains the same model); the blobs callbacks write a
// blob when its first reference appears and drop it when its last one goes.
type state struct {
	jobs    map[string]*jobEntry
	members map[string]string
	refs    map[string]int
	blobs   blobHooks
}

// blobHooks are the side effects of the state on the blob store.
type blobHooks interface {
	// write stores data under hash.
	write(hash string, data []byte)
	// drop deletes blob hash (now unreferenced).
	drop(hash string)
}

func newState(blobs blobHooks) *state {
	return &state{jobs: make(map[string]*jobEntry), members: make(map[string]string), refs: make(map[string]int), blobs: blobs}
}

// ref records a reference to blob hash with bytes data, writing the blob if it is new.
func (s *state) ref(hash string, data []byte) {
	if s.refs[hash] == 0 {
		s.blobs.write(hash, data)
	}
	s.refs[hash]++
}

// unref drops a reference to blob hash ("" is no blob), deleting the blob with the last one.
func (s *state) unref(hash string) {
	if hash == "" {
		return
	}
	if s.refs[hash]--; s.refs[hash] <= 0 {
		delete(s.refs, hash)
		s.blobs.drop(hash)
	}
}

// dropCheckpoint forgets the job's checkpoint.
func (s *state) dropCheckpoint(e *jobEntry) {
	s.unref(e.job.CheckpointHash)
	e.job.CheckpointHash, e.job.CheckpointSize = "", 0
}

func (s *state) get(id string) (*jobEntry, error) {
	e, ok := s.jobs[id]
	if !ok {
		return nil, fmt.Errorf("job %q: %w", id, ErrJobNotFound)
	}
	return e, nil
}

func (s *state) submit(c submitCmd) error {
	if c.ID == "" {
		return fmt.Errorf("submit: empty job ID: %w", ErrInvalidArgument)
	}
	if _, ok := s.jobs[c.ID]; ok {
		return fmt.Errorf("submit job %q: %w", c.ID, ErrJobExists)
	}
	s.jobs[c.ID] = &jobEntry{job: Job{
		ID:        c.ID,
		Spec:      c.Spec,
		State:     JobPending,
		CreatedAt: c.Time,
		UpdatedAt: c.Time,
	}}
	s.jobs[c.ID].events.add(Event{JobID: c.ID, State: JobPending, Phase: "state", Message: "submitted", UnixNano: c.Time.UnixNano()})
	return nil
}

func (s *state) setState(c setStateCmd) error {
	e, err := s.get(c.ID)
	if err != nil {
		return fmt.Errorf("set state: %w", err)
	}
	from := e.job.State
	if !from.canMove(c.State) {
		return fmt.Errorf("job %q: %s -> %s: %w", c.ID, from, c.State, ErrInvalidTransition)
	}
	if c.State == JobSucceeded && e.job.ModelHash == "" {
		return fmt.Errorf("job %q: %s -> %s: put the model first: %w", c.ID, from, c.State, ErrNoModel)
	}
	e.job.State = c.State
	e.job.Error = c.Error
	e.job.UpdatedAt = c.Time
	if c.State.Finished() {
		e.upload = nil
		s.dropCheckpoint(e)
	}
	msg := c.Message
	if msg == "" {
		msg = c.Error
	}
	e.events.add(Event{JobID: c.ID, State: c.State, Phase: "state", Iteration: int32(e.job.Iteration),
		Objective: e.job.Objective, Message: msg, UnixNano: c.Time.UnixNano()})
	return nil
}

func (s *state) checkpoint(c checkpointCmd) error {
	e, err := s.get(c.ID)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if e.job.State != JobRunning {
		return fmt.Errorf("checkpoint job %q (%s): %w", c.ID, e.job.State, ErrJobNotRunning)
	}
	data := c.Checkpoint
	if c.Upload != 0 {
		// The bytes came as chunks: check them like a model's.
		var err error
		if data, err = e.finishUpload(fmt.Sprintf("checkpoint of job %q", c.ID), c.Upload, c.Chunks, c.Size, c.SHA256); err != nil {
			return err
		}
	}
	// One live checkpoint per job: the new one replaces the old (referenced first, so equal
	// bytes are not deleted and written again).
	old := e.job.CheckpointHash
	e.job.CheckpointHash, e.job.CheckpointSize = "", 0
	if len(data) > 0 {
		hash := BlobHash(data)
		s.ref(hash, data)
		e.job.CheckpointHash, e.job.CheckpointSize = hash, int64(len(data))
	}
	s.unref(old)
	e.job.Iteration = c.Iteration
	e.job.Objective = c.Objective
	e.job.UpdatedAt = c.Time
	return nil
}

// modelChunk appends a chunk to the job's upload (of a model or a checkpoint). Chunk 0 starts
// a new upload (dropping any unfinished one) whose ID is the chunk's Upload, or else index,
// the chunk's raft log index; it returns the upload ID.
func (s *state) modelChunk(index uint64, c modelChunkCmd) (uint64, error) {
	e, err := s.get(c.ID)
	if err != nil {
		return 0, fmt.Errorf("model chunk: %w", err)
	}
	if e.job.State != JobRunning {
		return 0, fmt.Errorf("model chunk for job %q (%s): %w", c.ID, e.job.State, ErrJobNotRunning)
	}
	if c.Seq == 0 {
		// The proposer names the upload (so it can send every chunk without waiting for the
		// first); an unnamed one takes the chunk's log index.
		id := c.Upload
		if id == 0 {
			id = index
		}
		e.upload = &upload{id: id, chunks: [][]byte{c.Data}, size: int64(len(c.Data))}
		return id, nil
	}
	u := e.upload
	if u == nil || u.id != c.Upload {
		return 0, fmt.Errorf("model chunk %d for job %q: upload %d is not in progress: %w", c.Seq, c.ID, c.Upload, ErrModelUpload)
	}
	if c.Seq != len(u.chunks) {
		return 0, fmt.Errorf("model chunk for job %q: got chunk %d, want %d: %w", c.ID, c.Seq, len(u.chunks), ErrModelUpload)
	}
	u.chunks = append(u.chunks, c.Data)
	u.size += int64(len(c.Data))
	return u.id, nil
}

// modelCommit checks the upload against the announced chunk count, size and sha256 and makes
// it the job's model.
func (s *state) modelCommit(c modelCommitCmd) error {
	e, err := s.get(c.ID)
	if err != nil {
		return fmt.Errorf("model commit: %w", err)
	}
	if e.job.State != JobRunning {
		return fmt.Errorf("model commit for job %q (%s): %w", c.ID, e.job.State, ErrJobNotRunning)
	}
	data, err := e.finishUpload(fmt.Sprintf("model commit for job %q", c.ID), c.Upload, c.Chunks, c.Size, c.SHA256)
	if err != nil {
		return err
	}
	s.ref(c.SHA256, data)
	s.unref(e.job.ModelHash)
	e.job.ModelSize = int64(len(data))
	e.job.ModelHash = c.SHA256
	e.job.Metrics = c.Metrics
	e.job.UpdatedAt = c.Time
	return nil
}

func (s *state) cancel(c cancelCmd) error {
	e, err := s.get(c.ID)
	if err != nil {
		return fmt.Errorf("cancel: %w", err)
	}
	if !e.job.State.canMove(JobCanceled) {
		return fmt.Errorf("cancel job %q (%s): %w", c.ID, e.job.State, ErrInvalidTransition)
	}
	e.job.State = JobCanceled
	e.job.UpdatedAt = c.Time
	e.upload = nil
	s.dropCheckpoint(e)
	e.events.add(Event{JobID: c.ID, State: JobCanceled, Phase: "state", Iteration: int32(e.job.Iteration),
		Objective: e.job.Objective, Message: "canceled", UnixNano: c.Time.UnixNano()})
	return nil
}

// deleteJobs removes finished jobs with their models, checkpoints and events. With
// c.Retention, jobs that are gone or not finished are skipped (the leader chose them from a
// state that may have moved on); otherwise they are errors and nothing is deleted.
func (s *state) deleteJobs(c deleteCmd) error {
	if !c.Retention {
		for _, id := range c.IDs {
			e, err := s.get(id)
			if err != nil {
				return fmt.Errorf("delete: %w", err)
			}
			if !e.job.State.Finished() {
				return fmt.Errorf("delete job %q (%s): cancel it first: %w", id, e.job.State, ErrJobActive)
			}
		}
	}
	for _, id := range c.IDs {
		e, ok := s.jobs[id]
		if !ok || !e.job.State.Finished() {
			continue
		}
		s.unref(e.job.ModelHash)
		s.dropCheckpoint(e)
		delete(s.jobs, id)
	}
	return nil
}

// appendEvents adds progress events to their jobs' rings; events of unknown or finished
// jobs are dropped (they arrive after the job's end, from a run that was stopping).
func (s *state) appendEvents(c eventsCmd) error {
	for _, ev := range c.Events {
		if e, ok := s.jobs[ev.JobID]; ok && !e.job.State.Finished() {
			e.events.add(ev)
		}
	}
	return nil
}

// member records or removes the API address of coordinator c.ID.
func (s *state) member(c memberCmd) error {
	if c.ID == "" {
		return fmt.Errorf("member: empty server ID: %w", ErrInvalidArgument)
	}
	if c.Remove {
		delete(s.members, c.ID)
		return nil
	}
	if c.APIAddr == "" {
		return fmt.Errorf("member %q: empty API address: %w", c.ID, ErrInvalidArgument)
	}
	s.members[c.ID] = c.APIAddr
	return nil
}

// sortedEntries returns the entries ordered by CreatedAt, then ID.
func (s *state) sortedEntries() []*jobEntry {
	out := make([]*jobEntry, 0, len(s.jobs))
	for _, e := range s.jobs {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *jobEntry) int {
		if c := a.job.CreatedAt.Compare(b.job.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.job.ID, b.job.ID)
	})
	return out
}
