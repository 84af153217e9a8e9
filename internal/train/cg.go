package train

// The exact GP trained by distributed conjugate gradients (Potapczynski et al. 2021),
// BBMM-style (Gardner et al. 2018): the kernel matrix is never formed on
// the coordinator; every product K_hat V is a map round over the shards (kernelop.go). The
// objective is L(theta) = 1/2 (log|K_hat| + y^T K_hat^-1 y + n log 2 pi), K_hat = K + sigma_n^2 I,
// minimised by Adam with the stochastic gradient of their eq. 3 (§2.1).
//
// The algorithm, step by step:
//
//  1. moments pass (standardization; run.prepare);
//  2. the start: the shared hyperparameter search (search.go: restarts on a seeded sample,
//     polished on min(n, 1000) sampled rows). The paper starts from GPyTorch's defaults and takes 800-1500 Adam
//     steps; starting near the optimum lets a default run take 100. With the kernel setting
//     KernelAuto (the default) the search runs with the SE kernel and chooseKernel (kernelchoice.go)
//     then picks rbf, matern52 or matern32 by the exact log marginal likelihood on the same
//     sampled rows; Adam starts from that family's fitted theta;
//  3. rows pass: the standardized rows come to the coordinator, which keeps y and the CG
//     state and sends X with every kernel map step; when the kernel was chosen on sampled
//     rows (n > 1000), the choice is checked on all rows: each family's log marginal
//     likelihood at its sampled fit by one PCG solve with SLQ, another family replacing the
//     choice when higher by more than two standard errors (kernelOnAllRows);
//  4. Adam over theta = (log l_1..log l_d, log sigma_f^2, log sigma_n^2), inside the spec's box,
//     rate learning-rate decayed x0.1 at 50%, 70% and 90% of max-iter (App. E). Step t:
//     a. P = L L^T + sigma_n^2 I, L the rank-k pivoted Cholesky of K from k kernel columns
//     gathered from the shards (Gardner et al. 2018, §4.1), applied by Woodbury; k grows
//     until no row's left-out prior variance exceeds sigma_n^2 / 10, at most
//     max(sqrt(n (p+1)), sqrt(1e9 / n)) (precondRank, precondCap; App. E uses rank 5, whose
//     solves the truncation cuts short);
//     b. probes z_1..z_p ~ N(0, P) (Rademacher without a preconditioner), from a random stream
//     fixed by (seed, t), so a resumed run draws the same ones;
//     c. one batched PCG on B = [z_1..z_p, y]: rr (the default) draws J_1, J_2 ~ P(J) ∝
//     exp(-lambda J) on J_min..n and keeps two Russian-roulette sums W_1, W_2 (§4.1,
//     eqs. 16-17), an unbiased gradient; fixed truncation (--truncation fixed, or a
//     cg-iters given alone) runs J = cg-iters iterations, whose gradient is biased towards
//     a smaller noise (§3.1, Theorem 1: truncated CG underestimates y^T K_hat^-1 y, more so
//     the worse K_hat is conditioned): on kin40k's first 2000 rows fixed J = 100 ended at a
//     noise variance of 0.0011 against the exact optimum's 0.0059 (coverage95 0.918), rr at
//     0.0038 (0.939);
//     d. the gradient (eq. 3 with the solves of eq. 16), u_i the probe solves and w_1, w_2 the
//     data solves:
//     dL/dtheta_j = 1/2 [ (1/p) sum_i u_i^T dK_hat_j P^-1 z_i - w_1^T dK_hat_j w_2 ],
//     the forms a^T (dK/dtheta_j) b in one map round and dK_hat/dlog sigma_n^2 = sigma_n^2 I;
//     e. the objective's value, for the trace only: y^T w plus the SLQ log-determinant from the
//     probes' CG coefficients and log|P| (§3.1, eq. 8); like the gradient it is biased for fixed J;
//  5. the posterior at the final theta: PCG on [y, z_1..z_p] to relative residual cg-tol (at
//     most 1000 iterations; §5 and App. E) gives alpha = K_hat^-1 y and the SLQ log marginal
//     likelihood with its standard error over the probes (stored as the model's LogLikSE, with a
//     WarnEstimate warning); block Lanczos steps on K_hat from [y, 15 seeded random columns]
//     with full reorthogonalisation give the variance cache K_hat^-1 ~= Q T^-1 Q^T, stored as
//     Minus = Q L_T^-T (T = L_T L_T^T), whose variances are never below the exact ones, grown
//     16 columns per product until they are within an estimated 3% of the exact ones at 64
//     training inputs (varianceCache), or of the fixed variance-rank;
//  6. the leave-one-out check (Rasmussen & Williams 2006, eq. 5.12) as one map round on that
//     posterior, bracketed by the cache's estimated excess (checkLOO, tasks.LOOTask), unless
//     the mean solve or the cache did not converge.
//
// Checkpoints hold the start and Adam's state after each step; the rows pass is repeated on
// resume (deterministic), so a resumed run gives the same model bits.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"

	"gonum.org/v1/gonum/floats"
	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/model"
	"github.com/gpreduce/gpreduce/internal/optimizer"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/solver"
	"github.com/gpreduce/gpreduce/internal/tasks"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

const (
	// cgTrainTol is the relative residual at which a training solve stops before its
	// truncation (the reference code's training tolerance).
	cgTrainTol = 1e-8
	// cgStream separates the probe and truncation streams from the spec seed's other uses.
	cgStream = 0x6367 << 32
	// cgFinalStep keys the random stream of the final solve's probes, cgKernelStep that of
	// the kernel choice's check on all rows (kernelOnAllRows).
	cgFinalStep  = 1 << 31
	cgKernelStep = cgFinalStep + 1
)

