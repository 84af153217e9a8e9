package solver

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"
)

// LanczosStep is called by LanczosBasis after step j (1-based) with the new basis vector q_j
// and the entries T_jj and T_{j,j-1} (0 for j = 1) of the tridiagonal; returning true ends
// the process with rank j.
type LanczosStep func(j int, q []float64, diag, off float64) bool

// LanczosBasis runs at most rank steps of the Lanczos process on the symmetric operator A
// from b with full reorthogonalisation (two passes of classical Gram-Schmidt against every
// earlier vector, as matrix-vector products), the cache of LOVE (Pleiss et al. 2018; used for
// the variances by Potapczynski et al. 2021, App. E). It returns Q = [q_1..q_r] (n x r,
// column-major, orthonormal, q_1 = b/||b||) and the tridiagonal T = Q^T A Q as its diagonal
// Diag (r) and off-diagonal Off (r-1):
//
//	w = A q_j - Off_{j-1} q_{j-1},  Diag_j = q_j^T w,  w -= Diag_j q_j,  reorthogonalise w,
//	Off_j = ||w||,  q_{j+1} = w / Off_j.
//
// Q T^-1 Q^T is then the Galerkin approximation of A^-1 on the Krylov space
// span{b, A b, ..., A^{r-1} b}; it satisfies Q T^-1 Q^T <= A^-1 for A positive definite, so
// variances computed from it are never below the exact ones. The process stops early, with
// r < rank, when Off_j <= tol * ||A q_1|| (an invariant subspace: the basis is then exact on
// it) or when step (which may be nil) returns true. Each step costs one single-column product
// with A and O(n j) for the reorthogonalisation.
func LanczosBasis(op Operator, b []float64, rank int, tol float64, step LanczosStep) (Q, Diag, Off []float64, r int, err error) {
	n := op.Dim()
	if len(b) != n || rank < 1 {
		return nil, nil, nil, 0, fmt.Errorf("lanczos basis: start of %d values for n = %d, rank %d", len(b), n, rank)
	}
	rank = min(rank, n)
	nb := math.Sqrt(dot(b, b))
	if !(nb > 0) || math.IsInf(nb, 0) {
		return nil, nil, nil, 0, fmt.Errorf("lanczos basis: start vector norm %v", nb)
	}
	Q = make([]float64, 0, n*min(rank, 128))
	q := make([]float64, n)
	for i := range q {
		q[i] = b[i] / nb
	}
	w := make([]float64, n)
	c := make([]float64, rank)
	scale := 0.0
	for j := 0; ; j++ {
		Q = append(Q, q...)
		if err := op.MulVecs(w, q, 1); err != nil {
			return nil, nil, nil, 0, fmt.Errorf("lanczos basis: step %d: %w", j+1, err)
		}
		if j == 0 {
			scale = math.Sqrt(dot(w, w))
		}
		off := 0.0
		if j > 0 {
			off = Off[j-1]
			prev := Q[(j-1)*n : j*n]
			for i := range w {
				w[i] -= off * prev[i]
			}
		}
		a := dot(q, w)
		Diag = append(Diag, a)
		for i := range w {
			w[i] -= a * q[i]
		}
		// Two passes of w -= Q (Q^T w); Q (n x (j+1), column-major) is Qr = Q^T row-major.
		Qr := blas64.General{Rows: j + 1, Cols: n, Stride: n, Data: Q}
		wv, cv := blas64.Vector{N: n, Inc: 1, Data: w}, blas64.Vector{N: j + 1, Inc: 1, Data: c[:j+1]}
		for pass := 0; pass < 2; pass++ {
			blas64.Gemv(blas.NoTrans, 1, Qr, wv, 0, cv)
			blas64.Gemv(blas.Trans, -1, Qr, cv, 1, wv)
		}
		if j+1 == rank || (step != nil && step(j+1, q, a, off)) {
			return Q, Diag, Off, j + 1, nil
		}
		beta := math.Sqrt(dot(w, w))
		if !(beta > tol*scale) {
			return Q, Diag, Off, j + 1, nil
		}
		Off = append(Off, beta)
		q = make([]float64, n)
		for i := range q {
			q[i] = w[i] / beta
		}
	}
}

