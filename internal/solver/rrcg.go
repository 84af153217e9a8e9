package solver

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Truncation is the distribution of the number J of CG iterations that RR-CG runs (Potapczynski
// et al. 2021, §4.1, eq. 17): with q = exp(-Lambda) and M = JMax - JMin + 1,
//
//	P(J = j) = q^(j - JMin) (1 - q) / (1 - q^M),   j = JMin..JMax,
//
// so J - JMin is a geometric variable truncated to 0..M-1. Lambda between 0.05 and 0.1 gives
// sd(J) between 20 and 10 and E[J] ~= JMin + 1/(e^Lambda - 1) when M is large. Lambda > 0 and
// 1 <= JMin <= JMax are required.
type Truncation struct {
	Lambda     float64
	JMin, JMax int
}

func (t Truncation) validate() error {
	if !(t.Lambda > 0) || math.IsInf(t.Lambda, 0) {
		return fmt.Errorf("truncation: lambda %v must be positive and finite", t.Lambda)
	}
	if t.JMin < 1 || t.JMax < t.JMin {
		return fmt.Errorf("truncation: need 1 <= JMin (%d) <= JMax (%d)", t.JMin, t.JMax)
	}
	return nil
}

// Survival returns P(J >= j) in closed form, computed in float64 without the cancellation of
// 1 - cdf (a closed form derived here from eq. 17):
//
//	P(J >= j) = 1                                                       for j <= JMin,
//	P(J >= j) = q^(j - JMin) (1 - q^(JMax - j + 1)) / (1 - q^M)         for JMin < j <= JMax,
//	P(J >= j) = 0                                                       for j > JMax,
//
// with 1 - q^m evaluated as -expm1(-Lambda m).
func (t Truncation) Survival(j int) float64 {
	switch {
	case j <= t.JMin:
		return 1
	case j > t.JMax:
		return 0
	}
	M := float64(t.JMax - t.JMin + 1)
	return math.Exp(-t.Lambda*float64(j-t.JMin)) * math.Expm1(-t.Lambda*float64(t.JMax-j+1)) / math.Expm1(-t.Lambda*M)
}

// Prob returns P(J = j) = q^(j - JMin) (1 - q) / (1 - q^M) for JMin <= j <= JMax, else 0.
func (t Truncation) Prob(j int) float64 {
	if j < t.JMin || j > t.JMax {
		return 0
	}
	M := float64(t.JMax - t.JMin + 1)
	return math.Exp(-t.Lambda*float64(j-t.JMin)) * math.Expm1(-t.Lambda) / math.Expm1(-t.Lambda*M)
}

// Mean returns E[J] = JMin + q/(1 - q) - M q^M / (1 - q^M), the mean of the truncated geometric.
func (t Truncation) Mean() float64 {
	M := float64(t.JMax - t.JMin + 1)
	qM := math.Exp(-t.Lambda * M)
	return float64(t.JMin) + 1/math.Expm1(t.Lambda) - M*qM/(-math.Expm1(-t.Lambda*M))
}

// Sample draws J by inversion: with u ~ U[0, 1),
//
//	J = JMin + floor( log(1 - u (1 - q^M)) / log q ),
//
// since P(J - JMin >= m) = (q^m - q^M) / (1 - q^M) is the probability that
// 1 - u (1 - q^M) <= q^m.
func (t Truncation) Sample(rng *rand.Rand) int {
	M := t.JMax - t.JMin + 1
	u := rng.Float64()
	m := int(math.Floor(math.Log1p(u*math.Expm1(-t.Lambda*float64(M))) / -t.Lambda))
	if m < 0 {
		m = 0
	}
	if m > M-1 {
		m = M - 1
	}
	return t.JMin + m
}

// RRResult is the outcome of RRSolveQuad for k right-hand sides b_c (n x k column-major).
// With the PCG series A^-1 b ~= x_JMax = sum_{j=1..JMax} alpha_j d_j and two independent
// truncations J_1, J_2 ~ Truncation, for s = 1, 2:
//
//	W_s = sum_{j=1..min(J_s, Jc)} alpha_j d_j / P(J >= j),      E[W_s] = x_JMax,
//
// where Jc is the iteration at which the column's CG converged (its later terms are zero to the
// tolerance). Quad[c] = (b_c^T W_1 + b_c^T W_2) / 2 is an unbiased estimate of b_c^T x_JMax
// ~= b_c^T A^-1 b_c. W_1 and W_2 are independent given B, so a^T W_1 (dK) W_2 is unbiased for
// the data term b^T A^-1 dK A^-1 b of the gradient (Potapczynski et al. 2021, §4.1), while a
// single W is enough for the linear probe terms. CG holds the plain PCG run of max(J_1, J_2)
// iterations (its X is the plain iterate, equal to W_s when convergence comes at Jc <= JMin,
// where all weights are 1).
type RRResult struct {
	W1, W2 []float64
	Quad   []float64
	J      [2]int
	CG     *CGResult
}

// RRSolveQuad runs Russian-roulette truncated PCG (RR-CG, Potapczynski et al. 2021, §4.1,
// eq. 16) on A X = B, B n x k column-major, drawing J_1 and J_2 from trunc with rng and running
// one batched PCG of max(J_1, J_2) iterations; see RRResult. All columns share (J_1, J_2).
// precond == nil means P = I; tol is the relative residual at which a column stops early.
//
// Unlike the reference code (which replaces W by the plain iterate whenever CG converges), the
// converged estimate keeps its weights: replacing it is unbiased only when Jc <= JMin, and
// biased otherwise because the plain sum is then not the series' Russian-roulette estimate.
func RRSolveQuad(op Operator, b []float64, k int, precond Preconditioner, trunc Truncation, tol float64, rng *rand.Rand) (*RRResult, error) {
	if err := trunc.validate(); err != nil {
		return nil, err
	}
	return rrSolve(op, b, k, precond, trunc, [2]int{trunc.Sample(rng), trunc.Sample(rng)}, tol)
}

// rrSolve is RRSolveQuad with given truncations J.
func rrSolve(op Operator, b []float64, k int, precond Preconditioner, trunc Truncation, J [2]int, tol float64) (*RRResult, error) {
	if err := trunc.validate(); err != nil {
		return nil, err
	}
	n := op.Dim()
	run := max(J[0], J[1])
	weight := make([]float64, run+1) // 1 / P(J >= j)
	for j := 1; j <= run; j++ {
		weight[j] = 1 / trunc.Survival(j)
	}
	res := &RRResult{W1: make([]float64, n*k), W2: make([]float64, n*k), Quad: make([]float64, k), J: J}
	step := func(j, c int, alpha float64, d []float64) {
		a := alpha * weight[j]
		for s, W := range [2][]float64{res.W1, res.W2} {
			if j > J[s] {
				continue
			}
			wc := W[c*n : (c+1)*n]
			for i := range wc {
				wc[i] += a * d[i]
			}
		}
	}
	cg, err := batchPCG(op, b, k, precond, run, tol, step)
	if err != nil {
		return nil, fmt.Errorf("rr-cg: %w", err)
	}
	res.CG = cg
	for c := 0; c < k; c++ {
		bc := b[c*n : (c+1)*n]
		res.Quad[c] = 0.5 * (dot(bc, res.W1[c*n:(c+1)*n]) + dot(bc, res.W2[c*n:(c+1)*n]))
	}
	return res, nil
}
