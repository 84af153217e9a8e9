package train

// KMCG: conjugate gradients for kernel machines (Bartels & Hennig 2020, §3.2). CG runs on the
// noise-free kernel matrix K_M of M inducing rows X_M and only its search directions
// S = [s_1..s_P] are kept; they define the rank-P kernel
// k_hat(a, b) = k(a, X_M) S (S^T K_M S)^-1 S^T k(X_M, b) (eq. 14), which replaces k in the mean,
// a DTC-style variance and the evidence (eq. 15, the variance after it, eq. 16). Everything
// after CG is P x P.
// This implementation keeps the KMCG mean (eq. 15) but not its variance and evidence, which the
// paper finds poor against inducing-point baselines (Sec. 4.1; on grids the variance is about
// 100x too large) and which measured 7-21x the exact latent variance and an evidence 1110.6
// against the exact 769.6 on energy: variances come from the same adaptive Lanczos cache as
// cg's, and the reported log likelihood is the exact GP's at the final hyperparameters.
//
// The algorithm, step by step:
//
//  1. moments pass (run.prepare);
//  2. kernel hyperparameters: the exact GP's likelihood maximised on a seeded random sample of
//     min(n, kmcgStartRows = 2000) rows by the shared search (search.go). KMCG learns none:
//     the paper fits them on the exact GP of the data (Sec. 4), and the final model keeps
//     them, so its sample is twice the other methods' start (whose own objective then runs
//     on all n rows): on 2000 rows an evaluation is about 10 GFLOP. With the kernel setting
//     KernelAuto (the default) the search runs with the SE kernel and chooseKernel (kernelchoice.go)
//     then picks rbf, matern52 or matern32 by the log marginal likelihood on the same rows;
//  3. rows pass: the standardized rows come to the coordinator; when the sample held fewer
//     than n rows, the choice is checked on all n rows (kernelOnAllRows): each family's log
//     likelihood at its sampled fit, the value step 10 reports (kmcgLogLik) with the same
//     probes for every family, and another family replaces the choice when higher by more
//     than two standard errors. As kmcg keeps the sampled fit, this compares the very
//     models it can return;
//  4. X_M: all rows (M = n, as in all the paper's experiments), or with subset M < n a seeded
//     random choice of M rows;
//  5. CG on K_M x = y_M from x_0 = 0 with full A-reorthogonalisation of the directions
//     (solver.ReorthCG), at most cg-iters directions, stopping at ||r|| <= cg-tol ||y_M||
//     (default 0.01, Definition 3). With M = n each product K s is a map round over the shards;
//     with M < n the M x M products run on the coordinator;
//  6. R = k(X, X_M) S: R = Z = K_M S when M = n (Algorithm 2 line 10), else one map round of
//     tasks.KernelMVM restricted to the columns X_M;
//  7. A1 = S^T Z, G = R^T R, b = R^T y, y^T y (all that eqs. 15-16 need). The noise variance
//     s2 is the sampled exact fit's. Only with kmcg-noise evidence is it refitted: S and Z do
//     not depend on the noise, so the evidence (eq. 16)
//     ln Z(s2) = -(y^T y - b^T beta)/(2 s2) - sum log diag L2 + sum log diag L1
//     - (n - P)/2 ln s2 - n/2 ln 2 pi,  L1 = chol(A1), L2 = chol(G + s2 A1), beta = (G + s2 A1)^-1 b,
//     is maximised over s2 inside its bounds at O(P^3) per evaluation (a 33-point grid in
//     log s2, then golden-section search). The paper finds the evidence estimate
//     non-monotone in P and overshooting (Sec. 4.1, Fig. 6) and never fits with it, hence it
//     is not the default;
//  8. the mean weights a = S beta on X_M (eq. 15), spread over all n rows (zero off X_M);
//  9. the variance cache of K_hat = K + s2 I over all n rows, as cg's (varianceCache);
//  10. the log likelihood at the final hyperparameters: the exact GP's (Cholesky on the
//     coordinator) when n <= exact-max-rows, else the SLQ estimate with its standard error
//     (as cg's, 10 probes) and a WarnEstimate warning;
//  11. with the Cholesky factor of step 10, the leave-one-out check of the exact GP at the
//     final hyperparameters (Rasmussen & Williams 2006, eq. 5.12; warnLOO), as exact's.
//
// The run has no iterations to checkpoint: a resumed run repeats it from the saved start.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/model"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/solver"
	"github.com/gpreduce/gpreduce/internal/tasks"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// kmcgStream keys the random choice of the inducing rows (kmcgStream + 1: the probes of the
