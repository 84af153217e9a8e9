package train

// GP-GRIEF (paper 001, Evans & Nair 2018; digest 001). A product kernel is replaced by its
// top-p Nystrom eigenfunctions on a Cartesian inducing grid of m = prod_i m_i points, which
// Kronecker and Khatri-Rao structure make cheap to evaluate without ever forming m
// (features.GRIEF). With the base-kernel hyperparameters theta fixed, one pass over the data
// gives A = Phi^T Phi, r = Phi^T y, y^T y and n; after the eigendecomposition of A (the SVD of
// Phi) the log marginal likelihood of the re-weighted kernel Phi~ W Phi~^T + s2 I and all its
// p~ + 1 derivatives cost O(p) (digest §2.3), so the weights and the noise are learnt, by
// maximum likelihood (type II) or by MALA sampling (type I), without touching the data again.
//
// The algorithm, step by step:
//
//  1. moments pass (standardization; run.prepare);
//  2. grid: a distinct-values pass (capped at m_bar + 1 per column, on the raw columns, then
//     standardized with the transform) and the standardized column extremes place m_i =
//     min(m_bar, #distinct_i) points per column (features.GRIEFGrid, digest §1.2);
//  3. theta: the exact GP's likelihood maximised on a seeded random sample of min(n, 1000)
//     rows (digest §2.4, "initialisation"), within the spec's bounds: lengthscales, signal
//     variance, and the initial noise sigma0^2. theta stays fixed from here on;
//  4. the map: features.NewGRIEF (Algorithm 1 picks the p largest product eigenvalues once,
//     here, so every worker uses the same selection; digest pitfall 4);
//  5. one Gram pass (GramTask with the GRIEF map): A, r, y^T y, n;
//  6. the transformed basis: A = V D V^T, kept where D_i > 1e-12 max D (a relative threshold,
//     digest §3), Sigma~ = D^(1/2), r~ = Sigma~^-1 V~^T r;
//  7. type II: box-constrained L-BFGS over (log w~, log s2), or type I: MALA over the same
//     variables with the paper's log-normal priors; both O(p) per evaluation;
//  8. the posterior (digest §2.5): beta and C such that the latent mean is phi(x) beta and the
//     latent variance phi(x) C phi(x)^T.
//
// Weights live in the transformed basis phi~(x) = phi(x) V~ Sigma~^-1, where the base GRIEF
// kernel (eq. 3, w = 1 on the eigenfunctions) is w~_i = Sigma~_ii^2, not w~ = 1 (digest §2.3,
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

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/features"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/model"
	"github.com/gpreduce/gpreduce/internal/optimizer"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
)

const (
	// griefInitRows is the size of the random subsample the exact GP initialises theta on.
	griefInitRows = 1000
	// griefRelEig drops eigenvalues of A below this fraction of the largest (digest §3:
	// forming A squares Phi's condition number, so smaller ones are rounding noise).
	griefRelEig = 1e-12
	// griefLogWBox bounds type II's log w~_i to log Sigma~_ii^2 +- griefLogWBox.
	griefLogWBox = 15
	// MALA as in the paper (digest §2.4): burn-in and thinning; the default number of
	// retained samples is DefaultGRIEFSamples, giving 1000 + 180*50 = 10000 iterations.
	griefBurnIn = 1000
	griefThin   = 50
	// Log-normal priors {mode, variance} (digest §2.4): on omega_i = w~_i / Sigma~_ii^2
	// {1, 100} (mode 1 = the base kernel; the digest's suggested deviation from the paper's
	// prior on w itself), on s2 {sigma0^2, 0.04}.
	griefWPriorVar     = 100
	griefNoisePriorVar = 0.04
)

