package store

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// The job API: proposals (leader only) and reads of the local state.

// SubmitJob adds job id in state Pending with the encoded spec, created at now (the
// leader's clock; the zero time means time.Now()). It fails with ErrJobExists if id is taken.
func (n *Node) SubmitJob(ctx context.Context, id string, spec []byte, now time.Time) error {
	if id == "" {
		return fmt.Errorf("submit job: empty ID: %w", ErrInvalidArgument)
	}
	if _, err := n.propose(ctx, opSubmit, submitCmd{ID: id, Spec: spec, Time: stamp(now)}); err != nil {
		return fmt.Errorf("submit job %q: %w", id, err)
	}
	return nil
}

// SetState moves job id to state with the reason errMsg (kept in Job.Error). Allowed moves:
// pending -> running, failed or canceled; running -> succeeded, failed or canceled; a
// finished job never changes (ErrInvalidTransition). Succeeded requires a model stored by
// PutModel (ErrNoModel). A finished job's checkpoint is dropped.
func (n *Node) SetState(ctx context.Context, id string, state JobState, errMsg string, now time.Time) error {
	return n.SetStateMessage(ctx, id, state, errMsg, "", now)
}

// SetStateMessage is SetState with msg as the text of the job event the change records
// (errMsg if msg is empty).
func (n *Node) SetStateMessage(ctx context.Context, id string, state JobState, errMsg, msg string, now time.Time) error {
	c := setStateCmd{ID: id, State: state, Error: errMsg, Message: msg, Time: stamp(now)}
	if _, err := n.propose(ctx, opSetState, c); err != nil {
		return fmt.Errorf("set job %q %s: %w", id, state, err)
	}
	return nil
}

// SaveCheckpoint records the optimizer iteration, objective and opaque checkpoint of running
// job id, replacing its earlier checkpoint. A checkpoint over Config.MaxCheckpointBytes fails
// with ErrCheckpointTooLarge. One larger than Config.ModelChunkBytes travels in chunks, like
// a model; either way the bytes end in the blob store, not in the state.
//
// The size limit is checked here, on the proposing leader, and not in Apply: it is local
// configuration, and Apply must not depend on anything but the log.
func (n *Node) SaveCheckpoint(ctx context.Context, id string, iteration int, objective float64, checkpoint []byte, now time.Time) error {
	if size := int64(len(checkpoint)); size > n.cfg.MaxCheckpointBytes {
		return fmt.Errorf("checkpoint job %q: %d bytes, limit %d: %w", id, size, n.cfg.MaxCheckpointBytes, ErrCheckpointTooLarge)
	}
	c := checkpointCmd{ID: id, Iteration: iteration, Objective: objective, Time: stamp(now)}
	if len(checkpoint) <= n.cfg.ModelChunkBytes {
		c.Checkpoint = checkpoint
	} else {
		up, chunks, err := n.upload(ctx, id, checkpoint)
		if err != nil {
			return fmt.Errorf("checkpoint job %q at iteration %d: %w", id, iteration, err)
		}
		c.Upload, c.Chunks, c.Size, c.SHA256 = up, chunks, int64(len(checkpoint)), BlobHash(checkpoint)
	}
	if _, err := n.propose(ctx, opCheckpoint, c); err != nil {
		return fmt.Errorf("checkpoint job %q at iteration %d: %w", id, iteration, err)
	}
	return nil
}

// PutModel stores the finished model of running job id, with its metrics (opaque JSON). The
// model is written as one raft command per Config.ModelChunkBytes chunk, then a commit
// command that checks the sha256 of the assembled chunks and makes the model the job's
// (replacing an earlier one); the bytes go to the blob store of every member, and log
// compaction drops the chunks. A model over Config.MaxModelBytes fails with
// ErrModelTooLarge. The job stays running: mark it succeeded with SetState.
func (n *Node) PutModel(ctx context.Context, id string, model, metrics []byte, now time.Time) error {
	if len(model) == 0 {
		return fmt.Errorf("put model of job %q: empty model: %w", id, ErrInvalidArgument)
	}
	if size := int64(len(model)); size > n.cfg.MaxModelBytes {
		return fmt.Errorf("put model of job %q: %d bytes, limit %d (serve --max-model-bytes): %w", id, size, n.cfg.MaxModelBytes, ErrModelTooLarge)
	}
	up, chunks, err := n.upload(ctx, id, model)
	if err != nil {
		return fmt.Errorf("put model of job %q: %w", id, err)
	}
	c := modelCommitCmd{
		ID: id, Upload: up, Chunks: chunks, Size: int64(len(model)),
		SHA256: BlobHash(model), Metrics: metrics, Time: stamp(now),
	}
	if _, err := n.propose(ctx, opModelCommit, c); err != nil {
		return fmt.Errorf("put model of job %q: commit: %w", id, err)
	}
	return nil
}

