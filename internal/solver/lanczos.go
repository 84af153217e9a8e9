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
// its coefficients alpha_1..alpha_J and beta_1..beta_{J-1} (Gardner et al. 2018, as GPyTorch
// builds it; Potapczynski et al. 2021, §3.1):
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
// iterations make it exact in exact arithmetic. The nodes theta_k and weights V_{1k}^2 come
// from the Golub-Welsch algorithm (GolubWelsch): O(J^2), against O(J^3) for a full
// eigendecomposition.
func LanczosQuadrature(alpha, beta []float64, f func(float64) float64) (float64, error) {
	T, err := LanczosTridiagonal(alpha, beta)
	if err != nil {
		return 0, err
	}
	J := T.SymmetricDim()
	diag, off := make([]float64, J), make([]float64, J)
	for j := 0; j < J; j++ {
		diag[j] = T.At(j, j)
		if j+1 < J {
			off[j] = T.At(j+1, j)
		}
	}
	w, err := GolubWelsch(diag, off)
	if err != nil {
		return 0, err
	}
	q := 0.0
	for k, t := range diag {
		q += w[k] * f(t)
	}
	return q, nil
}

// golubWelschMaxSweeps bounds the implicit QL sweeps spent on one eigenvalue.
const golubWelschMaxSweeps = 60

// GolubWelsch computes the Gauss quadrature rule of a symmetric tridiagonal matrix T with
// diagonal diag (J) and off-diagonal off (off[j] = T_{j+1,j}, j < J-1; off[J-1] is ignored):
// it overwrites diag with the eigenvalues theta_k of T (the nodes) and off with scratch, and
// returns the weights V_{1k}^2, the squared first components of the normalised eigenvectors,
// so that e_1^T f(T) e_1 = sum_k V_{1k}^2 f(theta_k) (Golub and Welsch 1969). It runs the
// implicit QL algorithm with Wilkinson shifts (EISPACK tql2/imtql2) but applies each plane
// rotation to the first row of the eigenvector matrix only: O(J^2) work and O(J) memory
// instead of the O(J^3) and O(J^2) of a full eigendecomposition. It fails when an eigenvalue
// needs more than 60 sweeps (which does not happen for finite input).
func GolubWelsch(diag, off []float64) ([]float64, error) {
	n := len(diag)
	if len(off) < n {
		return nil, fmt.Errorf("golub-welsch: %d off-diagonal entries for %d diagonal ones", len(off), n)
	}
	e := off[:n]
	if n > 0 {
		e[n-1] = 0
	}
	z := make([]float64, n) // first row of the eigenvector matrix, from e_1^T
	if n > 0 {
		z[0] = 1
	}
	for l := 0; l < n; l++ {
		for sweep := 0; ; sweep++ {
			m := l
			for ; m < n-1; m++ {
				dd := math.Abs(diag[m]) + math.Abs(diag[m+1])
				if math.Abs(e[m]) <= 0x1p-53*dd {
					break
				}
			}
			if m == l {
				break
			}
			if sweep == golubWelschMaxSweeps {
				return nil, fmt.Errorf("golub-welsch: eigenvalue %d did not converge in %d sweeps", l+1, golubWelschMaxSweeps)
			}
			g := (diag[l+1] - diag[l]) / (2 * e[l])
			r := math.Hypot(g, 1)
			g = diag[m] - diag[l] + e[l]/(g+math.Copysign(r, g))
			s, c, p := 1.0, 1.0, 0.0
			deflated := false
			for i := m - 1; i >= l; i-- {
				f, b := s*e[i], c*e[i]
				r = math.Hypot(f, g)
				e[i+1] = r
				if r == 0 {
					diag[i+1] -= p
					e[m] = 0
					deflated = true
					break
				}
				s, c = f/r, g/r
				g = diag[i+1] - p
				r = (diag[i]-g)*s + 2*c*b
				p = s * r
				diag[i+1] = g + p
				g = c*r - b
				zi := z[i+1]
				z[i+1] = s*z[i] + c*zi
				z[i] = c*z[i] - s*zi
			}
			if deflated {
				continue
			}
			diag[l] -= p
			e[l] = g
			e[m] = 0
		}
	}
	for k, v := range z {
		z[k] = v * v
	}
	return z, nil
}

// SLQLogDet estimates log det A for the operator A = K + sigma^2 I by preconditioned stochastic
// Lanczos quadrature (Potapczynski et al. 2021, §2.1 and §3.1, eq. 8). With P the
// preconditioner (identity when nil), probes z_i ~ N(0, P) and w_i = P^-1/2 z_i ~ N(0, I),
//
//	log det A = log det P + tr log(P^-1/2 A P^-1/2) = log det P + E[ w^T log(P^-1/2 A P^-1/2) w ],
//
// and PCG on A z_i with preconditioner P yields the Lanczos tridiagonal T_i of P^-1/2 A P^-1/2
// started at w_i / ||w_i||, so the per-probe term is ||w_i||^2 e_1^T log(T_i) e_1 with
// ||w_i||^2 = z_i^T P^-1 z_i. The estimate is log det P plus the mean of the probes' terms, and
// stderr is their sample standard deviation over sqrt(probes) (NaN for a single probe). All
// probes share one batched PCG run of at most maxIter iterations, each probe stopping at relative
// residual 1e-10; fewer than n iterations bias the estimate upward (Potapczynski et al. 2021,
// §3.1, Theorem 1).
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