func (r *run) trainGRIEF(ctx context.Context, eng engine.Engine, p *prepared) (*model.Model, error) {
	spec, obs := r.spec, r.obs
	fam, _ := kernel.ParseFamily(spec.Kernel)
	d := p.d

	// Step 2: the inducing grid.
	grid, err := r.griefGrid(ctx, eng, p)
	if err != nil {
		return nil, fmt.Errorf("grief: %w", err)
	}

	// Step 3: theta from the exact GP on a random subsample.
	h, err := r.griefInit(ctx, eng, p, fam)
	if err != nil {
		return nil, fmt.Errorf("grief: %w", err)
	}

	// Step 4: the eigenfunction map, fixed from here on.
	g, err := features.NewGRIEF(fam, h.Lengthscales, h.SignalVariance, grid, spec.griefP())
	if err != nil {
		return nil, fmt.Errorf("grief: %w", err)
	}
	np := g.NumFeatures()
	sizes := make([]int, d)
	for k := range grid {
		sizes[k] = len(grid[k])
	}
	obs(Event{Phase: "sizing", Message: fmt.Sprintf("%d eigenfunctions on a grid of %v points per dimension; lengthscales %s, signal variance %.4g, noise %.4g",
		np, sizes, fmtFloats(h.Lengthscales), h.SignalVariance, h.NoiseVariance)})

	// Step 5: one Gram pass, unless the checkpoint carries it.
	gram := r.ck.Gram
	if r.ck.Phase < phaseStats || gram == nil || gram.S != np {
		obs(Event{Phase: "gram", Message: fmt.Sprintf("Gram pass: %d x %d per shard over %d shards", np, np, len(eng.Shards()))})
		st, err := eng.Reduce(ctx, &GramTask{Features: g, Transform: p.tf})
		if err != nil {
			return nil, fmt.Errorf("grief: Gram pass: %w", err)
		}
		var ok bool
		if gram, ok = st.(*reduce.Gram); !ok {
			return nil, fmt.Errorf("grief: Gram pass returned %T", st)
		}
		if r.ck.Phase < phaseStats {
			r.ck.Phase = phaseStats
			if int64(np)*int64(np)*8 <= r.hooks.MaxStatsBytes {
				r.ck.Gram = gram
			}
			if err := r.save(ctx); err != nil {
				return nil, err
			}
		}
	}

	// Step 6: the transformed basis.
	b, err := newGRIEFBasis(gram)
	if err != nil {
		return nil, fmt.Errorf("grief: %w", err)
	}
	obs(Event{Phase: "basis", Message: fmt.Sprintf("transformed basis of rank %d of %d", b.pt, b.p)})

	// Step 7 and 8: inference over (log w~, log s2) and the posterior.
	var post *model.GRIEFPost
	var lml, noise float64
	fit := &fitted{theta: make([]float64, d+2)}
	switch spec.griefInference() {
	case "type2":
		post, lml, noise, err = r.griefType2(ctx, b, h.NoiseVariance, p, fit)
	case "type1":
		post, lml, noise, err = r.griefType1(ctx, b, h.NoiseVariance, fit)
	default:
		err = fmt.Errorf("inference: unknown inference %q", spec.Inference)
	}
	if err != nil {
		return nil, fmt.Errorf("grief: %w", err)
	}
	for k, l := range h.Lengthscales {
		fit.theta[k] = math.Log(l)
	}
	fit.theta[d], fit.theta[d+1] = math.Log(h.SignalVariance), math.Log(noise)
	m := newModel(spec, p, fit, lml)
	m.GRIEF = &model.GRIEFParams{
		Lengthscales: g.Lengthscales, SignalVariance: g.SignalVariance,
		Grid: g.Grid, Q: g.Q, LogLam: g.LogLam, Idx: g.Idx, LogLamP: g.LogLamP,
	}
	m.GRIEFPost = post
	return m, nil
}

// griefGrid places the inducing grid from the standardized column extremes and the
// distinct values of each column (at most m_bar + 1 of them: more means "many").
func (r *run) griefGrid(ctx context.Context, eng engine.Engine, p *prepared) ([][]float64, error) {
	mbar := r.spec.griefGrid()
	lo, hi := p.lo, p.hi
	if lo == nil { // resumed: the extremes are not in the checkpoint
		q, err := prepare(ctx, eng, r.spec, r.obs)
		if err != nil {
			return nil, err
		}
		lo, hi = q.lo, q.hi
	}
	r.obs(Event{Phase: "grid", Message: fmt.Sprintf("distinct-values pass (up to %d per column)", mbar+1)})
	st, err := eng.Reduce(ctx, shard.DistinctTask{Cap: mbar})
	if err != nil {
		return nil, fmt.Errorf("distinct-values pass: %w", err)
	}
	dv, ok := st.(*reduce.Distinct)
	if !ok {
		return nil, fmt.Errorf("distinct-values pass returned %T", st)
	}
	if len(dv.Values) != p.d {
		return nil, fmt.Errorf("distinct-values pass gave %d columns, the data has %d", len(dv.Values), p.d)
	}
	distinct := make([][]float64, p.d)
	for k, vals := range dv.Values {
		distinct[k] = make([]float64, len(vals))
		for j, v := range vals {
			distinct[k][j] = (v - p.tf.XMean[k]) / p.tf.XScale[k]
		}
	}
	return features.GRIEFGrid(lo, hi, distinct, mbar)
}

// griefInit fits the exact GP on a seeded random sample of min(n, griefInitRows) rows and
// returns its hyperparameters (standardized units) as the fixed theta and sigma0^2.
func (r *run) griefInit(ctx context.Context, eng engine.Engine, p *prepared, fam kernel.Family) (model.Hyper, error) {
	theta, err := r.sampleInit(ctx, eng, p, fam, griefInitRows)
	if err != nil {
		return model.Hyper{}, err
	}
	return hyperOf(theta, p.d), nil
}

