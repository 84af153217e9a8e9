package train

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/model"
	"github.com/gpreduce/gpreduce/internal/optimizer"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
)

// Event reports training progress: a phase (moments, sizing, gram, optimize, fit), the
// optimizer iteration and its objective (negative log marginal likelihood per training row,
// standardized units), and a message.
type Event struct {
	Phase     string
	Iteration int
	MaxIter   int
	Objective float64
	Message   string
}

// Observer receives progress events. It must not block for long.
type Observer func(Event)

// Train runs the spec's method over the engine's shards and returns the trained model.
func Train(ctx context.Context, eng engine.Engine, spec Spec, obs Observer) (*model.Model, error) {
	return Run(ctx, eng, spec, Hooks{Observer: obs})
}

// Run is Train with checkpoints: it resumes from hooks.Resume when set and saves a checkpoint
// through hooks.Save after each phase and each optimizer iteration. A resumed run returns the
// same model, bit for bit, as one that was never interrupted.
func Run(ctx context.Context, eng engine.Engine, spec Spec, hooks Hooks) (*model.Model, error) {
	if err := spec.Validate(0); err != nil {
		return nil, err
	}
	r, err := newRun(spec, hooks)
	if err != nil {
		return nil, err
	}
	p, err := r.prepare(ctx, eng)
	if err != nil {
		return nil, err
	}
	if !spec.isAuto() {
		return r.trainWith(ctx, eng, spec, p)
	}
	return r.trainAuto(ctx, eng, spec, p)
}

// trainWith validates spec for the prepared data and trains its method.
func (r *run) trainWith(ctx context.Context, eng engine.Engine, spec Spec, p *prepared) (*model.Model, error) {
	spec.Kernel = resolveKernel(spec.Kernel, spec.Method)
	r.spec.Kernel = spec.Kernel
	if err := spec.Validate(p.d); err != nil {
		return nil, err
	}
	meth, ok := LookupMethod(spec.Method)
	if !ok {
		return nil, fmt.Errorf("method: unknown method %q; use %s", spec.Method, methodChoices())
	}
	return meth.train(ctx, r, eng, p)
}

// prepared is what every method learns in its first pass: the standardization and, in
// standardized units, the extent of each input column.
type prepared struct {
	d, n   int
	tf     shard.Transform
	ranges []float64
	// lo, hi are the standardized column minima and maxima (checkpointed; a resume from a
	// checkpoint written before they were recorded repeats the moments pass for them).
	lo, hi []float64
}

// prepare runs the moments pass, or takes its outcome from the checkpoint.
func (r *run) prepare(ctx context.Context, eng engine.Engine) (*prepared, error) {
	if r.ck.Phase >= phasePrepared {
		p := &prepared{d: r.ck.D, n: r.ck.N, tf: r.ck.Transform, ranges: r.ck.Ranges, lo: r.ck.Lo, hi: r.ck.Hi}
		if p.lo == nil || p.hi == nil {
			// A checkpoint written before the extremes were recorded: the moments pass is
			// deterministic, so repeating it gives the bits an uninterrupted run has.
			q, err := prepare(ctx, eng, r.spec, r.obs)
			if err != nil {
				return nil, err
			}
			p.lo, p.hi = q.lo, q.hi
			r.ck.Lo, r.ck.Hi = q.lo, q.hi
		}
		return p, nil
	}
	p, err := prepare(ctx, eng, r.spec, r.obs)
	if err != nil {
		return nil, err
	}
	r.ck.Phase, r.ck.N, r.ck.D, r.ck.Transform, r.ck.Ranges = phasePrepared, p.n, p.d, p.tf, p.ranges
	r.ck.Lo, r.ck.Hi = p.lo, p.hi
	return p, r.save(ctx)
}

// prepare runs the moments pass (count, mean, M2, min, max per column, merged by Chan's
// formula in shard order) and derives the standardization.
func prepare(ctx context.Context, eng engine.Engine, spec Spec, obs Observer) (*prepared, error) {
	obs(Event{Phase: "moments", Message: fmt.Sprintf("standardization pass over %d shards", len(eng.Shards()))})
	st, err := eng.Reduce(ctx, shard.MomentsTask{})
	if err != nil {
		return nil, fmt.Errorf("moments pass: %w", err)
	}
	m, ok := st.(*reduce.Moments)
	if !ok {
		return nil, fmt.Errorf("moments pass returned %T", st)
	}
	d := len(m.Mean) - 1
	if d < 1 {
		return nil, fmt.Errorf("data has no input columns")
	}
	// Name the data and its target in errors such as a constant target.
	names := &shard.Table{Source: eng.Shards()[0].Source, Columns: spec.Columns, Target: spec.Target, D: d}
	if len(names.Columns) != d {
		names.Columns = nil
	}
	tf, err := shard.NewTransform(m, names)
	if err != nil {
		return nil, err
	}
	p := &prepared{d: d, n: m.N, tf: tf, ranges: make([]float64, d), lo: make([]float64, d), hi: make([]float64, d)}
	for k := 0; k < d; k++ {
		p.ranges[k] = (m.Max[k] - m.Min[k]) / tf.XScale[k]
		p.lo[k] = (m.Min[k] - tf.XMean[k]) / tf.XScale[k]
		p.hi[k] = (m.Max[k] - tf.XMean[k]) / tf.XScale[k]
	}
	return p, nil
}

