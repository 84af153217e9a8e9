package linalg

import (
	"math"
	"runtime"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// trsmBlock is the diagonal block of a blocked triangular solve: solved by substitution, the
// rest of the solve is a product (gemmCore). Small, because substitution runs at scalar speed.
const trsmBlock = 32

// Trsm solves op(A) X = alpha B (s = blas.Left) or X op(A) = alpha B (s = blas.Right) for X
// with A triangular, overwriting B with X, with the arguments of blas64.Trsm.
//
// The solve is blocked (Golub and Van Loan, Matrix Computations, 4th ed., §3.1): blocks of
// 32 rows (or columns) are solved by substitution and their contribution is subtracted from
// the rest of B by one product.
func Trsm(s blas.Side, tA blas.Transpose, alpha float64, a blas64.Triangular, b blas64.General) {
	trsmWith(bestKernel, s, tA, alpha, a, b)
}

func trsmWith(kern kernelFunc, s blas.Side, tA blas.Transpose, alpha float64, a blas64.Triangular, b blas64.General) {
	m, n := b.Rows, b.Cols
	if (s == blas.Left && a.N != m) || (s != blas.Left && a.N != n) {
		panic("linalg: Trsm: dimension mismatch")
	}
	scale(alpha, m, n, b.Data, b.Stride, full)
	if alpha == 0 || m == 0 || n == 0 {
		return
	}
	// T = op(A) is lower triangular when (Lower, NoTrans) or (Upper, Trans).
	lowerT := (a.Uplo == blas.Lower) == (tA == blas.NoTrans)
	T := view{data: a.Data, stride: a.Stride, trans: tA != blas.NoTrans}
	unit := a.Diag == blas.Unit
	B := view{data: b.Data, stride: b.Stride}
	ld := b.Stride
	if s == blas.Left {
		if lowerT {
			// Forward: X_k = T_kk^-1 B_k, then B_(k+1:) -= T_(k+1:,k) X_k.
			for k0 := 0; k0 < m; k0 += trsmBlock {
				k1 := min(k0+trsmBlock, m)
				solveLeft(T, unit, true, k0, k1, b.Data, ld, n)
				gemmCore(kern, m-k1, n, k1-k0, -1, T.at(k1, k0), B.at(k0, 0), b.Data[min(k1*ld, len(b.Data)):], ld, full)
			}
			return
		}
		for k1 := m; k1 > 0; k1 -= trsmBlock {
			k0 := max(k1-trsmBlock, 0)
			solveLeft(T, unit, false, k0, k1, b.Data, ld, n)
			gemmCore(kern, k0, n, k1-k0, -1, T.at(0, k0), B.at(k0, 0), b.Data, ld, full)
		}
		return
	}
	if lowerT {
		// X T = B with T lower: the last columns first; B_(:,0:k0) -= X_k T_(k,0:k0).
		for k1 := n; k1 > 0; k1 -= trsmBlock {
			k0 := max(k1-trsmBlock, 0)
			solveRight(T, unit, true, k0, k1, b.Data, ld, m)
			gemmCore(kern, m, k0, k1-k0, -1, B.at(0, k0), T.at(k0, 0), b.Data, ld, full)
		}
		return
	}
	for k0 := 0; k0 < n; k0 += trsmBlock {
		k1 := min(k0+trsmBlock, n)
		solveRight(T, unit, false, k0, k1, b.Data, ld, m)
		if k1 < n {
			gemmCore(kern, m, n-k1, k1-k0, -1, B.at(0, k0), T.at(k0, k1), b.Data[k1:], ld, full)
		}
	}
}

// tAt returns element (i, j) of the view.
func (v view) get(i, j int) float64 {
	if v.trans {
		return v.data[j*v.stride+i]
	}
	return v.data[i*v.stride+j]
}

// solveLeft overwrites rows k0..k1-1 of B (n columns) with T_kk^-1 B_k by substitution:
// x_i = (b_i - sum_l T_il x_l) / T_ii, the sum by fused multiply-adds in increasing l
// (forward, lowerT) or decreasing l (backward).
func solveLeft(T view, unit, lowerT bool, k0, k1 int, b []float64, ld, n int) {
	for ii := k0; ii < k1; ii++ {
		i := ii
		if !lowerT {
			i = k1 - 1 - (ii - k0)
		}
		bi := b[i*ld : i*ld+n]
		if lowerT {
			for l := k0; l < i; l++ {
				axpyNeg(T.get(i, l), b[l*ld:l*ld+n], bi)
			}
		} else {
			for l := k1 - 1; l > i; l-- {
				axpyNeg(T.get(i, l), b[l*ld:l*ld+n], bi)
			}
		}
		if !unit {
			d := T.get(i, i)
			for j := range bi {
				bi[j] /= d
			}
		}
	}
}

// axpyNegGo sets y = fma(-t, x, y) elementwise: the portable form of axpyNeg.
func axpyNegGo(t float64, x, y []float64) {
	x = x[:len(y)]
	for j, v := range x {
		y[j] = math.FMA(-t, v, y[j])
	}
}

// solveRight overwrites columns k0..k1-1 of B (m rows) with B_k T_kk^-1: for each row,
// x_j = (b_j - sum_l x_l T_lj) / T_jj, the sum by fused multiply-adds over l in decreasing
// order (T lower: columns solved last to first) or increasing order (T upper). The rows are
// independent: they are shared among goroutines when there is enough work, with the same
// operations for each row whichever goroutine runs it.
func solveRight(T view, unit, lowerT bool, k0, k1 int, b []float64, ld, m int) {
	w := k1 - k0
	// The diagonal block by columns: tk[c*w+l] = T_(k0+l, k0+c), read contiguously below.
	var tkBuf [trsmBlock * trsmBlock]float64
	tk := tkBuf[:w*w]
	for c := range w {
		for l := range w {
			if (lowerT && l >= c) || (!lowerT && l <= c) {
				tk[c*w+l] = T.get(k0+l, k0+c)
			}
		}
	}
	rows := func(r0, r1 int) {
		for r := r0; r < r1; r++ {
			row := b[r*ld+k0 : r*ld+k1]
			for jj := range w {
				j := jj
				if lowerT {
					j = w - 1 - jj
				}
				col := tk[j*w : (j+1)*w]
				v := row[j]
				if lowerT {
					for l := w - 1; l > j; l-- {
						v = math.FMA(-row[l], col[l], v)
					}
				} else {
					for l := 0; l < j; l++ {
						v = math.FMA(-row[l], col[l], v)
					}
				}
				if !unit {
					v /= col[j]
				}
				row[j] = v
			}
		}
	}
	workers := 1
	if m*w*w >= parallelFlops/8 {
		workers = min(runtime.GOMAXPROCS(0), m)
	}
	if workers <= 1 {
		rows(0, m)
		return
	}
	var wg sync.WaitGroup
	per := (m + workers - 1) / workers
	for r0 := per; r0 < m; r0 += per {
		wg.Go(func() { rows(r0, min(r0+per, m)) })
	}
	rows(0, min(per, m))
	wg.Wait()
}
