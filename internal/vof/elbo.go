package vof

import (
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/gpreduce/gpreduce/internal/linalg"
)

// coreIn is what the Gaussian-likelihood ELBO with Kuu = I needs from the data (Section 3.3,
// eq. 3 with the corrected constant): over a batch of n rows of a data set of nTotal rows,
// YY = sum y_n^2, KY = sum_n k_n y_n, KK = sum_n k_n k_n^T (used through its symmetric part;
// for TrigVOF an unbiased estimate), with k_n = Kuf[:, n], and the prior variance v = k(x, x).
type coreIn struct {
	n, nTotal float64
	YY        float64
	KY        []float64
	KK        []float64 // M x M row-major
	v         float64
}

// coreOut holds the partial derivatives of the ELBO with respect to the data quantities, which
// the callers chain to the kernel and feature parameters.
type coreOut struct {
	gKY []float64 // dF/dKY
	gKK []float64 // dF/dKK (symmetric)
	gV  float64   // dF/dv
}

// coreELBO returns
//
//	F = (nTotal/n) [ -n/2 log(2 pi sigma^2) - (YY - 2 m^T KY + <C, KK> + n v) / (2 sigma^2) ] - KL,
//	C = m m^T + S - I,  KL = 1/2 (tr S + m^T m - M - log det S),
//
// the sum over rows of E_q[log N(y_n | f_n, sigma^2)] with mu_n = k_n^T m and
// sigma_n^2 = v + k_n^T (S - I) k_n (Section 3.3; the paper prints the constant as
// -log(2 pi sigma)^2 and the variance with a minus sign, both typos), minus the Gaussian KL
// with Kuu = I. If g is not nil it receives dF/dlog sigma^2, dF/dm and dF/dL for S = L L^T, and
// the returned coreOut the partials in KY, KK and v. S is never inverted: log det S =
// 2 sum log L_jj and dKL/dL = L - diag(1/L_jj) (the lower triangle of S^-1 L = L^-T).
func coreELBO(mod Model, p *Params, in coreIn, g *Grad) (float64, *coreOut) {
	M := len(p.Mean)
	m := p.Mean
	s2 := p.Noise
	scale := in.nTotal / in.n
	// <C, KK> = (m^T KKs m) + <S, KKs> - tr KK.
	var mKm, mKY, trKK, sKK float64
	Km := make([]float64, M) // KKs m
	for i := 0; i < M; i++ {
		row := in.KK[i*M : (i+1)*M]
		var a float64
		for j := 0; j < M; j++ {
			a += 0.5 * (row[j] + in.KK[j*M+i]) * m[j]
		}
		Km[i] = a
		mKm += m[i] * a
		mKY += m[i] * in.KY[i]
		trKK += row[i]
	}
	L := p.Chol
	var KL float64
	// For a dense factor the coordinator side is O(M^3) per step (the data side stays
	// O(n M^2)): S = L L^T by Syrk and, for the gradient, KKs L by Gemm, through the compute
	// core (internal/linalg; naive loops took 3 minutes per step at M = 3375).
	var S, Lz, KKs []float64
	if mod.Dense {
		Lz, KKs = lowerOf(L, M), symPart(in.KK, M)
		S = make([]float64, M*M)
		linalg.Syrk(blas.NoTrans, 1, blas64.General{Rows: M, Cols: M, Stride: M, Data: Lz}, 0, blas64.Symmetric{Uplo: blas.Upper, N: M, Stride: M, Data: S})
		for i := 0; i < M; i++ {
			for j := 0; j < i; j++ {
				S[i*M+j] = S[j*M+i]
			}
		}
		for i := 0; i < M; i++ {
			for j := 0; j < M; j++ {
				sKK += S[i*M+j] * KKs[i*M+j]
			}
			for k := 0; k <= i; k++ {
				KL += L[i*M+k] * L[i*M+k]
			}
			KL -= 2 * math.Log(L[i*M+i])
		}
	} else {
		for i := 0; i < M; i++ {
			sKK += L[i] * L[i] * in.KK[i*M+i]
			KL += L[i]*L[i] - 2*math.Log(L[i])
		}
	}
	var mm float64
	for _, x := range m {
		mm += x * x
	}
	KL = 0.5 * (KL + mm - float64(M))
	quad := in.YY - 2*mKY + mKm + sKK - trKK + in.n*in.v
	data := scale * (-in.n/2*math.Log(2*math.Pi*s2) - quad/(2*s2))
	F := data - KL
	if g == nil {
		return F, nil
	}
	out := &coreOut{gKY: make([]float64, M), gKK: make([]float64, M*M), gV: -scale * in.n / (2 * s2)}
	g.Noise = scale * (-in.n/2 + quad/(2*s2))
	c := -scale / (2 * s2)
	for i := 0; i < M; i++ {
		g.Mean[i] = scale*(in.KY[i]-Km[i])/s2 - m[i]
		out.gKY[i] = scale * m[i] / s2
	}
	for i := 0; i < M; i++ {
		for j := 0; j < M; j++ {
			cij := m[i] * m[j]
			if i == j {
				cij--
			}
			if mod.Dense {
				cij += S[i*M+j]
			} else if i == j {
				cij += L[i] * L[i]
			}
			out.gKK[i*M+j] = c * cij
		}
	}
	// dF/dS = c KKs (data part); dF/dL = 2 dF/dS L, lower triangle, minus dKL/dL.
	if mod.Dense {
		// (KKs L)_ij = sum_(k >= j) KKs_ik L_kj, L lower.
		G := make([]float64, M*M)
		linalg.Gemm(blas.NoTrans, blas.NoTrans, 1, blas64.General{Rows: M, Cols: M, Stride: M, Data: KKs}, blas64.General{Rows: M, Cols: M, Stride: M, Data: Lz}, 0, blas64.General{Rows: M, Cols: M, Stride: M, Data: G})
		for i := 0; i < M; i++ {
			for j := 0; j <= i; j++ {
				v := 2*c*G[i*M+j] - L[i*M+j]
				if i == j {
					v += 1 / L[i*M+i]
				}
				g.Chol[i*M+j] = v
			}
		}
	} else {
		for i := 0; i < M; i++ {
			g.Chol[i] = 2*c*in.KK[i*M+i]*L[i] - L[i] + 1/L[i]
		}
	}
	return F, out
}

// lowerOf returns the lower triangle of the M x M row-major l (diagonal included) with zeros
// above it: a dense factor's strict upper part is not part of the parameter and is never read.
func lowerOf(l []float64, M int) []float64 {
	z := make([]float64, M*M)
	for i := 0; i < M; i++ {
		copy(z[i*M:i*M+i+1], l[i*M:i*M+i+1])
	}
	return z
}

// symPart returns (A + A^T)/2 of the M x M row-major a, the part of KK the ELBO uses.
func symPart(a []float64, M int) []float64 {
	s := make([]float64, M*M)
	for i := 0; i < M; i++ {
		for j := 0; j <= i; j++ {
			v := 0.5 * (a[i*M+j] + a[j*M+i])
			s[i*M+j], s[j*M+i] = v, v
		}
	}
	return s
}
