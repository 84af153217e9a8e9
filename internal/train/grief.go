package train

// GP-GRIEF (Evans & Nair 2018). A product kernel is replaced by its
// top-p Nystrom eigenfunctions on a Cartesian inducing grid of m = prod_i m_i points, which
// Kronecker and Khatri-Rao structure make cheap to evaluate without ever forming m
// (features.GRIEF). With the base-kernel hyperparameters theta fixed, one pass over the data
// gives A = Phi^T Phi, r = Phi^T y, y^T y and n; after the eigendecomposition of A (the SVD of
// Phi) the log marginal likelihood of the re-weighted kernel Phi~ W Phi~^T + s2 I and all its
// p~ + 1 derivatives cost O(p) (GP-GRIEF §5), so the weights and the noise are learnt, by
// maximum likelihood (type II) or by MALA sampling (type I), without touching the data again.
//
// The algorithm, step by step:
//
//  1. moments pass (standardization; run.prepare);
//  2. grid: a distinct-values pass (capped at m_bar + 1 per column, on the raw columns, then
//     standardized with the transform) and the standardized column extremes place m_i =
//     min(m_bar, #distinct_i) points per column (features.GRIEFGrid; §4), evenly between the
//     extremes as in the authors' code; a seeded sample of 2000 rows then moves the axis of
//     every heavy-tailed column to the sample's 1-D k-means centres, the authors' code's other
//     placement (features.GRIEFKMeansAxes; §4, footnote 1: the inducing points follow the
//     training inputs' distribution);
//  3. theta: the shared search (search.go) maximises the exact GP's likelihood on a seeded
//     random sample of min(n, 1000) rows (GP-GRIEF §6), within the spec's bounds. type2
//     (GRIEF-II, the default) then learns theta and the noise on all rows with w = 1 by
//     L-BFGS, each evaluation a Gram pass and a lengthscale-gradient pass (griefIIProblem);
//     type1 and type2-weights keep theta from here on;
//  4. the map: features.NewGRIEF (Algorithm 1 picks the p largest product eigenvalues once,
//     here, so every worker uses the same selection even among tied products);
//  5. one Gram pass (tasks.GramTask with the GRIEF map): A, r, y^T y, n;
//  6. type2 keeps the base kernel (w = 1) at its learned noise: its posterior is Bayesian
//     linear regression on the eigenfunctions, one Cholesky factorisation of A + s2 I
//     (griefIIPosterior). The weight-learning variants need the transformed basis: A = V D V^T,
//     kept where D_i > 1e-12 max D (a relative threshold, not the authors' code's absolute
//     one), Sigma~ = D^(1/2), r~ = Sigma~^-1 V~^T r;
//  7. type2-weights runs box-constrained L-BFGS over (log w~, log s2), and type1 MALA over the
//     same variables with the paper's log-normal priors, both O(p) per evaluation;
//  8. the posterior (derived here; the paper gives only the generic GP eq. 2): beta and C such
//     that the latent mean is phi(x) beta and the latent variance phi(x) C phi(x)^T.
//
// Weights live in the transformed basis phi~(x) = phi(x) V~ Sigma~^-1, where the base GRIEF
// kernel (eq. 3, w = 1 on the eigenfunctions) is w~_i = Sigma~_ii^2, not w~ = 1 (derived here,
// verified in grief_test.go). Both inference types therefore start from w~ = Sigma~^2, the
// base kernel, rather than the paper's w = 1, which in this basis would be a different and
// arbitrary kernel. Type II bounds log w~_i to log Sigma~_ii^2 +- griefLogWBox.
//
// For the Matern families the GRIEF kernel is the product of 1-D Materns (features.GRIEF),
// while the initialisation fits the ARD Matern of package kernel; for rbf the two agree.
//
// Checkpoints: the phases before the loop (grid, theta, map) are recomputed on resume (they
// are deterministic); the Gram statistic is kept in the checkpoint when it fits under
// Hooks.MaxStatsBytes. Type II checkpoints its L-BFGS state each iteration through
// run.optimize; type I's chain is cheap (O(p) per iteration) and restarts from scratch on
// resume, giving the same samples since it is seeded by the spec's seed.

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/features"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/linalg"
	"github.com/gpreduce/gpreduce/internal/model"
	"github.com/gpreduce/gpreduce/internal/optimizer"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/tasks"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

const (
	// griefRelEig drops eigenvalues of A below this fraction of the largest
	// (forming A squares Phi's condition number, so smaller ones are rounding noise).
	griefRelEig = 1e-12
	// griefLogWBox bounds type II's log w~_i to log Sigma~_ii^2 +- griefLogWBox.
	griefLogWBox = 15
	// MALA as in the paper (GP-GRIEF §6): burn-in and thinning; the default number of
	// retained samples is DefaultGRIEFSamples, giving 1000 + 180*50 = 10000 iterations.
	griefBurnIn = 1000
	griefThin   = 50
	// Log-normal priors {mode, variance} (GP-GRIEF §6): on omega_i = w~_i / Sigma~_ii^2
	// {1, 100} (mode 1 = the base kernel; a deliberate deviation from the paper's prior on w
	// itself, whose mode 1 is not the base kernel in this basis), on s2 {sigma0^2, 0.04}.
	griefWPriorVar     = 100
	griefNoisePriorVar = 0.04
)

// GP-GRIEF's defaults, used when its settings leave a field at 0.
const (
	DefaultGRIEFGrid           = 10   // m_bar, as in the paper's experiments
	DefaultGRIEFEigenfunctions = 1000 // p of type1 and type2-weights, as in the paper's GRIEF-I experiments; type2 takes min(1000, 10^floor(log10 n))
	DefaultGRIEFSamples        = 180  // (10000 - 1000) / 50: the paper's MALA run
	// griefMaxEigenfunctions is the top of GRIEF-II's default p ladder (griefIIFit) beyond
	// the paper's 1000, taken only while the eigenfunctions leave out more prior variance
	// than the noise variance: a Gram statistic of p^2 floats (128 MiB per shard).
	griefMaxEigenfunctions = 4000
	// griefPassBudget bounds the ladder beyond the paper's 1000 by the cost of a likelihood
	// evaluation, about 3 n p^2 flops (the Gram pass and the gradient pass's two triangular
	// solves): n p^2 <= griefPassBudget, so a rung above 1000 costs at most about 15 s per
	// evaluation at 80 GFLOP/s (n = 15,000: 4000; n = 10^5: 2000; above 10^5 rows none).
	griefPassBudget = 4e11
	// griefAutoGridMax bounds the default grid of griefGrid at small d (at d = 1 the paper's
	// rule would ask for 4000 points; their 1-D eigendecompositions are O(m^3) per evaluation).
	griefAutoGridMax = 128
	MaxGRIEFGrid     = 1024
)

func init() {
	register(Method{
		Name:     "grief",
		Summary:  "GP-GRIEF: one pass, then O(p) per iteration, for any d",
		Settings: func() proto.Message { return &pb.GRIEFSettings{} },
		Tasks:    []string{"moments", "sample", "distinct", "gram", "grief_grad", "loo"},
		Draws:    "subsample and MALA chain",
		validate: validateGRIEF,
		train: func(ctx context.Context, r *run, eng engine.Engine, p *prepared) (*model.Model, error) {
			return r.trainGRIEF(ctx, eng, p)
		},
	})
}

// griefSettings is the spec's *pb.GRIEFSettings, or the defaults.
func griefSettings(s *Spec) *pb.GRIEFSettings {
	if g, ok := s.Settings.(*pb.GRIEFSettings); ok && g != nil {
		return g
	}
	return &pb.GRIEFSettings{}
}

