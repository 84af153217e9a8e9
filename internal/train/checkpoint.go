package train

import (
	"bytes"
	"context"
	"encoding/gob"
	"fmt"

	"github.com/gpreduce/gpreduce/internal/model"
	"github.com/gpreduce/gpreduce/internal/optimizer"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
)

// Checkpoint phases, in order.
const (
	phasePrepared = 1 // standardization known
	phaseStats    = 2 // reduced statistics known (gl)
	phaseStarted  = 3 // start point chosen
)

// checkpointVersion is bumped whenever Checkpoint changes incompatibly.
const checkpointVersion = 1

// Checkpoint is the resumable state of a training run. Everything a method computes before
// an optimizer iteration is either in it or recomputed deterministically, so a run resumed
// from any checkpoint produces the same model, bit for bit, as an uninterrupted one.
type Checkpoint struct {
	Version   int
	Method    string
	Phase     int
	N, D      int
	Transform shard.Transform
	Ranges    []float64
	// Lo, Hi are the standardized input minima and maxima (the model's TrainBox); nil in a
	// checkpoint written before they were recorded.
	Lo, Hi   []float64
	GL       *model.GLParams       // gl: the grid
	Gram     *reduce.Gram          // gl: the reduced statistic, when under Hooks.MaxStatsBytes
	Restarts []Restart             // the hyperparameter search's finished restarts
	Start    []float64             // the hyperparameter search's outcome
	LBFGS    *optimizer.LBFGSState // the optimizer after its last completed iteration
	Adam     *optimizer.AdamState  // cg: Adam after its last completed step
	Trace    []float64             // objective by iteration
	// GRIEFP is GRIEF-II's rung of the eigenfunction ladder being fitted (griefIIFit; 0
	// before the ladder's start check) and GRIEFTheta the theta that rung's L-BFGS started
	// from (nil: the search's start).
	GRIEFP     int
	GRIEFTheta []float64
	// Kernel is the family exact, cg or kmcg chose by the evidence (chooseKernel; empty
	// before the choice or when the spec names one), KernelStart its fitted theta on the
	// sampled rows and KernelReason the choice's sentence.
	Kernel       string
	KernelStart  []float64
	KernelReason string
	// KernelFits are every family's fits on the sampled rows (chooseKernel), for the check of
	// the choice on all rows by exact, cg and kmcg (kernelOnAllRows); KernelAllRows is set once
	// that check has settled Kernel, KernelStart and KernelReason.
	KernelFits    []KernelFit
	KernelAllRows bool
	// Fallback is the method auto retrains with after its first choice ended at the all-noise
	// fit (autoFallback), and FallbackReason why; empty until then.
	Fallback, FallbackReason string
}

// Hooks connect a run to whoever drives it: progress events, the checkpoint to resume from,
// and where to save checkpoints. Save is called after each phase and after each optimizer
// iteration with the iteration number, the objective per training row, and the encoded
// checkpoint; a Save error stops the run.
type Hooks struct {
	Observer      Observer
	Resume        []byte
	Save          func(ctx context.Context, iteration int, objective float64, checkpoint []byte) error
	MaxStatsBytes int64 // largest reduced statistic stored in a checkpoint (default 16 MiB)
}

// DefaultMaxStatsBytes bounds the reduced statistics a checkpoint carries.
const DefaultMaxStatsBytes = 16 << 20

// DecodeCheckpoint reads an encoded checkpoint.
func DecodeCheckpoint(b []byte) (*Checkpoint, error) {
	var c Checkpoint
	if err := gob.NewDecoder(bytes.NewReader(b)).Decode(&c); err != nil {
		return nil, fmt.Errorf("decode checkpoint: %w", err)
	}
	if c.Version != checkpointVersion {
		return nil, fmt.Errorf("decode checkpoint: version %d, this build reads %d", c.Version, checkpointVersion)
	}
	return &c, nil
}

// run is one training run's state and hooks.
type run struct {
	spec  Spec
	hooks Hooks
	ck    *Checkpoint
	obs   Observer
}

func newRun(spec Spec, hooks Hooks) (*run, error) {
	r := &run{spec: spec, hooks: hooks, obs: hooks.Observer, ck: &Checkpoint{Version: checkpointVersion, Method: spec.Method}}
	if r.obs == nil {
		r.obs = func(Event) {}
	}
	if r.hooks.MaxStatsBytes == 0 {
		r.hooks.MaxStatsBytes = DefaultMaxStatsBytes
	}
	if len(hooks.Resume) > 0 {
		ck, err := DecodeCheckpoint(hooks.Resume)
		if err != nil {
			return nil, err
		}
		if ck.Method != spec.Method {
			return nil, fmt.Errorf("checkpoint is of method %q, the job's is %q", ck.Method, spec.Method)
		}
		r.ck = ck
		r.obs(Event{Phase: "resume", Iteration: r.iteration(), Message: fmt.Sprintf("resuming from a checkpoint at phase %d, iteration %d", ck.Phase, r.iteration())})
	}
	return r, nil
}

func (r *run) iteration() int {
	switch {
	case r.ck.LBFGS != nil:
		return r.ck.LBFGS.Iter
	case r.ck.Adam != nil:
		return r.ck.Adam.Iter
	}
	return 0
}

// save encodes the checkpoint and hands it to Hooks.Save.
func (r *run) save(ctx context.Context) error {
	if r.hooks.Save == nil {
		return nil
	}
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(r.ck); err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	obj := 0.0
	switch {
	case r.ck.N <= 0:
	case r.ck.LBFGS != nil:
		obj = r.ck.LBFGS.F / float64(r.ck.N)
	case r.ck.Adam != nil:
		obj = r.ck.Adam.F / float64(r.ck.N)
	}
	if err := r.hooks.Save(ctx, r.iteration(), obj, b.Bytes()); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	return nil
}
