package train

// Variational orthogonal features (paper 002: Burt, Rasmussen and van der Wilk, "Variational
// Orthogonal Features"): sparse variational GP regression with inter-domain features that are
// orthonormal under the prior, so Kuu = I (Section 2, eq. 2) and the ELBO (Section 3, eq. 3,
// with the Gaussian constant -1/2 log(2 pi sigma^2)) needs no M x M prior factorisation. The
// numerics are internal/vof; this file is the distributed algorithm.
//
// The algorithm, step by step:
//
//  1. moments pass (standardization; run.prepare), then the layout (vofShape): --layout
//     tensor or additive as given; auto (the default) takes the tensor product while its
//     M1^d features fit --max-features, else the tensor product of the largest odd m <= M1
//     per input that fits when m >= M1/2 (the resolution at most halved), else the additive
//     layout; the model's sizing warning reports either change;
//  2. the start: the shared hyperparameter search (search.go) gives the lengthscales, the
//     signal variance (split evenly over the inputs for the additive layout) and the noise; the feature
//     parameter starts at sigma_in = 1 (Hermite, Section 3.1.1: the standardized inputs'
//     variance) or at a = min(4/l, pi K / (1.1 xmax)) per input (TrigVOF, Section 3.1.2: the
//     band [-a, a] covers the spectral density's bulk while the K-th basis function still
//     reaches the furthest input xmax);
//  3. Hermite, full batch: L-BFGS over theta = (log l, log v, log sigma^2, log sigma_in) on the
//     collapsed bound, q(u) = N(m*, S*) at its optimum (Section 3.2: S* = (I + sigma^-2 Kuf
//     Kuf^T)^-1, m* = sigma^-2 S* Kuf y; diagonal S* for the mean field). Each evaluation is one
//     map round: every shard returns sum y^2, sum k_n y_n, sum k_n k_n^T and their theta
//     derivatives (vof_kuf tasks; Section 4.1's sufficient statistics, which depend on theta
//     and so are recomputed per evaluation), merged in shard order;
//  4. otherwise (TrigVOF, or Hermite with --batch-rows) Adam over all of (theta, m, S),
//     rate learning-rate decayed x0.1 at 50%, 70% and 90% of max-iter, from q at its optimum
//     for the start theta (one vof_kuf pass; TrigVOF with Gauss-Legendre Kuf, Section 4.3).
//     Step t:
//     a. the minibatch: with --batch-rows B each row is kept with probability B/n by the
//     stream (seed, t, shard), so the batch is the same on any number of workers and on
//     resume; the data term is scaled by n / (rows kept);
//     b. Hermite: the vof_kuf statistics with derivatives at the step's theta, and ELBOKuf;
//     c. TrigVOF: two stratified frequency grids drawn from the stream (seed, t) (Appendix
//     E.1); the workers return n, sum y^2, the four T-vectors b and the four T x T blocks
//     P (vof_trig tasks; with the moments for the gradient in a), and the coordinator
//     forms the unbiased ELBO estimate with Appendix E.1's outer product and all its
//     gradients (ELBOTrig). With --fixed-grid the grids of step 0 and a stay fixed, the
//     statistics are accumulated once and every step costs O(T^2) independent of n
//     (a fixed quasi-Monte Carlo objective);
//  5. the posterior: one vof_kuf pass at the final theta and q at its optimum (Section 3.2),
//     whose ELBO is the model's log likelihood (a lower bound on the exact GP's). Prediction
//     is eq. 2 with Kuu = I (internal/model's VOFPosterior): closed form for Hermite,
//     Gauss-Legendre quadrature on [-a, a] for TrigVOF, variance clamped at zero.
//
// Checkpoints hold the start and the optimizer's state after each iteration (L-BFGS or
// Adam); the streams depend only on (seed, step), and a fixed grid's statistics are
// recomputed on resume, so a resumed run gives the same model bits.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/features"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/model"
	"github.com/gpreduce/gpreduce/internal/optimizer"
	"github.com/gpreduce/gpreduce/internal/tasks"
	"github.com/gpreduce/gpreduce/internal/vof"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// The vof defaults, used when the settings leave a field at 0.