// validateGRIEF checks grief's settings.
func validateGRIEF(s *Spec, _ int) error {
	g := griefSettings(s)
	switch g.GetInference() {
	case "", "type1", "type2", "type2-weights":
	default:
		return fmt.Errorf("inference: unknown inference %q; use type2 (GRIEF-II: maximum marginal likelihood over theta and the noise), type1 (MALA over the weights and the noise) or type2-weights (maximum likelihood over the weights and the noise)", g.GetInference())
	}
	switch g.GetGridPlacement() {
	case "", "auto", "even", "kmeans":
	default:
		return fmt.Errorf("grid-placement: unknown placement %q; use auto (even, or 1-D k-means for heavy-tailed columns), even or kmeans", g.GetGridPlacement())
	}
	if g.GetGrid() < 0 || g.GetGrid() > MaxGRIEFGrid {
		return fmt.Errorf("grid: %d points per dimension; give 1 to %d (or 0 for the default %d)", g.GetGrid(), MaxGRIEFGrid, DefaultGRIEFGrid)
	}
	if g.GetEigenfunctions() < 0 {
		return fmt.Errorf("eigenfunctions: %d is negative; give a positive number (or 0 for the default %d)", g.GetEigenfunctions(), DefaultGRIEFEigenfunctions)
	}
	if err := nonNegative(g); err != nil {
		return err
	}
	if mf := orInt(int(g.GetMaxFeatures()), DefaultMaxFeatures); s.griefP(0) > mf {
		return fmt.Errorf("eigenfunctions: %d exceeds max-features %d (A = Phi^T Phi takes p^2 floats per shard); lower it or raise max-features", s.griefP(0), mf)
	}
	if g.GetSamples() < 0 {
		return fmt.Errorf("samples: %d is negative; give a positive number (or 0 for the default %d)", g.GetSamples(), DefaultGRIEFSamples)
	}
	if g.GetSamples() > 0 && s.griefInference() != "type1" {
		return fmt.Errorf("samples: %d is a type1 (MALA) setting; drop it or set inference type1", g.GetSamples())
	}
	if g.GetSamples() > 1e6 {
		return fmt.Errorf("samples: %d is more than 1e6; the chain would take %d iterations", g.GetSamples(), int(g.GetSamples())*griefThin)
	}
	return nil
}

func (s *Spec) griefInference() string {
	if i := griefSettings(s).GetInference(); i != "" {
		return i
	}
	return "type2"
}

// griefGrid is m_bar, the inducing grid points per input column, for n rows of d inputs: the
// spec's, or the paper's 10 (GP-GRIEF §6) raised at small d to the smallest m with m^d at least
// the eigenfunctions the method may take (griefLadderTop for GRIEF-II's default ladder, else
// griefP), at most griefAutoGridMax. The grid has m_bar^d product eigenfunctions, so with 10
// points per column p is capped at 100 on 2-D data and 1000 on 3-D data whatever the ladder or
// the spec asks for: on 54,000 rows of a 2-D function with noise 0.1 (scripts/synth-2d.py),
// 100 eigenfunctions of the 10 x 10 grid left out a tenth of the prior variance per row and
// predicted with RMSE 0.29, where 1000 of a 45 x 45 grid reached the noise (0.0994). From
// d = 4 on, 10^d >= 4000 and the paper's grid stands.
func (s *Spec) griefGrid(n, d int) int {
	if g := griefSettings(s).GetGrid(); g != 0 {
		return int(g)
	}
	want := s.griefP(n)
	if s.griefInference() == "type2" && griefSettings(s).GetEigenfunctions() == 0 {
		want = griefLadderTop(s, n)
	}
	m := DefaultGRIEFGrid
	for m < griefAutoGridMax && !gridHolds(m, d, want) {
		m++
	}
	return m
}

// gridHolds reports whether m^d >= want.
func gridHolds(m, d, want int) bool {
	c := 1
	for i := 0; i < d && c < want; i++ {
		c *= m
	}
	return c >= want
}

// griefP is the number of eigenfunctions p for n training rows: the spec's, or GP-GRIEF
// §6's choice, p = min(1000, 10^floor(log10 n)) for type2 (GRIEF-II) and p = 1000 for the
// weight-learning variants. n <= 0 (not yet known) gives the largest p the spec can take.
func (s *Spec) griefP(n int) int {
	switch {
	case griefSettings(s).GetEigenfunctions() != 0:
		return int(griefSettings(s).GetEigenfunctions())
	case s.griefInference() != "type2" || n <= 0:
		return DefaultGRIEFEigenfunctions
	}
	p := 1
	for p*10 <= n && p < DefaultGRIEFEigenfunctions {
		p *= 10
	}
	return p
}

func (s *Spec) griefSamples() int {
	return orInt(int(griefSettings(s).GetSamples()), DefaultGRIEFSamples)
}

func (r *run) trainGRIEF(ctx context.Context, eng engine.Engine, p *prepared) (*model.Model, error) {
	spec, obs := r.spec, r.obs
	fam, _ := kernel.ParseFamily(spec.Kernel)
	d := p.d
	inference := spec.griefInference()
	np := spec.griefP(p.n)

	// Step 2: the inducing grid, and the k-means alternative for heavy-tailed columns.
	grid, alt, err := r.griefGrid(ctx, eng, p)
	if err != nil {
		return nil, fmt.Errorf("grief: %w", err)
	}

	// Step 3: theta from the shared search; type2 (GRIEF-II) then learns it on all rows.
	lower, upper := box(spec, d)
	theta, err := r.searchStart(ctx, eng, p, fam, lower, upper)
	if err != nil {
		return nil, fmt.Errorf("grief: %w", err)
	}
	if alt != nil {
		if grid, err = r.griefChooseGrid(ctx, eng, p, fam, grid, alt, theta, np); err != nil {
			return nil, fmt.Errorf("grief: %w", err)
		}
	}
	fit := &fitted{theta: append([]float64(nil), theta...)}
	var gram *reduce.Gram // type2: the Gram statistic at the fitted theta, when the ladder took it
	if inference == "type2" {
		if fit, np, gram, err = r.griefIIFit(ctx, eng, p, fam, grid, theta, lower, upper, np); err != nil {
			return nil, fmt.Errorf("grief: %w", err)
		}
	}
	h := hyperOf(fit.theta, d)

	// Step 4: the eigenfunction map, fixed from here on.
	g, err := features.NewGRIEF(fam, h.Lengthscales, h.SignalVariance, grid, np)
	if err != nil {
		return nil, fmt.Errorf("grief: %w", err)
	}
	np = g.NumFeatures()
	sizes := make([]int, d)
	for k := range grid {
		sizes[k] = len(grid[k])
	}
	obs(Event{Phase: "sizing", Message: fmt.Sprintf("%d eigenfunctions on a grid of %v points per dimension; lengthscales %s, signal variance %.4g, noise %.4g",
		np, sizes, fmtFloats(h.Lengthscales), h.SignalVariance, h.NoiseVariance)})

	// Step 5: one Gram pass, unless the ladder or the checkpoint carries it.
	if gram == nil || gram.S != np {
		gram = r.ck.Gram
	}
	if gram == nil || gram.S != np {
		obs(Event{Phase: "gram", Message: fmt.Sprintf("Gram pass: %d x %d per shard over %d shards", np, np, len(eng.Shards()))})
		if gram, err = griefGram(ctx, eng, g, p.tf); err != nil {
			return nil, fmt.Errorf("grief: %w", err)
		}
		if inference != "type2" && int64(np)*int64(np)*8 <= r.hooks.MaxStatsBytes {
			r.ck.Gram = gram
			if err := r.save(ctx); err != nil {
				return nil, err
			}
		}
	}

	// Steps 6-8: GRIEF-II's posterior straight from the Gram statistic; the weight-learning
	// variants through the transformed basis.
	var post *model.GRIEFPost
	var lml, noise float64
	left := griefLeftOut(gram, h.SignalVariance)
	if inference == "type2" {
		noise = h.NoiseVariance
		if post, lml, err = griefIIPosterior(gram, noise); err != nil {
			return nil, fmt.Errorf("grief: %w", err)
		}
		obs(Event{Phase: "basis", Message: fmt.Sprintf("posterior over %d eigenfunctions with w = 1; prior variance left out per row %.4g (signal %.4g, noise %.4g)", np, left, h.SignalVariance, noise)})
	} else {
		b, err := newGRIEFBasis(gram)
		if err != nil {
			return nil, fmt.Errorf("grief: %w", err)
		}
		obs(Event{Phase: "basis", Message: fmt.Sprintf("transformed basis of rank %d of %d; prior variance left out per row %.4g (signal %.4g, noise %.4g)", b.pt, b.p, left, h.SignalVariance, h.NoiseVariance)})
		switch inference {
		case "type2-weights":
			post, lml, noise, err = r.griefType2Weights(ctx, b, h.NoiseVariance, p, fit)
		case "type1":
			post, lml, noise, err = r.griefType1(ctx, b, h.NoiseVariance, fit)
		default:
			err = fmt.Errorf("inference: unknown inference %q", inference)
		}
		if err != nil {
			return nil, fmt.Errorf("grief: %w", err)
		}
	}
	fit.theta[d+1] = math.Log(noise)
	m := newModel(spec, p, fit, lml)
	m.Posterior = &model.GRIEFPosterior{Map: model.GRIEFParams{
		Lengthscales: g.Lengthscales, SignalVariance: g.SignalVariance,
		Grid: g.Grid, Q: g.Q, LogLam: g.LogLam, Idx: g.Idx, LogLamP: g.LogLamP,
	}, Post: post}
	reason := ""
	if inference == "type2" {
		reason = fit.reason
	}
	r.warnFit(m, p, fit.theta, lower, upper, reason)
	if left > noise {
		m.Warn(model.WarnApproximation, "the %d eigenfunctions of the %s-point grid leave out %.3g of the prior variance %.3g per training row (standardized units), more than the noise variance %.3g: predictions are limited by the approximation; raise eigenfunctions (max-features bounds it) or grid", np, griefGridSize(sizes), left, h.SignalVariance, noise)
	}
	if inference != "type1" { // type1's posterior is a mixture over MALA samples, not a Gaussian one
		if err := r.checkLOO(ctx, eng, m, 0); err != nil {
			return nil, fmt.Errorf("grief: %w", err)
		}
	}
	if inference == "type2-weights" {
		m.Warn(model.WarnEstimate, "the log likelihood %.6g (type2-weights) is maximised over %d eigenfunction weights as well as the noise; it is not comparable with other methods' log likelihoods, and the weights may overfit (GP-GRIEF §5)", lml, len(post.W))
	}
	return m, nil
}

