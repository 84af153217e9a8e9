package linalg

import (
	"errors"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"
)

// ErrNotFactorized is returned by the methods of a Cholesky that holds no successful
// factorisation.
var ErrNotFactorized = errors.New("linalg: Cholesky: no successful factorisation")

// Cholesky is the factorisation A = U^T U of a symmetric positive definite matrix, with the
// methods of gonum's mat.Cholesky that gpreduce uses, so that a field of type mat.Cholesky
// can become a linalg.Cholesky with no other change. Its factor comes from Potrf.
type Cholesky struct {
	n  int
	u  []float64 // upper triangular, row-major n x n; the strict lower triangle is zero
	ok bool
	// work is the n x n scratch of inverseU.
	work []float64
}

// Factorize computes the Cholesky factorisation of a and reports whether a is numerically
// positive definite (only the upper triangle of a is read).
func (c *Cholesky) Factorize(a mat.Symmetric) (ok bool) {
	n := a.SymmetricDim()
	c.n, c.ok = n, false
	if cap(c.u) < n*n {
		c.u = make([]float64, n*n)
	}
	c.u = c.u[:n*n]
	if r, isRaw := a.(mat.RawSymmetricer); isRaw && r.RawSymmetric().Uplo == blas.Upper {
		raw := r.RawSymmetric()
		for i := range n {
			row := c.u[i*n : (i+1)*n]
			clear(row[:i])
			copy(row[i:], raw.Data[i*raw.Stride+i:i*raw.Stride+n])
		}
	} else {
		for i := range n {
			for j := range n {
				if j < i {
					c.u[i*n+j] = 0
					continue
				}
				c.u[i*n+j] = a.At(i, j)
			}
		}
	}
	_, c.ok = Potrf(blas64.Symmetric{Uplo: blas.Upper, N: n, Stride: n, Data: c.u})
	return c.ok
}

// SymmetricDim returns the order n of the factorised matrix.
func (c *Cholesky) SymmetricDim() int { return c.n }

// RawU returns the upper triangular factor U (A = U^T U), row-major with stride n, sharing
// the receiver's storage.
func (c *Cholesky) RawU() blas64.Triangular {
	return blas64.Triangular{Uplo: blas.Upper, Diag: blas.NonUnit, N: c.n, Stride: c.n, Data: c.u}
}

// LogDet returns log det A = 2 sum_i log U_ii.
func (c *Cholesky) LogDet() float64 {
	if !c.ok {
		return math.NaN()
	}
	var s float64
	for i := range c.n {
		s += math.Log(c.u[i*c.n+i])
	}
	return 2 * s
}

// SolveVecTo sets dst = A^-1 b by two triangular solves, U^T z = b and U x = z.
func (c *Cholesky) SolveVecTo(dst *mat.VecDense, b mat.Vector) error {
	if !c.ok {
		return ErrNotFactorized
	}
	if b.Len() != c.n {
		return errors.New("linalg: Cholesky: SolveVecTo: length mismatch")
	}
	x := make([]float64, c.n)
	for i := range x {
		x[i] = b.AtVec(i)
	}
	B := blas64.General{Rows: c.n, Cols: 1, Stride: 1, Data: x}
	Trsm(blas.Left, blas.Trans, 1, c.RawU(), B)
	Trsm(blas.Left, blas.NoTrans, 1, c.RawU(), B)
	if dst.IsEmpty() {
		dst.ReuseAsVec(c.n)
	} else if dst.Len() != c.n {
		return errors.New("linalg: Cholesky: SolveVecTo: destination length mismatch")
	}
	for i, v := range x {
		dst.SetVec(i, v)
	}
	return nil
}

// SolveTo sets dst = A^-1 b for a matrix b with n rows, by Trsm with U^T and then U.
func (c *Cholesky) SolveTo(dst *mat.Dense, b mat.Matrix) error {
	if !c.ok {
		return ErrNotFactorized
	}
	r, k := b.Dims()
	if r != c.n {
		return errors.New("linalg: Cholesky: SolveTo: row count mismatch")
	}
	x := make([]float64, r*k)
	for i := range r {
		for j := range k {
			x[i*k+j] = b.At(i, j)
		}
	}
	B := blas64.General{Rows: r, Cols: k, Stride: k, Data: x}
	Trsm(blas.Left, blas.Trans, 1, c.RawU(), B)
	Trsm(blas.Left, blas.NoTrans, 1, c.RawU(), B)
	if dst.IsEmpty() {
		dst.ReuseAs(r, k)
	} else if dr, dc := dst.Dims(); dr != r || dc != k {
		return errors.New("linalg: Cholesky: SolveTo: destination shape mismatch")
	}
	dst.Copy(mat.NewDense(r, k, x))
	return nil
}