// The conjugate-gradient defaults, used when the settings leave a field at 0.
const (
	DefaultCGIters        = 100  // J of fixed CG (--truncation fixed) and P of KMCG, as in the papers' experiments
	DefaultRRMin          = 80   // J_min of RR-CG: with lambda 0.05, E[J] ~= 100 (Potapczynski et al. 2021, App. E)
	DefaultRRRate         = 0.05 // lambda of RR-CG: sd(J) ~= 20
	DefaultProbes         = 10   // Hutchinson probes (GPyTorch's num_trace_samples)
	DefaultCGLearningRate = 0.05 // Adam base rate, decayed x0.1 at 50%, 70% and 90% of the steps
	DefaultCGPredictTol   = 1e-4 // relative residual of the prediction solve (Potapczynski et al. 2021, §5)
	DefaultVarianceRank   = 100  // the adaptive variance cache may always grow to this rank (LOVE's rank)
	MaxCGPredictIters     = 1000 // cap on the prediction solve (Potapczynski et al. 2021, App. E)
)

func init() {
	register(Method{
		Name:     "cg",
		Summary:  "the exact GP by distributed conjugate gradients (BBMM-style, fixed or Russian-roulette truncation)",
		Settings: func() proto.Message { return &pb.CGSettings{} },
		Tasks:    []string{"moments", "sample", "rows", "kernel", "loo"},
		Draws:    "probes and truncation lengths",
		// cg fits the exact GP's likelihood, so the evidence choice of exact applies.
		ChoosesKernel: true,
		validate:      validateCG,
		train: func(ctx context.Context, r *run, eng engine.Engine, p *prepared) (*model.Model, error) {
			return r.trainCG(ctx, eng, p)
		},
	})
}

// cgSettings is the spec's *pb.CGSettings, or the defaults.
func cgSettings(s *Spec) *pb.CGSettings {
	if g, ok := s.Settings.(*pb.CGSettings); ok && g != nil {
		return g
	}
	return &pb.CGSettings{}
}

// cgRR reports whether cg's training solves use Russian-roulette truncation: truncation rr,
// or no truncation and no cg-iters (rr is the default; a J given alone selects fixed).
func cgRR(c *pb.CGSettings) bool {
	t := c.GetTruncation()
	return t == "rr" || (t == "" && c.GetCgIters() == 0)
}

// validateCG checks cg's settings.
func validateCG(s *Spec, _ int) error {
	c := cgSettings(s)
	switch c.GetTruncation() {
	case "", "fixed", "rr":
	default:
		return fmt.Errorf("truncation: unknown truncation %q; use rr (Russian roulette, the default) or fixed (J = cg-iters)", c.GetTruncation())
	}
	rr := cgRR(c)
	switch {
	case c.GetRrMin() != 0 && !rr:
		return fmt.Errorf("rr-min: a setting of cg's Russian-roulette truncation, but the truncation is fixed (cg-iters or truncation fixed given); drop it or set truncation rr")
	case c.GetRrRate() != 0 && !rr:
		return fmt.Errorf("rr-rate: a setting of cg's Russian-roulette truncation, but the truncation is fixed (cg-iters or truncation fixed given); drop it or set truncation rr")
	case c.GetCgIters() != 0 && c.GetTruncation() == "rr":
		return fmt.Errorf("cg-iters: the J of fixed truncation, but truncation is rr (whose J is drawn from rr-min and rr-rate); drop one of them")
	case c.GetCgIters() < 0:
		return fmt.Errorf("cg-iters: %d is negative; give a positive number (or 0 for the default %d)", c.GetCgIters(), DefaultCGIters)
	case c.GetRrMin() < 0:
		return fmt.Errorf("rr-min: %d is negative; give J_min >= 1 (or 0 for the default %d)", c.GetRrMin(), DefaultRRMin)
	case c.GetRrRate() < 0 || math.IsNaN(c.GetRrRate()) || math.IsInf(c.GetRrRate(), 0):
		return fmt.Errorf("rr-rate: %g must be positive and finite (0.05 to 0.1 gives sd(J) of 20 to 10)", c.GetRrRate())
	case c.GetProbes() < 0 || c.GetProbes() > 1000:
		return fmt.Errorf("probes: %d; give 1 to 1000 (or 0 for the default %d)", c.GetProbes(), DefaultProbes)
	case c.GetPrecondRank() < -1:
		return fmt.Errorf("precond-rank: %d; give a fixed rank >= 1, -1 for no preconditioner, or 0 for the default (adaptive)", c.GetPrecondRank())
	case c.GetLearningRate() < 0 || math.IsNaN(c.GetLearningRate()) || math.IsInf(c.GetLearningRate(), 0):
		return fmt.Errorf("learning-rate: %g must be positive and finite", c.GetLearningRate())
	case c.GetCgTol() < 0 || c.GetCgTol() >= 1 || math.IsNaN(c.GetCgTol()):
		return fmt.Errorf("cg-tol: %g must lie in (0, 1)", c.GetCgTol())
	case c.GetVarianceRank() < 0:
		return fmt.Errorf("variance-rank: %d is negative; give a positive rank (or 0 for the adaptive rank)", c.GetVarianceRank())
	}
	return nil
}