// griefIIFit learns theta and the noise with w = 1 on all rows (GRIEF-II, GP-GRIEF §5-6) by
// L-BFGS from theta, with p0 eigenfunctions when the spec fixes p. With the default p the
// number of eigenfunctions follows a ladder: GP-GRIEF §6 takes p = min(1000, 10^floor(log10
// n)) with n the size of the whole dataset, which on a training split just above a power of
// ten gives a tenth of the paper's p (concrete: 927 training rows of 1030, p = 100 where the
// paper used 1000), and on data whose function needs more eigenfunctions than 1000 of the
// 10-point grid (many relevant inputs, short lengthscales) the approximation rather than the
// data limits the fit. So p goes up the ladder (x10 up to the paper's 1000, then x2 within
// griefTop: griefMaxEigenfunctions, the pass budget, max-features, the grid) while the p
// eigenfunctions leave out more prior variance per row than the noise variance
// (griefLeftOut > sigma_n^2): first at the searched start (one Gram pass per rung), then at
// the end of each rung's L-BFGS run (converged or at max-iter), where L-BFGS starts again from
// the fitted theta on the next rung (max-iter applies to each rung). At the end of a rung the
// ladder also climbs where the left-out variance is at most the noise but the next rung
// raises the log marginal likelihood at the fitted theta by more than griefEvidence nats
// (griefRungGain, one more Gram pass): the left-out variance is a per-row average and can sit
// below the noise while the data still need the finer eigenfunctions (elevators split 4: the
// fit at 1000 left out 0.129 against a noise of 0.153). The
// rung and its start are in the checkpoint, so a resumed run continues the same phase and
// gets the same p and bits. It returns the fit, p, and the Gram statistic at the fitted theta
// (signal variance included) when the last check computed it, else nil.
func (r *run) griefIIFit(ctx context.Context, eng engine.Engine, p *prepared, fam kernel.Family, grid [][]float64, theta, lower, upper []float64, p0 int) (*fitted, int, *reduce.Gram, error) {
	ladder := griefSettings(&r.spec).GetEigenfunctions() == 0
	top := griefTop(&r.spec, grid, p.n)
	np := p0
	switch {
	case !ladder:
	case r.ck.GRIEFP > 0:
		np = r.ck.GRIEFP
		if r.ck.GRIEFTheta != nil {
			theta = r.ck.GRIEFTheta
		}
	default:
		var err error
		if np, err = r.griefIISize(ctx, eng, p, fam, grid, theta, np); err != nil {
			return nil, 0, nil, err
		}
		r.ck.GRIEFP = np
	}
	for {
		q := &griefIIProblem{ctx: ctx, eng: eng, tf: p.tf, fam: fam, grid: grid, p: np, d: p.d}
		r.obs(Event{Phase: "optimize", Message: fmt.Sprintf("GRIEF-II: theta and the noise with w = 1, %d eigenfunctions; each evaluation is a Gram pass and a gradient pass", np)})
		fit, err := r.optimize(ctx, q.objective, theta, lower, upper, p, griefIIFuncTol)
		if err != nil {
			return nil, 0, nil, fmt.Errorf("GRIEF-II: %w", err)
		}
		if !ladder || np >= top {
			return fit, np, nil, nil
		}
		h := hyperOf(fit.theta, p.d)
		gram, err := griefGramAt(ctx, eng, p, fam, grid, h, np)
		if err != nil {
			return nil, 0, nil, err
		}
		next := griefNextP(np, top)
		left := griefLeftOut(gram, h.SignalVariance)
		at := fmt.Sprintf("GRIEF-II: at the fitted theta %d eigenfunctions leave out %.3g of the prior variance %.3g per row", np, left, h.SignalVariance)
		if left > h.NoiseVariance {
			r.obs(Event{Phase: "sizing", Message: fmt.Sprintf("%s, more than the noise variance %.3g: refitting from there with %d", at, h.NoiseVariance, next)})
		} else {
			gain, err := griefRungGain(ctx, eng, p, fam, grid, h, gram, next)
			if err != nil {
				return nil, 0, nil, err
			}
			if !(gain > griefEvidence) {
				r.obs(Event{Phase: "sizing", Message: fmt.Sprintf("%s, at most the noise variance %.3g, and %d raise the log likelihood there by %.3g nats, not %g: keeping %d", at, h.NoiseVariance, next, gain, griefEvidence, np)})
				return fit, np, gram, nil
			}
			r.obs(Event{Phase: "sizing", Message: fmt.Sprintf("%s, at most the noise variance %.3g, but %d raise the log likelihood there by %.4g nats: refitting from there with %d", at, h.NoiseVariance, next, gain, next)})
		}
		np, theta = next, fit.theta
		// The next rung's L-BFGS starts afresh; the trace and iterations are the last rung's.
		r.ck.GRIEFP, r.ck.GRIEFTheta, r.ck.LBFGS, r.ck.Trace = np, theta, nil, nil
		if err := r.save(ctx); err != nil {
			return nil, 0, nil, err
		}
	}
}