// box is the optimizer's box on theta = (log l_1..log l_d, log sigma_f^2, log sigma_n^2).
func box(spec Spec, d int) (lower, upper []float64) {
	lower = make([]float64, d+2)
	upper = make([]float64, d+2)
	for k := 0; k < d; k++ {
		lower[k], upper[k] = math.Log(spec.LengthscaleBounds[0]), math.Log(spec.LengthscaleBounds[1])
	}
	lower[d], upper[d] = math.Log(spec.SignalVarianceBounds[0]), math.Log(spec.SignalVarianceBounds[1])
	lower[d+1], upper[d+1] = math.Log(spec.NoiseVarianceBounds[0]), math.Log(spec.NoiseVarianceBounds[1])
	return lower, upper
}

func clamp(v, lo, hi float64) float64 { return math.Min(hi, math.Max(lo, v)) }

// fitted is the optimizer's outcome.
type fitted struct {
	theta []float64
	trace []float64
	iters int
	// reason is why L-BFGS stopped (optimizer.Reason*); empty for other optimizers.
	reason string
}

// optimize minimizes obj over the box with box-constrained L-BFGS from x0 (normally the
// shared search's outcome, run.searchStart), reporting and checkpointing each iteration; a
// checkpointed run continues from its saved optimizer state. The objective is the total
// negative log likelihood; events report it per training row. funcTol is the relative
// decrease below which (three iterations running) the run has converged; 0 selects
// fitFuncTol, the test for analytic gradients.
func (r *run) optimize(ctx context.Context, obj optimizer.Objective, x0, lower, upper []float64, p *prepared, funcTol float64) (*fitted, error) {
	if funcTol == 0 {
		funcTol = fitFuncTol
	}
	maxIter := r.spec.maxIter()
	st := r.ck.LBFGS
	if st == nil {
		var err error
		if st, err = optimizer.NewLBFGSState(x0, lower, upper); err != nil {
			return nil, err
		}
	}
	err := optimizer.MinimizeLBFGSB(ctx, obj, st, lower, upper, optimizer.LBFGSSettings{MaxIter: maxIter, FuncTol: funcTol, GradTol: fitGradTol}, func(s *optimizer.LBFGSState) error {
		for len(r.ck.Trace) <= s.Iter {
			r.ck.Trace = append(r.ck.Trace, 0)
		}
		r.ck.Trace[s.Iter] = s.F
		r.ck.LBFGS = s
		r.obs(Event{Phase: "optimize", Iteration: s.Iter, MaxIter: maxIter, Objective: s.F / float64(p.n)})
		return r.save(ctx)
	})
	if err != nil {
		return nil, fmt.Errorf("optimize hyperparameters: %w", err)
	}
	return &fitted{theta: append([]float64(nil), st.X...), trace: append([]float64(nil), r.ck.Trace...), iters: st.Iter, reason: st.Reason}, nil
}

// hyperOf unpacks theta into standardized hyperparameters.
func hyperOf(theta []float64, d int) model.Hyper {
	h := model.Hyper{Lengthscales: make([]float64, d), SignalVariance: math.Exp(theta[d]), NoiseVariance: math.Exp(theta[d+1])}
	for k := range h.Lengthscales {
		h.Lengthscales[k] = math.Exp(theta[k])
	}
	return h
}

// newModel fills the parts every method shares, the training inputs' box among them.
func newModel(spec Spec, p *prepared, fit *fitted, lml float64) *model.Model {
	return &model.Model{
		Version: model.Version, Method: spec.Method, Kernel: spec.Kernel, D: p.d,
		Columns: spec.Columns, Target: spec.Target, Transform: p.tf, Hyper: hyperOf(fit.theta, p.d),
		LogLik: lml, Trace: fit.trace, Iterations: fit.iters, NTrain: p.n,
		TrainBox: &model.Domain{Lo: slices.Clone(p.lo), Hi: slices.Clone(p.hi)},
	}
}
