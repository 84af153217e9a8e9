package tasks

// The map step of the conjugate-gradient methods (Potapczynski et al. 2021, Sec. 4; Bartels &
// Hennig 2020, Sec. 3): products with the kernel matrix K = k(X, X) of all n training rows,
// one block of rows per shard. A shard's task computes its rows of K V for a batch of vectors
// V, the bilinear forms a^T (dK/dtheta) b summed over its rows, or selected columns of its
// rows of K. Every shard needs all of X, which the KernelOp carries; a process decodes it once
// per hyperparameter value (the decoder caches it by hash, OpCache) and keeps each shard's
// kernel block in memory while the op's blocks fit its budget (KernelOp.CacheBytes, else the
// context's WithKernelCacheBytes, else DefaultKernelCacheBytes: a quarter of the machine's
// memory), so the many products of one CG run cost one kernel evaluation per entry.

import (
	"context"
	"fmt"
	"math"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/linalg"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
)

// FallbackKernelCacheBytes is the kernel-block budget when the machine's memory cannot be
// read (1 GiB).
const FallbackKernelCacheBytes = 1 << 30

// KernelCacheMemoryShare is the share of the machine's memory (the smaller of the physical
// memory and the cgroup's limit) that one KernelOp may fill with kernel blocks by default: a
// quarter. A worker's decoder keeps the ops of the two latest hyperparameter values, so the
// kernel blocks of a worker take at most half the memory by default.
const KernelCacheMemoryShare = 4

// DefaultKernelCacheBytes is the kernel-block budget of one KernelOp when neither the op nor
// the context sets one: 1/KernelCacheMemoryShare of the machine's memory (machineMemory), or
// FallbackKernelCacheBytes when that cannot be read. It is read once per process.
var DefaultKernelCacheBytes = sync.OnceValue(func() int64 {
	if m := machineMemory(); m > 0 {
		return m / KernelCacheMemoryShare
	}
	return FallbackKernelCacheBytes
})

// kernelCacheKey is the context key of WithKernelCacheBytes.
type kernelCacheKey struct{}

// WithKernelCacheBytes returns ctx carrying the kernel-block budget of the KernelOps whose
// tasks run under it (a process setting: eval's --kernel-cache-size); b < 0 keeps no blocks.
// An op's own CacheBytes, when set, takes precedence.
func WithKernelCacheBytes(ctx context.Context, b int64) context.Context {
	return context.WithValue(ctx, kernelCacheKey{}, b)
}

// kernelCacheBytes is the budget for op's blocks under ctx: the op's CacheBytes, else the
// context's (WithKernelCacheBytes), else DefaultKernelCacheBytes.
func kernelCacheBytes(ctx context.Context, op *KernelOp) int64 {
	if op.CacheBytes != 0 {
		return op.CacheBytes
	}
	if b, ok := ctx.Value(kernelCacheKey{}).(int64); ok && b != 0 {
		return b
	}
	return DefaultKernelCacheBytes()
}

// Row chunks of the kernel products. A shard's rows are taken in chunks: formed on the fly
// (when the shard's block is not cached) chunkBytes of K at a time, and multiplied one chunk
// per linalg.Gemm call, so that the product's packing and goroutines are paid per chunk, not
// per 128 rows. The bits do not depend on the chunks: an entry of K depends only on its two
// rows (kernel.Family.ScaledBlock) and a Gemm's only on its fixed inner panel (linalg), so a
// cached block and rows formed on the fly give the same products.
const (
	// chunkBytes bounds the kernel rows formed at once and a chunk's product rows (64 MiB).
	chunkBytes = 64 << 20
	// chunkQuantum is the granularity of a chunk's rows: a multiple of the kernel tile's 64
	// rows, the product's 96-row tasks and quadRows, so that full chunks split evenly.
	chunkQuantum = 768
	// quadRows is the rows of the sub-chunks of KernelQuad's transposed products.
	quadRows = 384
)

// chunkRows is the rows of a chunk whose rows hold rowValues float64 each: as many as fit in
// chunkBytes, in multiples of chunkQuantum (at least one quantum), and at most rows.
func chunkRows(rows, rowValues int) int {
	r := chunkBytes / 8 / max(rowValues, 1) / chunkQuantum * chunkQuantum
	return max(1, min(rows, max(r, chunkQuantum)))
}