// griefIISize is the first rung of GRIEF-II's default p ladder (griefIIFit): p0 raised while,
// at the searched start theta, the eigenfunctions leave out more prior variance per row than
// the noise variance, one Gram pass per rung. The evidence for a further rung is weighed only
// at fitted hyperparameters (griefIIFit), where it means something: the start is the sampled
// rows' fit.
func (r *run) griefIISize(ctx context.Context, eng engine.Engine, p *prepared, fam kernel.Family, grid [][]float64, theta []float64, p0 int) (int, error) {
	h := hyperOf(theta, p.d)
	top := griefTop(&r.spec, grid, p.n)
	np := p0
	for np < top {
		gram, err := griefGramAt(ctx, eng, p, fam, grid, h, np)
		if err != nil {
			return 0, err
		}
		left := griefLeftOut(gram, h.SignalVariance)
		if !(left > h.NoiseVariance) {
			break
		}
		next := griefNextP(np, top)
		r.obs(Event{Phase: "sizing", Message: fmt.Sprintf("GRIEF-II: %d eigenfunctions leave out %.3g of the prior variance %.3g per row at the start, more than the noise variance %.3g: taking %d", np, left, h.SignalVariance, h.NoiseVariance, next)})
		np = next
	}
	return np, nil
}

// griefTop is the top of GRIEF-II's p ladder for n rows: the paper's 1000, or above it the
// largest rung within griefMaxEigenfunctions, the pass budget and 2n (beyond that the O(p^3)
// steps on the coordinator, not the pass, set the cost: housing's 456 rows at p = 4000 took
// 466 s against 4 s); at most max-features and the grid's number of product eigenfunctions.
func griefTop(s *Spec, grid [][]float64, n int) int {
	top := griefLadderTop(s, n)
	m := 1
	for _, ax := range grid {
		m = min(m*len(ax), top)
	}
	return m
}

// griefLadderTop is griefTop before the grid's cap: the paper's 1000, or above it the largest
// rung within griefMaxEigenfunctions, the pass budget and 2n; at most max-features.
func griefLadderTop(s *Spec, n int) int {
	top := DefaultGRIEFEigenfunctions
	for next := 2 * top; next <= griefMaxEigenfunctions && next <= 2*n && float64(n)*float64(next)*float64(next) <= griefPassBudget; next *= 2 {
		top = next
	}
	return min(top, orInt(int(griefSettings(s).GetMaxFeatures()), DefaultMaxFeatures))
}

// griefRungGain is the GRIEF-II log marginal likelihood (w = 1) at hyperparameters h with next
// eigenfunctions minus that with the current ones, whose Gram statistic (signal variance
// included, griefGramAt) is gram: one Gram pass at next. At a theta fitted with p
// eigenfunctions this is a lower bound on how much the next rung's optimum beats the current
// one (the next rung's optimum is at least its value at this theta), so a gain above
// griefEvidence means that the data support the finer model whatever its fit then does. A
// likelihood that cannot be evaluated (P not positive definite) gives no gain.
func griefRungGain(ctx context.Context, eng engine.Engine, p *prepared, fam kernel.Family, grid [][]float64, h model.Hyper, gram *reduce.Gram, next int) (float64, error) {
	gn, err := griefGramAt(ctx, eng, p, fam, grid, h, next)
	if err != nil {
		return 0, err
	}
	lp, okp := griefIILML(gram, 1, h.NoiseVariance, nil, nil)
	ln, okn := griefIILML(gn, 1, h.NoiseVariance, nil, nil)
	if !okp || !okn {
		return math.Inf(-1), nil
	}
	return ln - lp, nil
}

// griefNextP is the rung above p on GRIEF-II's ladder: x10 up to the paper's 1000, then x2,
// at most top.
func griefNextP(p, top int) int {
	if p < DefaultGRIEFEigenfunctions {
		return min(10*p, DefaultGRIEFEigenfunctions, top)
	}
	return min(2*p, top)
}

// griefGramAt is the Gram statistic of the p-eigenfunction GRIEF map at hyperparameters h.
func griefGramAt(ctx context.Context, eng engine.Engine, p *prepared, fam kernel.Family, grid [][]float64, h model.Hyper, np int) (*reduce.Gram, error) {
	g, err := features.NewGRIEF(fam, h.Lengthscales, h.SignalVariance, grid, np)
	if err != nil {
		return nil, err
	}
	return griefGram(ctx, eng, g, p.tf)
}

// griefIIPosterior is GRIEF-II's posterior at w = 1, the base GRIEF kernel K~ = Phi Phi^T
// (GP-GRIEF eq. 3) at noise s2, from the Gram statistic (A = Phi^T Phi, r = Phi^T y, y^T y)
// of the fitted map: Bayesian linear regression on the p eigenfunctions with unit prior
// weights, so with P = A + s2 I = L L^T
//
//	Beta = P^-1 r,   C = s2 P^-1,
//
// the latent mean phi(x) Beta and variance phi(x) C phi(x)^T of the generic GP prediction
// (GP-GRIEF eq. 2, by the matrix inversion lemma), and the log marginal likelihood of
// griefIILML. Directions of weight space the data do not reach keep their prior variance.
// One Cholesky factorisation and one inverse, O(p^3) on the compute core; the eigenpairs of
// A that the weight-learning variants need are not formed (gonum's eigensolver took minutes
// at p = 4000).
func griefIIPosterior(g *reduce.Gram, s2 float64) (*model.GRIEFPost, float64, error) {
	p := g.S
	lml, ok := griefIILML(g, 1, s2, nil, nil)
	if !ok {
		return nil, 0, fmt.Errorf("GRIEF-II posterior: A + s2 I (%d x %d) is not positive definite at noise %g", p, p, s2)
	}
	a := mat.NewSymDense(p, append([]float64(nil), g.G...)) // the upper triangle, all SymDense reads
	for i := 0; i < p; i++ {
		a.SetSym(i, i, a.At(i, i)+s2)
	}
	var ch linalg.Cholesky
	if !ch.Factorize(a) {
		return nil, 0, fmt.Errorf("GRIEF-II posterior: A + s2 I (%d x %d) is not positive definite at noise %g", p, p, s2)
	}
	beta := mat.NewVecDense(p, nil)
	if err := ch.SolveVecTo(beta, mat.NewVecDense(p, append([]float64(nil), g.B...))); err != nil {
		return nil, 0, fmt.Errorf("GRIEF-II posterior: %w", err)
	}
	var inv mat.SymDense
	if err := ch.InverseTo(&inv); err != nil {
		return nil, 0, fmt.Errorf("GRIEF-II posterior: %w", err)
	}
	C := make([]float64, p*p)
	for i := 0; i < p; i++ {
		for j := i; j < p; j++ {
			v := s2 * inv.At(i, j)
			C[i*p+j], C[j*p+i] = v, v
		}
	}
	return &model.GRIEFPost{Inference: "type2", Beta: beta.RawVector().Data, C: C}, lml, nil
}

// griefLeftOut is the prior variance per row that the GRIEF kernel of the Gram statistic g
// leaves out, sf2 - tr(Phi^T Phi)/n = tr(K - K~)/n (K~ = Phi Phi^T is a Nystrom kernel, so
// K - K~ is positive semi-definite and the difference is at least 0 up to rounding).
func griefLeftOut(g *reduce.Gram, sf2 float64) float64 {
	var tr float64
	for i := 0; i < g.S; i++ {
		tr += g.G[i*g.S+i]
	}
	return sf2 - tr/float64(g.N)
}

// griefGridSize is "m_1 x m_2 x ..." with runs of equal sizes written as powers.
func griefGridSize(sizes []int) string {
	var parts []string
	for i := 0; i < len(sizes); {
		j := i
		for j < len(sizes) && sizes[j] == sizes[i] {
			j++
		}
		if j-i > 1 {
			parts = append(parts, fmt.Sprintf("%d^%d", sizes[i], j-i))
		} else {
			parts = append(parts, fmt.Sprint(sizes[i]))
		}
		i = j
	}
	return strings.Join(parts, " x ")
}

