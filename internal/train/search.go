package train

// The hyperparameter initialisation and search shared by every method that learns the kernel
// hyperparameters theta = (log l_1..log l_d, log sigma_f^2, log sigma_n^2). The marginal likelihood of an ARD kernel has poor local optima: the
// all-noise optimum (sigma_n^2 near the target variance, the signal explaining nothing) and
// optima with a relevant input switched off or an irrelevant one switched on. One local run
// from a fixed start falls into them on data with many inputs. The search, step by step:
//
//  1. a seeded random sample of min(n, startRows) rows (shard.SampleTask, bottom-k keys, so
//     the same seed and shard layout give the same rows on any number of workers); its first
//     min(n, searchRows) rows (the smallest keys) are themselves a uniform sample;
//  2. lengthscales started from the data: per input, the median absolute difference between
//     sampled rows (the median heuristic, Gretton et al. 2012, applied per dimension), times
//     sqrt(d) so that a typical squared distance over all d inputs is O(1) lengthscale^2;
//  3. searchRestarts deterministic starts on the searchRows rows: searchNearStarts near the
//     heuristic (with noise variances 0.1 and 0.01, shortened 3x with noise 0.05, and two
//     whose log-lengthscales are the heuristic's plus N(0, 1) draws), then starts anywhere in
//     the box, each log-lengthscale uniform between its bounds (as scikit-learn's
//     n_restarts_optimizer draws them), for the optima a start near the heuristic does not
//     reach: on nearly noiseless data every near start can end in one basin while the highest
//     likelihood switches an input off and gives another a short lengthscale (yacht: 7 nats
//     with the Matern 5/2 kernel, TestExactSearchFindsBestOptimum). Beyond the first three,
//     the noise is log-uniform on [1e-3, 0.5]; the draws come from a stream seeded by the
//     job's seed; the signal variance starts at 1 - noise, the standardized target's variance.
//     Each start runs box-constrained L-BFGS on the exact GP's likelihood of the sample for at
//     most searchIters iterations;
//  4. the all-noise rule: a restart whose noise variance is at least allNoiseFrac of the
//     target variance is set aside when another restart found signal, even at a higher
//     likelihood (on a few hundred rows the all-noise optimum can win while the signal is
//     real); among the rest the highest likelihood wins;
//  5. the winner is polished on all startRows sampled rows (box-constrained L-BFGS, max-iter
//     iterations), then handed to the method, whose own objective on the full data decides the
//     final theta (exact, gl, rff: L-BFGS; cg: Adam; grief type2: GRIEF-II's L-BFGS). kmcg and
//     grief type1 keep it, as their papers fit theta on the exact GP.
//
// The result is saved in the checkpoint (Checkpoint.Start), and every step is deterministic,
// so a resumed run starts from the same theta bit for bit.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/model"
	"github.com/gpreduce/gpreduce/internal/optimizer"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
)

const (
	// searchRows is the size of the sample the restarts run on: an exact fit on 400 rows
	// costs a few milliseconds per evaluation yet resolves which of tens of inputs matter.
	searchRows = 400
	// startRows is the size of the sample the winning restart is polished on: GP-GRIEF's
	// initialisation size, min(n, 1000) (GP-GRIEF §6).
	startRows = 1000
	// searchRestarts is the number of deterministic starts, of which the first
	// searchNearStarts start near the median heuristic and the rest anywhere in the box.
	searchRestarts   = 9
	searchNearStarts = 5
	// farMargin is how many nats of the sample's likelihood a far start must gain over the
	// near starts' pick to replace it (pickRestart).
	farMargin = 0.01
	// searchIters caps the L-BFGS iterations of one restart.
	searchIters = 50
	// searchFuncTol stops a restart when its relative decrease falls below it: restarts only
	// have to find the basin, the polish and the method's own objective refine it.
	searchFuncTol = 1e-6
	// fitFuncTol and fitGradTol are the convergence tests of the polish and of the methods'
	// own L-BFGS runs: scipy's L-BFGS-B defaults (factr 1e7, i.e. a relative decrease of
	// 2.2e-9, and pgtol 1e-5), which scikit-learn and GPy users get. Tighter tests only buy
	// changes far below a nat at the cost of tens of O(n^3) evaluations.
	fitFuncTol = 2.2e-9
	fitGradTol = 1e-5
	// allNoiseFrac: a fit whose noise variance is at least this fraction of the target's
	// variance (1 in standardized units) explains the target as noise.
	allNoiseFrac = 0.9
	// medianRows caps the rows whose pairwise differences give the median heuristic.
	medianRows = 300
	// searchStream separates the restarts' random stream from the spec seed's other uses.
	searchStream = 0x7365617263 << 24
	// boundTol: a log-hyperparameter within boundTol of its box's width from a bound is on it.
	boundTol = 1e-3
)