// KernelOp is the kernel matrix K = k(X, X) of the standardized training inputs X (n x d,
// row-major, rows in shard order) at one hyperparameter value. Shard i owns rows
// Offsets[i]..Offsets[i+1]-1 of X (len(Offsets) = shards + 1). A KernelOp is shared by all
// the tasks of one hyperparameter value and caches their kernel blocks; it is safe for
// concurrent use.
type KernelOp struct {
	Kernel     kernel.Kernel
	X          []float64
	Offsets    []int
	CacheBytes int64 // kernel-block budget in this process; 0: the context's, else DefaultKernelCacheBytes; < 0 none

	mu     sync.Mutex
	blocks map[int][]float64
	used   int64
	spare  [][]float64 // memory of a recycled op's blocks (Recycle), taken by new blocks

	scaleOnce sync.Once
	scaled    []float64 // X with column k divided by lengthscale k
}

// Validate checks the shapes: a valid kernel of d = len(Kernel.Lengthscales) inputs, X of
// n*d finite values, and Offsets increasing from 0 to n.
func (o *KernelOp) Validate() error {
	if err := o.Kernel.Validate(); err != nil {
		return fmt.Errorf("kernel op: %w", err)
	}
	d := o.Kernel.Dim()
	if len(o.X) == 0 || len(o.X)%d != 0 {
		return fmt.Errorf("kernel op: %d input values for d=%d", len(o.X), d)
	}
	n := len(o.X) / d
	if len(o.Offsets) < 2 || o.Offsets[0] != 0 || o.Offsets[len(o.Offsets)-1] != n {
		return fmt.Errorf("kernel op: shard offsets must run from 0 to the %d rows", n)
	}
	for i := 1; i < len(o.Offsets); i++ {
		if o.Offsets[i] < o.Offsets[i-1] {
			return fmt.Errorf("kernel op: shard offsets decrease at shard %d", i)
		}
	}
	for _, v := range o.X {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("kernel op: inputs are not finite")
		}
	}
	return nil
}

// N is the number of training rows n.
func (o *KernelOp) N() int { return len(o.X) / o.Kernel.Dim() }

// rowsOf returns the first row and row count of shard ref in X, checking the shard's table.
func (o *KernelOp) rowsOf(ref shard.Ref, tab *shard.Table) (lo, rows int, err error) {
	if ref.Index < 0 || ref.Index+1 >= len(o.Offsets) {
		return 0, 0, fmt.Errorf("kernel task: shard %d of a job with %d shards", ref.Index, len(o.Offsets)-1)
	}
	lo, hi := o.Offsets[ref.Index], o.Offsets[ref.Index+1]
	if tab != nil && tab.N() != hi-lo {
		return 0, 0, fmt.Errorf("kernel task: shard %d has %d rows, the job's inputs give it %d", ref.Index, tab.N(), hi-lo)
	}
	if tab != nil && tab.D != o.Kernel.Dim() {
		return 0, 0, fmt.Errorf("kernel task: shard %d has %d inputs, the kernel %d", ref.Index, tab.D, o.Kernel.Dim())
	}
	return lo, hi - lo, nil
}

// scaledX returns X with column j divided by lengthscale j, computed once per op.
func (o *KernelOp) scaledX() []float64 {
	o.scaleOnce.Do(func() {
		d := o.Kernel.Dim()
		o.scaled = make([]float64, len(o.X))
		for i, v := range o.X {
			o.scaled[i] = v / o.Kernel.Lengthscales[i%d]
		}
	})
	return o.scaled
}

// fill writes rows lo..lo+rows-1 of K (rows x n, row-major) into dst.
func (o *KernelOp) fill(lo, rows int, dst []float64) {
	o.fillWith(lo, rows, nil, dst, kernel.BlockK)
}

// fillCols writes rows lo..lo+rows-1 of K[:, idx] (rows x len(idx), row-major) into dst.
func (o *KernelOp) fillCols(lo, rows int, idx []int, dst []float64) {
	o.fillWith(lo, rows, idx, dst, kernel.BlockK)
}

