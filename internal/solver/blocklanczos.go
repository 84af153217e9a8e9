package solver

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/gpreduce/gpreduce/internal/linalg"
)

// blockLanczosStream keys the random start columns and the replacements of deflated columns.
const blockLanczosStream = 0x626c6b << 32

// BlockKrylov is an orthonormal basis Q = [Q_1 .. Q_k] (n x r) of the block Krylov space
// span{S, A S, ..., A^{k-1} S} of a symmetric positive definite operator A, built by
// BlockLanczos, with the Cholesky factor L of the block tridiagonal T = Q^T A Q. L is block
// lower bidiagonal: its diagonal blocks L_jj (b_j x b_j, lower triangular) and its
// subdiagonal blocks L_{j,j-1} (b_j x b_{j-1}).
//
// Q T^-1 Q^T = (Q L^-T)(Q L^-T)^T is the Galerkin approximation of A^-1 on the span of Q: for
// any k, k^T Q T^-1 Q^T k <= k^T A^-1 k, so variances k(x, x) - k^T Q T^-1 Q^T k are never
// below the exact ones, and they are exact once Q spans R^n.
type BlockKrylov struct {
	n      int
	q      []float64   // r x n row-major: row i is the basis vector q_i
	starts []int       // block j is rows starts[j] .. starts[j+1]-1
	ldiag  [][]float64 // L_jj, b_j x b_j row-major, lower triangular
	lsub   [][]float64 // L_{j,j-1}, b_j x b_{j-1} row-major; nil for j = 0
}

// Rank returns r, the number of basis vectors.
func (k *BlockKrylov) Rank() int { return k.starts[len(k.starts)-1] }

// Blocks returns the number of blocks whose factor L_jj is known.
func (k *BlockKrylov) Blocks() int { return len(k.ldiag) }

// Block returns block j: its basis vectors (b_j x n row-major, rows of Q^T), L_jj and
// L_{j,j-1} (nil for j = 0), sharing the basis's storage.
func (k *BlockKrylov) Block(j int) (q, ldiag, lsub []float64, bj int) {
	s0, s1 := k.starts[j], k.starts[j+1]
	return k.q[s0*k.n : s1*k.n], k.ldiag[j], k.lsub[j], s1 - s0
}

// Basis returns Q^T (r x n row-major: row i is q_i), sharing the basis's storage.
func (k *BlockKrylov) Basis() []float64 { return k.q[:k.Rank()*k.n] }

// Minus returns M = Q L^-T (n x r row-major), so that Q T^-1 Q^T = M M^T: by block forward
// substitution on M L^T = Q, M_j = (Q_j - M_{j-1} L_{j,j-1}^T) L_jj^-T.
func (k *BlockKrylov) Minus() []float64 {
	n, r := k.n, k.Rank()
	m := make([]float64, n*r)
	for c := 0; c < r; c++ {
		qc := k.q[c*n : (c+1)*n]
		for i, v := range qc {
			m[i*r+c] = v
		}
	}
	for j := range k.ldiag {
		s0, s1 := k.starts[j], k.starts[j+1]
		bj := s1 - s0
		mj := blas64.General{Rows: n, Cols: bj, Stride: r, Data: m[s0:]}
		if j > 0 {
			sp := k.starts[j-1]
			bp := s0 - sp
			mp := blas64.General{Rows: n, Cols: bp, Stride: r, Data: m[sp:]}
			linalg.Gemm(blas.NoTrans, blas.Trans, -1, mp, blas64.General{Rows: bj, Cols: bp, Stride: bp, Data: k.lsub[j]}, 1, mj)
		}
		linalg.Trsm(blas.Right, blas.Trans, 1, lowerTri(k.ldiag[j], bj), mj)
	}
	return m
}

// lowerTri views a b x b row-major lower triangle.
func lowerTri(l []float64, b int) blas64.Triangular {
	return blas64.Triangular{Uplo: blas.Lower, Diag: blas.NonUnit, N: b, Stride: b, Data: l}
}