// final log likelihood's estimate); kmcgKernelStream keys the probes of the kernel check on all
// rows, the same for every family.
const (
	kmcgStream       = 0x6b6d6367 << 32
	kmcgKernelStream = kmcgStream + 2
)

// kmcgStartRows is the size of the sample whose exact fit gives kmcg's hyperparameters.
const kmcgStartRows = 2000

// DefaultKMCGTol is KMCG's stopping rule ||r|| <= 0.01 ||y_M|| (Bartels & Hennig 2020, Definition 3)
// when the settings leave cg_tol at 0.
const DefaultKMCGTol = 0.01

func init() {
	register(Method{
		Name:     "kmcg",
		Summary:  "kernel machines by conjugate gradients: CG directions on (a subset of) the rows, no optimizer loop",
		Settings: func() proto.Message { return &pb.KMCGSettings{} },
		Tasks:    []string{"moments", "sample", "rows", "kernel"},
		Draws:    "subset",
		// kmcg's hyperparameters are the exact GP's on a sample: the evidence choice applies.
		ChoosesKernel: true,
		validate:      validateKMCG,
		train: func(ctx context.Context, r *run, eng engine.Engine, p *prepared) (*model.Model, error) {
			return r.trainKMCG(ctx, eng, p)
		},
	})
}

// kmcgSettings is the spec's *pb.KMCGSettings, or the defaults.
func kmcgSettings(s *Spec) *pb.KMCGSettings {
	if g, ok := s.Settings.(*pb.KMCGSettings); ok && g != nil {
		return g
	}
	return &pb.KMCGSettings{}
}

// validateKMCG checks kmcg's settings.
func validateKMCG(s *Spec, _ int) error {
	k := kmcgSettings(s)
	switch k.GetKmcgNoise() {
	case "", "start", "evidence":
	default:
		return fmt.Errorf("kmcg-noise: unknown choice %q; use start (keep the sampled exact fit's noise) or evidence (refit by the KMCG evidence, eq. 16)", k.GetKmcgNoise())
	}
	switch {
	case k.GetCgIters() < 0:
		return fmt.Errorf("cg-iters: %d is negative; give a positive number (or 0 for the default %d)", k.GetCgIters(), DefaultCGIters)
	case k.GetCgTol() < 0 || k.GetCgTol() >= 1 || math.IsNaN(k.GetCgTol()):
		return fmt.Errorf("cg-tol: %g must lie in (0, 1)", k.GetCgTol())
	case k.GetSubset() < 0:
		return fmt.Errorf("subset: %d is negative; give the number of inducing rows M (or 0 for all rows)", k.GetSubset())
	case k.GetVarianceRank() < 0:
		return fmt.Errorf("variance-rank: %d is negative; give a positive rank (or 0 for the adaptive rank)", k.GetVarianceRank())
	}
	return nonNegative(k)
}