// searchStart puts into the checkpoint, once, the start of the method's own optimizer: the
// outcome of the shared search (steps 1-5 above) inside the box [lower, upper]. A resumed run
// reads it from the checkpoint.
func (r *run) searchStart(ctx context.Context, eng engine.Engine, p *prepared, fam kernel.Family, lower, upper []float64) ([]float64, error) {
	return r.searchStartOn(ctx, eng, p, fam, lower, upper, startRows)
}

// searchStartOn is searchStart with the winner polished on min(n, polish) sampled rows
// (polish >= searchRows). The bottom-k sample's first searchRows rows do not depend on
// polish, so neither do the restarts.
func (r *run) searchStartOn(ctx context.Context, eng engine.Engine, p *prepared, fam kernel.Family, lower, upper []float64, polish int) ([]float64, error) {
	if r.ck.Phase >= phaseStarted && len(r.ck.Start) == p.d+2 {
		return r.ck.Start, nil
	}
	all, err := r.sampleProblem(ctx, eng, p, fam, polish)
	if err != nil {
		return nil, err
	}
	sub := all.head(searchRows)
	starts := searchStarts(medianLengthscales(sub.x, len(sub.y), p.d), lower, upper, r.spec.Seed)
	r.obs(Event{Phase: "start", Message: fmt.Sprintf("hyperparameter search: %d restarts on %d sampled rows, then %d rows", len(starts), len(sub.y), len(all.y))})
	// Each restart's outcome is checkpointed, so a resumed run repeats only the unfinished ones.
	for i := len(r.ck.Restarts); i < len(starts); i++ {
		rs, err := sub.restart(ctx, starts[i], lower, upper)
		if err != nil {
			return nil, fmt.Errorf("hyperparameter search: %w", err)
		}
		r.ck.Restarts = append(r.ck.Restarts, rs)
		r.obs(Event{Phase: "start", Iteration: i + 1, MaxIter: len(starts), Objective: rs.F / float64(len(sub.y)), Message: fmt.Sprintf("restart %d of %d", i+1, len(starts))})
		if err := r.save(ctx); err != nil {
			return nil, err
		}
	}
	theta := pickRestart(r.ck.Restarts)
	if theta == nil {
		return nil, fmt.Errorf("hyperparameter search: the likelihood is not finite at any of %d starts; check the bounds", len(starts))
	}
	if len(all.y) > len(sub.y) {
		st, err := optimizer.NewLBFGSState(theta, lower, upper)
		if err != nil {
			return nil, err
		}
		if err := optimizer.MinimizeLBFGSB(ctx, all.objective, st, lower, upper, optimizer.LBFGSSettings{MaxIter: r.spec.maxIter(), FuncTol: fitFuncTol, GradTol: fitGradTol}, nil); err != nil {
			return nil, fmt.Errorf("hyperparameter search: polish on %d rows: %w", len(all.y), err)
		}
		theta = st.X
	}
	r.ck.Phase, r.ck.Start = phaseStarted, append([]float64(nil), theta...)
	return r.ck.Start, r.save(ctx)
}

// sampleProblem draws a seeded random sample of min(n, rows) rows by a bottom-k pass and
// returns the exact GP on it, standardized, with the rows in ascending key order.
func (r *run) sampleProblem(ctx context.Context, eng engine.Engine, p *prepared, fam kernel.Family, rows int) (*exactProblem, error) {
	d := p.d
	smp, err := r.samplePass(ctx, eng, d, rows)
	if err != nil {
		return nil, err
	}
	n := len(smp.Y)
	if n < 2 {
		return nil, fmt.Errorf("sample pass gave %d rows; the search needs at least 2", n)
	}
	x, y := make([]float64, n*d), make([]float64, n)
	for i := 0; i < n; i++ {
		p.tf.ApplyRow(smp.X[i*d:(i+1)*d], x[i*d:(i+1)*d])
		y[i] = p.tf.Y(smp.Y[i])
	}
	return &exactProblem{fam: fam, d: d, x: x, y: y}, nil
}