// griefGram runs one Gram pass with the GRIEF map g: A = Phi^T Phi, r = Phi^T y, y^T y, n.
func griefGram(ctx context.Context, eng engine.Engine, g *features.GRIEF, tf shard.Transform) (*reduce.Gram, error) {
	st, err := eng.Reduce(ctx, &tasks.GramTask{Features: g, Transform: tf})
	if err != nil {
		return nil, fmt.Errorf("Gram pass: %w", err)
	}
	gram, ok := st.(*reduce.Gram)
	if !ok {
		return nil, fmt.Errorf("Gram pass returned %T", st)
	}
	return gram, nil
}

// griefIIProblem is GRIEF-II (GP-GRIEF §6, type II): the marginal likelihood of the base
// GRIEF kernel K~ = Phi Phi^T (eq. 3, w = 1) plus s2 I on all rows, as a function of
// x = (log l_1..log l_d, log c, log s2), c the signal variance. Phi scales as sqrt(c) (K_XU and
// the eigenvalues of K_UU both scale as c), so one Gram pass with unit signal variance gives
// A_1 = Phi_1^T Phi_1 and r_1 = Phi_1^T y, and with P = s2 I + c A_1, beta = P^-1 sqrt(c) r_1:
//
//	LML = -1/2 [log|P| + (n - p) log s2 + (y^T y - sqrt(c) r_1^T beta)/s2 + n log 2 pi]
//	dLML/dlog c  = -1/2 [p - s2 tr(P^-1) - beta^T beta]
//	dLML/dlog s2 = -1/2 s2 [tr(P^-1) + (n - p)/s2 - (y^T y - sqrt(c) r_1^T beta)/s2^2 + beta^T beta/s2]
//
// (supplement A with W = I). The lengthscale derivatives need the derivatives of the 1-D
// eigenpairs, which the paper does not give (the authors' code takes forward differences, one
// pass per input). Derived here: with the selection S_p held fixed, A and r depend on l_k
// through Phi_1 alone, and differentiating the LML above gives
//
//	dLML/dlog l_k = - sum_n z_n . dphi(x_n)/dlog l_k,
//	z_n = c P^-1 phi(x_n) - ((sqrt(c) y_n - c phi(x_n) . beta) / s2) beta,
//
// (from dlog|P| = c tr(P^-1 dA), d(sqrt(c) r^T beta) = 2 sqrt(c) beta^T dr - c beta^T dA beta,
// dA = sum_n (dphi_n phi_n^T + phi_n dphi_n^T), dr = sum_n y_n dphi_n), with dphi from first-order
// perturbation of the 1-D eigenpairs (features.GRIEFGrad). One more map round
// (tasks.GRIEFGradTask, carrying P's Cholesky factor) gives all d sums, so an evaluation costs
// two passes over the data whatever d is, in place of d + 1. The selection S_p of Algorithm 1
// follows theta between evaluations, which makes the objective piecewise smooth (it jumps where
// two product eigenvalues cross).
type griefIIProblem struct {
	ctx  context.Context
	eng  engine.Engine
	tf   shard.Transform
	fam  kernel.Family
	grid [][]float64
	p, d int
}

// griefIIFuncTol is GRIEF-II's convergence test, a relative decrease of 1e-6 three iterations
// running: the objective jumps where the selection S_p changes, below which L-BFGS's progress is
// noise, and every evaluation is two passes over the data.
const griefIIFuncTol = 1e-6

// gram returns the unit-signal GRIEF map at lengthscales exp(x[:d]) and its Gram statistic.
func (q *griefIIProblem) gram(x []float64) (*features.GRIEF, *reduce.Gram, error) {
	ls := make([]float64, q.d)
	for k := range ls {
		ls[k] = math.Exp(x[k])
	}
	g, err := features.NewGRIEF(q.fam, ls, 1, q.grid, q.p)
	if err != nil {
		return nil, nil, err
	}
	gram, err := griefGram(q.ctx, q.eng, g, q.tf)
	return g, gram, err
}

// objective is the negative GRIEF-II log likelihood and its gradient (see griefIIProblem).
func (q *griefIIProblem) objective(x, grad []float64) (float64, error) {
	d := q.d
	g, gram, err := q.gram(x)
	if err != nil {
		return 0, err
	}
	c, s2 := math.Exp(x[d]), math.Exp(x[d+1])
	var g2 [2]float64
	var st griefIIState
	f, ok := griefIILML(gram, c, s2, g2[:], &st)
	if !ok {
		return math.Inf(1), nil // not positive definite here: a failed step
	}
	grad[d], grad[d+1] = -g2[0], -g2[1]
	res, err := q.eng.Reduce(q.ctx, &tasks.GRIEFGradTask{Features: g, Transform: q.tf, L: st.L, Beta: st.Beta,
		C: c, A: math.Sqrt(c) / s2, B: c / s2})
	if err != nil {
		return 0, fmt.Errorf("lengthscale gradient pass: %w", err)
	}
	sum, ok := res.(*reduce.Sum)
	if !ok || len(sum.Parts) != 1 || len(sum.Parts[0]) != d {
		return 0, fmt.Errorf("lengthscale gradient pass returned %T, not %d sums", res, d)
	}
	copy(grad[:d], sum.Parts[0]) // d(-LML)/dlog l_k = + sum_n z_n . dphi_n/dlog l_k
	return -f, nil
}

// griefIIState is what the lengthscale gradient pass needs of one likelihood evaluation: the
// Cholesky factor L of P = s2 I + c A_1 (p x p row-major, lower triangle; the upper is zero)
// and beta = P^-1 sqrt(c) r_1.
type griefIIState struct {
	L, Beta []float64
}

// griefIILML is the GRIEF-II log marginal likelihood from the unit-signal Gram statistic g
// at signal variance c and noise s2, and, if grad is not nil, its derivatives in (log c,
// log s2), and if st is not nil the factor and beta the lengthscale gradient needs. ok is false
// when P = s2 I + c A_1 is not numerically positive definite.
func griefIILML(g *reduce.Gram, c, s2 float64, grad []float64, st *griefIIState) (lml float64, ok bool) {
	p, n := g.S, g.N
	// P = s2 I + c A_1 in the lower triangle (the Gram statistic holds the upper), factorised
	// in place by the compute core's Cholesky: P = L L^T.
	pl := make([]float64, p*p)
	for i := 0; i < p; i++ {
		for j := 0; j <= i; j++ {
			pl[i*p+j] = c * g.G[j*p+i]
		}
		pl[i*p+i] += s2
	}
	L, ok := linalg.Potrf(blas64.Symmetric{Uplo: blas.Lower, N: p, Stride: p, Data: pl})
	if !ok {
		return 0, false
	}
	var logDet float64
	for i := 0; i < p; i++ {
		logDet += 2 * math.Log(pl[i*p+i])
	}
	// beta = P^-1 sqrt(c) r_1 by two triangular solves.
	sc := math.Sqrt(c)
	beta := make([]float64, p)
	for i := range beta {
		beta[i] = sc * g.B[i]
	}
	var rb float64
	bv := blas64.Vector{N: p, Inc: 1, Data: beta}
	blas64.Trsv(blas.NoTrans, L, bv)
	for _, v := range beta {
		rb += v * v // r^T P^-1 r = ||L^-1 r||^2
	}
	blas64.Trsv(blas.Trans, L, bv)
	q := g.YY - rb
	if st != nil {
		st.L, st.Beta = pl, beta
	}
	lml = -0.5 * (logDet + float64(n-p)*math.Log(s2) + q/s2 + float64(n)*math.Log(2*math.Pi))
	if grad != nil {
		// tr(P^-1) = ||L^-1||_F^2: the trace needs every entry of L^-1 (linalg.InverseNorm2).
		tr, bb := linalg.InverseNorm2(L), 0.0
		for _, v := range beta {
			bb += v * v
		}
		grad[0] = -0.5 * (float64(p) - s2*tr - bb)
		grad[1] = -0.5 * s2 * (tr + float64(n-p)/s2 - q/(s2*s2) + bb/s2)
	}
	return lml, true
}