// BlockLanczos runs the block Lanczos process with full reorthogonalisation on the symmetric
// positive definite operator A (Golub and Underwood 1977; Golub and Van Loan, Matrix
// Computations, 4th ed., §10.3.6) from the start block S = [start, g_2 .. g_b] (start and
// b - 1 standard normal columns drawn from seed), until the basis has rank columns (at most
// n). Step j (0-based) takes one product with A of b columns:
//
//	W = A Q_j - Q_{j-1} R_{j-1}^T,  A_j = Q_j^T W,  W -= Q_j A_j,
//	W -= Q (Q^T W) twice (full reorthogonalisation, as products),
//	Q_{j+1} = orthonormal basis of W's columns,  R_j = Q_{j+1}^T W = T_{j+1,j},
//
// and the block Cholesky factor of T grows with it: L_00 = chol(A_0),
// L_{j,j-1} = R_{j-1} L_{j-1,j-1}^-T, L_jj = chol(A_j - L_{j,j-1} L_{j,j-1}^T). A column of W
// that orthogonalisation leaves below tol times the largest column norm of A Q_0 (a deflated
// direction: the Krylov space is invariant there) is replaced by a seeded random vector
// orthogonalised against the basis, so the process always reaches rank; T_{j+1,j} = Q_{j+1}^T W
// stays exact because every new vector is orthogonal to all earlier ones. After each step,
// step (which may be nil) sees the basis with its new block and may end the process by
// returning true.
//
// With b = 1 this is the Lanczos process from start (LOVE's cache, Pleiss et al. 2018). A
// block of b columns costs about one single-column product when the products are memory
// bound (the kernel blocks read once for all b columns) and turns the reorthogonalisation into
// matrix products, at a Krylov space of lower polynomial degree for the same rank.
func BlockLanczos(op Operator, start []float64, b, rank int, tol float64, seed uint64, step func(*BlockKrylov) bool) (*BlockKrylov, error) {
	n := op.Dim()
	if len(start) != n || rank < 1 || b < 1 || !(tol >= 0) {
		return nil, fmt.Errorf("block lanczos: start of %d values for n = %d, block %d, rank %d, tol %v", len(start), n, b, rank, tol)
	}
	rank = min(rank, n)
	ns := math.Sqrt(dot(start, start))
	if !(ns > 0) || math.IsInf(ns, 0) {
		return nil, fmt.Errorf("block lanczos: start vector norm %v", ns)
	}
	rng := rand.New(rand.NewPCG(seed, blockLanczosStream))
	k := &BlockKrylov{n: n, starts: []int{0}}
	bj := min(b, rank)
	s := make([]float64, bj*n)
	copy(s, start)
	for i := n; i < len(s); i++ {
		s[i] = rng.NormFloat64()
	}
	if err := k.extend(s, bj, -tol, rng); err != nil {
		return nil, err
	}
	w := make([]float64, b*n)
	var rPrev []float64 // R_{j-1} = T_{j,j-1}, b_j x b_{j-1}
	scale := 0.0
	for j := 0; ; j++ {
		s0, s1 := k.starts[j], k.starts[j+1]
		bj := s1 - s0
		qj := k.q[s0*n : s1*n]
		wj := w[:bj*n]
		if err := op.MulVecs(wj, qj, bj); err != nil {
			return nil, fmt.Errorf("block lanczos: step %d: %w", j+1, err)
		}
		W := blas64.General{Rows: bj, Cols: n, Stride: n, Data: wj}
		Qj := blas64.General{Rows: bj, Cols: n, Stride: n, Data: qj}
		if j == 0 {
			for c := 0; c < bj; c++ {
				scale = math.Max(scale, math.Sqrt(dot(wj[c*n:(c+1)*n], wj[c*n:(c+1)*n])))
			}
		} else {
			sp := k.starts[j-1]
			bp := s0 - sp
			linalg.Gemm(blas.NoTrans, blas.NoTrans, -1, blas64.General{Rows: bj, Cols: bp, Stride: bp, Data: rPrev},
				blas64.General{Rows: bp, Cols: n, Stride: n, Data: k.q[sp*n : s0*n]}, 1, W)
		}
		aj := make([]float64, bj*bj)
		linalg.Gemm(blas.NoTrans, blas.Trans, 1, W, Qj, 0, blas64.General{Rows: bj, Cols: bj, Stride: bj, Data: aj})
		for r := 0; r < bj; r++ {
			for c := 0; c < r; c++ {
				v := 0.5 * (aj[r*bj+c] + aj[c*bj+r])
				aj[r*bj+c], aj[c*bj+r] = v, v
			}
		}
		linalg.Gemm(blas.NoTrans, blas.NoTrans, -1, blas64.General{Rows: bj, Cols: bj, Stride: bj, Data: aj}, Qj, 1, W)
		// The factor's new blocks: L_{j,j-1} = R_{j-1} L_{j-1,j-1}^-T, L_jj = chol(A_j - L_{j,j-1} L_{j,j-1}^T).
		var lsub []float64
		if j > 0 {
			bp := s0 - k.starts[j-1]
			lsub = append([]float64(nil), rPrev...)
			linalg.Trsm(blas.Right, blas.Trans, 1, lowerTri(k.ldiag[j-1], bp), blas64.General{Rows: bj, Cols: bp, Stride: bp, Data: lsub})
			for r := 0; r < bj; r++ {
				for c := 0; c < bj; c++ {
					aj[r*bj+c] -= dot(lsub[r*bp:(r+1)*bp], lsub[c*bp:(c+1)*bp])
				}
			}
		}
		if _, ok := linalg.Potrf(blas64.Symmetric{Uplo: blas.Lower, N: bj, Stride: bj, Data: aj}); !ok {
			return nil, fmt.Errorf("block lanczos: the block tridiagonal of rank %d is not positive definite", s1)
		}
		k.ldiag = append(k.ldiag, aj)
		k.lsub = append(k.lsub, lsub)
		if stop := step != nil && step(k); stop || s1 == rank {
			return k, nil
		}
		Qall := blas64.General{Rows: s1, Cols: n, Stride: n, Data: k.q[:s1*n]}
		c := blas64.General{Rows: bj, Cols: s1, Stride: s1, Data: make([]float64, bj*s1)}
		for pass := 0; pass < 2; pass++ {
			linalg.Gemm(blas.NoTrans, blas.Trans, 1, W, Qall, 0, c)
			linalg.Gemm(blas.NoTrans, blas.NoTrans, -1, c, Qall, 1, W)
		}
		bn := min(b, rank-s1)
		next := make([]float64, bn*n)
		copy(next, wj) // bn <= bj: only the last block can be narrower than b
		if err := k.extend(next, bn, tol*scale, rng); err != nil {
			return nil, err
		}
		rPrev = make([]float64, bn*bj)
		linalg.Gemm(blas.NoTrans, blas.Trans, 1, blas64.General{Rows: bn, Cols: n, Stride: n, Data: k.q[s1*n : (s1+bn)*n]}, W, 0,
			blas64.General{Rows: bn, Cols: bj, Stride: bj, Data: rPrev})
	}
}

