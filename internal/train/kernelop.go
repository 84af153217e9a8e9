package train

// The coordinator's side of the kernel map step (tasks.KernelTask): the kernel matrix of a
// tasks.KernelOp as a solver operator whose products run as map rounds over an engine.

import (
	"context"
	"fmt"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/tasks"
)

// columnsOf copies the merged rows of a tasks.KernelMVM (n x k, row-major) into dst (n x k,
// column-major, the solver's layout).
func columnsOf(dst, rows []float64, n, k int) {
	for i := 0; i < n; i++ {
		for c := 0; c < k; c++ {
			dst[c*n+i] = rows[i*k+c]
		}
	}
}

// kernelOperator is K_hat = K + sigma_n^2 I as a solver.Operator whose products run as
// tasks.KernelMVM map steps over an engine, merged in shard order.
type kernelOperator struct {
	ctx   context.Context
	eng   engine.Engine
	op    *tasks.KernelOp
	noise float64
}

func (k *kernelOperator) Dim() int { return k.op.N() }

// MulVecs writes dst = (K + sigma_n^2 I) src for kc columns (column-major).
func (k *kernelOperator) MulVecs(dst, src []float64, kc int) error {
	n := k.op.N()
	st, err := k.eng.Reduce(k.ctx, &tasks.KernelTask{Op: k.op, Kind: tasks.KernelMVM, K: kc, V: src})
	if err != nil {
		return fmt.Errorf("kernel products: %w", err)
	}
	rows, ok := st.(*reduce.Rows)
	if !ok || rows.D != kc || len(rows.X) != n*kc {
		return fmt.Errorf("kernel products: the shards returned %T with the wrong shape", st)
	}
	columnsOf(dst, rows.X, n, kc)
	for i, v := range src[:n*kc] {
		dst[i] += k.noise * v
	}
	return nil
}

// quad returns, for the kc pairs (A[:,c], B[:,c]), the bilinear forms a_c^T (dK/dtheta_j) b_c
// for the d+1 kernel log-hyperparameters, c-major (kc x (d+1)).
func (k *kernelOperator) quad(A, B []float64, kc int) ([]float64, error) {
	st, err := k.eng.Reduce(k.ctx, &tasks.KernelTask{Op: k.op, Kind: tasks.KernelQuad, K: kc, A: A, B: B})
	if err != nil {
		return nil, fmt.Errorf("kernel derivative forms: %w", err)
	}
	s, ok := st.(*reduce.Sum)
	if !ok || len(s.Parts) != 1 || len(s.Parts[0]) != kc*(k.op.Kernel.Dim()+1) {
		return nil, fmt.Errorf("kernel derivative forms: the shards returned %T with the wrong shape", st)
	}
	return s.Parts[0], nil
}

// column returns K[:, i] = k(X, x_i), gathered from the shards.
func (k *kernelOperator) column(i int) ([]float64, error) {
	return k.columns([]int{i})
}

// columns returns K[:, idx] = k(X, x_i) for i in idx (n x len(idx), column-major), gathered
// from the shards in one map round.
func (k *kernelOperator) columns(idx []int) ([]float64, error) {
	n, c := k.op.N(), len(idx)
	st, err := k.eng.Reduce(k.ctx, &tasks.KernelTask{Op: k.op, Kind: tasks.KernelCols, Idx: idx})
	if err != nil {
		return nil, fmt.Errorf("kernel columns (%d): %w", c, err)
	}
	r, ok := st.(*reduce.Rows)
	if !ok || r.D != c || len(r.X) != n*c {
		return nil, fmt.Errorf("kernel columns: the shards returned %T with the wrong shape", st)
	}
	out := make([]float64, n*c)
	columnsOf(out, r.X, n, c)
	return out, nil
}