func cgIters(c *pb.CGSettings) int { return orInt(int(c.GetCgIters()), DefaultCGIters) }
func rrMin(c *pb.CGSettings) int   { return orInt(int(c.GetRrMin()), DefaultRRMin) }
func probes(c *pb.CGSettings) int  { return orInt(int(c.GetProbes()), DefaultProbes) }

// precondRank is the pivoted-Cholesky preconditioner's rank for n rows and t probes, and the
// floor at which it stops early as a multiple of sigma_n^2 (solver.PivotedCholesky's floor).
// A rank given in the settings is used as it is (-1: none). The default is adaptive: the
// factor grows until no row's left-out prior variance K_ii - (L L^T)_ii exceeds a tenth of the
// noise variance sigma_n^2, with at most precondCap(n, t) columns. What the factor leaves out
// is then small against the noise, P^-1 K_hat has its spectrum near 1, and the training solves
// converge to cgTrainTol before the Russian-roulette J instead of being cut short by it. On
// elevators (14,940 rows, d = 18) at the start of a default run it picks rank 105 (15
// iterations to 1e-8), at the 50-step optimum it reaches the cap, 405 (30 iterations), where
// rank 5, the rank of Potapczynski et al. 2021, App. E, needs about 1000 and rank 200 about
// 80.
func precondRank(c *pb.CGSettings, n, t int) (rank int, floorNoise float64) {
	switch c.GetPrecondRank() {
	case 0:
		return precondCap(n, t), precondFloor
	case -1:
		return 0, 0
	}
	return int(c.GetPrecondRank()), 0
}

// precondCap is the adaptive preconditioner's largest rank for n rows and t probes:
// max(sqrt(n (t+1)), sqrt(2 precondBudget / n)), at most n. The first bounds the factor's
// O(n k^2) update, n k^2 / 2 multiply-adds, by half of one product K_hat [Z, y] (n^2 (t+1)),
// and its solve per iteration, O(n k (t+1)), by about 2k/n of a product. The second lets the
// update take precondBudget multiply-adds however small n is: a fraction of a second, and on
// up to 1000 rows the full factor. Small problems need it when the noise is small against the
// signal: on pendulum (567 rows, d = 9, the noise on its lower bound 1e-4 of the target's
// variance) the rank-78 factor of the first bound left the training solves unconverged at J,
// whose Russian-roulette weights then made the gradient so noisy that Adam wandered 68 nats
// below the exact optimum it started from (test RMSE 1.103 against the exact GP's 0.794);
// with this cap it stays there (0.805; log marginal likelihood 220.18 +- 0.05 against 220.20).
// Above n = sqrt(2 precondBudget / (t+1)), 9535 rows with 10 probes, the first bound governs.
func precondCap(n, t int) int {
	k := math.Max(math.Sqrt(float64(n)*float64(t+1)), math.Sqrt(2*precondBudget/float64(n)))
	return min(n, int(k))
}

// precondBudget is the multiply-adds the adaptive preconditioner's update may always take
// (precondCap): about 0.15 s of solver.PivotedCholesky's update (linalg.AxpyNeg, which streams
// the factor at about 3.4e9 multiply-adds per second on the 2-core machine of the README).
const precondBudget = 5e8

// precondFloor is the adaptive preconditioner's floor: the largest left-out prior variance
// it accepts, as a fraction of sigma_n^2 (precondRank).
const precondFloor = 0.1

// precondDesc describes the preconditioner setting for the sizing message.
func precondDesc(c *pb.CGSettings, n, t int) string {
	k, floor := precondRank(c, n, t)
	switch {
	case k == 0:
		return "no preconditioner"
	case floor > 0:
		return fmt.Sprintf("pivoted-Cholesky preconditioner of adaptive rank (left-out variance <= noise/10), at most %d", k)
	}
	return fmt.Sprintf("pivoted-Cholesky preconditioner of rank %d", k)
}
func rrRate(c *pb.CGSettings) float64 { return orFloat(c.GetRrRate(), DefaultRRRate) }
func learningRate(c *pb.CGSettings) float64 {
	return orFloat(c.GetLearningRate(), DefaultCGLearningRate)
}

