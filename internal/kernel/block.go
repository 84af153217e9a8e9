package kernel

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"

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

// blockRows x blockCols is the tile of the block that ScaledBlock forms at a time: its
// product, squared distances and exponentials stay in the core's L2 cache (256 KB).
const (
	blockRows = 64
	blockCols = 512
)

// ScaledBlock writes dst[i*ld+j] = sf2 * f(r_ij^2) for the rows a_i of a (m x d) and b_j of b
// (n x d), both row-major and already divided by the lengthscales, where f is the profile k0
// (v = BlockK) or q (v = BlockQ) of the family and r_ij = ||a_i - b_j||.
//
// The squared distances come from matrix products, r^2 = ||a||^2 + ||b||^2 - 2 a.b
// (linalg.Gemm, one per tile of 64 x 512 entries); r^2 carries an absolute error of a few
// ulp of ||a||^2 + ||b||^2 rather than of r^2 itself, so values below 64 ulp of that are set
// to 0 (the same point: k(x, x) is exactly sf2, and r^2 is never negative). The exponentials
// are linalg.ExpTo's. Tiles are shared among up to GOMAXPROCS goroutines; an entry's bits
// depend only on its two rows (never on the CPU, the tiling or GOMAXPROCS).
func (f Family) ScaledBlock(v BlockValue, sf2 float64, a, b []float64, d int, dst []float64, ld int) {
	m, n := len(a)/d, len(b)/d
	if m == 0 || n == 0 {
		return
	}
	na, nb := sqNorms(a, d), sqNorms(b, d)
	rowTiles, colTiles := (m+blockRows-1)/blockRows, (n+blockCols-1)/blockCols
	tiles := rowTiles * colTiles
	tile := func(t int, scratch []float64) {
		r0, c0 := t/colTiles*blockRows, t%colTiles*blockCols
		r1, c1 := min(r0+blockRows, m), min(c0+blockCols, n)
		D := blas64.General{Rows: r1 - r0, Cols: c1 - c0, Stride: ld, Data: dst[r0*ld+c0:]}
		linalg.Gemm(blas.NoTrans, blas.Trans, -2, blas64.General{Rows: r1 - r0, Cols: d, Stride: d, Data: a[r0*d:]},
			blas64.General{Rows: c1 - c0, Cols: d, Stride: d, Data: b[c0*d:]}, 0, D)
		for i := r0; i < r1; i++ {
			f.profileRow(v, sf2, na[i], nb[c0:c1], dst[i*ld+c0:i*ld+c1], scratch[:c1-c0])
		}
	}
	workers := 1
	if m*n*(d+8) >= 1<<20 {
		workers = min(runtime.GOMAXPROCS(0), tiles)
	}
	if workers <= 1 {
		scratch := make([]float64, blockCols)
		for t := range tiles {
			tile(t, scratch)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			scratch := make([]float64, blockCols)
			for {
				t := int(next.Add(1)) - 1
				if t >= tiles {
					return
				}
				tile(t, scratch)
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

// profileRow overwrites row (-2 a_i.b_j for the columns j of the tile) with sf2 k0(r) or
// sf2 q(r), r^2 = (na + nb_j) + row_j (0 when below the formula's rounding error, see
// tinyDist2), by the formulas of Family.ProfileGrad with the exponentials taken in one vector
// call (e is scratch of the row's length).
func (f Family) profileRow(v BlockValue, sf2, na float64, nb, row, e []float64) {
	nb = nb[:len(row)]
	e = e[:len(row)]
	switch f {
	case RBF: // k0 = q = exp(-r^2/2)
		distArgs(false, 0, na, nb, row, e)
		linalg.ExpTo(e, e)
		for j := range row {
			row[j] = sf2 * e[j]
		}
	case Matern12: // k0 = exp(-r), q = k0 / r (0 at r = 0)
		sqrtExp(1, na, nb, row, e)
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
		sqrtExp(math.Sqrt(3), na, nb, row, e)
		for j, a := range row {
			if v == BlockK {
				row[j] = sf2 * ((1 + a) * e[j])
			} else {
				row[j] = sf2 * (3 * e[j])
			}
		}
	case Matern52: // a = sqrt5 r: k0 = (1 + a + a^2/3) exp(-a), q = 5/3 (1 + a) exp(-a)
		sqrtExp(math.Sqrt(5), na, nb, row, e)
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

// dist2 is the squared distance s + x from s = ||a||^2 + ||b||^2 and x = -2 a.b, set to 0
// below the formula's rounding error (tinyDist2).
func dist2(s, x float64) float64 {
	r2 := s + x
	if r2 <= tinyDist2*s {
		return 0 // below the formula's rounding error: the same point
	}
	return r2
}

// sqrtExp overwrites row (-2 a.b_j) with a = c r, r = sqrt(dist2(na + nb_j, row_j)), and sets
// e = exp(-a).
func sqrtExp(c, na float64, nb, row, e []float64) {
	distArgs(true, c, na, nb, row, e)
	linalg.ExpTo(e, e)
}