// fillQ writes rows lo..lo+rows-1 of Q, Q_im = sigma_f^2 q(r_im) (kernel.Family.ProfileGrad).
func (o *KernelOp) fillQ(lo, rows int, dst []float64) {
	o.fillWith(lo, rows, nil, dst, kernel.BlockQ)
}

// fillWith writes sigma_f^2 f(r_im^2) (f = k0 or q) for rows i = lo..lo+rows-1 and columns m in
// idx (all n columns when idx is nil), row-major, from the inputs scaled by the lengthscales
// (kernel.Family.ScaledBlock: an entry's bits depend only on its two rows, so cached and
// on-the-fly blocks agree).
func (o *KernelOp) fillWith(lo, rows int, idx []int, dst []float64, v kernel.BlockValue) {
	d := o.Kernel.Dim()
	xs := o.scaledX()
	xb := xs
	if idx != nil {
		xb = make([]float64, len(idx)*d)
		for c, m := range idx {
			copy(xb[c*d:(c+1)*d], xs[m*d:(m+1)*d])
		}
	}
	o.Kernel.Family.ScaledBlock(v, o.Kernel.SignalVariance, xs[lo*d:(lo+rows)*d], xb, d, dst, len(xb)/d)
}

// block returns shard index's cached kernel block (rows x n), forming and caching it when it
// fits in the budget limit (< 0: none); nil means the caller forms rows on the fly.
func (o *KernelOp) block(limit int64, index, lo, rows int) []float64 {
	size := int64(rows) * int64(o.N()) * 8
	o.mu.Lock()
	if b, ok := o.blocks[index]; ok {
		o.mu.Unlock()
		return b
	}
	if limit < 0 || o.used+size > limit {
		o.mu.Unlock()
		return nil
	}
	o.used += size // reserve before computing, so concurrent shards respect the budget
	b := o.takeSpare(rows * o.N())
	o.mu.Unlock()
	if b == nil {
		b = make([]float64, rows*o.N())
	}
	o.fill(lo, rows, b) // overwrites every value of a recycled slice
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.blocks == nil {
		o.blocks = map[int][]float64{}
	}
	if old, ok := o.blocks[index]; ok { // another task formed it meanwhile
		o.used -= size
		o.spare = append(o.spare, b)
		return old
	}
	o.blocks[index] = b
	return b
}

