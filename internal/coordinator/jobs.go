package coordinator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
// PutModel (ErrNoModel).
func (n *Node) SetState(ctx context.Context, id string, state JobState, errMsg string, now time.Time) error {
	c := setStateCmd{ID: id, State: state, Error: errMsg, Time: stamp(now)}
	if _, err := n.propose(ctx, opSetState, c); err != nil {
		return fmt.Errorf("set job %q %s: %w", id, state, err)
	}
	return nil
}

// SaveCheckpoint records the optimizer iteration, objective and opaque checkpoint of running
// job id. A checkpoint over Config.MaxCheckpointBytes fails with ErrCheckpointTooLarge.
//
// The size limit is checked here, on the proposing leader, and not in Apply: it is local
// configuration, and Apply must not depend on anything but the log.
func (n *Node) SaveCheckpoint(ctx context.Context, id string, iteration int, objective float64, checkpoint []byte, now time.Time) error {
	if size := int64(len(checkpoint)); size > n.cfg.MaxCheckpointBytes {
		return fmt.Errorf("checkpoint job %q: %d bytes, limit %d: %w", id, size, n.cfg.MaxCheckpointBytes, ErrCheckpointTooLarge)
	}
	c := checkpointCmd{ID: id, Iteration: iteration, Objective: objective, Checkpoint: checkpoint, Time: stamp(now)}
	if _, err := n.propose(ctx, opCheckpoint, c); err != nil {
		return fmt.Errorf("checkpoint job %q at iteration %d: %w", id, iteration, err)
	}
	return nil
}

// PutModel stores the finished model of running job id, with its metrics (opaque JSON). The
// model is written as one raft command per Config.ModelChunkBytes chunk, then a commit
// command that checks the sha256 of the assembled chunks and makes the model the job's
// (replacing an earlier one). The job stays running: mark it succeeded with SetState.
func (n *Node) PutModel(ctx context.Context, id string, model, metrics []byte, now time.Time) error {
	if len(model) == 0 {
		return fmt.Errorf("put model of job %q: empty model: %w", id, ErrInvalidArgument)
	}
	sum := sha256.Sum256(model)
	size := n.cfg.ModelChunkBytes
	chunks := (len(model) + size - 1) / size
	chunk := func(i int) []byte { return model[i*size : min((i+1)*size, len(model))] }

	first, err := n.propose(ctx, opModelChunk, modelChunkCmd{ID: id, Seq: 0, Data: chunk(0)})
	if err != nil {
		return fmt.Errorf("put model of job %q: chunk 0 of %d: %w", id, chunks, err)
	}
	upload := first.Upload
	// Keep up to modelPipeline chunks in flight: raft orders them as proposed and batches
	// them into fewer disk writes and RPCs.
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
				return fmt.Errorf("put model of job %q: chunk %d of %d: %w", id, q.seq, chunks, err)
			}
		}
		return nil
	}
	for seq := 1; seq < chunks; seq++ {
		f, err := n.start(ctx, opModelChunk, modelChunkCmd{ID: id, Upload: upload, Seq: seq, Data: chunk(seq)})
		if err != nil {
			return fmt.Errorf("put model of job %q: chunk %d of %d: %w", id, seq, chunks, err)
		}
		queue = append(queue, inflight{seq, f})
		if err := drain(modelPipeline - 1); err != nil {
			return err
		}
	}
	if err := drain(0); err != nil {
		return err
	}
	c := modelCommitCmd{
		ID: id, Upload: upload, Chunks: chunks, Size: int64(len(model)),
		SHA256: hex.EncodeToString(sum[:]), Metrics: metrics, Time: stamp(now),
	}
	if _, err := n.propose(ctx, opModelCommit, c); err != nil {
		return fmt.Errorf("put model of job %q: commit: %w", id, err)
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

// Model returns the committed model of job id, reassembled from its chunks (ErrNoModel if
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