func (r *run) trainCG(ctx context.Context, eng engine.Engine, p *prepared) (*model.Model, error) {
	spec, obs := r.spec, r.obs
	cs := cgSettings(&spec)
	d := p.d
	lower, upper := box(spec, d)

	// Step 2: the start, and the kernel family by the evidence when the spec leaves it to it.
	fam, x0, kernelReason, err := r.searchKernel(ctx, eng, p, &spec, lower, upper, startRows)
	if err != nil {
		return nil, fmt.Errorf("cg: %w", err)
	}

	// Step 3: the rows.
	prob, err := newCGProblem(ctx, eng, p, fam, spec)
	if err != nil {
		return nil, fmt.Errorf("cg: %w", err)
	}
	// Step 3 (cont.): a kernel family the evidence chose on sampled rows, checked on all rows.
	if fam, x0, kernelReason, err = r.kernelOnAllRows(ctx, &spec, p.n, startRows, fam, x0, kernelReason, prob.allRowsLML); err != nil {
		return nil, fmt.Errorf("cg: %w", err)
	}
	prob.fam = fam
	mode := fmt.Sprintf("fixed J = %d", cgIters(cs))
	if cgRR(cs) {
		mode = fmt.Sprintf("Russian roulette J_min = %d, lambda = %g, E[J] = %.1f", rrMin(cs), rrRate(cs), prob.trunc.Mean())
	}
	obs(Event{Phase: "sizing", Message: fmt.Sprintf("%d rows over %d shards; %s, %d probes, %s", p.n, len(eng.Shards()), mode, probes(cs), precondDesc(cs, p.n, probes(cs)))})

	// Step 4: Adam.
	maxIter := spec.maxIter()
	st := r.ck.Adam
	if st == nil {
		st = optimizer.NewAdamState(x0)
	}
	set := optimizer.AdamSettings{
		LearningRate: learningRate(cs), MaxIter: maxIter,
		Schedule: optimizer.Schedule{Kind: "multistep", Decay: 0.1, Milestones: []float64{0.5, 0.7, 0.9}},
	}
	obj := func(theta, grad []float64) (float64, error) {
		rng := rand.New(rand.NewPCG(spec.Seed, cgStream+uint64(st.Iter)))
		e, err := prob.eval(theta, rng)
		if err != nil {
			return 0, err
		}
		copy(grad, e.grad)
		return e.value, nil
	}
	err = optimizer.MinimizeAdam(ctx, obj, st, lower, upper, set, func(s *optimizer.AdamState) error {
		for len(r.ck.Trace) < s.Iter {
			r.ck.Trace = append(r.ck.Trace, 0)
		}
		if s.Iter > 0 {
			r.ck.Trace[s.Iter-1] = s.F
		}
		r.ck.Adam = s
		obs(Event{Phase: "optimize", Iteration: s.Iter, MaxIter: maxIter, Objective: s.F / float64(p.n)})
		return r.save(ctx)
	})
	if err != nil {
		return nil, fmt.Errorf("cg: optimize hyperparameters: %w", err)
	}
	fit := &fitted{theta: append([]float64(nil), st.X...), trace: append([]float64(nil), r.ck.Trace...), iters: st.Iter}

	// Step 5: the posterior.
	obs(Event{Phase: "fit", Message: "posterior: CG solve to tolerance and the Lanczos variance cache"})
	post, err := prob.posterior(fit.theta, rand.New(rand.NewPCG(spec.Seed, cgStream+cgFinalStep)), obs)
	if err != nil {
		return nil, fmt.Errorf("cg: posterior: %w", err)
	}
	m := newModel(spec, p, fit, post.lml)
	m.KernelReason = kernelReason
	m.LogLikSE = post.se
	m.Posterior = &model.ExpansionPosterior{Expansion: post.pred}
	for _, w := range post.warnings {
		m.Warn(w.Code, "%s", w.Message)
	}
	r.warnFit(m, p, fit.theta, lower, upper, adamReason(fit.trace, p.n))

	// Step 6: the leave-one-out check (R&W eq. 5.12) as one map round, from the cached
	// posterior's prediction at each training row: with alpha solved to the tolerance and
	// the cache's variances within VarianceGapTol of the exact ones, it is the exact GP's
	// check up to those tolerances (checkLOO).
	if post.looSkip != "" {
		obs(Event{Phase: "loo", Message: "leave-one-out check skipped: " + post.looSkip})
		return m, nil
	}
	if err := r.checkLOO(ctx, eng, m, post.gap); err != nil {
		return nil, fmt.Errorf("cg: %w", err)
	}
	return m, nil
}

// allRowsLML is cg's estimate for kernelOnAllRows: the log marginal likelihood on all rows
// with family f at theta, from the posterior's solve with the probes of cgKernelRNG, and its
// standard error (solveMean). It leaves the problem's family at f.
func (c *cgProblem) allRowsLML(f kernel.Family, theta []float64) (float64, float64, error) {
	c.fam = f
	post, _, _, err := c.solveMean(theta, cgKernelRNG(c.spec.Seed), func(Event) {})
	if err != nil {
		return 0, 0, err
	}
	return post.lml, post.se, nil
}

// cgKernelRNG is the probe stream of allRowsLML, the same for every family.
func cgKernelRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, cgStream+cgKernelStep)) }

// cgProblem holds what every CG step needs: the standardized rows and the settings.
type cgProblem struct {
	ctx     context.Context
	eng     engine.Engine
	fam     kernel.Family
	d, n    int
	x, y    []float64
	offsets []int
	spec    Spec
	cg      *pb.CGSettings    // cg's settings; kmcg's cg_iters and variance_rank for kmcg
	trunc   solver.Truncation // rr only
	// basisProbes replaces the random probes by sqrt(n) e_1..sqrt(n) e_n, which makes the
	// trace and SLQ terms exact (tests only; needs no preconditioner).
	basisProbes bool
	// last is the kernel op of the latest hyperparameter value, whose kernel-block memory the
	// next value's op reuses (tasks.KernelOp.Recycle).
	last *tasks.KernelOp
}

// gatherRows collects the standardized rows in shard order and each shard's first row.
func gatherRows(ctx context.Context, eng engine.Engine, p *prepared) (x, y []float64, offsets []int, err error) {
	parts, err := eng.Gather(ctx, &tasks.RowsTask{Transform: p.tf})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("gather rows: %w", err)
	}
	offsets = make([]int, 1, len(parts)+1)
	for i, st := range parts {
		rows, ok := st.(*reduce.Rows)
		if !ok || rows.D != p.d {
			return nil, nil, nil, fmt.Errorf("gather rows: shard %d returned %T", i, st)
		}
		x = append(x, rows.X...)
		y = append(y, rows.Y...)
		offsets = append(offsets, len(y))
	}
	if len(y) != p.n {
		return nil, nil, nil, fmt.Errorf("gather rows: %d rows, the moments pass counted %d", len(y), p.n)
	}
	return x, y, offsets, nil
}