// upload writes data as the chunks of a new upload of job id and returns the upload ID and
// the number of chunks; a commit command then names them. The upload is named here (a
// random ID), so every chunk is in flight at once, up to modelPipeline: raft orders them as
// proposed and batches them into fewer disk writes and RPCs.
func (n *Node) upload(ctx context.Context, id string, data []byte) (uint64, int, error) {
	size := n.cfg.ModelChunkBytes
	chunks := (len(data) + size - 1) / size
	chunk := func(i int) []byte { return data[i*size : min((i+1)*size, len(data))] }
	var b [8]byte
	_, _ = rand.Read(b[:])
	upload := binary.LittleEndian.Uint64(b[:]) | 1 // never 0, which means "the log index"

	type inflight struct {
		seq int
		f   raft.ApplyFuture
	}
	var queue []inflight
	drain := func(keep int) error {
		for len(queue) > keep {
			q := queue[0]
			queue = queue[1:]
			if _, err := n.result(ctx, q.f); err != nil {
				return fmt.Errorf("chunk %d of %d: %w", q.seq, chunks, err)
			}
		}
		return nil
	}
	for seq := range chunks {
		f, err := n.start(ctx, opModelChunk, modelChunkCmd{ID: id, Upload: upload, Seq: seq, Data: chunk(seq)})
		if err != nil {
			return 0, 0, fmt.Errorf("chunk %d of %d: %w", seq, chunks, err)
		}
		queue = append(queue, inflight{seq, f})
		if err := drain(modelPipeline - 1); err != nil {
			return 0, 0, err
		}
	}
	if err := drain(0); err != nil {
		return 0, 0, err
	}
	return upload, chunks, nil
}

// DeleteJobs removes finished jobs with their models, checkpoints and events, on every
// member. It fails with ErrJobNotFound or ErrJobActive (pending or running: cancel first),
// deleting nothing, if any job is missing or unfinished.
func (n *Node) DeleteJobs(ctx context.Context, ids []string, now time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := n.propose(ctx, opDelete, deleteCmd{IDs: ids, Time: stamp(now)}); err != nil {
		return fmt.Errorf("delete jobs %v: %w", ids, err)
	}
	return nil
}

// ExpireJobs removes the given jobs that are still there and finished (retention).
func (n *Node) ExpireJobs(ctx context.Context, ids []string, now time.Time) error {
	if _, err := n.propose(ctx, opDelete, deleteCmd{IDs: ids, Retention: true, Time: stamp(now)}); err != nil {
		return fmt.Errorf("expire %d finished jobs: %w", len(ids), err)
	}
	return nil
}

// AppendEvents records progress events of their jobs (kept per job, the last 500).
func (n *Node) AppendEvents(ctx context.Context, evs []Event) error {
	if _, err := n.propose(ctx, opEvents, eventsCmd{Events: evs}); err != nil {
		return fmt.Errorf("record %d job events: %w", len(evs), err)
	}
	return nil
}

// CancelJob cancels pending or running job id. Canceling a finished job fails with
// ErrInvalidTransition.
func (n *Node) CancelJob(ctx context.Context, id string, now time.Time) error {
	if _, err := n.propose(ctx, opCancel, cancelCmd{ID: id, Time: stamp(now)}); err != nil {
		return fmt.Errorf("cancel job %q: %w", id, err)
	}
	return nil
}

// Job returns a copy of job id from this node's state (ErrJobNotFound if there is none).
func (n *Node) Job(id string) (Job, error) { return n.fsm.job(id) }

// Jobs returns copies of all jobs, ordered by CreatedAt, then ID.
func (n *Node) Jobs() []Job { return n.fsm.jobs(nil) }

// JobsInState returns copies of the jobs in any of the given states, ordered by CreatedAt,
// then ID. JobsInState(JobRunning) lists the jobs a new leader resumes (after Barrier).
func (n *Node) JobsInState(states ...JobState) []Job {
	return n.fsm.jobs(func(j *Job) bool { return slices.Contains(states, j.State) })
}

// Model returns the committed model of job id from this node's blob store (ErrNoModel if
// the job has none).
func (n *Node) Model(id string) ([]byte, error) { return n.fsm.model(id) }

// stamp returns the command time for now: the leader's clock if now is zero, in UTC and
// without a monotonic reading.
func stamp(now time.Time) time.Time {
	if now.IsZero() {
		now = time.Now()
	}
	return now.UTC()
}

// propose applies one command and waits for its result.
func (n *Node) propose(ctx context.Context, o op, payload any) (applyResponse, error) {
	f, err := n.start(ctx, o, payload)
	if err != nil {
		return applyResponse{}, err
	}
	return n.result(ctx, f)
}

// start encodes and submits one command to raft without waiting for it.
func (n *Node) start(ctx context.Context, o op, payload any) (raft.ApplyFuture, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := n.checkLeader(); err != nil {
		return nil, err
	}
	data, err := encodeCommand(o, payload)
	if err != nil {
		return nil, err
	}
	return n.raft.Apply(data, n.timeout(ctx)), nil
}

// result waits for a submitted command and returns its response; a command rejected by
// Apply returns the rejection.
func (n *Node) result(ctx context.Context, f raft.ApplyFuture) (applyResponse, error) {
	if err := n.await(ctx, f); err != nil {
		return applyResponse{}, err
	}
	resp, _ := f.Response().(applyResponse)
	return resp, resp.Err
}
