package solver

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"
)

// slqTol is the relative residual at which SLQLogDet stops a probe's CG run. Stopping there
// changes the quadrature by O(tol^2) relative to running all maxIter iterations.
const slqTol = 1e-10

// LanczosTridiagonal returns the J x J Lanczos tridiagonal T that (P)CG builds implicitly from
// its coefficients alpha_1..alpha_J and beta_1..beta_{J-1} (Gardner et al. 2018, digest 004 §1.4):
//
//	T_11 = 1/alpha_1,   T_jj = 1/alpha_j + beta_{j-1}/alpha_{j-1} (j >= 2),
//	T_{j,j-1} = T_{j-1,j} = sqrt(beta_{j-1}) / alpha_{j-1}.
//
// For PCG on A with preconditioner P started from b, T = Q^T (P^-1/2 A P^-1/2) Q with Q
// orthonormal and first column P^-1/2 b / ||P^-1/2 b||. beta may be longer than J - 1 (extra
// entries are ignored).
func LanczosTridiagonal(alpha, beta []float64) (*mat.SymDense, error) {
	J := len(alpha)
	if J == 0 {
		return nil, fmt.Errorf("lanczos: no CG coefficients")
	}
	if len(beta) < J-1 {
		return nil, fmt.Errorf("lanczos: %d beta coefficients for %d alphas", len(beta), J)
	}
	T := mat.NewSymDense(J, nil)
	for j := 0; j < J; j++ {
		if !(alpha[j] > 0) {
			return nil, fmt.Errorf("lanczos: alpha_%d = %v is not positive", j+1, alpha[j])
		}
		v := 1 / alpha[j]
		if j > 0 {
			if !(beta[j-1] >= 0) {
				return nil, fmt.Errorf("lanczos: beta_%d = %v is negative", j, beta[j-1])
			}
			v += beta[j-1] / alpha[j-1]
			T.SetSym(j, j-1, math.Sqrt(beta[j-1])/alpha[j-1])
		}
		T.SetSym(j, j, v)
	}
	return T, nil
}

// LanczosQuadrature returns the Gauss quadrature e_1^T f(T) e_1 = sum_k V_{1k}^2 f(theta_k) for
// the Lanczos tridiagonal T = V diag(theta) V^T of the CG coefficients (LanczosTridiagonal).
// Multiplied by b^T P^-1 b it approximates b^T P^-1/2 f(P^-1/2 A P^-1/2) P^-1/2 b; J = n
// iterations make it exact in exact arithmetic.
func LanczosQuadrature(alpha, beta []float64, f func(float64) float64) (float64, error) {
	T, err := LanczosTridiagonal(alpha, beta)
	if err != nil {
		return 0, err
	}
	var eig mat.EigenSym
	if !eig.Factorize(T, true) {
		return 0, fmt.Errorf("lanczos: eigendecomposition of the %d x %d tridiagonal failed", T.SymmetricDim(), T.SymmetricDim())
	}
	theta := eig.Values(nil)
	var V mat.Dense
	eig.VectorsTo(&V)
	q := 0.0
	for k, t := range theta {
		v := V.At(0, k)
		q += v * v * f(t)
	}
	return q, nil
}

// SLQLogDet estimates log det A for the operator A = K + sigma^2 I by preconditioned stochastic
// Lanczos quadrature (digest 004 §1.2, §1.4). With P the preconditioner (identity when nil),
// probes z_i ~ N(0, P) and w_i = P^-1/2 z_i ~ N(0, I),
//
//	log det A = log det P + tr log(P^-1/2 A P^-1/2) = log det P + E[ w^T log(P^-1/2 A P^-1/2) w ],
//
// and PCG on A z_i with preconditioner P yields the Lanczos tridiagonal T_i of P^-1/2 A P^-1/2
// started at w_i / ||w_i||, so the per-probe term is ||w_i||^2 e_1^T log(T_i) e_1 with
// ||w_i||^2 = z_i^T P^-1 z_i. The estimate is log det P plus the mean of the probes' terms, and
// stderr is their sample standard deviation over sqrt(probes) (NaN for a single probe). All
// probes share one batched PCG run of at most maxIter iterations, each probe stopping at relative
// residual 1e-10; fewer than n iterations bias the estimate upward (digest 004 Theorem 1).
func SLQLogDet(op Operator, precond Preconditioner, probes int, maxIter int, rng *rand.Rand) (estimate, stderr float64, err error) {
	n := op.Dim()
	if probes < 1 {
		return 0, 0, fmt.Errorf("slq: %d probes", probes)
	}
	Z := make([]float64, n*probes)
	if precond == nil {
		for i := range Z {
			Z[i] = rng.NormFloat64()
		}
	} else {
		for c := 0; c < probes; c++ {
			precond.Sample(rng, Z[c*n:(c+1)*n])
		}
	}
	// ||w||^2 = z^T P^-1 z.
	PZ := Z
	if precond != nil {
		PZ = make([]float64, n*probes)
		precond.Solve(PZ, Z, probes)
	}
	res, err := BatchPCG(op, Z, probes, precond, maxIter, slqTol)
	if err != nil {
		return 0, 0, fmt.Errorf("slq: %w", err)
	}
	terms := make([]float64, probes)
	mean := 0.0
	for c := 0; c < probes; c++ {
		zc := Z[c*n : (c+1)*n]
		w2 := dot(zc, PZ[c*n:(c+1)*n])
		q, err := LanczosQuadrature(res.Alpha[c], res.Beta[c], math.Log)
		if err != nil {
			return 0, 0, fmt.Errorf("slq: probe %d: %w", c, err)
		}
		terms[c] = w2 * q
		mean += terms[c]
	}
	mean /= float64(probes)
	stderr = math.NaN()
	if probes > 1 {
		ss := 0.0
		for _, t := range terms {
			ss += (t - mean) * (t - mean)
		}
		stderr = math.Sqrt(ss / float64(probes-1) / float64(probes))
	}
	estimate = mean
	if precond != nil {
		estimate += precond.LogDet()
	}
	return estimate, stderr, nil
}