func newCGProblem(ctx context.Context, eng engine.Engine, p *prepared, fam kernel.Family, spec Spec) (*cgProblem, error) {
	x, y, offsets, err := gatherRows(ctx, eng, p)
	if err != nil {
		return nil, err
	}
	cs := cgSettings(&spec)
	c := &cgProblem{ctx: ctx, eng: eng, fam: fam, d: p.d, n: p.n, x: x, y: y, offsets: offsets, spec: spec, cg: cs}
	if cgRR(cs) {
		c.trunc = solver.Truncation{Lambda: rrRate(cs), JMin: min(rrMin(cs), p.n), JMax: p.n}
	}
	return c, nil
}

// operator returns K_hat at log-hyperparameters theta as a distributed operator. Its kernel
// op takes over the kernel-block memory of the previous value's op (on the local engine,
// where the ops cache the blocks), which is not used again: every step and the posterior
// make a new operator and drop the old one.
func (c *cgProblem) operator(theta []float64) (*kernelOperator, model.Hyper) {
	h := hyperOf(theta, c.d)
	op := &tasks.KernelOp{Kernel: kernel.Kernel{Family: c.fam, Lengthscales: h.Lengthscales, SignalVariance: h.SignalVariance}, X: c.x, Offsets: c.offsets}
	op.Recycle(c.last)
	c.last = op
	return &kernelOperator{ctx: c.ctx, eng: c.eng, op: op, noise: h.NoiseVariance}, h
}