const (
	DefaultVOFFeatures     = 21   // 1-D features per input M1 (odd, as TrigVOF needs)
	DefaultVOFFrequencies  = 32   // TrigVOF frequencies per input and grid, T1
	DefaultVOFLearningRate = 0.01 // Adam base rate
	DefaultMaxVOFFeatures  = features.DefaultMaxVOFFeatures
)

const (
	// vofGridStream and vofBatchStream separate the frequency-grid and minibatch streams from
	// the spec seed's other uses.
	vofGridStream  = 0x766f6667 << 24
	vofBatchStream = 0x766f6662 << 24
	// Bounds of the feature parameters (standardized units): sigma_in for Hermite, a for
	// TrigVOF (angular frequency per standard deviation of the input).
	vofSigmaInMin, vofSigmaInMax = 0.1, 10
	vofAMin, vofAMax             = 0.1, 1e4
	// vofQBound bounds the entries of m and of the covariance factor's strictly lower part in
	// Adam's box; vofLogDiag bounds the log diagonal of the factor.
	vofQBound                  = 1e4
	vofLogDiagLo, vofLogDiagHi = -30, 5
)

func init() {
	register(Method{
		Name:     "vof",
		Summary:  "variational orthogonal features (Hermite or TrigVOF): Kuu = I, map rounds of O(n M^2) statistics",
		Settings: func() proto.Message { return &pb.VOFSettings{} },
		Tasks:    []string{"moments", "sample", "vof_kuf", "vof_trig"},
		Draws:    "minibatches and TrigVOF frequency grids",
		MaxIter:  vofMaxIter,
		validate: validateVOF,
		train: func(ctx context.Context, r *run, eng engine.Engine, p *prepared) (*model.Model, error) {
			return r.trainVOF(ctx, eng, p)
		},
	})
}

// vofSettings is the spec's *pb.VOFSettings, or the defaults.
func vofSettings(s *Spec) *pb.VOFSettings {
	if v, ok := s.Settings.(*pb.VOFSettings); ok && v != nil {
		return v
	}
	return &pb.VOFSettings{}
}

// The values of --layout: how the 1-D bases of the inputs combine into d-dimensional
// features (features.VOFLayout).
const (
	// VOFLayoutAuto is the default: the tensor product when its M1^d features fit
	// --max-features, otherwise the additive layout, with a sizing warning on the model.
	VOFLayoutAuto = "auto"
	// VOFLayoutTensor is the tensor product (the product kernel, M1^d features), refused
	// when M1^d exceeds --max-features.
	VOFLayoutTensor = "tensor"
	// VOFLayoutAdditive is a sum of 1-D VOF models, one per input (the additive kernel,
	// d M1 features; no interactions between inputs). --additive is a synonym.
	VOFLayoutAdditive = "additive"
)

// vofLayoutName is the spec's --layout with --additive folded in: auto, tensor or additive.
func vofLayoutName(s *Spec) (string, error) {
	v := vofSettings(s)
	l := v.GetLayout()
	switch l {
	case "":
		l = VOFLayoutAuto
	case VOFLayoutAuto, VOFLayoutTensor, VOFLayoutAdditive:
	default:
		return "", fmt.Errorf("layout: unknown layout %q; use auto, tensor or additive", l)
	}
	if v.GetAdditive() {
		if v.GetLayout() != "" && l != VOFLayoutAdditive {
			return "", fmt.Errorf("layout: %s contradicts --additive (the same as --layout additive); drop one of them", l)
		}
		l = VOFLayoutAdditive
	}
	return l, nil
}