// sampleInit fits the exact GP by maximum likelihood (the start search, then box-constrained
// L-BFGS) on a random sample of min(n, rows) rows drawn by a seeded bottom-k pass, and returns
// its log-hyperparameters theta = (log l, log sigma_f^2, log sigma_n^2), standardized units.
func (r *run) sampleInit(ctx context.Context, eng engine.Engine, p *prepared, fam kernel.Family, rows int) ([]float64, error) {
	d := p.d
	st, err := eng.Reduce(ctx, shard.SampleTask{K: rows, Seed: r.spec.Seed})
	if err != nil {
		return nil, fmt.Errorf("sample pass: %w", err)
	}
	smp, ok := st.(*reduce.Sample)
	if !ok {
		return nil, fmt.Errorf("sample pass returned %T", st)
	}
	n := len(smp.Y)
	if n < 2 || len(smp.X) != n*d {
		return nil, fmt.Errorf("sample pass gave %d rows of %d values for d=%d", n, len(smp.X), d)
	}
	x, y := make([]float64, n*d), make([]float64, n)
	for i := 0; i < n; i++ {
		p.tf.ApplyRow(smp.X[i*d:(i+1)*d], x[i*d:(i+1)*d])
		y[i] = p.tf.Y(smp.Y[i])
	}
	r.obs(Event{Phase: "init", Message: fmt.Sprintf("exact GP on a random sample of %d rows for the kernel hyperparameters", n)})
	prob := &exactProblem{fam: fam, d: d, x: x, y: y}
	lower, upper := box(r.spec, d)
	theta, err := prob.fit(ctx, lower, upper, r.spec.maxIter())
	if err != nil {
		return nil, fmt.Errorf("initial hyperparameters: %w", err)
	}
	return theta, nil
}

// griefType2 maximises the likelihood over (log w~, log s2) from the base kernel.
func (r *run) griefType2(ctx context.Context, b *griefBasis, sn2 float64, p *prepared, fit *fitted) (*model.GRIEFPost, float64, float64, error) {
	pt := b.pt
	lower, upper := make([]float64, pt+1), make([]float64, pt+1)
	x0 := make([]float64, pt+1)
	for i := 0; i < pt; i++ {
		ls := math.Log(b.sig2[i])
		x0[i], lower[i], upper[i] = ls, ls-griefLogWBox, ls+griefLogWBox
	}
	lower[pt], upper[pt] = math.Log(r.spec.NoiseVarianceBounds[0]), math.Log(r.spec.NoiseVarianceBounds[1])
	x0[pt] = clamp(math.Log(sn2), lower[pt], upper[pt])
	if r.ck.Phase < phaseStarted { // the start is fixed, so run.optimize skips its search
		r.ck.Phase, r.ck.Start = phaseStarted, x0
		if err := r.save(ctx); err != nil {
			return nil, 0, 0, err
		}
	}
	obj := func(x, grad []float64) (float64, error) {
		f := b.lml(x, grad)
		for i := range grad {
			grad[i] = -grad[i]
		}
		return -f, nil
	}
	opt, err := r.optimize(ctx, obj, nil, lower, upper, p)
	if err != nil {
		return nil, 0, 0, err
	}
	fit.trace, fit.iters = opt.trace, opt.iters
	w, s2 := b.weights(opt.theta)
	beta, C := b.posterior(w, s2)
	return &model.GRIEFPost{Inference: "type2", Beta: beta, C: C, W: w}, b.lml(opt.theta, nil), s2, nil
}

// griefType1 samples (log w~, log s2) by MALA under the log-normal priors and averages the
// posterior over the retained samples (digest §2.4, §2.5).
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

// griefBasis is the transformed basis (digest §2.3): of A = Phi^T Phi = V D V^T it keeps the
// p~ eigenpairs with D_i > griefRelEig max D, in descending order; Sigma~^2 = D. Everything the
// loop needs is r~ = Sigma~^-1 V~^T r, y^T y - ||r~||^2, n and p~.
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
// grad is not nil, its gradient in x (digest §2.3 times the chain rule d/dlog v = v d/dv):
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
// (digest §2.5): beta = T (w .* r~ ./ (w + s2)), C = T diag(s2 w ./ (w + s2)) T^T, T = V~ Sigma~^-1.
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
	var TS mat.Dense
	TS.Mul(T, S)
	blas64.Gemm(blas.NoTrans, blas.Trans, 1, TS.RawMatrix(), T.RawMatrix(), 0, blas64.General{Rows: p, Cols: p, Stride: p, Data: C})
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
// with E = exp(s^2), variance = mode^2 (E^4 - E^3) and mu = log(mode) + s^2 (digest §2.4).
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
