package solver

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Operator is a symmetric positive definite n x n matrix A = K + sigma^2 I known only through
// products. MulVecs writes dst = A src for k column vectors stored column-major (n x k, column c
// at [c*n, (c+1)*n)). The products may be computed remotely, so callers batch columns.
type Operator interface {
	Dim() int
	MulVecs(dst, src []float64, k int) error
}

// Preconditioner is a symmetric positive definite n x n matrix P approximating an Operator,
// with cheap solves. Solve writes dst = P^-1 src for k column-major columns; LogDet returns
// log det P; Sample writes a draw z ~ N(0, P) of length n into dst.
type Preconditioner interface {
	Solve(dst, src []float64, k int)
	LogDet() float64
	Sample(rng *rand.Rand, dst []float64)
}

// CGResult is the outcome of BatchPCG for k right-hand sides b_c. For column c:
//
//	X[c*n:(c+1)*n] = x_J = sum_{j=1..J} alpha_j d_j,   J = Iters[c],
//
// the PCG iterate after J iterations from x_0 = 0. Alpha[c] holds alpha_1..alpha_J and Beta[c]
// holds beta_1..beta_{J-1}, where d_{j+1} = P^-1 r_j + beta_j d_j: exactly the coefficients the
// J x J Lanczos tridiagonal needs (LanczosTridiagonal). Converged[c] reports
// ||r_J|| <= tol ||b_c||; a zero column has J = 0, X = 0 and counts as converged.
type CGResult struct {
	X         []float64
	Iters     []int
	Alpha     [][]float64
	Beta      [][]float64
	Converged []bool
}

// BatchPCG solves A X = B by preconditioned conjugate gradients, B n x k column-major, with one
// Operator call per iteration for all columns still running (the active columns are packed
// contiguously, so the call has fewer than k columns once some have converged). With r_0 = b,
// z_0 = P^-1 r_0, d_1 = z_0, rho_0 = r_0^T z_0, iteration j = 1, 2, ... computes
//
//	v_j = A d_j,  alpha_j = rho_{j-1} / d_j^T v_j,  x_j = x_{j-1} + alpha_j d_j,  r_j = r_{j-1} - alpha_j v_j,
//	z_j = P^-1 r_j,  rho_j = r_j^T z_j,  beta_j = rho_j / rho_{j-1},  d_{j+1} = z_j + beta_j d_j.
//
// A column stops when its relative residual ||r_j|| / ||b|| <= tol or after maxIter iterations.
// precond == nil means P = I. It fails when A or P is not numerically positive definite along
// the search directions (d^T A d <= 0 or r^T P^-1 r <= 0).
func BatchPCG(op Operator, b []float64, k int, precond Preconditioner, maxIter int, tol float64) (*CGResult, error) {
	return batchPCG(op, b, k, precond, maxIter, tol, nil)
}

// cgStep is called once per column and iteration j with alpha_j and the direction d_j, after
// x_j has been formed.
type cgStep func(j, c int, alpha float64, d []float64)

func batchPCG(op Operator, b []float64, k int, precond Preconditioner, maxIter int, tol float64, step cgStep) (*CGResult, error) {
	n := op.Dim()
	if n <= 0 || k <= 0 {
		return nil, fmt.Errorf("pcg: dimension %d with %d right-hand sides", n, k)
	}
	if len(b) != n*k {
		return nil, fmt.Errorf("pcg: right-hand sides have %d values, want %d x %d", len(b), n, k)
	}
	if maxIter < 1 {
		return nil, fmt.Errorf("pcg: maxIter %d must be at least 1", maxIter)
	}
	if !(tol >= 0) {
		return nil, fmt.Errorf("pcg: tolerance %v must be non-negative", tol)
	}
	res := &CGResult{
		X:         make([]float64, n*k),
		Iters:     make([]int, k),
		Alpha:     make([][]float64, k),
		Beta:      make([][]float64, k),
		Converged: make([]bool, k),
	}
	r := append([]float64(nil), b...)
	z := make([]float64, n*k)
	d := make([]float64, n*k)
	rho := make([]float64, k)
	bnorm := make([]float64, k)
	col := func(v []float64, c int) []float64 { return v[c*n : (c+1)*n] }

	var active []int
	for c := 0; c < k; c++ {
		bnorm[c] = math.Sqrt(dot(col(b, c), col(b, c)))
		if bnorm[c] == 0 {
			res.Converged[c] = true
			continue
		}
		if math.IsNaN(bnorm[c]) || math.IsInf(bnorm[c], 0) {
			return nil, fmt.Errorf("pcg: right-hand side %d is not finite", c)
		}
		active = append(active, c)
	}
	src := make([]float64, n*len(active))
	dst := make([]float64, n*len(active))
	applyPrecond := func(cols []int) {
		if precond == nil {
			for _, c := range cols {
				copy(col(z, c), col(r, c))
			}
			return
		}
		for i, c := range cols {
			copy(src[i*n:(i+1)*n], col(r, c))
		}
		precond.Solve(dst[:n*len(cols)], src[:n*len(cols)], len(cols))
		for i, c := range cols {
			copy(col(z, c), dst[i*n:(i+1)*n])
		}
	}
	applyPrecond(active)
	for _, c := range active {
		copy(col(d, c), col(z, c))
		rho[c] = dot(col(r, c), col(z, c))
		if !(rho[c] > 0) {
			return nil, fmt.Errorf("pcg: preconditioner is not positive definite (r^T P^-1 r = %g, column %d)", rho[c], c)
		}
	}

	for j := 1; len(active) > 0; j++ {
		ka := len(active)
		for i, c := range active {
			copy(src[i*n:(i+1)*n], col(d, c))
		}
		if err := op.MulVecs(dst[:n*ka], src[:n*ka], ka); err != nil {
			return nil, fmt.Errorf("pcg: iteration %d: %w", j, err)
		}
		next := make([]int, 0, ka)
		for i, c := range active {
			v := dst[i*n : (i+1)*n]
			dc, xc, rc := col(d, c), col(res.X, c), col(r, c)
			dAd := dot(dc, v)
			if !(dAd > 0) {
				return nil, fmt.Errorf("pcg: operator is not positive definite (d^T A d = %g at iteration %d, column %d)", dAd, j, c)
			}
			a := rho[c] / dAd
			for t := range xc {
				xc[t] += a * dc[t]
				rc[t] -= a * v[t]
			}
			res.Alpha[c] = append(res.Alpha[c], a)
			res.Iters[c] = j
			if step != nil {
				step(j, c, a, dc)
			}
			if math.Sqrt(dot(rc, rc)) <= tol*bnorm[c] {
				res.Converged[c] = true
				continue
			}
			if j < maxIter {
				next = append(next, c)
			}
		}
		if len(next) == 0 {
			break
		}
		applyPrecond(next)
		for _, c := range next {
			zc, dc := col(z, c), col(d, c)
			rhoNew := dot(col(r, c), zc)
			if !(rhoNew > 0) {
				// r_j != 0 but r^T P^-1 r <= 0: P is not positive definite numerically.
				return nil, fmt.Errorf("pcg: preconditioner is not positive definite (r^T P^-1 r = %g at iteration %d, column %d)", rhoNew, j, c)
			}
			beta := rhoNew / rho[c]
			res.Beta[c] = append(res.Beta[c], beta)
			for t := range dc {
				dc[t] = zc[t] + beta*dc[t]
			}
			rho[c] = rhoNew
		}
		active = next
	}
	return res, nil
}