// vofShape is the vof.Model of the spec for d inputs, with the layout resolved. Burt,
// Rasmussen and van der Wilk (2020) construct 1-D features only; their Section 4.3 notes that
// VOF struggle with many inputs and points to additive structure in the prior, as in VFF.
// The default layout (auto) therefore keeps the tensor product, with its interactions between
// inputs, while its M1^d features fit --max-features; over the budget it keeps it with fewer
// features per input (the largest odd m with m^d within the budget) as long as m >= M1/2, and
// otherwise takes the additive layout of d M1 features. sizing is not empty when auto changed
// the features or the layout: it says what was chosen, why, and what to change, for the
// model's sizing warning.
func vofShape(s *Spec, d int) (mod vof.Model, sizing string, err error) {
	v := vofSettings(s)
	basis := vof.Hermite
	if vofTrig(s) {
		basis = vof.Trig
	}
	fam, err := kernel.ParseFamily(s.Kernel)
	if err != nil {
		return vof.Model{}, "", fmt.Errorf("kernel: %w", err)
	}
	layout, err := vofLayoutName(s)
	if err != nil {
		return vof.Model{}, "", err
	}
	mod = vof.Model{Basis: basis, Family: fam, Dim: d, M1: orInt(int(v.GetFeatures()), DefaultVOFFeatures),
		Additive: layout == VOFLayoutAdditive, Dense: v.GetCovariance() == "dense", MaxFeatures: orInt(int(v.GetMaxFeatures()), DefaultMaxVOFFeatures)}
	if layout == VOFLayoutAdditive || d < 2 || mod.M1 < 1 {
		return mod, "", nil
	}
	if _, err := mod.Layout().NumFeatures(); err == nil {
		return mod, "", nil
	}
	if layout == VOFLayoutTensor {
		return vof.Model{}, "", fmt.Errorf("layout: tensor needs %d^%d features (%d per input over %d inputs), over --max-features %d; raise --max-features, lower --features, or use --layout additive or auto",
			mod.M1, d, mod.M1, d, mod.MaxFeatures)
	}
	if m, n := tensorSide(mod); 2*m >= mod.M1 {
		sizing = fmt.Sprintf("vof: %d^%d tensor features exceed --max-features %d; using %d features per input (%d^%d = %d), which resolve less detail along each input than %d; raise --max-features for the full grid, or set --layout additive for %d x %d features without interactions",
			mod.M1, d, mod.MaxFeatures, m, m, d, n, mod.M1, d, mod.M1)
		mod.M1 = m
		return mod, sizing, nil
	}
	mod.Additive = true
	sizing = fmt.Sprintf("vof: %d^%d tensor features exceed --max-features %d; using the additive layout (%d x %d = %d features): interactions between inputs are not modelled; raise --max-features or lower --features for a tensor grid (--layout tensor), or set --layout additive to choose this layout and silence this warning",
		mod.M1, d, mod.MaxFeatures, d, mod.M1, d*mod.M1)
	return mod, sizing, nil
}

// tensorSide is the largest odd M1 (odd, as TrigVOF's bases need) whose tensor layout of
// mod's inputs fits mod's budget (features.VOFLayout.NumFeatures), with its feature count;
// 0, 0 when even one feature per input does not fit.
func tensorSide(mod vof.Model) (m1, features int) {
	l := mod.Layout()
	for l.M1 = 1; ; l.M1 += 2 {
		n, err := l.NumFeatures()
		if err != nil {
			return m1, features
		}
		m1, features = l.M1, n
	}
}

// VOFLBFGSMaxIter is vof's default optimizer budget when it maximizes the collapsed bound
// over the hyperparameters by full-batch L-BFGS (the Hermite basis without --batch-rows),
// which stops when converged: the additive layout's bound is flat along components that
// switch off, and on concrete's ten splits (d = 8) L-BFGS converges in 83-125 iterations,
// so DefaultMaxIter would stop seven of them unconverged. Adam runs (TrigVOF, minibatches)
// take every step of their schedule and keep DefaultMaxIter. The search's polish of vof's
// start on its sampled rows (search.go) has the same budget.
const VOFLBFGSMaxIter = 300

// vofMaxIter is vof's Method.MaxIter: VOFLBFGSMaxIter for full-batch L-BFGS, else
// DefaultMaxIter.
func vofMaxIter(s *Spec) int {
	if vofTrig(s) || vofSettings(s).GetBatchRows() > 0 {
		return DefaultMaxIter
	}
	return VOFLBFGSMaxIter
}