func (r *run) trainKMCG(ctx context.Context, eng engine.Engine, p *prepared) (*model.Model, error) {
	spec, obs := r.spec, r.obs
	ks := kmcgSettings(&spec)
	// The CG settings kmcg shares: P as cg_iters, the variance cache's rank; the other CG
	// settings (the log-likelihood estimate's probes and preconditioner) keep cg's defaults.
	cs := &pb.CGSettings{Truncation: "fixed", CgIters: ks.GetCgIters(), VarianceRank: ks.GetVarianceRank()}
	d, n := p.d, p.n

	// Step 2: the kernel hyperparameters from the exact fit on min(n, kmcgStartRows) sampled
	// rows, and with KernelAuto (the default) the family by the evidence on the same rows.
	lower, upper := box(spec, d)
	fam, x0, kernelReason, err := r.searchKernel(ctx, eng, p, &spec, lower, upper, kmcgStartRows)
	if err != nil {
		return nil, fmt.Errorf("kmcg: %w", err)
	}

	// Step 3: the rows, and the kernel choice checked on all of them.
	x, y, offsets, err := gatherRows(ctx, eng, p)
	if err != nil {
		return nil, fmt.Errorf("kmcg: %w", err)
	}
	ll := newKMCGLogLik(ctx, eng, spec, cs, ks, d, x, y, offsets)
	check := ll.allRowsLML(spec.Seed)
	if fam, x0, kernelReason, err = r.kernelOnAllRows(ctx, &spec, n, kmcgStartRows, fam, x0, kernelReason, check); err != nil {
		return nil, fmt.Errorf("kmcg: %w", err)
	}
	h := hyperOf(x0, d)
	kern := kernel.Kernel{Family: fam, Lengthscales: h.Lengthscales, SignalVariance: h.SignalVariance}
	op := &tasks.KernelOp{Kernel: kern, X: x, Offsets: offsets}

	// Steps 4-6: X_M, the CG directions and R.
	M := int(ks.GetSubset())
	if M == 0 || M >= n {
		M = n
	}
	tol := orFloat(ks.GetCgTol(), DefaultKMCGTol)
	obs(Event{Phase: "sizing", Message: fmt.Sprintf("KMCG on %d of %d rows, at most %d directions, stop at relative residual %g", M, n, cgIters(cs), tol)})
	var S, Z, R, xm []float64
	var P int
	if M == n {
		xm = x
		S, Z, P, err = solver.ReorthCG(&kernelOperator{ctx: ctx, eng: eng, op: op}, y, cgIters(cs), tol)
		if err != nil {
			return nil, fmt.Errorf("kmcg: %w", err)
		}
		R = Z
	} else {
		idx := kmcgSubset(n, M, spec.Seed)
		xm = make([]float64, M*d)
		ym := make([]float64, M)
		for i, j := range idx {
			copy(xm[i*d:(i+1)*d], x[j*d:(j+1)*d])
			ym[i] = y[j]
		}
		local := &localKernel{ctx: ctx, op: &tasks.KernelOp{Kernel: kern, X: xm, Offsets: []int{0, M}}}
		S, Z, P, err = solver.ReorthCG(local, ym, cgIters(cs), tol)
		if err != nil {
			return nil, fmt.Errorf("kmcg: %w", err)
		}
		st, err := eng.Reduce(ctx, &tasks.KernelTask{Op: op, Kind: tasks.KernelMVM, K: P, V: S, Idx: idx})
		if err != nil {
			return nil, fmt.Errorf("kmcg: R = k(X, X_M) S: %w", err)
		}
		rows, ok := st.(*reduce.Rows)
		if !ok || rows.D != P || len(rows.X) != n*P {
			return nil, fmt.Errorf("kmcg: R = k(X, X_M) S: the shards returned %T with the wrong shape", st)
		}
		R = make([]float64, n*P) // column-major like Z
		columnsOf(R, rows.X, n, P)
	}
	// Step 7: the P x P statistics and the noise.
	post, err := newKMCGPost(S, Z, R, y, M, P)
	if err != nil {
		return nil, fmt.Errorf("kmcg: %w", err)
	}
	theta := append([]float64(nil), x0...)
	s2 := h.NoiseVariance
	if ks.GetKmcgNoise() == "evidence" {
		obs(Event{Phase: "fit", Message: fmt.Sprintf("%d CG directions; refitting the noise by the KMCG evidence (eq. 16) at O(P^3)", P)})
		lo, hi := math.Log(spec.NoiseVarianceBounds[0]), math.Log(spec.NoiseVarianceBounds[1])
		s2 = math.Exp(maximize1D(func(u float64) float64 {
			v, err := post.evidence(math.Exp(u))
			if err != nil {
				return math.Inf(-1)
			}
			return v
		}, lo, hi))
		theta[d+1] = math.Log(s2)
	} else {
		obs(Event{Phase: "fit", Message: fmt.Sprintf("%d CG directions", P)})
	}

	// Step 8: the mean weights (eq. 15), on all n rows when X_M is a subset.
	am, err := post.weights(s2)
	if err != nil {
		return nil, fmt.Errorf("kmcg: %w", err)
	}
	alpha := am
	if M < n {
		alpha = make([]float64, n)
		for i, j := range kmcgSubset(n, M, spec.Seed) {
			alpha[j] = am[i]
		}
	}

	// Step 9: the variance cache of K_hat at (theta, s2).
	kop := &kernelOperator{ctx: ctx, eng: eng, op: op, noise: s2}
	vc, err := varianceCache(kop, y, spec.Seed, int(cs.GetVarianceRank()), obs)
	if err != nil {
		return nil, fmt.Errorf("kmcg: %w", err)
	}

	// Step 10: the log likelihood at the final hyperparameters.
	if ll.exact != nil {
		obs(Event{Phase: "fit", Message: fmt.Sprintf("exact log likelihood at the final hyperparameters (n = %d <= exact-max-rows %d)", n, orInt(int(ks.GetExactMaxRows()), DefaultExactMaxRows))})
	}
	lml, se, warns, err := ll.at(fam, theta, rand.New(rand.NewPCG(spec.Seed, kmcgStream+1)), obs)
	if err != nil {
		return nil, fmt.Errorf("kmcg: log likelihood: %w", err)
	}

	m := newModel(spec, p, &fitted{theta: theta}, lml)
	m.KernelReason = kernelReason
	m.LogLikSE = se
	m.Posterior = &model.ExpansionPosterior{Expansion: &solver.ExpansionPredictor{Kernel: kern, X: x, D: d, Alpha: alpha, Minus: vc.minus, RMinus: vc.rank}}
	for _, w := range append(warns, vc.warnings...) {
		m.Warn(w.Code, "%s", w.Message)
	}
	r.warnFit(m, p, theta, lower, upper, "")
	// Step 11: the leave-one-out check (R&W eq. 5.12) of the exact GP at these
	// hyperparameters, from step 10's Cholesky factor: kmcg predicts with that GP's variances
	// (to the cache's gap) and a mean that approaches its mean as CG converges (with a
	// subset, a subset's solve), so a kernel or noise model that does not fit the data shows
	// in the same residuals. The warning says which model was checked. Above exact-max-rows
	// there is no factor and no check.
	if ll.last != nil {
		resid, variance, err := ll.last.LOO()
		if err != nil {
			return nil, fmt.Errorf("kmcg: %w", err)
		}
		warnLOO(m, resid, variance, " of the exact GP at these hyperparameters (kmcg predicts with its variances)")
	}
	return m, nil
}