// SymTridiagonal returns the r x r symmetric tridiagonal matrix with diagonal diag (r) and
// off-diagonal off (off[j] = T_{j+1,j}, at least r-1 entries), e.g. LanczosBasis's T.
func SymTridiagonal(diag, off []float64) *mat.SymDense {
	r := len(diag)
	T := mat.NewSymDense(r, nil)
	for j := 0; j < r; j++ {
		T.SetSym(j, j, diag[j])
		if j > 0 {
			T.SetSym(j, j-1, off[j-1])
		}
	}
	return T
}

// VarianceGap watches a Lanczos variance cache grow (LanczosBasis with its Step as the step
// function) at p probe inputs x_1..x_p, given their cross-covariance columns k_i = k(X, x_i)
// and prior variances k(x_i, x_i), for A = K + noise I. After r steps, with c_i = Q^T k_i,
//
//	Upper_i = k(x_i, x_i) - c_i^T T^-1 c_i                      (the cache's variance, >= exact),
//	Lower_i = Upper_i - (||k_i||^2 - ||c_i||^2) / noise          (unexplored directions as noise only),
//
// the second treating A on the orthogonal complement of the Krylov space as noise I, the
// smallest it can be, so that it estimates the exact variance from below. Gap is the largest
// relative distance (Upper_i - Lower_i) / Upper_i over the probes: the cache's variances are
// at most about that fraction above the exact ones, and it falls to 0 as the cache becomes
// exact. c_i^T T^-1 c_i is updated in O(p) per step from the LDL^T factors of the growing
// tridiagonal (T = L D L^T, L unit lower bidiagonal: l_j = T_{j,j-1} / D_{j-1},
// D_j = T_jj - l_j T_{j,j-1}, and w = L^-1 c adds w_j = c_{ij} - l_j w_{j-1}), so the
// monitor costs one n x p product per step.
type VarianceGap struct {
	n, p        int
	cols        []float64 // n x p column-major
	prior, norm []float64 // k(x_i, x_i), ||k_i||^2
	noise       float64
	quad, proj  []float64 // c_i^T T^-1 c_i, ||c_i||^2
	w           []float64 // last entry of L^-1 c_i
	d           float64   // last pivot D_j
	c           []float64
	steps       int
}

// NewVarianceGap returns a monitor for the probe columns cols (n x p, column-major) with prior
// variances prior (p) and the noise variance of A = K + noise I.
func NewVarianceGap(cols []float64, n int, prior []float64, noise float64) (*VarianceGap, error) {
	p := len(prior)
	if n < 1 || p < 1 || len(cols) != n*p {
		return nil, fmt.Errorf("variance gap: %d values for %d probe columns of %d rows", len(cols), p, n)
	}
	if !(noise > 0) || math.IsInf(noise, 0) {
		return nil, fmt.Errorf("variance gap: noise variance %v must be positive and finite", noise)
	}
	g := &VarianceGap{n: n, p: p, cols: cols, prior: prior, noise: noise,
		norm: make([]float64, p), quad: make([]float64, p), proj: make([]float64, p), w: make([]float64, p), c: make([]float64, p)}
	for i := range g.norm {
		k := cols[i*n : (i+1)*n]
		g.norm[i] = dot(k, k)
	}
	return g, nil
}

// Step takes Lanczos step j's vector q_j and tridiagonal entries (a LanczosStep that never
// stops the process).
func (g *VarianceGap) Step(j int, q []float64, diag, off float64) bool {
	K := blas64.General{Rows: g.p, Cols: g.n, Stride: g.n, Data: g.cols} // k_i^T as rows
	blas64.Gemv(blas.NoTrans, 1, K, blas64.Vector{N: g.n, Inc: 1, Data: q}, 0, blas64.Vector{N: g.p, Inc: 1, Data: g.c})
	l := 0.0
	if g.steps > 0 {
		l = off / g.d
	}
	g.d = diag - l*off
	for i, ci := range g.c {
		wi := ci - l*g.w[i]
		g.w[i] = wi
		g.quad[i] += wi * wi / g.d
		g.proj[i] += ci * ci
	}
	g.steps = j
	return false
}