// takeSpare returns a recycled slice of length size (the smallest that fits), or nil; o.mu
// is held.
func (o *KernelOp) takeSpare(size int) []float64 {
	best := -1
	for i, b := range o.spare {
		if cap(b) >= size && (best < 0 || cap(b) < cap(o.spare[best])) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	b := o.spare[best][:size]
	o.spare = append(o.spare[:best], o.spare[best+1:]...)
	return b
}

// Recycle hands the memory of prev's kernel blocks (and of the blocks prev itself recycled
// but did not use) to o, whose blocks reuse it before allocating: a CG run forms a new
// op's blocks, often GiBs, at every hyperparameter value, and fresh memory of that size costs
// page faults and zeroing at every step. prev keeps no blocks afterwards (a later task of
// prev forms its rows again); no task of prev may be running. Reuse never changes a result:
// a block's every value is written when it is formed.
func (o *KernelOp) Recycle(prev *KernelOp) {
	if prev == nil || prev == o {
		return
	}
	prev.mu.Lock()
	var bufs [][]float64
	for i := 0; i+1 < len(prev.Offsets); i++ { // in shard order, so the hand-over is deterministic
		if b, ok := prev.blocks[i]; ok {
			bufs = append(bufs, b)
		}
	}
	bufs = append(bufs, prev.spare...)
	prev.blocks, prev.used, prev.spare = nil, 0, nil
	prev.mu.Unlock()
	o.mu.Lock()
	o.spare = append(o.spare, bufs...)
	o.mu.Unlock()
}

// KernelTaskKind selects what a KernelTask computes.
type KernelTaskKind int

const (
	// KernelMVM: the shard's rows of K V for V n x k (column-major), or with Idx set, of
	// K[:, Idx] V for V len(Idx) x k.
	KernelMVM KernelTaskKind = iota + 1
	// KernelQuad: for p pairs of n-vectors (a_c, b_c), the sums over the shard's rows i of
	// a_c[i] (dK/dtheta_j)[i, :] b_c for the kernel's d+1 log-hyperparameters theta_j.
	KernelQuad
	// KernelCols: the shard's rows of K[:, Idx].
	KernelCols
)

// KernelTask is one kernel map step over a KernelOp:
//
//   - KernelMVM with V (n x K, column-major) returns reduce.Rows with D = K holding the shard's
//     rows of K V (row-major) and zero Y; merged in shard order they are K V, row by row. With
//     Idx set, V is len(Idx) x K and the product is K[:, Idx] V (KMCG's R = k(X, X_M) S), formed
//     on the fly at O(rows len(Idx) d) per shard.
//   - KernelQuad with A and B (n x K each, column-major: K pairs) returns reduce.Sum with one
//     part of K*(d+1) values, [c*(d+1)+j] = sum_{i in shard} A[i,c] sum_m dK[i,m]/dtheta_j B[m,c],
//     with theta = (log l_1..log l_d, log sigma_f^2) (kernel.EvalGrad's order); merged, the sums
//     are a_c^T (dK/dtheta_j) b_c.
//   - KernelCols with Idx returns reduce.Rows with D = len(Idx) holding the shard's rows of
//     K[:, Idx]: gathered in shard order, the columns k(X, x_i) for the pivoted Cholesky.
type KernelTask struct {
	Op   *KernelOp
	Kind KernelTaskKind
	K    int
	V    []float64
	A, B []float64
	Idx  []int
}

// Check validates the task's shapes against its op.
func (t *KernelTask) Check() error {
	if t.Op == nil {
		return fmt.Errorf("kernel task: no kernel op")
	}
	n := t.Op.N()
	switch t.Kind {
	case KernelMVM:
		m := n
		if len(t.Idx) > 0 {
			m = len(t.Idx)
			if err := checkIdx(t.Idx, n); err != nil {
				return err
			}
		}
		if t.K < 1 || len(t.V) != m*t.K {
			return fmt.Errorf("kernel task: %d values for %d vectors of %d rows", len(t.V), t.K, m)
		}
	case KernelQuad:
		if t.K < 1 || len(t.A) != n*t.K || len(t.B) != n*t.K {
			return fmt.Errorf("kernel task: %d and %d values for %d pairs of %d rows", len(t.A), len(t.B), t.K, n)
		}
	case KernelCols:
		if len(t.Idx) == 0 {
			return fmt.Errorf("kernel task: no columns")
		}
		return checkIdx(t.Idx, n)
	default:
		return fmt.Errorf("kernel task: unknown kind %d", t.Kind)
	}
	return nil
}

func checkIdx(idx []int, n int) error {
	for _, i := range idx {
		if i < 0 || i >= n {
			return fmt.Errorf("kernel task: column %d of %d", i, n)
		}
	}
	return nil
}

// Map computes the shard's part.
func (t *KernelTask) Map(ctx context.Context, ref shard.Ref, tab *shard.Table) (reduce.Stats, error) {
	if err := t.Check(); err != nil {
		return nil, err
	}
	lo, rows, err := t.Op.rowsOf(ref, tab)
	if err != nil {
		return nil, err
	}
	switch t.Kind {
	case KernelMVM:
		return t.mvm(ctx, ref.Index, lo, rows)
	case KernelQuad:
		return t.quad(ctx, ref.Index, lo, rows)
	}
	return t.cols(ctx, ref.Index, lo, rows), nil
}

func (t *KernelTask) mvm(ctx context.Context, index, lo, rows int) (reduce.Stats, error) {
	k := t.K
	out := &reduce.Rows{D: k, X: make([]float64, rows*k), Y: make([]float64, rows)}
	if rows == 0 {
		return out, nil
	}
	// The columns of K taken: all n, or Idx (K[:, Idx] V, never cached).
	m := t.Op.N()
	var cached []float64
	if len(t.Idx) > 0 {
		m = len(t.Idx)
	} else {
		cached = t.Op.block(kernelCacheBytes(ctx, t.Op), index, lo, rows)
	}
	// V is m x k column-major, which is the row-major k x m matrix V^T. The product runs over
	// chunks of rows (chunkRows: of the formed rows of K when not cached, of the output when
	// cached); both give the same bits (which shards a process caches depends on its memory).
	vt := blas64.General{Rows: k, Cols: m, Stride: m, Data: t.V}
	var buf []float64
	bs := chunkRows(rows, k)
	if cached == nil {
		bs = chunkRows(rows, m)
		buf = make([]float64, bs*m)
	}
	for r0 := 0; r0 < rows; r0 += bs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		nr := min(bs, rows-r0)
		kb := buf
		switch {
		case cached != nil:
			kb = cached[r0*m:]
		case len(t.Idx) > 0:
			t.Op.fillCols(lo+r0, nr, t.Idx, buf)
		default:
			t.Op.fill(lo+r0, nr, buf)
		}
		Kb := blas64.General{Rows: nr, Cols: m, Stride: m, Data: kb[:nr*m]}
		C := blas64.General{Rows: nr, Cols: k, Stride: k, Data: out.X[r0*k : (r0+nr)*k]}
		linalg.Gemm(blas.NoTrans, blas.Trans, 1, Kb, vt, 0, C)
	}
	return out, nil
}

