package solver

import (
	"fmt"
	"math"
)

// LanczosBasis runs at most rank steps of the Lanczos process on the symmetric operator A
// from b with full reorthogonalisation (two passes of classical Gram-Schmidt against every
// earlier vector), the cache of LOVE (Pleiss et al. 2018; digest 004 §6). It returns
// Q = [q_1..q_r] (n x r, column-major, orthonormal, q_1 = b/||b||) and the tridiagonal
// T = Q^T A Q as its diagonal Diag (r) and off-diagonal Off (r-1):
//
//	w = A q_j - Off_{j-1} q_{j-1},  Diag_j = q_j^T w,  w -= Diag_j q_j,  reorthogonalise w,
//	Off_j = ||w||,  q_{j+1} = w / Off_j.
//
// Q T^-1 Q^T is then the Galerkin approximation of A^-1 on the Krylov space
// span{b, A b, ..., A^{r-1} b}; it satisfies Q T^-1 Q^T <= A^-1 for A positive definite, so
// variances computed from it are never below the exact ones. The process stops early, with
// r < rank, when Off_j <= tol * ||A q_1|| (an invariant subspace: the basis is then exact on it).
// Each step costs one single-column product with A.
func LanczosBasis(op Operator, b []float64, rank int, tol float64) (Q, Diag, Off []float64, r int, err error) {
	n := op.Dim()
	if len(b) != n || rank < 1 {
		return nil, nil, nil, 0, fmt.Errorf("lanczos basis: start of %d values for n = %d, rank %d", len(b), n, rank)
	}
	rank = min(rank, n)
	nb := math.Sqrt(dot(b, b))
	if !(nb > 0) || math.IsInf(nb, 0) {
		return nil, nil, nil, 0, fmt.Errorf("lanczos basis: start vector norm %v", nb)
	}
	Q = make([]float64, 0, n*rank)
	q := make([]float64, n)
	for i := range q {
		q[i] = b[i] / nb
	}
	w := make([]float64, n)
	scale := 0.0
	for j := 0; ; j++ {
		Q = append(Q, q...)
		if err := op.MulVecs(w, q, 1); err != nil {
			return nil, nil, nil, 0, fmt.Errorf("lanczos basis: step %d: %w", j+1, err)
		}
		if j == 0 {
			scale = math.Sqrt(dot(w, w))
		}
		if j > 0 {
			prev := Q[(j-1)*n : j*n]
			for i := range w {
				w[i] -= Off[j-1] * prev[i]
			}
		}
		a := dot(q, w)
		Diag = append(Diag, a)
		for i := range w {
			w[i] -= a * q[i]
		}
		for pass := 0; pass < 2; pass++ {
			for l := 0; l <= j; l++ {
				ql := Q[l*n : (l+1)*n]
				c := dot(ql, w)
				for i := range w {
					w[i] -= c * ql[i]
				}
			}
		}
		if j+1 == rank {
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

// reorthBreakdown is the relative curvature s^T A s / (s^T s) below which ReorthCG stops: the
// direction is numerically in the null space of A (noise-free kernel matrices are severely
// ill-conditioned; digest 003 §6).
const reorthBreakdown = 1e-13

// ReorthCG runs conjugate gradients on A x = b from x_0 = 0 with full A-reorthogonalisation of
// the search directions and returns the directions S = [s_1..s_P] and their images
// Z = A S = [z_1..z_P] (both n x P, column-major), the ingredients of KMCG (digest 003 §2.4-2.6;
// the solution itself is discarded). With r_0 = s_1 = b, step i computes
//
//	z_i = A s_i,  alpha_i = r_{i-1}^T r_{i-1} / s_i^T z_i,  r_i = r_{i-1} - alpha_i z_i,
//	s_{i+1} = r_i + (r_i^T r_i / r_{i-1}^T r_{i-1}) s_i,
//	s_{i+1} -= sum_{j<=i} (z_j^T s_{i+1} / s_j^T z_j) s_j        (A-orthogonalisation, digest 003 §3),
//
// which needs no extra products because Z is stored. It stops after maxIter directions, when
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