// griefGrid places the inducing grid from the standardized column extremes and the
// distinct values of each column (at most m_bar + 1 of them: more means "many"). Under the
// default placement (auto) it also returns alt, the grid with the axes of heavy-tailed columns
// at their 1-D k-means centres (griefKMeansAxes), or nil when no column is heavy-tailed;
// griefChooseGrid picks between the two. Under kmeans the k-means grid is the grid.
func (r *run) griefGrid(ctx context.Context, eng engine.Engine, p *prepared) (grid, alt [][]float64, err error) {
	mbar := r.spec.griefGrid(p.n, p.d)
	lo, hi := p.lo, p.hi
	r.obs(Event{Phase: "grid", Message: fmt.Sprintf("distinct-values pass (up to %d per column)", mbar+1)})
	st, err := eng.Reduce(ctx, shard.DistinctTask{Cap: mbar})
	if err != nil {
		return nil, nil, fmt.Errorf("distinct-values pass: %w", err)
	}
	dv, ok := st.(*reduce.Distinct)
	if !ok {
		return nil, nil, fmt.Errorf("distinct-values pass returned %T", st)
	}
	if len(dv.Values) != p.d {
		return nil, nil, fmt.Errorf("distinct-values pass gave %d columns, the data has %d", len(dv.Values), p.d)
	}
	distinct := make([][]float64, p.d)
	levels := make([]bool, p.d)
	for k, vals := range dv.Values {
		distinct[k] = make([]float64, len(vals))
		for j, v := range vals {
			distinct[k][j] = (v - p.tf.XMean[k]) / p.tf.XScale[k]
		}
		levels[k] = len(vals) <= mbar
	}
	grid, err = features.GRIEFGrid(lo, hi, distinct, mbar)
	placement := r.spec.griefPlacement()
	if err != nil || placement == "even" {
		return grid, nil, err
	}
	km, err := r.griefKMeansAxes(ctx, eng, p, grid, levels, placement == "kmeans")
	switch {
	case err != nil:
		return nil, nil, err
	case km == nil:
		return grid, nil, nil
	case placement == "kmeans":
		return km, nil, nil
	}
	return grid, km, nil
}

// griefEvidence is the log Bayes factor, in nats, by which a discrete choice of the GRIEF-II
// model must beat the paper's to be taken: the k-means axes against the even grid
// (griefChooseGrid) and one more rung of eigenfunctions on the ladder (griefIIFit) where the
// left-out prior variance alone would stop. 5 is "very strong" evidence on Kass & Raftery's
// (1995) scale (2 ln B > 10), so the paper's choice stands unless the data clearly prefer the
// other.
const griefEvidence = 5.0

// griefChooseGrid returns the k-means alternative of the even grid when its GRIEF-II log
// marginal likelihood (griefIILML, w = 1) at the searched start theta with p eigenfunctions
// exceeds the even grid's by more than griefEvidence, one Gram pass each, and else the even
// grid (the paper's, as in the authors' code): the placement is chosen like a discrete
// hyperparameter, by the evidence. On 29,700 rows of 20 log-normal inputs
// (scripts/synth-heavy.py) the k-means axes raised it from -174,343 to -28,419 at the start;
// on protein (one heavy-tailed input) from -224,819 to -219,371; on elevators, whose
// heavy-tailed columns are mostly one value, by 1 nat over 14,940 rows, and the even grid
// stands.
func (r *run) griefChooseGrid(ctx context.Context, eng engine.Engine, p *prepared, fam kernel.Family, even, alt [][]float64, theta []float64, np int) ([][]float64, error) {
	d := p.d
	lml := func(grid [][]float64) (float64, error) {
		q := &griefIIProblem{ctx: ctx, eng: eng, tf: p.tf, fam: fam, grid: grid, p: np, d: d}
		_, gram, err := q.gram(theta)
		if err != nil {
			return 0, err
		}
		f, ok := griefIILML(gram, math.Exp(theta[d]), math.Exp(theta[d+1]), nil, nil)
		if !ok {
			return math.Inf(-1), nil
		}
		return f, nil
	}
	le, err := lml(even)
	if err != nil {
		return nil, fmt.Errorf("grid choice, even grid: %w", err)
	}
	lk, err := lml(alt)
	if err != nil {
		return nil, fmt.Errorf("grid choice, k-means grid: %w", err)
	}
	if lk > le+griefEvidence {
		r.obs(Event{Phase: "grid", Message: fmt.Sprintf("the k-means axes raise the GRIEF-II log likelihood at the start (p = %d) from %.6g to %.6g: taken", np, le, lk)})
		return alt, nil
	}
	r.obs(Event{Phase: "grid", Message: fmt.Sprintf("the k-means axes give the GRIEF-II log likelihood %.6g at the start (p = %d), the even grid %.6g: not %g more, so the even grid stands", lk, np, le, griefEvidence)})
	return even, nil
}

// griefPlacement is the grid_placement setting: auto (the default), even or kmeans.
func (s *Spec) griefPlacement() string {
	if g := griefSettings(s).GetGridPlacement(); g != "" {
		return g
	}
	return "auto"
}

// griefSampleRows is the size of the seeded row sample that places the axes of heavy-tailed
// columns (features.GRIEFKMeansAxes): the 10% and 90% quantiles of the tail test are then known
// to about sqrt(0.1 * 0.9 / 2000) = 0.7% in probability.
const griefSampleRows = 2000

// griefKMeansAxes returns grid with the axes of heavy-tailed columns (every continuous column
// when all is set: grid_placement kmeans) at their 1-D k-means centres in a seeded sample of
// griefSampleRows rows (a bottom-k pass: the same rows for any worker count and after a
// resume), and says which columns moved; nil when none did.
func (r *run) griefKMeansAxes(ctx context.Context, eng engine.Engine, p *prepared, grid [][]float64, levels []bool, all bool) ([][]float64, error) {
	smp, err := r.samplePass(ctx, eng, p.d, griefSampleRows)
	if err != nil {
		return nil, fmt.Errorf("grid: %w", err)
	}
	n, d := len(smp.Y), p.d
	cols := make([][]float64, d)
	for k := range cols {
		cols[k] = make([]float64, n)
	}
	row := make([]float64, d)
	for i := 0; i < n; i++ {
		p.tf.ApplyRow(smp.X[i*d:(i+1)*d], row)
		for k, v := range row {
			cols[k][i] = v
		}
	}
	for _, c := range cols {
		slices.Sort(c)
	}
	ratio := features.GRIEFTailRatio
	if all {
		ratio = 0
	}
	out, moved, err := features.GRIEFKMeansAxes(grid, cols, levels, ratio)
	if err != nil || len(moved) == 0 {
		return nil, err
	}
	if ratio == 0 {
		r.obs(Event{Phase: "grid", Message: fmt.Sprintf("grid points of %d inputs at the 1-D k-means centres of %d sampled rows", len(moved), n)})
		return out, nil
	}
	names := make([]string, len(moved))
	for j, k := range moved {
		names[j] = r.inputName(k) + " (" + strconv.Itoa(len(out[k])) + " points)"
	}
	r.obs(Event{Phase: "grid", Message: fmt.Sprintf("heavy-tailed inputs (range over %g times the central 80%% of %d sampled rows): their 1-D k-means centres are the alternative axes: %s", features.GRIEFTailRatio, n, strings.Join(names, ", "))})
	return out, nil
}

