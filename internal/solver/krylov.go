package solver

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/gpreduce/gpreduce/internal/linalg"
)

// VarianceGap watches a variance cache grow (BlockLanczos with its Step as the step
// function) at p probe inputs x_1..x_p, given their cross-covariance columns k_i = k(X, x_i)
// and prior variances k(x_i, x_i), for A = K + noise I. With c_i = Q^T k_i for the basis so
// far,
//
//	Upper_i = k(x_i, x_i) - c_i^T T^-1 c_i                      (the cache's variance, >= exact),
//	Lower_i = Upper_i - (||k_i||^2 - ||c_i||^2) / noise          (unexplored directions as noise only),
//
// the second treating A on the orthogonal complement of the Krylov space as noise I, the
// smallest it can be, so that it estimates the exact variance from below. Gap is the largest
// relative distance (Upper_i - Lower_i) / Upper_i over the probes: the cache's variances are
// at most about that fraction above the exact ones, and it falls to 0 as the cache becomes
// exact. c_i^T T^-1 c_i = ||L^-1 c_i||^2 grows by one block per step: with T = L L^T block
// lower bidiagonal, w_j = L_jj^-1 (c_{i,j} - L_{j,j-1} w_{j-1}) and the quadratic form gains
// ||w_j||^2, so the monitor costs one p x n x b_j product per step.
type VarianceGap struct {
	n, p        int
	cols        []float64 // n x p column-major
	prior, norm []float64 // k(x_i, x_i), ||k_i||^2
	noise       float64
	quad, proj  []float64 // c_i^T T^-1 c_i, ||c_i||^2
	w           []float64 // p x b_{j-1}: the last block of L^-1 c_i
	blocks      int
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
		norm: make([]float64, p), quad: make([]float64, p), proj: make([]float64, p)}
	for i := range g.norm {
		k := cols[i*n : (i+1)*n]
		g.norm[i] = dot(k, k)
	}
	return g, nil
}

// Step takes the basis's blocks not seen yet (a BlockLanczos step function that never stops
// the process).
func (g *VarianceGap) Step(k *BlockKrylov) bool {
	for ; g.blocks < k.Blocks(); g.blocks++ {
		q, ldiag, lsub, bj := k.Block(g.blocks)
		c := make([]float64, g.p*bj) // row i: c_i's block, Q_j^T k_i
		linalg.Gemm(blas.NoTrans, blas.Trans, 1, blas64.General{Rows: g.p, Cols: g.n, Stride: g.n, Data: g.cols},
			blas64.General{Rows: bj, Cols: g.n, Stride: g.n, Data: q}, 0, blas64.General{Rows: g.p, Cols: bj, Stride: bj, Data: c})
		bp := 0
		if lsub != nil {
			bp = len(lsub) / bj
		}
		for i := 0; i < g.p; i++ {
			ci := c[i*bj : (i+1)*bj]
			g.proj[i] += dot(ci, ci)
			if lsub != nil {
				wp := g.w[i*bp : (i+1)*bp]
				for r := range ci {
					ci[r] -= dot(lsub[r*bp:(r+1)*bp], wp)
				}
			}
			for r := range ci { // forward substitution with L_jj
				ci[r] = (ci[r] - dot(ldiag[r*bj:r*bj+r], ci[:r])) / ldiag[r*bj+r]
			}
			g.quad[i] += dot(ci, ci)
		}
		g.w = c
	}
	return false
}

// Gap returns max_i (Upper_i - Lower_i) / Upper_i after the steps taken so far (+Inf before
// the first step or when a cached variance is not positive).
func (g *VarianceGap) Gap() float64 {
	if g.blocks == 0 {
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
