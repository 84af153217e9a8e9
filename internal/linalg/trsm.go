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

// trsmSplit is the largest triangle the blocked loop (trsmProblem.loop) solves on its own; a larger
// one is split in two (trsmProblem.rec) so that most of the work is one product with an inner
// dimension of half the triangle instead of many rank-32 updates of all of B.
const trsmSplit = 256

// Trsm solves op(A) X = alpha B (s = blas.Left) or X op(A) = alpha B (s = blas.Right) for X
// with A triangular, overwriting B with X, with the arguments of blas64.Trsm.
//
// The solve is recursive, then blocked (Golub and Van Loan, Matrix Computations, 4th ed.,
// §3.1; Elmroth, Gustavson, Jonsson and Kågström, SIAM Review 46(1), 2004, §3): a triangle
// larger than trsmSplit is split into T11, T22 and the off-diagonal block, one half is solved,
// its contribution is subtracted from the other half of B by one product, and the other half
// is solved; below that size, blocks of 32 rows (or columns) are solved by substitution and
// their contribution is subtracted from the rest of B by one product. The split points
// depend on the triangle's size alone, so the bits do not depend on the goroutine count.
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
	t := trsmProblem{
		kern: kern, left: s == blas.Left,
		// T = op(A) is lower triangular when (Lower, NoTrans) or (Upper, Trans).
		lowerT: (a.Uplo == blas.Lower) == (tA == blas.NoTrans),
		unit:   a.Diag == blas.Unit,
		ld:     b.Stride,
	}
	t.rec(view{data: a.Data, stride: a.Stride, trans: tA != blas.NoTrans}, b.Data, a.N, m, n)
}

// trsmProblem is what stays fixed through the recursion of one Trsm call: the micro-kernel,
// the side, the shape of T = op(A), and B's row stride.
type trsmProblem struct {
	kern               kernelFunc
	left, lowerT, unit bool
	ld                 int
}

// rec solves with the k x k triangle T for B (m x n, at b with stride t.ld): T X = B (left,
// k = m) or X T = B (right, k = n). Above trsmSplit, T splits at h (a multiple of trsmBlock
// near k/2) into T11 (h x h), T22 and the off-diagonal block T21 (lower) or T12 (upper).
func (t trsmProblem) rec(T view, b []float64, k, m, n int) {
	if k <= trsmSplit {
		t.loop(T, b, m, n)
		return
	}
	h := (k/2 + trsmBlock - 1) / trsmBlock * trsmBlock
	ld := t.ld
	T11, T22 := T, T.at(h, h)
	switch {
	case t.left && t.lowerT: // X1 = T11^-1 B1; B2 -= T21 X1; X2 = T22^-1 B2
		b2 := b[h*ld:]
		t.rec(T11, b, h, h, n)
		gemmCore(t.kern, m-h, n, h, -1, T.at(h, 0), view{data: b, stride: ld}, b2, ld, full)
		t.rec(T22, b2, k-h, m-h, n)
	case t.left: // X2 = T22^-1 B2; B1 -= T12 X2; X1 = T11^-1 B1
		b2 := b[h*ld:]
		t.rec(T22, b2, k-h, m-h, n)
		gemmCore(t.kern, h, n, m-h, -1, T.at(0, h), view{data: b2, stride: ld}, b, ld, full)
		t.rec(T11, b, h, h, n)
	case t.lowerT: // X T = B: X2 = B2 T22^-1; B1 -= X2 T21; X1 = B1 T11^-1
		b2 := b[h:]
		t.rec(T22, b2, k-h, m, n-h)
		gemmCore(t.kern, m, h, n-h, -1, view{data: b2, stride: ld}, T.at(h, 0), b, ld, full)
		t.rec(T11, b, h, m, h)
	default: // X1 = B1 T11^-1; B2 -= X1 T12; X2 = B2 T22^-1
		b2 := b[h:]
		t.rec(T11, b, h, m, h)
		gemmCore(t.kern, m, n-h, h, -1, view{data: b, stride: ld}, T.at(0, h), b2, ld, full)
		t.rec(T22, b2, k-h, m, n-h)
	}
}

// loop solves with a triangle of at most trsmSplit rows by blocks of trsmBlock: each block by
// substitution (solveLeft, solveRight), then its contribution subtracted from the rest of B
// by one product.
func (t trsmProblem) loop(T view, b []float64, m, n int) {
	kern, unit, ld := t.kern, t.unit, t.ld
	B := view{data: b, stride: ld}
	if t.left {
		if t.lowerT {
			// Forward: X_k = T_kk^-1 B_k, then B_(k+1:) -= T_(k+1:,k) X_k.
			for k0 := 0; k0 < m; k0 += trsmBlock {
				k1 := min(k0+trsmBlock, m)
				solveLeft(T, unit, true, k0, k1, b, ld, n)
				gemmCore(kern, m-k1, n, k1-k0, -1, T.at(k1, k0), B.at(k0, 0), b[min(k1*ld, len(b)):], ld, full)
			}
			return
		}
		for k1 := m; k1 > 0; k1 -= trsmBlock {
			k0 := max(k1-trsmBlock, 0)
			solveLeft(T, unit, false, k0, k1, b, ld, n)
			gemmCore(kern, k0, n, k1-k0, -1, T.at(0, k0), B.at(k0, 0), b, ld, full)
		}
		return
	}
	if t.lowerT {
		// X T = B with T lower: the last columns first; B_(:,0:k0) -= X_k T_(k,0:k0).
		for k1 := n; k1 > 0; k1 -= trsmBlock {
			k0 := max(k1-trsmBlock, 0)
			solveRight(T, unit, true, k0, k1, b, ld, m)
			gemmCore(kern, m, k0, k1-k0, -1, B.at(0, k0), T.at(k0, 0), b, ld, full)
		}
		return
	}
	for k0 := 0; k0 < n; k0 += trsmBlock {
		k1 := min(k0+trsmBlock, n)
		solveRight(T, unit, false, k0, k1, b, ld, m)
		if k1 < n {
			gemmCore(kern, m, n-k1, k1-k0, -1, B.at(0, k0), T.at(k0, k1), b[k1:], ld, full)
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

// AxpyNeg sets y[j] = fma(-t, x[j], y[j]) for j < len(y), one rounding per element, in AVX2 +
// FMA assembly when the CPU allows and by math.FMA otherwise (the same bits either way); x
// must be at least as long as y. It is the update y -= t x of left-looking factorizations
// (solver.PivotedCholesky).
func AxpyNeg(t float64, x, y []float64) { axpyNeg(t, x, y) }

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
