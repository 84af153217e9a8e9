package kernel

import (
	"math"
	"runtime"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/gpreduce/gpreduce/internal/linalg"
)

// BlockValue selects what ScaledBlock writes.
type BlockValue int

const (
	// BlockK is the kernel value sigma_f^2 k0(r).
	BlockK BlockValue = iota
	// BlockQ is sigma_f^2 q(r), q = -k0'(r)/r (Family.ProfileGrad), the factor of the
	// lengthscale gradients.
	BlockQ
)

// tinyDist2 is the relative size (of ||a||^2 + ||b||^2) below which a squared distance from
// the product formula is rounding error and is taken as 0, so that a point's distance to
// itself is exactly 0 (k(x, x) = sigma_f^2 exactly) and negative values never occur.
const tinyDist2 = 64 * 0x1p-52

// blockRows is the number of rows ScaledBlock forms at a time per goroutine.
const blockRows = 64

// ScaledBlock writes dst[i*ld+j] = sf2 * f(r_ij^2) for the rows a_i of a (m x d) and b_j of b
// (n x d), both row-major and already divided by the lengthscales, where f is the profile k0
// (v = BlockK) or q (v = BlockQ) of the family and r_ij = ||a_i - b_j||.
//
// The squared distances come from one matrix product, r^2 = ||a||^2 + ||b||^2 - 2 a.b
// (linalg.Gemm); r^2 carries an absolute error of a few ulp of ||a||^2 + ||b||^2 rather than
// of r^2 itself, so values below 64 ulp of that are set to 0 (the same point: k(x, x) is
// exactly sf2, and r^2 is never negative). The exponentials are
// linalg.ExpTo's. The bits depend only on the inputs (never on the CPU or GOMAXPROCS).
func (f Family) ScaledBlock(v BlockValue, sf2 float64, a, b []float64, d int, dst []float64, ld int) {
	m, n := len(a)/d, len(b)/d
	if m == 0 || n == 0 {
		return
	}
	na, nb := sqNorms(a, d), sqNorms(b, d)
	workers := 1
	if m*n*(d+8) >= 1<<20 {
		workers = min(runtime.GOMAXPROCS(0), (m+blockRows-1)/blockRows)
	}
	chunk := func(r0, r1 int, scratch []float64) {
		rows := r1 - r0
		D := blas64.General{Rows: rows, Cols: n, Stride: ld, Data: dst[r0*ld:]}
		linalg.Gemm(blas.NoTrans, blas.Trans, -2, blas64.General{Rows: rows, Cols: d, Stride: d, Data: a[r0*d:]},
			blas64.General{Rows: n, Cols: d, Stride: d, Data: b}, 0, D)
		for i := r0; i < r1; i++ {
			row := dst[i*ld : i*ld+n]
			for j, x := range row {
				s := na[i] + nb[j]
				r2 := s + x
				if r2 <= tinyDist2*s {
					r2 = 0 // below the formula's rounding error: the same point
				}
				row[j] = r2
			}
			f.profileRow(v, sf2, row, scratch[:n])
		}
	}
	if workers <= 1 {
		scratch := make([]float64, n)
		for r0 := 0; r0 < m; r0 += blockRows {
			chunk(r0, min(r0+blockRows, m), scratch)
		}
		return
	}
	var wg sync.WaitGroup
	per := (m + workers - 1) / workers
	for w := range workers {
		r0, r1 := w*per, min((w+1)*per, m)
		if r0 >= r1 {
			break
		}
		wg.Go(func() {
			scratch := make([]float64, n)
			for s := r0; s < r1; s += blockRows {
				chunk(s, min(s+blockRows, r1), scratch)
			}
		})
	}
	wg.Wait()
}

// sqNorms returns ||x_i||^2 for the rows of x (d columns), summed by fused multiply-adds in
// column order.
func sqNorms(x []float64, d int) []float64 {
	out := make([]float64, len(x)/d)
	for i := range out {
		var s float64
		for _, v := range x[i*d : (i+1)*d] {
			s = math.FMA(v, v, s)
		}
		out[i] = s
	}
	return out
}

// profileRow overwrites row (squared distances r^2) with sf2 k0(r) or sf2 q(r), the same
// formulas as Family.ProfileGrad with the exponentials taken in one vector call.
func (f Family) profileRow(v BlockValue, sf2 float64, row, e []float64) {
	switch f {
	case RBF: // k0 = q = exp(-r^2/2)
		for j, r2 := range row {
			e[j] = -r2 / 2
		}
		linalg.ExpTo(e, e)
		for j := range row {
			row[j] = sf2 * e[j]
		}
	case Matern12: // k0 = exp(-r), q = k0 / r (0 at r = 0)
		sqrtExp(1, row, e)
		for j, r := range row {
			switch {
			case v == BlockK:
				row[j] = sf2 * e[j]
			case r == 0:
				row[j] = 0
			default:
				row[j] = sf2 * (e[j] / r)
			}
		}
	case Matern32: // a = sqrt3 r: k0 = (1 + a) exp(-a), q = 3 exp(-a)
		sqrtExp(math.Sqrt(3), row, e)
		for j, a := range row {
			if v == BlockK {
				row[j] = sf2 * ((1 + a) * e[j])
			} else {
				row[j] = sf2 * (3 * e[j])
			}
		}
	case Matern52: // a = sqrt5 r: k0 = (1 + a + a^2/3) exp(-a), q = 5/3 (1 + a) exp(-a)
		sqrtExp(math.Sqrt(5), row, e)
		for j, a := range row {
			if v == BlockK {
				row[j] = sf2 * ((1 + a + a*a/3) * e[j])
			} else {
				row[j] = sf2 * (5.0 / 3.0 * (1 + a) * e[j])
			}
		}
	default:
		panic("kernel: invalid family") // unreachable for values made by ParseFamily or the constants
	}
}

// sqrtExp overwrites row (squared distances r^2) with a = c r and sets e = exp(-a).
func sqrtExp(c float64, row, e []float64) {
	for j, r2 := range row {
		row[j] = c * math.Sqrt(r2)
		e[j] = -row[j]
	}
	linalg.ExpTo(e, e)
}
