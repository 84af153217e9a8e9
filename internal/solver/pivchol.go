package solver

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/gpreduce/gpreduce/internal/linalg"
)

// PivotedCholesky computes a rank-r partial Cholesky factor L (n x r, column-major) of a
// symmetric positive semidefinite n x n matrix K with K ~= L L^T, reading only the diagonal
// K_ii = diag(i) and r rows K_{i,:} = row(i, dst) (dst of length n), as in Gardner et al. 2018,
// §4.1 (Harbrecht et al. 2012's algorithm). With the residual diagonal
// e = diag(K - L_m L_m^T), step m picks the pivot p = argmax_i e_i and sets
//
//	L_{:,m} = (K_{p,:} - sum_{l<m} L_{p,l} L_{:,l}) / sqrt(e_p),   e_i -= L_{i,m}^2,
//
// (the sum over l in order, each term a fused multiply-add: linalg.AxpyNeg),
// with the entries of earlier pivots set to exactly zero (so the rows of L in pivot order are
// lower triangular). It stops after rank columns, or earlier when the trace of the residual
// sum_i e_i <= tol * trace(K), when the largest residual max_i e_i <= floor, or when no e_i is
// positive; r <= rank is the number of columns made and L has length n*r. The residual
// e_i = K_ii - (L L^T)_ii is the prior variance of row i that L leaves out, so floor = sigma^2
// stops once no row's left-out variance exceeds the noise variance sigma^2 of K + sigma^2 I.
// The cost is O(n r^2) plus r row evaluations; the update of each column runs on up to
// GOMAXPROCS goroutines over row ranges, and an entry's bits do not depend on the split.
func PivotedCholesky(diag func(i int) float64, row func(i int, dst []float64), n, rank int, tol, floor float64) (L []float64, r int, err error) {
	if n <= 0 || rank < 0 {
		return nil, 0, fmt.Errorf("pivoted Cholesky: n = %d, rank = %d", n, rank)
	}
	if !(tol >= 0) || !(floor >= 0) {
		return nil, 0, fmt.Errorf("pivoted Cholesky: tolerance %v and floor %v must be non-negative", tol, floor)
	}
	if rank > n {
		rank = n
	}
	e := make([]float64, n)
	trace := 0.0
	for i := range e {
		e[i] = diag(i)
		if !(e[i] >= 0) || math.IsInf(e[i], 0) {
			return nil, 0, fmt.Errorf("pivoted Cholesky: diagonal entry %d is %v", i, e[i])
		}
		trace += e[i]
	}
	pivoted := make([]bool, n)
	L = make([]float64, 0, n*rank)
	buf := make([]float64, n)
	lp := make([]float64, rank)
	for m := 0; m < rank; m++ {
		p, resid := -1, 0.0
		for i, v := range e {
			if pivoted[i] {
				continue
			}
			resid += v
			if p < 0 || v > e[p] {
				p = i
			}
		}
		if p < 0 || !(e[p] > 0) || e[p] <= floor || resid <= tol*trace {
			break
		}
		row(p, buf)
		for l := 0; l < m; l++ {
			lp[l] = L[l*n+p]
		}
		s := math.Sqrt(e[p])
		colm := make([]float64, n)
		parallelRows(n, m, func(i0, i1 int) {
			// Blocks of pivotBlock rows: the block of the new column stays in L1 while
			// the earlier columns' entries stream past it, one contiguous run per column.
			for b0 := i0; b0 < i1; b0 += pivotBlock {
				b1 := min(i1, b0+pivotBlock)
				c := colm[b0:b1]
				copy(c, buf[b0:b1])
				for l, lpl := range lp[:m] {
					linalg.AxpyNeg(lpl, L[l*n+b0:l*n+b1], c)
				}
				for i := range c {
					gi := b0 + i
					switch {
					case gi == p:
						c[i] = s
					case pivoted[gi]:
						c[i] = 0 // exactly zero in exact arithmetic
					default:
						c[i] /= s
						e[gi] = math.Max(0, e[gi]-c[i]*c[i])
					}
				}
			}
		})
		e[p] = 0
		pivoted[p] = true
		L = append(L, colm...)
		r++
	}
	return L, r, nil
}

// pivotBlock is the rows of PivotedCholesky's update blocks (4 KiB of the new column).
const pivotBlock = 512

// parallelRows runs f on row ranges [i0, i1) covering 0..n-1: one range when the update is
// small (n m below about a million multiply-adds), else one per GOMAXPROCS on
// linalg.RunTasks.
func parallelRows(n, m int, f func(i0, i1 int)) {
	w := runtime.GOMAXPROCS(0)
	if w < 2 || n*m < 1<<20 {
		f(0, n)
		return
	}
	step := (n + w - 1) / w
	linalg.RunTasks(w, (n+step-1)/step, func(i int) { f(i*step, min(n, (i+1)*step)) })
}