// kmcgLogLik is the exact GP's log marginal likelihood of kmcg's standardized rows (step 10
// and the kernel check of step 3): exact's Cholesky value (exactProblem, standard error 0) when
// n <= exact-max-rows, else cg's estimate (cgProblem.solveMean: the preconditioned batched CG
// solve with stochastic Lanczos quadrature over the probes) with its standard error and a
// WarnEstimate warning. Exactly one of exact and cg is set.
type kmcgLogLik struct {
	exact *exactProblem
	cg    *cgProblem
	// last is the exact GP of at's last call with exact set: step 10's, as nothing calls at
	// after it (the kernel check of step 3 goes through exact.allRowsLML). It shares the
	// exactProblem's workspace, so it is valid until the next build (solver.NewExactIn).
	last *solver.Exact
}

func newKMCGLogLik(ctx context.Context, eng engine.Engine, spec Spec, cs *pb.CGSettings, ks *pb.KMCGSettings, d int, x, y []float64, offsets []int) *kmcgLogLik {
	n := len(y)
	if n <= orInt(int(ks.GetExactMaxRows()), DefaultExactMaxRows) {
		return &kmcgLogLik{exact: &exactProblem{d: d, x: x, y: y}}
	}
	return &kmcgLogLik{cg: &cgProblem{ctx: ctx, eng: eng, d: d, n: n, x: x, y: y, offsets: offsets, spec: spec, cg: cs}}
}

// at is the log likelihood with kernel family f at theta = (log l, log sigma_f^2, log
// sigma_n^2), its standard error and warnings; rng draws the probes of the estimate.
func (l *kmcgLogLik) at(f kernel.Family, theta []float64, rng *rand.Rand, obs Observer) (float64, float64, []model.Warning, error) {
	if l.exact != nil {
		l.exact.fam = f
		ex, err := l.exact.build(theta)
		if err != nil {
			return 0, 0, nil, err
		}
		l.last = ex
		return ex.LogMarginalLikelihood(), 0, nil, nil
	}
	l.cg.fam = f
	lp, _, _, err := l.cg.solveMean(theta, rng, obs)
	if err != nil {
		return 0, 0, nil, err
	}
	return lp.lml, lp.se, lp.warnings, nil
}