// vofTrig reports whether the spec's basis is TrigVOF: --basis trig, or no basis and a
// kernel other than rbf (Hermite VOF exist for the rbf kernel only).
func vofTrig(s *Spec) bool {
	b := vofSettings(s).GetBasis()
	return b == "trig" || (b == "" && s.Kernel != "rbf")
}

// validateVOF checks vof's settings for d input columns (0: unknown).
func validateVOF(s *Spec, d int) error {
	v := vofSettings(s)
	if err := nonNegative(v); err != nil {
		return err
	}
	if _, err := vofLayoutName(s); err != nil {
		return err
	}
	trig := vofTrig(s)
	switch v.GetBasis() {
	case "", "hermite", "trig":
	default:
		return fmt.Errorf("basis: unknown basis %q; use hermite or trig", v.GetBasis())
	}
	switch v.GetCovariance() {
	case "", "diag", "dense":
	default:
		return fmt.Errorf("covariance: unknown covariance %q; use diag or dense", v.GetCovariance())
	}
	switch {
	case !trig && s.Kernel != "rbf":
		return fmt.Errorf("basis: hermite features are the rbf kernel's eigenfunctions, the kernel is %s; use --kernel rbf or --basis trig", s.Kernel)
	case trig && v.GetFeatures() != 0 && v.GetFeatures()%2 == 0:
		return fmt.Errorf("features: %d is even; TrigVOF needs an odd number 2K+1 per input", v.GetFeatures())
	case !trig && v.GetFixedGrid():
		return fmt.Errorf("fixed-grid: a setting of --basis trig; drop it or set basis trig")
	case !trig && v.GetFrequencies() != 0:
		return fmt.Errorf("frequencies: a setting of --basis trig; drop it or set basis trig")
	case v.GetFixedGrid() && v.GetBatchRows() != 0:
		return fmt.Errorf("batch-rows: --fixed-grid accumulates the statistics once over all rows; drop one of them")
	case math.IsNaN(v.GetLearningRate()) || math.IsInf(v.GetLearningRate(), 0) || v.GetLearningRate() < 0:
		return fmt.Errorf("learning-rate: %g must be positive and finite", v.GetLearningRate())
	}
	if d == 0 {
		return nil
	}
	mod, _, err := vofShape(s, d)
	if err != nil {
		return err
	}
	if _, err := mod.Validate(); err != nil {
		return fmt.Errorf("features: %w", err)
	}
	if trig {
		t1 := orInt(int(v.GetFrequencies()), DefaultVOFFrequencies)
		if _, err := vof.NewTrigGrid(mod, t1, rand.New(rand.NewPCG(0, 0))); err != nil {
			return fmt.Errorf("frequencies: %w", err)
		}
	}
	return nil
}

// vofProblem is what every VOF evaluation needs.
type vofProblem struct {
	eng  engine.Engine
	p    *prepared
	mod  vof.Model
	M    int
	xmax float64 // bound on the absolute standardized inputs (TrigVOF quadrature)
	seed uint64
	rate float64 // minibatch share of the rows; 0 for the full batch
	t1   int     // TrigVOF frequencies per input
	nh   int     // length of the hyperparameter vector (log l, log v, log sigma^2, log feature)
}

