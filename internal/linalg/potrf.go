package linalg

import (
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// potrfBlock is the outer block of the Cholesky factorisation (a multiple of kc keeps the
// trailing update one inner panel deep); potrfLeaf the size below which a diagonal block is
// factorised by the unblocked algorithm.
const (
	potrfBlock = 256
	potrfLeaf  = 16
)

// Potrf computes the Cholesky factorisation of the symmetric positive definite matrix in the
// triangle a.Uplo of a, in place: A = U^T U (blas.Upper) or A = L L^T (blas.Lower), with the
// arguments and results of lapack64.Potrf. ok is false when A is not numerically positive
// definite (a pivot is not > 0, or is NaN); the factor is then incomplete.
//
// The algorithm is the right-looking blocked Cholesky (Golub and Van Loan, Matrix
// Computations, 4th ed., §4.2): the diagonal block is factorised recursively, the panel
// below (right of) it is a triangular solve (Trsm) and the trailing matrix takes a rank-256
// Syrk update, so nearly all flops run in the micro-kernel.
func Potrf(a blas64.Symmetric) (t blas64.Triangular, ok bool) {
	ok = potrfWith(bestKernel, a.Uplo == blas.Lower, a.N, a.Data, a.Stride, potrfBlock)
	return blas64.Triangular{Uplo: a.Uplo, Diag: blas.NonUnit, N: a.N, Stride: a.Stride, Data: a.Data}, ok
}

func potrfWith(kern kernelFunc, lowerA bool, n int, a []float64, lda, nb int) bool {
	if n <= potrfLeaf || nb <= potrfLeaf {
		if lowerA {
			return potrfLowerUnblocked(n, a, lda)
		}
		return potrfUpperUnblocked(n, a, lda)
	}
	A := view{data: a, stride: lda}
	for j0 := 0; j0 < n; j0 += nb {
		j1 := min(j0+nb, n)
		w := j1 - j0
		diag := a[j0*lda+j0:]
		if !potrfWith(kern, lowerA, w, diag, lda, nb/4) {
			return false
		}
		if j1 == n {
			break
		}
		rest := n - j1
		T := blas64.Triangular{N: w, Stride: lda, Data: diag, Diag: blas.NonUnit}
		if lowerA {
			// A21 = A21 L11^-T; A22 -= A21 A21^T (lower triangle).
			T.Uplo = blas.Lower
			p := blas64.General{Rows: rest, Cols: w, Stride: lda, Data: a[j1*lda+j0:]}
			trsmWith(kern, blas.Right, blas.Trans, 1, T, p)
			P := A.at(j1, j0)
			gemmCore(kern, rest, rest, w, -1, P, view{data: P.data, stride: lda, trans: true}, a[j1*lda+j1:], lda, lower)
			continue
		}
		// A12 = U11^-T A12; A22 -= A12^T A12 (upper triangle).
		T.Uplo = blas.Upper
		p := blas64.General{Rows: w, Cols: rest, Stride: lda, Data: a[j0*lda+j1:]}
		trsmWith(kern, blas.Left, blas.Trans, 1, T, p)
		P := A.at(j0, j1)
		gemmCore(kern, rest, rest, w, -1, view{data: P.data, stride: lda, trans: true}, P, a[j1*lda+j1:], lda, upper)
	}
	return true
}

// potrfLowerUnblocked is the Cholesky-Banachiewicz algorithm, row by row:
// L_ij = (A_ij - sum_(l<j) L_il L_jl) / L_jj, L_ii = sqrt(A_ii - sum_(l<i) L_il^2), the sums
// by fused multiply-adds in increasing l.
func potrfLowerUnblocked(n int, a []float64, lda int) bool {
	for i := range n {
		ri := a[i*lda : i*lda+i+1]
		for j := 0; j <= i; j++ {
			rj := a[j*lda : j*lda+j]
			s := ri[j]
			for l, v := range rj {
				s = math.FMA(-ri[l], v, s)
			}
			if j < i {
				ri[j] = s / a[j*lda+j]
				continue
			}
			if !(s > 0) {
				return false
			}
			ri[i] = math.Sqrt(s)
		}
	}
	return true
}

// potrfUpperUnblocked is potrfLowerUnblocked for U = L^T stored in the upper triangle.
func potrfUpperUnblocked(n int, a []float64, lda int) bool {
	for i := range n {
		for j := 0; j <= i; j++ {
			s := a[j*lda+i]
			for l := range j {
				s = math.FMA(-a[l*lda+i], a[l*lda+j], s)
			}
			if j < i {
				a[j*lda+i] = s / a[j*lda+j]
				continue
			}
			if !(s > 0) {
				return false
			}
			a[i*lda+i] = math.Sqrt(s)
		}
	}
	return true
}