// precond builds P = L L^T + sigma_n^2 I from the pivoted Cholesky of K of precondRank's rank
// (diag K = sigma_f^2 for a stationary kernel; each pivot's column is one map round). It
// returns nil when the spec asks for no preconditioner.
func (c *cgProblem) precond(kop *kernelOperator, h model.Hyper) (solver.Preconditioner, error) {
	k, floor := precondRank(c.cg, c.n, c.numProbes())
	if k == 0 || c.basisProbes {
		return nil, nil
	}
	var colErr error
	L, r, err := solver.PivotedCholesky(
		func(int) float64 { return h.SignalVariance },
		func(i int, dst []float64) {
			col, err := kop.column(i)
			if err != nil {
				colErr = err
				clear(dst)
				return
			}
			copy(dst, col)
		}, c.n, k, 0, floor*h.NoiseVariance)
	if colErr != nil {
		return nil, colErr
	}
	if err != nil {
		return nil, err
	}
	w, err := solver.NewWoodbury(L, c.n, r, h.NoiseVariance)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// probes fills the first t columns of B (n x (t+1), column-major) with probes and returns
// P^-1 Z (n x t).
func (c *cgProblem) probes(B []float64, t int, pre solver.Preconditioner, rng *rand.Rand) []float64 {
	n := c.n
	for i := 0; i < t; i++ {
		col := B[i*n : (i+1)*n]
		switch {
		case c.basisProbes:
			col[i] = math.Sqrt(float64(n))
		case pre != nil:
			pre.Sample(rng, col)
		default:
			for j := range col {
				col[j] = 1
				if rng.Uint64()&1 == 1 {
					col[j] = -1
				}
			}
		}
	}
	pz := make([]float64, n*t)
	if pre != nil {
		pre.Solve(pz, B[:n*t], t)
	} else {
		copy(pz, B[:n*t])
	}
	return pz
}

func (c *cgProblem) numProbes() int {
	if c.basisProbes {
		return c.n
	}
	return probes(c.cg)
}

// slqLogDet returns log|P| plus the mean over the t probe columns 0..t-1 of
// (z^T P^-1 z) e_1^T log(T) e_1, T the Lanczos tridiagonal from that column's PCG coefficients
// (Potapczynski et al. 2021, §3.1, eq. 8).
func (c *cgProblem) slqLogDet(res *solver.CGResult, B, pz []float64, t int, pre solver.Preconditioner) (float64, error) {
	ld, _, err := c.slqLogDetSE(res, B, pz, t, pre)
	return ld, err
}

// slqLogDetSE is slqLogDet with the standard error of the estimate: the sample standard
// deviation of the t probe terms over sqrt(t) (NaN for one probe; 0 for the basis probes,
// whose sum is exact).
func (c *cgProblem) slqLogDetSE(res *solver.CGResult, B, pz []float64, t int, pre solver.Preconditioner) (ld, se float64, err error) {
	n := c.n
	terms := make([]float64, t)
	for i := 0; i < t; i++ {
		q, err := solver.LanczosQuadrature(res.Alpha[i], res.Beta[i], math.Log)
		if err != nil {
			return 0, 0, fmt.Errorf("log-determinant: %w", err)
		}
		terms[i] = floats.Dot(B[i*n:(i+1)*n], pz[i*n:(i+1)*n]) * q
	}
	ld = floats.Sum(terms) / float64(t)
	switch {
	case c.basisProbes:
		se = 0
	case t < 2:
		se = math.NaN()
	default:
		ss := 0.0
		for _, v := range terms {
			ss += (v - ld) * (v - ld)
		}
		se = math.Sqrt(ss / float64(t-1) / float64(t))
	}
	if pre != nil {
		ld += pre.LogDet()
	}
	return ld, se, nil
}

// cgBatch is one batched solve's set-up at theta: K_hat as a distributed operator, the
// preconditioner (nil for none), and B = [z_1..z_t, y] (n x (t+1), column-major) with P^-1 Z.
type cgBatch struct {
	kop   *kernelOperator
	h     model.Hyper
	pre   solver.Preconditioner
	t     int
	B, pz []float64
}

func (c *cgProblem) batch(theta []float64, rng *rand.Rand) (*cgBatch, error) {
	kop, h := c.operator(theta)
	pre, err := c.precond(kop, h)
	if err != nil {
		return nil, fmt.Errorf("preconditioner: %w", err)
	}
	t := c.numProbes()
	B := make([]float64, c.n*(t+1))
	pz := c.probes(B, t, pre, rng)
	copy(B[t*c.n:], c.y)
	return &cgBatch{kop: kop, h: h, pre: pre, t: t, B: B, pz: pz}, nil
}

// cgEval is one step's objective estimate and gradient (total over the rows).
type cgEval struct {
	value float64
	grad  []float64
}

// eval runs one training step's solves at theta (step 4 a-e).
func (c *cgProblem) eval(theta []float64, rng *rand.Rand) (*cgEval, error) {
	n, d := c.n, c.d
	bt, err := c.batch(theta, rng)
	if err != nil {
		return nil, err
	}
	kop, pre, t, B, pz := bt.kop, bt.pre, bt.t, bt.B, bt.pz

	// U: probe solves (n x t); w1, w2: the data solves.
	var U, w1, w2 []float64
	var res *solver.CGResult
	var yKy float64
	if cgRR(c.cg) {
		rr, err := solver.RRSolveQuad(kop, B, t+1, pre, c.trunc, cgTrainTol, rng)
		if err != nil {
			return nil, err
		}
		U = make([]float64, n*t)
		for i := range U {
			U[i] = 0.5 * (rr.W1[i] + rr.W2[i])
		}
		w1, w2, res, yKy = rr.W1[t*n:], rr.W2[t*n:], rr.CG, rr.Quad[t]
	} else {
		res, err = solver.BatchPCG(kop, B, t+1, pre, cgIters(c.cg), cgTrainTol)
		if err != nil {
			return nil, err
		}
		U, w1 = res.X[:t*n], res.X[t*n:]
		w2, yKy = w1, floats.Dot(c.y, w1)
	}

	// The derivative forms: pairs (u_i, P^-1 z_i) and (w1, w2), one map round.
	A := make([]float64, n*(t+1))
	Bp := make([]float64, n*(t+1))
	copy(A, U)
	copy(A[t*n:], w1)
	copy(Bp, pz)
	copy(Bp[t*n:], w2)
	forms, err := kop.quad(A, Bp, t+1)
	if err != nil {
		return nil, err
	}
	np := d + 1
	grad := make([]float64, d+2)
	for j := 0; j < np; j++ {
		tr := 0.0
		for i := 0; i < t; i++ {
			tr += forms[i*np+j]
		}
		grad[j] = 0.5 * (tr/float64(t) - forms[t*np+j])
	}
	tr := 0.0
	for i := 0; i < t; i++ {
		tr += floats.Dot(U[i*n:(i+1)*n], pz[i*n:(i+1)*n])
	}
	sn2 := bt.h.NoiseVariance
	grad[d+1] = 0.5 * sn2 * (tr/float64(t) - floats.Dot(w1, w2))

	ld, err := c.slqLogDet(res, B, pz, t, pre)
	if err != nil {
		return nil, err
	}
	return &cgEval{value: 0.5 * (yKy + ld + float64(n)*math.Log(2*math.Pi)), grad: grad}, nil
}

// cgPosterior is the posterior at the final hyperparameters: the predictor, the SLQ
// estimate of the log marginal likelihood with its standard error, and the warnings for the
// model.
type cgPosterior struct {
	pred     *solver.ExpansionPredictor
	lml, se  float64
	warnings []model.Warning
	// looSkip says why the leave-one-out check cannot be trusted on this posterior (the
	// mean solve or the variance cache did not converge); empty when it can (checkLOO).
	looSkip string
	// gap is the variance cache's estimated relative excess over the exact variances.
	gap float64
}

// posterior solves for alpha = K_hat^-1 y to the prediction tolerance, estimates the log
// marginal likelihood by SLQ on the same batched run (with the standard error over the
// probes), and builds the variance cache (varianceCache). The solve and the cache's Lanczos
// steps run side by side and share K_hat's products (jointOperator): every product of the
// batched solve carries a Lanczos vector too, at about the cost of the solve's columns
// alone, so the cache costs products only for the steps beyond the solve's iterations.
func (c *cgProblem) posterior(theta []float64, rng *rand.Rand, obs Observer) (*cgPosterior, error) {
	bt, err := c.batch(theta, rng)
	if err != nil {
		return nil, err
	}
	kop := bt.kop
	j := &jointOperator{base: kop, live: 2}
	var (
		post          *cgPosterior
		alpha         []float64
		vc            *lanczosCache
		errMean, errV error
		wg            sync.WaitGroup
	)
	wg.Go(func() {
		defer j.leave()
		post, alpha, errMean = c.solveMeanOn(bt, j, obs)
	})
	wg.Go(func() {
		defer j.leave()
		vc, errV = varianceCacheOn(kop, j, c.y, c.spec.Seed, int(c.cg.GetVarianceRank()), obs)
	})
	wg.Wait()
	if errMean != nil {
		return nil, errMean
	}
	if errV != nil {
		return nil, errV
	}
	post.warnings = append(post.warnings, vc.warnings...)
	post.gap = vc.gap
	if post.looSkip == "" && vc.rank < c.n && vc.gap > VarianceGapTol {
		post.looSkip = fmt.Sprintf("the variance cache stopped with variances up to about %.0f%% above the exact ones", 100*vc.gap)
	}
	post.pred = &solver.ExpansionPredictor{Kernel: kop.op.Kernel, X: c.x, D: c.d, Alpha: alpha, Minus: vc.minus, RMinus: vc.rank}
	return post, nil
}

// solveMean is the posterior's batched PCG on [z_1..z_t, y] at theta to the prediction
// tolerance: alpha = K_hat^-1 y, and the log marginal likelihood
// -1/2 (y^T alpha + log|K_hat| + n log 2 pi) with log|K_hat| by SLQ from the probes, its
// standard error 1/2 se(log|K_hat|) (the spread of the probe terms; y^T alpha is solved to
// the tolerance), and the warnings that it is an estimate and, if so, that the solve did not
// converge. It returns K_hat as an operator for the variance cache.
func (c *cgProblem) solveMean(theta []float64, rng *rand.Rand, obs Observer) (*cgPosterior, []float64, *kernelOperator, error) {
	bt, err := c.batch(theta, rng)
	if err != nil {
		return nil, nil, nil, err
	}
	post, alpha, err := c.solveMeanOn(bt, bt.kop, obs)
	if err != nil {
		return nil, nil, nil, err
	}
	return post, alpha, bt.kop, nil
}

// solveMeanOn is solveMean on the batch bt, with K_hat's products taken through op (bt.kop,
// or a jointOperator over it).
func (c *cgProblem) solveMeanOn(bt *cgBatch, op solver.Operator, obs Observer) (*cgPosterior, []float64, error) {
	n := c.n
	pre, t, B, pz := bt.pre, bt.t, bt.B, bt.pz
	tol := c.cg.GetCgTol()
	if tol == 0 { // kmcg's cg-tol is its CG stopping rule, not passed here
		tol = DefaultCGPredictTol
	}
	res, err := solver.BatchPCG(op, B, t+1, pre, MaxCGPredictIters, tol)
	if err != nil {
		return nil, nil, err
	}
	post := &cgPosterior{}
	if !res.Converged[t] {
		msg := fmt.Sprintf("the mean solve stopped at %d iterations above relative residual %g", res.Iters[t], tol)
		obs(Event{Phase: "fit", Message: "warning: " + msg})
		post.looSkip = msg
		post.warnings = append(post.warnings, model.Warning{Code: model.WarnNotConverged, Message: msg + "; raise --cg-tol or the noise variance's lower bound"})
	}
	alpha := append([]float64(nil), res.X[t*n:]...)
	ld, se, err := c.slqLogDetSE(res, B, pz, t, pre)
	if err != nil {
		return nil, nil, err
	}
	post.lml = -0.5 * (floats.Dot(c.y, alpha) + ld + float64(n)*math.Log(2*math.Pi))
	post.se = 0.5 * se
	if !c.basisProbes {
		post.warnings = append(post.warnings, model.Warning{Code: model.WarnEstimate, Message: fmt.Sprintf(
			"the log likelihood %.6g is a stochastic Lanczos quadrature estimate from %d probes, ± %.2g (one standard error); raise --probes to narrow it",
			post.lml, t, post.se)})
	}
	return post, alpha, nil
}

const (
	// varianceProbes is how many training inputs watch the variance cache converge.
	varianceProbes = 64
	// VarianceGapTol is the estimated relative excess of the cached variances over the exact
	// ones (solver.VarianceGap) at which the variance cache stops growing.
	VarianceGapTol = 0.03
	// DefaultVarianceCacheBytes bounds the variance cache (n x rank float64s) when the spec
	// gives no variance-rank: the rank grows to at most max(DefaultVarianceRank,
	// DefaultVarianceCacheBytes / (8 n)), and to at most n.
	DefaultVarianceCacheBytes = 256 << 20
	// varianceBlock is the variance cache's Lanczos block: the columns each product adds
	// (varianceCache says why 16).
	varianceBlock = 16
	// varianceStream keys the choice of the probe inputs.
	varianceStream = 0x766172 << 32
)

// lanczosCache is the variance factor Minus = Q L_T^-T (n x rank, row-major) of
// K_hat^-1 ~= Q T^-1 Q^T, with the final estimated gap and the warnings for the model.
type lanczosCache struct {
	minus    []float64
	rank     int
	gap      float64
	warnings []model.Warning
}

// varianceCache builds the predictive-variance cache of cg and kmcg: block Lanczos on K_hat
// (the operator kop) from [y, varianceBlock - 1 seeded normal columns] with full
// reorthogonalisation (solver.BlockLanczos), K_hat^-1 ~= Q T^-1 Q^T, grown one block (one map
// round of varianceBlock columns) at a time until the variances it gives at varianceProbes
// seeded training inputs are within an estimated VarianceGapTol of the exact ones
// (solver.VarianceGap), or it reaches its largest rank, DefaultVarianceCacheBytes / (8 n) but
// at least DefaultVarianceRank, and at most n. A spec variance-rank fixes the rank instead
// (LOVE's fixed-rank cache). A cache whose estimated excess stays above VarianceGapTol is a
// model warning.
//
// Why this and not a fixed rank: the rank a Lanczos (or any rank-r) cache needs for variances
// within a few percent is about the number of eigenvalues of K above ~noise/100, which is
// 300-600 on energy and concrete (n = 692, 927) and 100 on none of them; LOVE's rank 100
// (Pleiss et al. 2018; Potapczynski et al. 2021, App. E) gives variances 5-50 times too large
// there (median 14x on energy, 4.8x on concrete). Starting
// the Lanczos process from the test cross-covariances (as LOVE may) does not help on these
// sets (measured: the same rank is needed) and ties the model to one test set; exact
// variances by batched solves per test row cost O(J n^2) per row at prediction. The adaptive
// cache keeps prediction at O(n (d + rank)) per row for any later input, with the rank the
// data need.
//
// Why blocks: a product with K_hat reads every cached kernel block once whatever the number
// of columns, so with one column per step (LOVE's Lanczos) the cache cost a memory-bound
// product per rank; with 16 columns a product costs about as much and the rank needed is
// about the same (elevators split 0, Matern 3/2 after two Adam steps: rank 1298 one column
// at a time, 1328 with blocks of 8, 1312 with 16; the posterior 169 s, 33 s and 25 s).
func varianceCache(kop *kernelOperator, y []float64, seed uint64, rank int, obs Observer) (*lanczosCache, error) {
	return varianceCacheOn(kop, kop, y, seed, rank, obs)
}

// varianceCacheOn is varianceCache with the Lanczos steps' products taken through op (kop,
// or a jointOperator over it).
func varianceCacheOn(kop *kernelOperator, op solver.Operator, y []float64, seed uint64, rank int, obs Observer) (*lanczosCache, error) {
	n := kop.Dim()
	maxRank := rank
	if maxRank == 0 {
		maxRank = max(DefaultVarianceRank, DefaultVarianceCacheBytes/(8*n))
	}
	maxRank = min(maxRank, n)
	idx := rand.New(rand.NewPCG(seed, varianceStream)).Perm(n)[:min(n, varianceProbes)]
	slices.Sort(idx)
	cols, err := kop.columns(idx)
	if err != nil {
		return nil, fmt.Errorf("variance cache: %w", err)
	}
	prior := make([]float64, len(idx))
	for i := range prior {
		prior[i] = kop.op.Kernel.SignalVariance
	}
	mon, err := solver.NewVarianceGap(cols, n, prior, kop.noise)
	if err != nil {
		return nil, fmt.Errorf("variance cache: %w", err)
	}
	adaptive := rank == 0
	stop := func(k *solver.BlockKrylov) bool {
		mon.Step(k)
		return adaptive && mon.Gap() <= VarianceGapTol
	}
	kr, err := solver.BlockLanczos(op, y, varianceBlock, maxRank, 1e-10, seed, stop)
	if err != nil {
		return nil, fmt.Errorf("variance cache: %w", err)
	}
	rk := kr.Rank()
	vc := &lanczosCache{minus: kr.Minus(), rank: rk, gap: mon.Gap()}
	if rk == n {
		vc.gap = 0 // Q spans R^n: the cache is exact (the monitor's difference is rounding)
	}
	obs(Event{Phase: "fit", Message: fmt.Sprintf("variance cache of rank %d (largest %d); estimated variance excess %.2g%%", rk, maxRank, 100*vc.gap)})
	if rk < n && vc.gap > VarianceGapTol {
		vc.warnings = append(vc.warnings, model.Warning{Code: model.WarnNotConverged, Message: fmt.Sprintf(
			"the variance cache stopped at rank %d with predictive variances up to about %.0f%% above the exact ones (estimated at %d training inputs); give a larger --variance-rank, or none for the adaptive rank",
			rk, 100*vc.gap, len(idx))})
	}
	return vc, nil
}

// jointOperator lets the live processes (goroutines) that share K_hat run their products
// together: a process's MulVecs waits until every live process has asked for one, then one
// map round computes all their columns, and each gets its own back. A column of K V has the
// same bits whatever columns it is computed with (each entry sums over its own column only,
// in linalg's fixed order; the noise term is per column), so the grouping never changes a
// result; it only saves products, which are memory bound with few columns. A process calls
// leave when it is done, after which the others no longer wait for it.
type jointOperator struct {
	base *kernelOperator
	mu   sync.Mutex
	live int
	reqs []*jointRequest
}

// jointRequest is one process's pending product.
type jointRequest struct {
	dst, src []float64
	k        int
	done     chan error
}

func (j *jointOperator) Dim() int { return j.base.Dim() }

// MulVecs writes dst = K_hat src for k columns, in one product with the other live
// processes' requests.
func (j *jointOperator) MulVecs(dst, src []float64, k int) error {
	r := &jointRequest{dst: dst, src: src, k: k, done: make(chan error, 1)}
	j.mu.Lock()
	j.reqs = append(j.reqs, r)
	j.flush()
	j.mu.Unlock()
	return <-r.done
}

// leave marks a process as finished and runs the others' requests if they were waiting
// for it.
func (j *jointOperator) leave() {
	j.mu.Lock()
	j.live--
	j.flush()
	j.mu.Unlock()
}

// flush runs the pending requests as one product once every live process has one (j.mu is
// held; every other live process is waiting for its request, so none contends).
func (j *jointOperator) flush() {
	if len(j.reqs) == 0 || len(j.reqs) < j.live {
		return
	}
	reqs := j.reqs
	j.reqs = nil
	if len(reqs) == 1 {
		r := reqs[0]
		r.done <- j.base.MulVecs(r.dst, r.src, r.k)
		return
	}
	n, total := j.base.Dim(), 0
	for _, r := range reqs {
		total += r.k
	}
	src := make([]float64, 0, n*total)
	for _, r := range reqs {
		src = append(src, r.src[:n*r.k]...)
	}
	dst := make([]float64, n*total)
	err := j.base.MulVecs(dst, src, total)
	off := 0
	for _, r := range reqs {
		if err == nil {
			copy(r.dst[:n*r.k], dst[off:off+n*r.k])
		}
		off += n * r.k
		r.done <- err
	}
}