func (r *run) trainVOF(ctx context.Context, eng engine.Engine, p *prepared) (*model.Model, error) {
	spec, obs := r.spec, r.obs
	vs := vofSettings(&spec)
	d := p.d
	mod, sizing, err := vofShape(&spec, d)
	if err != nil {
		return nil, fmt.Errorf("vof: %w", err)
	}
	M, err := mod.Validate()
	if err != nil {
		return nil, fmt.Errorf("vof: features: %w", err)
	}
	prob := &vofProblem{eng: eng, p: p, mod: mod, M: M, seed: spec.Seed, t1: orInt(int(vs.GetFrequencies()), DefaultVOFFrequencies),
		nh: 2*d + mod.NumVariances() + 1}
	if b := int(vs.GetBatchRows()); b > 0 && b < p.n {
		prob.rate = float64(b) / float64(p.n)
	}

	// Step 2: the start.
	lower, upper := box(spec, d)
	x0, err := r.searchStart(ctx, eng, p, mod.Family, lower, upper)
	if err != nil {
		return nil, fmt.Errorf("vof: %w", err)
	}
	if mod.Basis == vof.Trig {
		lo, hi := p.lo, p.hi
		for k := 0; k < d; k++ {
			prob.xmax = math.Max(prob.xmax, math.Max(math.Abs(lo[k]), math.Abs(hi[k])))
		}
	}
	h0, hl, hu := prob.start(spec, x0)
	mode := "collapsed bound, full batch, L-BFGS"
	if mod.Basis == vof.Trig || prob.rate > 0 {
		mode = fmt.Sprintf("Adam, learning rate %g", orFloat(vs.GetLearningRate(), DefaultVOFLearningRate))
	}
	if mod.Basis == vof.Trig {
		mode += fmt.Sprintf(", %d frequencies per grid", prob.t1)
		if vs.GetFixedGrid() {
			mode += " (fixed grid)"
		}
	}
	if prob.rate > 0 {
		mode += fmt.Sprintf(", minibatches of about %d rows", vs.GetBatchRows())
	}
	obs(Event{Phase: "sizing", Message: fmt.Sprintf("%d %s features (%d per input, %s layout), %s covariance; %s",
		M, mod.Basis, mod.M1, map[bool]string{false: "tensor", true: "additive"}[mod.Additive], map[bool]string{false: "diagonal", true: "dense"}[mod.Dense], mode)})
	if sizing != "" {
		obs(Event{Phase: "sizing", Message: sizing})
	}

	// Steps 3 and 4: the optimizer.
	var h []float64
	var fit *fitted
	if mod.Basis == vof.Hermite && prob.rate == 0 {
		fit, err = r.optimize(ctx, prob.collapsed(ctx), h0, hl, hu, p, 0)
		if err != nil {
			return nil, fmt.Errorf("vof: %w", err)
		}
		h = fit.theta
	} else {
		if h, fit, err = r.vofAdam(ctx, prob, vs, h0, hl, hu); err != nil {
			return nil, fmt.Errorf("vof: %w", err)
		}
	}

	// Step 5: the posterior at the final theta.
	obs(Event{Phase: "fit", Message: "variational posterior at the optimum"})
	post, elbo, err := prob.optimalQ(ctx, h)
	if err != nil {
		return nil, fmt.Errorf("vof: posterior: %w", err)
	}
	var worse string
	if fit.reason == "" && !(mod.Basis == vof.Hermite && prob.rate == 0) {
		// A stochastic run has no line search to keep it from ending worse than it began:
		// compare the bounds, each with q at its optimum over all the data, and keep the
		// start when it is better (never a model worse than its own starting point).
		post0, elbo0, err := prob.optimalQ(ctx, h0)
		if err != nil {
			return nil, fmt.Errorf("vof: posterior at the start: %w", err)
		}
		if elbo0 > elbo {
			worse = fmt.Sprintf("the stochastic optimizer ended at an evidence lower bound of %.6g, below its start's %.6g; the model keeps the start's hyperparameters; lower --learning-rate or raise --batch-rows or --max-iter", elbo, elbo0)
			h, post, elbo = h0, post0, elbo0
		}
	}
	// The shared model fields take theta = (log l, log k(x, x), log sigma^2).
	fit.theta = append(append([]float64(nil), h[:d]...), math.Log(priorVariance(post)), h[d+mod.NumVariances()])
	m := newModel(spec, p, fit, elbo)
	m.Posterior = &model.VOFPosterior{Basis: mod.Basis.String(), M1: mod.M1, Additive: mod.Additive, Dense: mod.Dense, Params: *post}
	if sizing != "" {
		m.Warn(model.WarnSizing, "%s", sizing)
	}
	if mod.NumVariances() > 1 {
		// The additive layout's signal variance is the sum of its components' variances and
		// has no box of its own; each component has the signal-variance box.
		wl, wu := slices.Clone(lower), slices.Clone(upper)
		wl[d], wu[d] = 0, 0
		r.warnFit(m, p, fit.theta, wl, wu, fit.reason)
		r.warnComponentVariances(m, p, h, hl, hu)
	} else {
		r.warnFit(m, p, fit.theta, lower, upper, fit.reason)
	}
	if worse != "" {
		m.Warn(model.WarnNotConverged, "%s", worse)
	}
	return m, nil
}