// Woodbury is the preconditioner P = L L^T + sigma^2 I_n for a rank-r factor L (n x r,
// column-major), applied through the r x r matrix C = sigma^2 I_r + L^T L and its Cholesky
// factor (standard Woodbury and determinant-lemma algebra):
//
//	P^-1 v = sigma^-2 (v - L C^-1 L^T v)                           (Woodbury identity)
//	log det P = (n - r) log sigma^2 + log det C                    (determinant lemma:
//	            det(sigma^2 I_n + L L^T) = sigma^{2n} det(I_r + L^T L / sigma^2) = sigma^{2(n-r)} det C)
//
// and a draw z = L z_1 + sigma z_2 with z_1 ~ N(0, I_r), z_2 ~ N(0, I_n) has covariance P.
type Woodbury struct {
	n, r   int
	sigma2 float64
	L      []float64
	u      blas64.Triangular // C = sigma^2 I_r + L^T L = U^T U (linalg.Potrf)
	logDet float64
}

// NewWoodbury builds P = L L^T + sigma2 I from L (n x r column-major, r may be 0) and
// factorises C = sigma2 I_r + L^T L; L is kept, not copied.
func NewWoodbury(L []float64, n, r int, sigma2 float64) (*Woodbury, error) {
	if n <= 0 || r < 0 || len(L) != n*r {
		return nil, fmt.Errorf("woodbury: factor has %d values for %d x %d", len(L), n, r)
	}
	if !(sigma2 > 0) || math.IsInf(sigma2, 0) {
		return nil, fmt.Errorf("woodbury: sigma^2 = %v must be positive and finite", sigma2)
	}
	w := &Woodbury{n: n, r: r, sigma2: sigma2, L: L}
	w.logDet = float64(n-r) * math.Log(sigma2)
	if r == 0 {
		return w, nil
	}
	// L column-major n x r is L^T row-major r x n; C = L^T L + sigma^2 I by linalg's Syrk
	// (upper triangle).
	c := make([]float64, r*r)
	linalg.Syrk(blas.NoTrans, 1, blas64.General{Rows: r, Cols: n, Stride: n, Data: L}, 0,
		blas64.Symmetric{Uplo: blas.Upper, N: r, Stride: r, Data: c})
	for i := 0; i < r; i++ {
		c[i*r+i] += sigma2
	}
	u, ok := linalg.Potrf(blas64.Symmetric{Uplo: blas.Upper, N: r, Stride: r, Data: c})
	if !ok {
		return nil, fmt.Errorf("woodbury: sigma^2 I + L^T L is not positive definite (r=%d)", r)
	}
	w.u = u
	for i := 0; i < r; i++ {
		w.logDet += 2 * math.Log(u.Data[i*r+i])
	}
	return w, nil
}

// Solve writes dst = P^-1 src = sigma^-2 (src - L C^-1 L^T src) for k column-major columns
// (two r x r triangular solves per column, no inverse). It panics unless len(dst) = len(src) = n k.
func (w *Woodbury) Solve(dst, src []float64, k int) {
	n, r := w.n, w.r
	if len(dst) != n*k || len(src) != n*k {
		panic(fmt.Sprintf("woodbury: solve with %d and %d values for %d x %d", len(dst), len(src), n, k))
	}
	if r == 0 {
		for i, v := range src {
			dst[i] = v / w.sigma2
		}
		return
	}
	Lt := blas64.General{Rows: r, Cols: n, Stride: n, Data: w.L}
	// U = L^T src (r x k) = Lt S^T, S = src^T (k x n row-major).
	u := make([]float64, r*k)
	linalg.Gemm(blas.NoTrans, blas.Trans, 1, Lt, blas64.General{Rows: k, Cols: n, Stride: n, Data: src},
		0, blas64.General{Rows: r, Cols: k, Stride: k, Data: u})
	// V = C^-1 U by two triangular solves with C = R^T R (R = w.u): R^T X = U, then R V = X.
	V := blas64.General{Rows: r, Cols: k, Stride: k, Data: u}
	linalg.Trsm(blas.Left, blas.Trans, 1, w.u, V)
	linalg.Trsm(blas.Left, blas.NoTrans, 1, w.u, V)
	// dst^T = (src - L V)^T / sigma^2 = (S - V^T Lt) / sigma^2.
	linalg.Gemm(blas.Trans, blas.NoTrans, 1, V, Lt,
		0, blas64.General{Rows: k, Cols: n, Stride: n, Data: dst})
	for i := range dst {
		dst[i] = (src[i] - dst[i]) / w.sigma2
	}
}

// LogDet returns log det P = (n - r) log sigma^2 + log det(sigma^2 I_r + L^T L).
func (w *Woodbury) LogDet() float64 { return w.logDet }

// Sample writes z = L z_1 + sigma z_2 ~ N(0, L L^T + sigma^2 I) into dst; it panics unless
// len(dst) = n.
func (w *Woodbury) Sample(rng *rand.Rand, dst []float64) {
	n := w.n
	if len(dst) != n {
		panic(fmt.Sprintf("woodbury: sample into %d values, want %d", len(dst), n))
	}
	s := math.Sqrt(w.sigma2)
	for i := range dst {
		dst[i] = s * rng.NormFloat64()
	}
	for l := 0; l < w.r; l++ {
		z := rng.NormFloat64()
		lc := w.L[l*n : (l+1)*n]
		for i := range dst {
			dst[i] += z * lc[i]
		}
	}
}