// samplePass draws the seeded bottom-k sample of min(n, rows) raw rows of d inputs
// (shard.SampleTask with the spec's seed): the same rows for any worker count and after a resume.
func (r *run) samplePass(ctx context.Context, eng engine.Engine, d, rows int) (*reduce.Sample, error) {
	st, err := eng.Reduce(ctx, shard.SampleTask{K: rows, Seed: r.spec.Seed})
	if err != nil {
		return nil, fmt.Errorf("sample pass: %w", err)
	}
	smp, ok := st.(*reduce.Sample)
	if !ok {
		return nil, fmt.Errorf("sample pass returned %T", st)
	}
	if n := len(smp.Y); n == 0 || len(smp.X) != n*d {
		return nil, fmt.Errorf("sample pass gave %d rows of %d values for d=%d", n, len(smp.X), d)
	}
	return smp, nil
}

// head is the exact GP on the first min(n, k) rows.
func (e *exactProblem) head(k int) *exactProblem {
	k = min(k, len(e.y))
	return &exactProblem{fam: e.fam, d: e.d, x: e.x[:k*e.d], y: e.y[:k]}
}

// medianLengthscales returns, per input, the median of |x_ik - x_jk| over the pairs of the
// first min(n, medianRows) rows, times sqrt(d). A column whose median difference is 0 (most
// rows share one value) gets its mean absolute difference, or 1 if that is 0 too.
func medianLengthscales(x []float64, n, d int) []float64 {
	m := min(n, medianRows)
	ls := make([]float64, d)
	diffs := make([]float64, 0, m*(m-1)/2)
	for k := 0; k < d; k++ {
		diffs = diffs[:0]
		var sum float64
		for i := 0; i < m; i++ {
			for j := i + 1; j < m; j++ {
				v := math.Abs(x[i*d+k] - x[j*d+k])
				diffs = append(diffs, v)
				sum += v
			}
		}
		med := 1.0
		if len(diffs) > 0 {
			slices.Sort(diffs)
			med = diffs[len(diffs)/2]
			if med == 0 {
				med = sum / float64(len(diffs))
			}
			if med == 0 {
				med = 1
			}
		}
		ls[k] = med * math.Sqrt(float64(d))
	}
	return ls
}

// searchStarts returns the deterministic starts of step 3, clamped into the box.
func searchStarts(l0, lower, upper []float64, seed uint64) [][]float64 {
	d := len(l0)
	rng := rand.New(rand.NewPCG(seed, searchStream))
	starts := make([][]float64, searchRestarts)
	for s := range starts {
		x := make([]float64, d+2)
		shift, sn2 := 0.0, 0.1
		switch s {
		case 0:
		case 1:
			sn2 = 0.01
		case 2:
			shift, sn2 = -math.Log(3), 0.05
		}
		for k := 0; k < d; k++ {
			switch {
			case s >= searchNearStarts:
				x[k] = lower[k] + rng.Float64()*(upper[k]-lower[k])
			default:
				x[k] = math.Log(l0[k]) + shift
				if s > 2 {
					x[k] += rng.NormFloat64()
				}
			}
		}
		if s > 2 {
			sn2 = math.Exp(math.Log(1e-3) + rng.Float64()*(math.Log(0.5)-math.Log(1e-3)))
		}
		x[d], x[d+1] = math.Log(1-sn2), math.Log(sn2)
		for i := range x {
			x[i] = clamp(x[i], lower[i], upper[i])
		}
		starts[s] = x
	}
	return starts
}

// allNoise reports whether theta explains the standardized target as noise.
func allNoise(theta []float64) bool {
	return math.Exp(theta[len(theta)-1]) >= allNoiseFrac
}

// Restart is one restart's outcome, kept in the checkpoint: its point and objective (the
// negative log likelihood of the search sample; +Inf when the start was not finite).
type Restart struct {
	X []float64
	F float64
}