// extend appends the m rows of v (m x n row-major, orthogonal to the basis up to rounding, or
// the start block) to the basis as one block of orthonormal vectors, by two passes of modified
// Gram-Schmidt against the block's earlier vectors. A row left with norm at most floor
// (floor < 0: at most -floor times its own norm) is replaced by a random vector orthogonalised
// twice against the whole basis. v is overwritten.
func (k *BlockKrylov) extend(v []float64, m int, floor float64, rng *rand.Rand) error {
	n := k.n
	r0 := k.Rank()
	for c := 0; c < m; c++ {
		x := v[c*n : (c+1)*n]
		from := r0 // the residual rows are orthogonal to the earlier blocks already
		lim := floor
		if lim < 0 {
			lim = -floor * math.Sqrt(dot(x, x))
		}
		for attempt := 0; ; attempt++ {
			r := r0 + c
			for pass := 0; pass < 2; pass++ {
				for i := from; i < r; i++ {
					qi := k.q[i*n : (i+1)*n]
					linalg.AxpyNeg(dot(qi, x), qi, x)
				}
			}
			nx := math.Sqrt(dot(x, x))
			if nx > lim && !math.IsInf(nx, 0) {
				for i := range x {
					x[i] /= nx
				}
				break
			}
			if attempt == 4 || r >= n {
				return fmt.Errorf("block lanczos: cannot extend the basis beyond rank %d of %d", r, n)
			}
			for i := range x {
				x[i] = rng.NormFloat64()
			}
			from, lim = 0, 1e-8*math.Sqrt(dot(x, x))
		}
		k.q = append(k.q, x...)
	}
	k.starts = append(k.starts, r0+m)
	return nil
}