// allRowsLML is at for kernelOnAllRows: exact's check with the Cholesky value (a family whose
// K_hat is not positive definite loses), else the estimate with the same probes
// (kmcgKernelStream) for every family.
func (l *kmcgLogLik) allRowsLML(seed uint64) func(kernel.Family, []float64) (float64, float64, error) {
	if l.exact != nil {
		return l.exact.allRowsLML
	}
	return func(f kernel.Family, theta []float64) (float64, float64, error) {
		v, se, _, err := l.at(f, theta, rand.New(rand.NewPCG(seed, kmcgKernelStream)), func(Event) {})
		return v, se, err
	}
}

// kmcgSubset returns M distinct row indices out of n, increasing, drawn with the seed.
func kmcgSubset(n, M int, seed uint64) []int {
	rng := rand.New(rand.NewPCG(seed, kmcgStream))
	idx := rng.Perm(n)[:M]
	slices.Sort(idx)
	return idx
}

// localKernel is the noise-free K_M of a tasks.KernelOp on the coordinator as a solver.Operator.
type localKernel struct {
	ctx context.Context
	op  *tasks.KernelOp
}

func (l *localKernel) Dim() int { return l.op.N() }

func (l *localKernel) MulVecs(dst, src []float64, k int) error {
	st, err := (&tasks.KernelTask{Op: l.op, Kind: tasks.KernelMVM, K: k, V: src}).Map(l.ctx, shard.Ref{Index: 0}, nil)
	if err != nil {
		return err
	}
	columnsOf(dst, st.(*reduce.Rows).X, l.op.N(), k)
	return nil
}

// kmcgPost holds KMCG's noise-independent P x P statistics, from which eqs. 15-16 of Bartels &
// Hennig 2020 follow for any s2 at O(P^3) (derived here; S and Z do not depend on the noise).
type kmcgPost struct {
	n, m, p int
	S       []float64 // m x p column-major
	A1      *mat.SymDense
	L1      mat.Cholesky
	G       *mat.SymDense // R^T R
	b       []float64     // R^T y
	yy      float64
}

func newKMCGPost(S, Z, R, y []float64, m, p int) (*kmcgPost, error) {
	n := len(y)
	// Scale each direction to unit K_M-norm, s_i / sqrt(s_i^T z_i) (and z_i, r_i alike): the
	// posterior depends on span(S) only (eqs. 14-16 are invariant under S -> S B, B
	// invertible), and CG directions differ in norm by many orders of magnitude, which would
	// make A1 and A2 needlessly ill-conditioned.
	scale := make([]float64, p)
	for i := range scale {
		c := floats.Dot(S[i*m:(i+1)*m], Z[i*m:(i+1)*m])
		if !(c > 0) {
			return nil, fmt.Errorf("direction %d has curvature s^T K_M s = %g", i+1, c)
		}
		scale[i] = 1 / math.Sqrt(c)
	}
	scaled := func(v []float64, rows int) []float64 {
		out := make([]float64, len(v))
		for i := 0; i < p; i++ {
			for j := 0; j < rows; j++ {
				out[i*rows+j] = v[i*rows+j] * scale[i]
			}
		}
		return out
	}
	S, Z, R = scaled(S, m), scaled(Z, m), scaled(R, n)
	k := &kmcgPost{n: n, m: m, p: p, S: S, A1: mat.NewSymDense(p, nil), G: mat.NewSymDense(p, nil), b: make([]float64, p), yy: floats.Dot(y, y)}
	for i := 0; i < p; i++ {
		for j := 0; j <= i; j++ {
			// A1 = S^T Z, symmetrised: diagonal in exact arithmetic (the directions are K_M-conjugate).
			a := 0.5 * (floats.Dot(S[i*m:(i+1)*m], Z[j*m:(j+1)*m]) + floats.Dot(S[j*m:(j+1)*m], Z[i*m:(i+1)*m]))
			k.A1.SetSym(i, j, a)
			k.G.SetSym(i, j, floats.Dot(R[i*n:(i+1)*n], R[j*n:(j+1)*n]))
		}
		k.b[i] = floats.Dot(R[i*n:(i+1)*n], y)
	}
	if !k.L1.Factorize(k.A1) {
		return nil, fmt.Errorf("S^T K_M S of rank %d is not positive definite: the directions lost conjugacy", p)
	}
	return k, nil
}