// Gap returns max_i (Upper_i - Lower_i) / Upper_i after the steps taken so far (+Inf before
// the first step or when a cached variance is not positive).
func (g *VarianceGap) Gap() float64 {
	if g.steps == 0 {
		return math.Inf(1)
	}
	worst := 0.0
	for i := range g.quad {
		upper := g.prior[i] - g.quad[i]
		rest := math.Max(0, g.norm[i]-g.proj[i]) / g.noise
		if !(upper > 0) {
			if rest > 0 {
				return math.Inf(1)
			}
			continue
		}
		worst = math.Max(worst, rest/upper)
	}
	return worst
}

// reorthBreakdown is the relative curvature s^T A s / (s^T s) below which ReorthCG stops: the
// direction is numerically in the null space of A (noise-free kernel matrices are severely
// ill-conditioned; Bartels & Hennig 2020 use no such guard).
const reorthBreakdown = 1e-13

// ReorthCG runs conjugate gradients on A x = b from x_0 = 0 with full A-reorthogonalisation of
// the search directions and returns the directions S = [s_1..s_P] and their images
// Z = A S = [z_1..z_P] (both n x P, column-major), the ingredients of KMCG (Bartels & Hennig
// 2020, §3.2, Definition 3 and Algorithm 2; the solution itself is discarded). With
// r_0 = s_1 = b, step i computes
//
//	z_i = A s_i,  alpha_i = r_{i-1}^T r_{i-1} / s_i^T z_i,  r_i = r_{i-1} - alpha_i z_i,
//	s_{i+1} = r_i + (r_i^T r_i / r_{i-1}^T r_{i-1}) s_i,
//	s_{i+1} -= sum_{j<=i} (z_j^T s_{i+1} / s_j^T z_j) s_j        (A-orthogonalisation),
//
// our form of the paper's full reorthogonalisation (§4, not spelled out there), which needs no
// extra products because Z is stored. It stops after maxIter directions, when
// ||r_i|| <= tol ||b|| (the paper's rule with tol = 0.01), or before adding a direction whose
// curvature s^T A s / s^T s falls below 1e-13 times that of b (numerical breakdown).
func ReorthCG(op Operator, b []float64, maxIter int, tol float64) (S, Z []float64, P int, err error) {
	n := op.Dim()
	if len(b) != n || maxIter < 1 || !(tol >= 0) {
		return nil, nil, 0, fmt.Errorf("reorthogonalised CG: %d values for n = %d, maxIter %d, tol %v", len(b), n, maxIter, tol)
	}
	bn := math.Sqrt(dot(b, b))
	if !(bn > 0) || math.IsInf(bn, 0) {
		return nil, nil, 0, fmt.Errorf("reorthogonalised CG: right-hand side norm %v", bn)
	}
	maxIter = min(maxIter, n)
	r := append([]float64(nil), b...)
	s := append([]float64(nil), b...)
	z := make([]float64, n)
	sz := make([]float64, 0, maxIter) // s_j^T z_j
	rr := dot(r, r)
	scale := 0.0
	for i := 0; i < maxIter; i++ {
		if err := op.MulVecs(z, s, 1); err != nil {
			return nil, nil, 0, fmt.Errorf("reorthogonalised CG: step %d: %w", i+1, err)
		}
		c, ss := dot(s, z), dot(s, s)
		if i == 0 {
			scale = c / ss
			if !(scale > 0) {
				return nil, nil, 0, fmt.Errorf("reorthogonalised CG: b^T A b = %v is not positive", c)
			}
		}
		if !(c > reorthBreakdown*scale*ss) {
			break
		}
		S = append(S, s...)
		Z = append(Z, z...)
		sz = append(sz, c)
		P = i + 1
		alpha := rr / c
		for t := range r {
			r[t] -= alpha * z[t]
		}
		rrNew := dot(r, r)
		if math.Sqrt(rrNew) <= tol*bn || P == maxIter {
			break
		}
		beta := rrNew / rr
		rr = rrNew
		next := make([]float64, n)
		for t := range next {
			next[t] = r[t] + beta*s[t]
		}
		for j := 0; j < P; j++ {
			zj := Z[j*n : (j+1)*n]
			sj := S[j*n : (j+1)*n]
			f := dot(zj, next) / sz[j]
			for t := range next {
				next[t] -= f * sj[t]
			}
		}
		s = next
	}
	if P == 0 {
		return nil, nil, 0, fmt.Errorf("reorthogonalised CG: no usable direction")
	}
	return S, Z, P, nil
}