// pickRestart applies the all-noise rule of step 4: the restart with the smallest finite
// objective among those that found signal, or among all when none did; the earlier restart
// on ties. A far start (index searchNearStarts and on) replaces the pick only when its
// objective is lower by more than farMargin nats: where it finds the same optimum as a near
// start, the near start's point stands, as it did before the far starts were added. It
// returns nil for none.
func pickRestart(rs []Restart) []float64 {
	var best *Restart
	for i := range rs {
		r := &rs[i]
		if math.IsInf(r.F, 0) || math.IsNaN(r.F) {
			continue
		}
		margin := 0.0
		if i >= searchNearStarts {
			margin = farMargin
		}
		switch {
		case best == nil, allNoise(best.X) && !allNoise(r.X):
			best = r
		case allNoise(best.X) == allNoise(r.X) && r.F < best.F-margin:
			best = r
		}
	}
	if best == nil {
		return nil
	}
	return best.X
}

// restart runs box-constrained L-BFGS from x0 for at most searchIters iterations. A start
// whose objective is not finite gives F = +Inf; only a cancelled ctx is an error.
func (e *exactProblem) restart(ctx context.Context, x0, lower, upper []float64) (Restart, error) {
	st, err := optimizer.NewLBFGSState(x0, lower, upper)
	if err != nil {
		return Restart{}, err
	}
	err = optimizer.MinimizeLBFGSB(ctx, e.objective, st, lower, upper, optimizer.LBFGSSettings{MaxIter: searchIters, FuncTol: searchFuncTol}, nil)
	if ctx.Err() != nil {
		return Restart{}, ctx.Err()
	}
	if err != nil || !st.Evaluated {
		return Restart{X: st.X, F: math.Inf(1)}, nil
	}
	return Restart{X: st.X, F: st.F}, nil
}

// inputName is the name of input column k in messages: its header name, else x1, x2, ...
func (r *run) inputName(k int) string {
	if k < len(r.spec.Columns) && r.spec.Columns[k] != "" {
		return r.spec.Columns[k]
	}
	return fmt.Sprintf("x%d", k+1)
}

// warnFit records on m what a user must know about the fitted hyperparameters theta inside
// the box [lower, upper]: each one on a bound (model.WarnBound, in original units), an
// optimizer stopped by its iteration or evaluation limit (model.WarnNotConverged, when reason
// says so), and the all-noise optimum (model.WarnAllNoise).
//
// A lengthscale on its upper bound is not reported when that bound is at least 10 times the
// input's standardized range: the kernel then varies by less than exp(-1/200) across the
// data in that input, which is switched off, and a wider box could not change the model.
func (r *run) warnFit(m *model.Model, p *prepared, theta, lower, upper []float64, reason string) {
	d := p.d
	name := r.inputName
	ys2 := p.tf.YScale * p.tf.YScale
	for i, v := range theta {
		w := upper[i] - lower[i]
		if !(w > 0) {
			continue
		}
		atLo, atHi := v-lower[i] <= boundTol*w, upper[i]-v <= boundTol*w
		if !atLo && !atHi {
			continue
		}
		side, b := "lower", math.Exp(lower[i])
		if atHi {
			side, b = "upper", math.Exp(upper[i])
		}
		switch {
		case i < d:
			if atHi && i < len(p.ranges) && b >= 10*p.ranges[i] {
				continue
			}
			sc := p.tf.XScale[i]
			m.Warn(model.WarnBound, "the lengthscale of %s is %.4g, on its %s bound %.4g (standardized %.4g); widen --lengthscale-bounds",
				name(i), math.Exp(v)*sc, side, b*sc, b)
		case i == d:
			m.Warn(model.WarnBound, "the signal variance is %.4g, on its %s bound %.4g (standardized %.4g); widen --signal-variance-bounds",
				math.Exp(v)*ys2, side, b*ys2, b)
		default:
			m.Warn(model.WarnBound, "the noise variance is %.4g, on its %s bound %.4g (standardized %.4g); widen --noise-variance-bounds",
				math.Exp(v)*ys2, side, b*ys2, b)
		}
	}
	if reason == optimizer.ReasonMaxIter || reason == optimizer.ReasonMaxEvals {
		m.Warn(model.WarnNotConverged, "the hyperparameter optimizer stopped without converging (%s, max-iter %d); raise --max-iter", reason, r.spec.maxIter())
	}
	if allNoise(theta) {
		sn2 := math.Exp(theta[d+1])
		m.Warn(model.WarnAllNoise, "the noise variance %.4g is %.0f%% of the target's variance %.4g: the model explains the target as noise (the degenerate optimum of the likelihood) and predicts about the mean",
			sn2*ys2, 100*sn2, ys2)
	}
}