// quad computes the derivative forms by matrix products. With t_j = xs_ij - xs_mj the scaled
// differences (xs = X / l) and Q_im = sigma_f^2 q(r_im) (kernel.Family.ProfileGrad),
//
//	dK_im/dlog l_j = Q_im t_j^2,   dK/dlog sigma_f^2 = K,
//	sum_{i in S} a_i sum_m dK_im/dlog l_j b_m
//	  = sum_{i in S} a_i [xs_ij^2 (Q b)_i - 2 xs_ij (Q (xs_j .* b))_i] + sum_m (Q_S^T a_S)_m xs_mj^2 b_m,
//
// S the shard's rows (the last term is the first one's mirror, Q being symmetric). So one
// product of each chunk of Q's rows with the n x (d+1)k matrix [b, xs_j .* b] and one of its
// transpose with the chunk's a give every lengthscale form (for RBF, Q = K also gives K b),
// at (d+2)k columns per entry of Q where [b, xs_j .* b, xs_j^2 .* b] took (2d+1)k. The
// transposed products run over fixed sub-chunks of quadRows rows, summed in row order, so
// that their bits do not depend on the chunks a process forms (cached or not). The rows of K
// come from the shard's cached kernel block when it is cached (for RBF, so do those of Q,
// whose entries have the same bits as K's: kernel.Family.ScaledBlock), else they are formed
// on the fly.
func (t *KernelTask) quad(ctx context.Context, index, lo, rows int) (reduce.Stats, error) {
	n, k, d := t.Op.N(), t.K, t.Op.Kernel.Dim()
	np, w := d+1, d+1
	xs := t.Op.scaledX()
	rbf := t.Op.Kernel.Family == kernel.RBF
	sum := make([]float64, k*np)
	if rows == 0 {
		return &reduce.Sum{Parts: [][]float64{sum}, N: 0}, nil
	}
	// Bext row-major n x (w k): column c*w is b_c, c*w+1+j is xs_j .* b_c.
	bext := make([]float64, n*w*k)
	for m := 0; m < n; m++ {
		row := bext[m*w*k : (m+1)*w*k]
		xm := xs[m*d : (m+1)*d]
		for c := 0; c < k; c++ {
			b := t.B[c*n+m]
			col := row[c*w : (c+1)*w]
			col[0] = b
			for j, v := range xm {
				col[1+j] = v * b
			}
		}
	}
	// as: the shard's rows of A, row-major rows x k, for the transposed products.
	as := make([]float64, rows*k)
	for i := 0; i < rows; i++ {
		for c := 0; c < k; c++ {
			as[i*k+c] = t.A[c*n+lo+i]
		}
	}
	cached := t.Op.block(kernelCacheBytes(ctx, t.Op), index, lo, rows)
	bs := chunkRows(rows, w*k)
	if cached == nil {
		bs = chunkRows(rows, max(n, w*k))
	}
	cq := make([]float64, bs*w*k)
	qta := make([]float64, n*k) // Q_S^T a_S, row-major n x k
	part := make([]float64, n*k)
	var qb, kb, ck []float64
	if cached == nil || !rbf {
		qb = make([]float64, bs*n)
	}
	if !rbf {
		ck = make([]float64, bs*k)
		if cached == nil {
			kb = make([]float64, bs*n)
		}
	}
	Bm := blas64.General{Rows: n, Cols: w * k, Stride: w * k, Data: bext}
	bt := blas64.General{Rows: k, Cols: n, Stride: n, Data: t.B}
	for r0 := 0; r0 < rows; r0 += bs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		nr := min(bs, rows-r0)
		var krows []float64 // rows r0..r0+nr-1 of the shard's K
		if cached != nil {
			krows = cached[r0*n : (r0+nr)*n]
		}
		qrows := krows
		if qrows == nil || !rbf {
			t.Op.fillQ(lo+r0, nr, qb)
			qrows = qb[:nr*n]
		}
		linalg.Gemm(blas.NoTrans, blas.NoTrans, 1, blas64.General{Rows: nr, Cols: n, Stride: n, Data: qrows}, Bm,
			0, blas64.General{Rows: nr, Cols: w * k, Stride: w * k, Data: cq[:nr*w*k]})
		for s0 := 0; s0 < nr; s0 += quadRows { // chunks are multiples of quadRows
			sr := min(quadRows, nr-s0)
			linalg.Gemm(blas.Trans, blas.NoTrans, 1, blas64.General{Rows: sr, Cols: n, Stride: n, Data: qrows[s0*n : (s0+sr)*n]},
				blas64.General{Rows: sr, Cols: k, Stride: k, Data: as[(r0+s0)*k : (r0+s0+sr)*k]},
				0, blas64.General{Rows: n, Cols: k, Stride: k, Data: part})
			for i, v := range part {
				qta[i] += v
			}
		}
		if !rbf {
			if krows == nil {
				t.Op.fill(lo+r0, nr, kb)
				krows = kb[:nr*n]
			}
			linalg.Gemm(blas.NoTrans, blas.Trans, 1, blas64.General{Rows: nr, Cols: n, Stride: n, Data: krows}, bt,
				0, blas64.General{Rows: nr, Cols: k, Stride: k, Data: ck[:nr*k]})
		}
		for i := 0; i < nr; i++ {
			gi := lo + r0 + i
			xi := xs[gi*d : (gi+1)*d]
			for c := 0; c < k; c++ {
				a := as[(r0+i)*k+c]
				if a == 0 {
					continue
				}
				cc := cq[(i*k+c)*w : (i*k+c+1)*w]
				s := sum[c*np : (c+1)*np]
				for j, v := range xi {
					s[j] += a * (v*v*cc[0] - 2*v*cc[1+j])
				}
				if rbf {
					s[d] += a * cc[0]
				} else {
					s[d] += a * ck[i*k+c]
				}
			}
		}
	}
	for m := 0; m < n; m++ {
		xm := xs[m*d : (m+1)*d]
		for c := 0; c < k; c++ {
			g := qta[m*k+c] * t.B[c*n+m]
			if g == 0 {
				continue
			}
			s := sum[c*np : (c+1)*np]
			for j, v := range xm {
				s[j] += g * v * v
			}
		}
	}
	return &reduce.Sum{Parts: [][]float64{sum}, N: rows}, nil
}

// cols returns the shard's rows of K[:, Idx]. They are copied from the shard's cached block,
// which is formed and cached here when it fits (the products at the same hyperparameters
// that follow or precede a column request use it: the pivoted Cholesky's hundreds of
// one-column requests then cost a copy each instead of a kernel evaluation); otherwise they are
// formed on the fly. Both give the same bits (fillWith).
func (t *KernelTask) cols(ctx context.Context, index, lo, rows int) reduce.Stats {
	c := len(t.Idx)
	out := &reduce.Rows{D: c, X: make([]float64, rows*c), Y: make([]float64, rows)}
	if rows == 0 {
		return out
	}
	if b := t.Op.block(kernelCacheBytes(ctx, t.Op), index, lo, rows); b != nil {
		n := t.Op.N()
		for i := 0; i < rows; i++ {
			row, dst := b[i*n:(i+1)*n], out.X[i*c:(i+1)*c]
			for j, m := range t.Idx {
				dst[j] = row[m]
			}
		}
		return out
	}
	t.Op.fillCols(lo, rows, t.Idx, out.X)
	return out
}