// InverseTo sets dst = A^-1 = W W^T with W = U^-1: W by a triangular solve against the
// identity, the product by Syrk (upper triangle), both skipping the zero triangle of W (about
// n^3 flops in all). Only for callers that need every entry of the inverse (the exact GP's
// gradient traces); a solve is cheaper otherwise.
func (c *Cholesky) InverseTo(dst *mat.SymDense) error {
	if !c.ok {
		return ErrNotFactorized
	}
	n := c.n
	if dst.IsEmpty() {
		dst.ReuseAsSym(n)
	} else if dst.SymmetricDim() != n {
		return errors.New("linalg: Cholesky: InverseTo: destination size mismatch")
	}
	raw := dst.RawSymmetric()
	w := c.inverseU()
	W := view{data: w, stride: n}
	for i0 := 0; i0 < n; i0 += potrfBlock {
		i1 := min(i0+potrfBlock, n)
		row := raw.Data[i0*raw.Stride : i1*raw.Stride]
		scale(0, i1-i0, n-i0, row[i0:], raw.Stride, upper)
		// (W W^T)_ij = sum_(l >= j) W_il W_jl for j >= i: the inner sum starts at i0.
		Wi := W.at(i0, i0)
		gemmCore(bestKernel, i1-i0, n-i0, n-i0, 1, Wi, view{data: Wi.data, stride: n, trans: true}, row[i0:], raw.Stride, upper)
	}
	return nil
}

// inverseU returns W = U^-1 (n x n, row-major) in the receiver's scratch, which it keeps so
// that a Cholesky refactorised at the same size (an optimizer's evaluations) does not
// allocate it again; the next call overwrites it.
func (c *Cholesky) inverseU() []float64 {
	n := c.n
	if cap(c.work) < n*n {
		c.work = make([]float64, n*n)
	}
	w := c.work[:n*n]
	clear(w)
	invUpper(bestKernel, c.u, w, n)
	return w
}

// InverseUTo sets dst (length n*n, row-major with stride n) to W = U^-1, the inverse of the
// upper triangular factor (A = U^T U, so A^-1 = W W^T), zero below the diagonal, by the
// triangular inverse of InverseTo and InverseDiag (about n^3/6 multiply-adds), formed in dst
// itself. For callers that keep a factor of A^-1 as such (a variational covariance S = A^-1),
// not for solves.
func (c *Cholesky) InverseUTo(dst []float64) error {
	if !c.ok {
		return ErrNotFactorized
	}
	if len(dst) != c.n*c.n {
		return errors.New("linalg: Cholesky: InverseUTo: destination length mismatch")
	}
	clear(dst)
	invUpper(bestKernel, c.u, dst, c.n)
	return nil
}

// InverseDiag sets dst[i] = (A^-1)_ii for i < n: with W = U^-1 (A^-1 = W W^T) it is the
// squared norm of row i of W, formed by the same triangular inverse as InverseTo (about
// n^3/6 multiply-adds, a third of InverseTo). dst must have length n.
func (c *Cholesky) InverseDiag(dst []float64) error {
	if !c.ok {
		return ErrNotFactorized
	}
	n := c.n
	if len(dst) != n {
		return errors.New("linalg: Cholesky: InverseDiag: destination length mismatch")
	}
	w := c.inverseU()
	for i := range n {
		var s float64
		for _, v := range w[i*n+i : (i+1)*n] {
			s += v * v
		}
		dst[i] = s
	}
	return nil
}

// InverseNorm2 returns ||T^-1||_F^2, the sum of the squares of the entries of the inverse of
// the non-unit triangular t; for the Cholesky factor of P (P = L L^T or U^T U) it is
// tr(P^-1). The inverse is formed by invUpper (about n^3/6 multiply-adds, a third of a
// triangular solve against the full identity), after transposing a lower t (||T^-1||_F =
// ||T^-T||_F).
func InverseNorm2(t blas64.Triangular) float64 {
	n := t.N
	u := make([]float64, n*n)
	for i := range n {
		for j := i; j < n; j++ {
			if t.Uplo == blas.Upper {
				u[i*n+j] = t.Data[i*t.Stride+j]
			} else {
				u[i*n+j] = t.Data[j*t.Stride+i]
			}
		}
	}
	w := make([]float64, n*n)
	invUpper(bestKernel, u, w, n)
	var s float64
	for i := range n {
		for _, v := range w[i*n+i : (i+1)*n] {
			s += v * v
		}
	}
	return s
}

// invUpper sets w (n x n, zero on entry) to U^-1 for the upper triangular u (both row-major,
// stride n): Trsm against the identity by block rows from the bottom, where block row k of
// the solution is zero left of column k0 and so takes no part in the products there.
func invUpper(kern kernelFunc, u, w []float64, n int) {
	for i := range n {
		w[i*n+i] = 1
	}
	T := view{data: u, stride: n}
	B := view{data: w, stride: n}
	for k1 := n; k1 > 0; k1 -= trsmBlock {
		k0 := max(k1-trsmBlock, 0)
		solveLeft(T, false, false, k0, k1, w[k0:], n, n-k0)
		gemmCore(kern, k0, n-k0, k1-k0, -1, T.at(0, k0), B.at(k0, k0), w[k0:], n, full)
	}
}

// UTo copies the upper triangular factor U into dst, resized to n x n.
func (c *Cholesky) UTo(dst *mat.TriDense) {
	if !dst.IsEmpty() {
		dst.Reset()
	}
	dst.ReuseAsTri(c.n, mat.Upper)
	raw := dst.RawTriangular()
	for i := range c.n {
		copy(raw.Data[i*raw.Stride+i:i*raw.Stride+c.n], c.u[i*c.n+i:(i+1)*c.n])
	}
}