// warnComponentVariances is warnFit's bound check for the kernel variances of the additive
// layout's components, h[d:2d] in the hyperparameter vector h (log l, log v_1..log v_d, log
// sigma^2, log feature parameters) with box lo, hi: one warning naming the inputs whose
// component is on each bound.
func (r *run) warnComponentVariances(m *model.Model, p *prepared, h, lo, hi []float64) {
	d, ys2 := p.d, p.tf.YScale*p.tf.YScale
	var at [2][]string // inputs on the lower, upper bound
	var bound [2]float64
	for k := 0; k < d; k++ {
		i := d + k
		w := hi[i] - lo[i]
		switch {
		case !(w > 0):
		case h[i]-lo[i] <= boundTol*w:
			at[0], bound[0] = append(at[0], r.inputName(k)), math.Exp(lo[i])
		case hi[i]-h[i] <= boundTol*w:
			at[1], bound[1] = append(at[1], r.inputName(k)), math.Exp(hi[i])
		}
	}
	var parts []string
	for s, side := range []string{"lower", "upper"} {
		if len(at[s]) > 0 {
			parts = append(parts, fmt.Sprintf("of %s on the %s bound %.4g (standardized %.4g)", strings.Join(at[s], ", "), side, bound[s]*ys2, bound[s]))
		}
	}
	if len(parts) > 0 {
		m.Warn(model.WarnBound, "the kernel variances of the additive components %s; widen --signal-variance-bounds", strings.Join(parts, ", and "))
	}
}

// start returns the start of the hyperparameter vector (log l, log v, log sigma^2, log
// feature parameter) from the search's theta x0 (step 2), and its box.
func (q *vofProblem) start(spec Spec, x0 []float64) (h, lo, hi []float64) {
	d, nv := q.p.d, q.mod.NumVariances()
	lower, upper := box(spec, d)
	h, lo, hi = make([]float64, q.nh), make([]float64, q.nh), make([]float64, q.nh)
	copy(h, x0[:d])
	copy(lo, lower[:d])
	copy(hi, upper[:d])
	for c := 0; c < nv; c++ {
		h[d+c] = clamp(x0[d]-math.Log(float64(nv)), lower[d], upper[d])
		lo[d+c], hi[d+c] = lower[d], upper[d]
	}
	h[d+nv], lo[d+nv], hi[d+nv] = x0[d+1], lower[d+1], upper[d+1]
	K := float64(q.mod.M1-1) / 2
	for k := 0; k < d; k++ {
		i := d + nv + 1 + k
		if q.mod.Basis == vof.Hermite {
			h[i], lo[i], hi[i] = 0, math.Log(vofSigmaInMin), math.Log(vofSigmaInMax)
			continue
		}
		a := 4 / math.Exp(x0[k])
		if q.xmax > 0 && K > 0 {
			a = math.Min(a, math.Pi*K/(1.1*q.xmax))
		}
		lo[i], hi[i] = math.Log(vofAMin), math.Log(vofAMax)
		h[i] = clamp(math.Log(a), lo[i], hi[i])
	}
	return h, lo, hi
}

// params returns the parameters at hyperparameters h with q(u) = N(0, I).
func (q *vofProblem) params(h []float64) (*vof.Params, error) {
	d, nv := q.p.d, q.mod.NumVariances()
	ex := func(v []float64) []float64 {
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = math.Exp(x)
		}
		return out
	}
	return q.mod.InitParams(ex(h[:d]), ex(h[d:d+nv]), math.Exp(h[d+nv]), ex(h[d+nv+1:]))
}

