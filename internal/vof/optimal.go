package vof

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/gpreduce/gpreduce/internal/linalg"
)

// OptimalQ returns the variational mean and covariance factor that maximise the ELBO at p's
// hyperparameters given statistics st of a batch of st.N rows (scaled to nTotal): with
// s = nTotal/N and A = I + (s/sigma^2) KK,
//
//	m* = (s/sigma^2) A^-1 KY,   S* = A^-1 (dense; Titsias 2009, Section 3.2 of the paper),
//	S*_jj = 1 / (1 + (s/sigma^2) KK_jj)   (diagonal S; m* is the same),
//
// so that ELBOKuf at the result is the collapsed bound, and its gradient in the
// hyperparameters is the gradient of the collapsed bound (the m and S gradients vanish). The
// dense factor L (S* = L L^T, L lower) is J U^-1 J for the Cholesky factor J A J = U^T U, with
// J the order reversal: A^-1 is never formed as a full matrix, only the triangular U^-1, and
// m* = L (L^T b) takes two triangular products with it. For a diagonal S, m* is one Cholesky
// solve with A. The factorisation and U^-1 go through the compute core (internal/linalg): at
// M = 3375 (15 Hermite features on each of 3 inputs) gonum's took 4.47 s per evaluation for
// the diagonal S and 11.4 s for the dense one (BenchmarkOptimalQ).
func OptimalQ(mod Model, p *Params, KY, KK []float64, n, nTotal int) (mean, chol []float64, err error) {
	M := len(KY)
	if len(KK) != M*M || n <= 0 {
		return nil, nil, fmt.Errorf("VOF optimal q: %d-vector with %d matrix entries over %d rows", M, len(KK), n)
	}
	c := float64(nTotal) / float64(n) / p.Noise
	// A, or for a dense S directly J A J (rows and columns in reverse order).
	r := func(i int) int { return i }
	if mod.Dense {
		r = func(i int) int { return M - 1 - i }
	}
	A := mat.NewSymDense(M, nil)
	for i := 0; i < M; i++ {
		for j := i; j < M; j++ {
			v := c * 0.5 * (KK[r(i)*M+r(j)] + KK[r(j)*M+r(i)])
			if i == j {
				v++
			}
			A.SetSym(i, j, v)
		}
	}
	b := make([]float64, M)
	for i := range KY {
		b[i] = c * KY[i]
	}
	if !mod.Dense {
		var ch linalg.Cholesky
		if !ch.Factorize(A) {
			return nil, nil, fmt.Errorf("VOF optimal q: I + KK/sigma^2 is not numerically positive definite (noise %g)", p.Noise)
		}
		var mv mat.VecDense
		if err := ch.SolveVecTo(&mv, mat.NewVecDense(M, b)); err != nil {
			return nil, nil, fmt.Errorf("VOF optimal q: %w", err)
		}
		mean = append([]float64(nil), mv.RawVector().Data...)
		chol = make([]float64, M)
		for j := range chol {
			chol[j] = 1 / sqrtPos(A.At(j, j))
		}
		return mean, chol, nil
	}
	// A holds J A J = U^T U; A^-1 = J U^-1 U^-T J, and L = J U^-1 J is lower triangular.
	var cr linalg.Cholesky
	if !cr.Factorize(A) {
		return nil, nil, fmt.Errorf("VOF optimal q: I + KK/sigma^2 is not numerically positive definite (noise %g)", p.Noise)
	}
	W := make([]float64, M*M)
	if err := cr.InverseUTo(W); err != nil {
		return nil, nil, fmt.Errorf("VOF optimal q: %w", err)
	}
	chol = make([]float64, M*M)
	for i := 0; i < M; i++ {
		for j := 0; j <= i; j++ {
			chol[i*M+j] = W[(M-1-i)*M+M-1-j]
		}
	}
	// m* = A^-1 b = L (L^T b), two triangular products with the factor just formed.
	t := make([]float64, M)
	for i := 0; i < M; i++ {
		for j, l := range chol[i*M : i*M+i+1] {
			t[j] += l * b[i]
		}
	}
	mean = make([]float64, M)
	for i := 0; i < M; i++ {
		var a float64
		for j, l := range chol[i*M : i*M+i+1] {
			a += l * t[j]
		}
		mean[i] = a
	}
	return mean, chol, nil
}

func sqrtPos(x float64) float64 {
	if x <= 0 {
		return 0
	}
	return math.Sqrt(x)
}