// griefType2Weights maximises the likelihood over (log w~, log s2) from the base kernel at
// the searched theta: the type-II variant over the weights that GP-GRIEF §5 warns overfits.
func (r *run) griefType2Weights(ctx context.Context, b *griefBasis, sn2 float64, p *prepared, fit *fitted) (*model.GRIEFPost, float64, float64, error) {
	pt := b.pt
	lower, upper := make([]float64, pt+1), make([]float64, pt+1)
	x0 := make([]float64, pt+1)
	for i := 0; i < pt; i++ {
		ls := math.Log(b.sig2[i])
		x0[i], lower[i], upper[i] = ls, ls-griefLogWBox, ls+griefLogWBox
	}
	lower[pt], upper[pt] = math.Log(r.spec.NoiseVarianceBounds[0]), math.Log(r.spec.NoiseVarianceBounds[1])
	x0[pt] = clamp(math.Log(sn2), lower[pt], upper[pt])
	obj := func(x, grad []float64) (float64, error) {
		f := b.lml(x, grad)
		for i := range grad {
			grad[i] = -grad[i]
		}
		return -f, nil
	}
	opt, err := r.optimize(ctx, obj, x0, lower, upper, p, 0)
	if err != nil {
		return nil, 0, 0, err
	}
	fit.trace, fit.iters = opt.trace, opt.iters
	w, s2 := b.weights(opt.theta)
	beta, C := b.posterior(w, s2)
	return &model.GRIEFPost{Inference: "type2-weights", Beta: beta, C: C, W: w}, b.lml(opt.theta, nil), s2, nil
}

// griefType1 samples (log w~, log s2) by MALA under the log-normal priors and averages the
// posterior over the retained samples (MALA as in GP-GRIEF §6; the averaging is ours).
func (r *run) griefType1(ctx context.Context, b *griefBasis, sn2 float64, fit *fitted) (*model.GRIEFPost, float64, float64, error) {
	pt := b.pt
	lo, hi := r.spec.NoiseVarianceBounds[0], r.spec.NoiseVarianceBounds[1]
	sn2 = clamp(sn2, lo, hi)
	pr := newGRIEFPrior(b, sn2)
	x0 := make([]float64, pt+1)
	for i := 0; i < pt; i++ {
		x0[i] = math.Log(b.sig2[i]) // prior mode: omega = 1, the base kernel
	}
	x0[pt] = math.Log(sn2)
	logp := func(x, grad []float64) (float64, error) {
		return b.lml(x, grad) + pr.logDensity(x, grad), nil
	}
	samples := r.spec.griefSamples()
	set := optimizer.MALASettings{Iters: griefBurnIn + samples*griefThin, BurnIn: griefBurnIn, Thin: griefThin, Scale: pr.scale(b, x0)}
	r.obs(Event{Phase: "sample", MaxIter: set.Iters, Message: fmt.Sprintf("MALA: %d iterations, burn-in %d, thinning %d, %d samples", set.Iters, griefBurnIn, griefThin, samples)})

	// Per sample s: b_s = w .* r~ ./ (w + s2) and c_s = s2 w ./ (w + s2) in the transformed
	// basis; beta_s = T b_s and C_s = T diag(c_s) T^T with T = V~ Sigma~^-1.
	var bs [][]float64
	cbar, wbar, xbar := make([]float64, pt), make([]float64, pt), make([]float64, pt+1)
	var s2bar float64
	onSample := func(x []float64) {
		w, s2 := b.weights(x)
		bv := make([]float64, pt)
		for i := range bv {
			bv[i] = w[i] * b.rt[i] / (w[i] + s2)
			cbar[i] += s2 * w[i] / (w[i] + s2)
			wbar[i] += w[i]
		}
		for i, v := range x {
			xbar[i] += v
		}
		s2bar += s2
		bs = append(bs, bv)
		fit.trace = append(fit.trace, -b.lml(x, nil))
		r.obs(Event{Phase: "sample", Iteration: griefBurnIn + len(bs)*griefThin, MaxIter: set.Iters, Objective: fit.trace[len(fit.trace)-1] / float64(b.n)})
	}
	rate, err := optimizer.MALA(ctx, logp, x0, set, r.spec.Seed, onSample)
	if err != nil {
		return nil, 0, 0, err
	}
	k := float64(len(bs))
	if k == 0 {
		return nil, 0, 0, fmt.Errorf("MALA retained no samples")
	}
	fit.iters = set.Iters
	r.obs(Event{Phase: "sample", Iteration: set.Iters, MaxIter: set.Iters, Message: fmt.Sprintf("MALA acceptance rate %.3f after burn-in", rate)})
	mb := make([]float64, pt)
	for _, bv := range bs {
		for i, v := range bv {
			mb[i] += v / k
		}
	}
	// S = diag(mean c) + Cov(b): the mixture's variance E[var_s + mean_s^2] - mean^2.
	S := mat.NewSymDense(pt, nil)
	for i := 0; i < pt; i++ {
		wbar[i] /= k
		S.SetSym(i, i, cbar[i]/k)
	}
	for _, bv := range bs {
		for i := 0; i < pt; i++ {
			di := bv[i] - mb[i]
			for j := i; j < pt; j++ {
				S.SetSym(i, j, S.At(i, j)+di*(bv[j]-mb[j])/k)
			}
		}
	}
	for i := range xbar {
		xbar[i] /= k
	}
	beta, C := b.transform(mb, S)
	return &model.GRIEFPost{Inference: "type1", Beta: beta, C: C, W: wbar, Samples: len(bs)}, b.lml(xbar, nil), s2bar / k, nil
}

// griefBasis is the transformed basis (GP-GRIEF §5): of A = Phi^T Phi = V D V^T it keeps the
// p~ eigenpairs with D_i > griefRelEig max D, in descending order; Sigma~^2 = D. Everything the
// loop needs is r~ = Sigma~^-1 V~^T r, y^T y - ||r~||^2, n and p~. The paper's basis
// phi~_i(x) = sum_j v~_ji Sigma~_ii^-1 phi_i(x) is corrected here to phi_j(x) in the sum, i.e.
// phi~(x) = phi(x) V~ Sigma~^-1.
type griefBasis struct {
	p, pt int
	n     int
	v     []float64 // p x pt, row-major: the kept eigenvectors of A
	sig2  []float64 // Sigma~_ii^2 = D_i
	rt    []float64 // r~
	res   float64   // y^T y - ||r~||^2, the residual outside span(Phi), clamped at 0
}

func newGRIEFBasis(g *reduce.Gram) (*griefBasis, error) {
	p := g.S
	// G holds the upper triangle, which is all SymDense reads.
	var es mat.EigenSym
	if !es.Factorize(mat.NewSymDense(p, append([]float64(nil), g.G...)), true) {
		return nil, fmt.Errorf("eigendecomposition of A = Phi^T Phi (%d x %d) failed", p, p)
	}
	vals := es.Values(nil) // ascending
	var vecs mat.Dense
	es.VectorsTo(&vecs)
	top := vals[p-1]
	if !(top > 0) {
		return nil, fmt.Errorf("A = Phi^T Phi is zero: the eigenfunctions vanish on the data")
	}
	pt := 0
	for pt < min(p, g.N) && vals[p-1-pt] > griefRelEig*top { // rank(Phi) <= min(p, n)
		pt++
	}
	b := &griefBasis{p: p, pt: pt, n: g.N, v: make([]float64, p*pt), sig2: make([]float64, pt), rt: make([]float64, pt)}
	res := g.YY
	for i := 0; i < pt; i++ {
		src := p - 1 - i
		b.sig2[i] = vals[src]
		var s float64
		for a := 0; a < p; a++ {
			va := vecs.At(a, src)
			b.v[a*pt+i] = va
			s += va * g.B[a]
		}
		b.rt[i] = s / math.Sqrt(vals[src])
		res -= b.rt[i] * b.rt[i]
	}
	b.res = math.Max(0, res)
	return b, nil
}