// kufStats runs one vof_kuf map round at p's hyperparameters (step 3, step 4b, step 5).
func (q *vofProblem) kufStats(ctx context.Context, p *vof.Params, grad bool, step int) (*vof.KufStats, error) {
	task := &tasks.VOFKufTask{Model: q.mod, Params: p, Transform: q.p.tf, Grad: grad, Xmax: q.xmax}
	if q.rate > 0 && step >= 0 {
		task.Batch = tasks.VOFBatch{Rate: q.rate, Seed: q.seed ^ vofBatchStream, Step: uint64(step)}
	}
	st, err := q.eng.Reduce(ctx, task)
	if err != nil {
		return nil, fmt.Errorf("statistics pass: %w", err)
	}
	ks, ok := st.(*vof.KufStats)
	if !ok {
		return nil, fmt.Errorf("statistics pass returned %T", st)
	}
	return ks, nil
}

// optimalQ returns the parameters at hyperparameters h with q at its optimum on the full data
// (Section 3.2), and the ELBO there.
func (q *vofProblem) optimalQ(ctx context.Context, h []float64) (*vof.Params, float64, error) {
	p, err := q.params(h)
	if err != nil {
		return nil, 0, err
	}
	st, err := q.kufStats(ctx, p, false, -1)
	if err != nil {
		return nil, 0, err
	}
	if p.Mean, p.Chol, err = vof.OptimalQ(q.mod, p, st.KY, st.KK, st.N, q.p.n); err != nil {
		return nil, 0, err
	}
	F, err := vof.ELBOKuf(q.mod, p, st, q.p.n, nil)
	return p, F, err
}

// collapsed is step 3's objective: the negative collapsed bound and its gradient in h.
func (q *vofProblem) collapsed(ctx context.Context) optimizer.Objective {
	return func(h, grad []float64) (float64, error) {
		p, err := q.params(h)
		if err != nil {
			return 0, err
		}
		st, err := q.kufStats(ctx, p, true, -1)
		if err != nil {
			return 0, err
		}
		if p.Mean, p.Chol, err = vof.OptimalQ(q.mod, p, st.KY, st.KK, st.N, q.p.n); err != nil {
			return 0, err
		}
		g := q.mod.NewGrad(q.M)
		F, err := vof.ELBOKuf(q.mod, p, st, q.p.n, g)
		if err != nil {
			return 0, err
		}
		pg := q.mod.PackGrad(p, g)
		for i := range h {
			grad[i] = -pg[i]
		}
		return -F, nil
	}
}