// factor returns the Cholesky factor of A2 = G + s2 A1 and beta = A2^-1 b.
func (k *kmcgPost) factor(s2 float64) (*mat.Cholesky, []float64, error) {
	A2 := mat.NewSymDense(k.p, nil)
	A2.AddSym(k.G, scaledSym(k.A1, s2))
	var L2 mat.Cholesky
	if !L2.Factorize(A2) {
		return nil, nil, fmt.Errorf("R^T R + s2 S^T K_M S is not positive definite at s2 = %g", s2)
	}
	var beta mat.VecDense
	if err := L2.SolveVecTo(&beta, mat.NewVecDense(k.p, append([]float64(nil), k.b...))); err != nil {
		return nil, nil, err
	}
	return &L2, beta.RawVector().Data, nil
}

func scaledSym(a *mat.SymDense, s float64) *mat.SymDense {
	out := mat.NewSymDense(a.SymmetricDim(), nil)
	out.ScaleSym(s, a)
	return out
}

// evidence is eq. 16: ln Z_hat at noise variance s2.
func (k *kmcgPost) evidence(s2 float64) (float64, error) {
	L2, beta, err := k.factor(s2)
	if err != nil {
		return 0, err
	}
	n, p := float64(k.n), float64(k.p)
	return -(k.yy-floats.Dot(k.b, beta))/(2*s2) - 0.5*L2.LogDet() + 0.5*k.L1.LogDet() - 0.5*(n-p)*math.Log(s2) - 0.5*n*math.Log(2*math.Pi), nil
}

// weights returns the mean weights a = S beta on X_M (eq. 15: mean(x) = k(x, X_M) a).
func (k *kmcgPost) weights(s2 float64) ([]float64, error) {
	_, beta, err := k.factor(s2)
	if err != nil {
		return nil, err
	}
	m, p := k.m, k.p
	alpha := make([]float64, m)
	for c := 0; c < p; c++ {
		sc := k.S[c*m : (c+1)*m]
		for i := range alpha {
			alpha[i] += beta[c] * sc[i]
		}
	}
	return alpha, nil
}

// rightSolveLT returns V L^-T (m x r, row-major) for V m x r column-major and the Cholesky
// factor L of an r x r matrix: the variance factors S L1^-T, S L2^-T of KMCG and Q L_T^-T of
// the LOVE cache.
func rightSolveLT(V []float64, m, r int, ch *mat.Cholesky) []float64 {
	out := make([]float64, m*r)
	for c := 0; c < r; c++ {
		for i := 0; i < m; i++ {
			out[i*r+c] = V[c*m+i]
		}
	}
	var L mat.TriDense
	ch.LTo(&L)
	blas64.Trsm(blas.Right, blas.Trans, 1, L.RawTriangular(), blas64.General{Rows: m, Cols: r, Stride: r, Data: out})
	return out
}

// maximize1D maximises f on [lo, hi]: a 33-point grid, then golden-section search between the
// best grid point's neighbours to a width of 1e-9 (f need not be concave overall).
func maximize1D(f func(float64) float64, lo, hi float64) float64 {
	if !(hi > lo) {
		return lo
	}
	const grid = 33
	best, bestF := 0, math.Inf(-1)
	h := (hi - lo) / (grid - 1)
	for i := 0; i < grid; i++ {
		if v := f(lo + float64(i)*h); v > bestF {
			best, bestF = i, v
		}
	}
	a, b := lo+float64(max(best-1, 0))*h, lo+float64(min(best+1, grid-1))*h
	g := (math.Sqrt(5) - 1) / 2
	c, d := b-g*(b-a), a+g*(b-a)
	fc, fd := f(c), f(d)
	for b-a > 1e-9 {
		if fc > fd {
			b, d, fd = d, c, fc
			c = b - g*(b-a)
			fc = f(c)
		} else {
			a, c, fc = c, d, fd
			d = a + g*(b-a)
			fd = f(d)
		}
	}
	x := (a + b) / 2
	if f(x) < bestF {
		return lo + float64(best)*h
	}
	return x
}