// weights unpacks x = (log w~, log s2).
func (b *griefBasis) weights(x []float64) ([]float64, float64) {
	w := make([]float64, b.pt)
	for i := range w {
		w[i] = math.Exp(x[i])
	}
	return w, math.Exp(x[b.pt])
}

// lml is the log marginal likelihood at x = (log w~_1..log w~_p~, log s2) in O(p~), and, if
// grad is not nil, its gradient in x (derived here from GP-GRIEF eq. 13 with A = I, times the
// chain rule d/dlog v = v d/dv):
//
//	LML = -1/2 sum_i [log(w_i + s2) + r~_i^2/(w_i + s2)] - 1/2 [(n - p~) log s2 + res/s2] - n/2 log 2 pi
//	dLML/dw_i = r~_i^2 / (2 (w_i + s2)^2) - 1 / (2 (w_i + s2))
//	dLML/ds2  = sum_i dLML/dw_i + res/(2 s2^2) - (n - p~)/(2 s2)
func (b *griefBasis) lml(x, grad []float64) float64 {
	pt := b.pt
	s2 := math.Exp(x[pt])
	var f, gs float64
	for i := 0; i < pt; i++ {
		w := math.Exp(x[i])
		a := w + s2
		r2 := b.rt[i] * b.rt[i]
		f += math.Log(a) + r2/a
		t := r2/(2*a*a) - 1/(2*a)
		gs += t
		if grad != nil {
			grad[i] = w * t
		}
	}
	nr := float64(b.n - pt)
	f = -0.5*f - 0.5*(nr*x[pt]+b.res/s2) - 0.5*float64(b.n)*math.Log(2*math.Pi)
	if grad != nil {
		grad[pt] = s2 * (gs + b.res/(2*s2*s2) - nr/(2*s2))
	}
	return f
}

// posterior is the predictive posterior at (w~, s2) over the untransformed features
// (derived here; the paper gives only the generic GP eq. 2):
// beta = T (w .* r~ ./ (w + s2)), C = T diag(s2 w ./ (w + s2)) T^T, T = V~ Sigma~^-1.
func (b *griefBasis) posterior(w []float64, s2 float64) (beta, C []float64) {
	bv := make([]float64, b.pt)
	S := mat.NewSymDense(b.pt, nil)
	for i := range bv {
		bv[i] = w[i] * b.rt[i] / (w[i] + s2)
		S.SetSym(i, i, s2*w[i]/(w[i]+s2))
	}
	return b.transform(bv, S)
}

// transform maps a transformed-basis mean vector bv and covariance S to the features:
// beta = T bv and C = T S T^T (p x p, full), T = V~ Sigma~^-1. It costs O(p p~^2 + p^2 p~).
func (b *griefBasis) transform(bv []float64, S *mat.SymDense) (beta, C []float64) {
	p, pt := b.p, b.pt
	T := mat.NewDense(p, max(pt, 1), nil)
	for a := 0; a < p; a++ {
		for i := 0; i < pt; i++ {
			T.Set(a, i, b.v[a*pt+i]/math.Sqrt(b.sig2[i]))
		}
	}
	beta = make([]float64, p)
	C = make([]float64, p*p)
	if pt == 0 {
		return beta, C
	}
	mat.NewVecDense(p, beta).MulVec(T, mat.NewVecDense(pt, bv))
	// C = (T S) T^T by two products on the compute core (at p = 4000 gonum's took tens of
	// seconds); S is expanded to a full matrix from its upper triangle.
	Sf := make([]float64, pt*pt)
	for i := 0; i < pt; i++ {
		for j := i; j < pt; j++ {
			v := S.At(i, j)
			Sf[i*pt+j], Sf[j*pt+i] = v, v
		}
	}
	TS := make([]float64, p*pt)
	linalg.Gemm(blas.NoTrans, blas.NoTrans, 1, T.RawMatrix(), blas64.General{Rows: pt, Cols: pt, Stride: pt, Data: Sf}, 0, blas64.General{Rows: p, Cols: pt, Stride: pt, Data: TS})
	linalg.Gemm(blas.NoTrans, blas.Trans, 1, blas64.General{Rows: p, Cols: pt, Stride: pt, Data: TS}, T.RawMatrix(), 0, blas64.General{Rows: p, Cols: p, Stride: p, Data: C})
	for a := 0; a < p; a++ { // exact symmetry
		for c := a + 1; c < p; c++ {
			v := (C[a*p+c] + C[c*p+a]) / 2
			C[a*p+c], C[c*p+a] = v, v
		}
	}
	return beta, C
}

// griefPrior holds the independent log-normal priors of type I, as normals on the log
// variables: log omega_i = log w~_i - log Sigma~_ii^2 ~ N(muW, s2W), log s2 ~ N(muN, s2N).
type griefPrior struct {
	logSig2   []float64
	muW, varW float64
	muN, varN float64
}

// logNormalFromMode returns (mu, s^2) of the log-normal with the given mode and variance:
// with E = exp(s^2), variance = mode^2 (E^4 - E^3) and mu = log(mode) + s^2 (the {mode,
// variance} priors of GP-GRIEF §6, the variance read as the log-normal's own, as in the
// authors' code).
func logNormalFromMode(mode, variance float64) (mu, s2 float64) {
	c := variance / (mode * mode)
	lo, hi := 1.0, 2.0
	for hi*hi*hi*(hi-1) < c {
		hi *= 2
	}
	for it := 0; it < 200; it++ {
		m := (lo + hi) / 2
		if m*m*m*(m-1) < c {
			lo = m
		} else {
			hi = m
		}
	}
	s2 = math.Log((lo + hi) / 2)
	return math.Log(mode) + s2, s2
}

func newGRIEFPrior(b *griefBasis, sigma02 float64) *griefPrior {
	pr := &griefPrior{logSig2: make([]float64, b.pt)}
	for i, s := range b.sig2 {
		pr.logSig2[i] = math.Log(s)
	}
	pr.muW, pr.varW = logNormalFromMode(1, griefWPriorVar)
	pr.muN, pr.varN = logNormalFromMode(sigma02, griefNoisePriorVar)
	return pr
}

// logDensity adds the prior's gradient to grad and returns its log density (up to a constant).
func (pr *griefPrior) logDensity(x, grad []float64) float64 {
	pt := len(pr.logSig2)
	var f float64
	for i := 0; i < pt; i++ {
		z := x[i] - pr.logSig2[i] - pr.muW
		f -= z * z / (2 * pr.varW)
		grad[i] -= z / pr.varW
	}
	z := x[pt] - pr.muN
	f -= z * z / (2 * pr.varN)
	grad[pt] -= z / pr.varN
	return f
}

// scale is MALA's diagonal preconditioner: the inverse square root of the diagonal of the
// expected Fisher information of the likelihood plus the prior precision at x, O(p):
// I_ii = 1/2 (w_i/(w_i + s2))^2 + 1/varW, I_ss = 1/2 sum_i (s2/(w_i + s2))^2 + (n - p~)/2 + 1/varN.
func (pr *griefPrior) scale(b *griefBasis, x []float64) []float64 {
	pt := b.pt
	w, s2 := b.weights(x)
	out := make([]float64, pt+1)
	iss := 0.5*float64(b.n-pt) + 1/pr.varN
	for i := 0; i < pt; i++ {
		a := w[i] + s2
		out[i] = 1 / math.Sqrt(0.5*(w[i]/a)*(w[i]/a)+1/pr.varW)
		iss += 0.5 * (s2 / a) * (s2 / a)
	}
	out[pt] = 1 / math.Sqrt(iss)
	return out
}