// vofAdam is step 4: Adam over the packed (theta, m, S) from q at its optimum for h0. It
// returns the final hyperparameters and the fit's trace.
func (r *run) vofAdam(ctx context.Context, q *vofProblem, vs *pb.VOFSettings, h0, hl, hu []float64) ([]float64, *fitted, error) {
	mod, M := q.mod, q.M
	maxIter := r.spec.maxIter()
	st := r.ck.Adam
	if st == nil {
		r.obs(Event{Phase: "start", Message: "variational posterior at the start hyperparameters"})
		p0, _, err := q.optimalQ(ctx, h0)
		if err != nil {
			return nil, nil, fmt.Errorf("start: %w", err)
		}
		st = optimizer.NewAdamState(mod.Pack(p0))
	}
	lower, upper := make([]float64, len(st.X)), make([]float64, len(st.X))
	copy(lower, hl)
	copy(upper, hu)
	for i := q.nh; i < len(lower); i++ {
		lower[i], upper[i] = -vofQBound, vofQBound
		if i >= q.nh+M && i < q.nh+2*M {
			lower[i], upper[i] = vofLogDiagLo, vofLogDiagHi
		}
	}
	fixed := mod.Basis == vof.Trig && vs.GetFixedGrid()
	var fixedGrid *vof.TrigGrid
	var fixedStats *vof.TrigStats
	if fixed {
		// a stays at its start: its box is the point.
		for k := q.nh - q.p.d; k < q.nh; k++ {
			lower[k], upper[k] = st.X[k], st.X[k]
		}
		a := make([]float64, q.p.d)
		for k := range a {
			a[k] = math.Exp(st.X[q.nh-q.p.d+k])
		}
		var err error
		if fixedGrid, err = vof.TrigGridForStep(mod, q.t1, q.seed^vofGridStream, 0); err != nil {
			return nil, nil, err
		}
		r.obs(Event{Phase: "gram", Message: fmt.Sprintf("fixed-grid statistics: %d frequencies per grid over %d shards", fixedGrid.NumPoints(), len(q.eng.Shards()))})
		if fixedStats, err = q.trigStats(ctx, fixedGrid, a, false, -1); err != nil {
			return nil, nil, err
		}
	}
	obj := func(x, grad []float64) (float64, error) {
		step := st.Iter
		p, err := mod.Unpack(x, M)
		if err != nil {
			return 0, err
		}
		g := mod.NewGrad(M)
		var F float64
		var n int
		switch {
		case mod.Basis == vof.Hermite:
			ks, err := q.kufStats(ctx, p, true, step)
			if err != nil {
				return 0, err
			}
			if n = ks.N; n > 0 {
				F, err = vof.ELBOKuf(mod, p, ks, q.p.n, g)
			}
			if err != nil {
				return 0, err
			}
		default:
			grid, ts := fixedGrid, fixedStats
			if !fixed {
				if grid, err = vof.TrigGridForStep(mod, q.t1, q.seed^vofGridStream, uint64(step)); err != nil {
					return 0, err
				}
				if ts, err = q.trigStats(ctx, grid, p.Feature, true, step); err != nil {
					return 0, err
				}
			}
			if n = ts.N; n > 0 {
				F, err = vof.ELBOTrig(mod, p, grid, ts, q.p.n, g)
			}
			if err != nil {
				return 0, err
			}
		}
		if n == 0 { // an empty minibatch: no step
			clear(grad)
			return 0, nil
		}
		for i, v := range mod.PackGrad(p, g) {
			grad[i] = -v
		}
		return -F, nil
	}
	set := optimizer.AdamSettings{
		LearningRate: orFloat(vs.GetLearningRate(), DefaultVOFLearningRate), MaxIter: maxIter,
		Schedule: optimizer.Schedule{Kind: "multistep", Decay: 0.1, Milestones: []float64{0.5, 0.7, 0.9}},
	}
	err := optimizer.MinimizeAdam(ctx, obj, st, lower, upper, set, func(s *optimizer.AdamState) error {
		for len(r.ck.Trace) < s.Iter {
			r.ck.Trace = append(r.ck.Trace, 0)
		}
		if s.Iter > 0 {
			r.ck.Trace[s.Iter-1] = s.F
		}
		r.ck.Adam = s
		r.obs(Event{Phase: "optimize", Iteration: s.Iter, MaxIter: maxIter, Objective: s.F / float64(q.p.n)})
		return r.save(ctx)
	})
	if err != nil {
		return nil, nil, fmt.Errorf("optimize: %w", err)
	}
	trace := append([]float64(nil), r.ck.Trace...)
	return append([]float64(nil), st.X[:q.nh]...), &fitted{trace: trace, iters: st.Iter, reason: adamReason(trace, q.p.n)}, nil
}

// trigStats runs one vof_trig map round on grid at feature parameters a (step 4c).
func (q *vofProblem) trigStats(ctx context.Context, grid *vof.TrigGrid, a []float64, featureGrad bool, step int) (*vof.TrigStats, error) {
	task := &tasks.VOFTrigTask{Grid: grid, A: a, Transform: q.p.tf, FeatureGrad: featureGrad}
	if q.rate > 0 && step >= 0 {
		task.Batch = tasks.VOFBatch{Rate: q.rate, Seed: q.seed ^ vofBatchStream, Step: uint64(step)}
	}
	st, err := q.eng.Reduce(ctx, task)
	if err != nil {
		return nil, fmt.Errorf("TrigVOF statistics pass: %w", err)
	}
	ts, ok := st.(*vof.TrigStats)
	if !ok {
		return nil, fmt.Errorf("TrigVOF statistics pass returned %T", st)
	}
	return ts, nil
}

// priorVariance is k(x, x) of the model at p: the sum of its kernel variances.
func priorVariance(p *vof.Params) float64 {
	var v float64
	for _, x := range p.Variances {
		v += x
	}
	return v
}
