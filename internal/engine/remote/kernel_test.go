package remote

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/tasks"
)

// TestKernelTasksMatchLocal runs the kernel map steps of the CG methods (K V, K[:, idx] V,
// the derivative forms a^T dK b, columns of K) on 2 and 3 fake workers over 7 uneven shards and
// checks the merged and the per-shard results are bitwise those of the local engine.
func TestKernelTasksMatchLocal(t *testing.T) {
	// 700 rows of 2 inputs, standardized-looking, in 7 shards of unequal size.
	rng := rand.New(rand.NewPCG(3, 5))
	tab := &shard.Table{Source: "mem", Columns: []string{"a", "b"}, Target: "y", D: 2}
	for i := 0; i < 700; i++ {
		a, b := rng.NormFloat64(), rng.NormFloat64()
		tab.X = append(tab.X, a, b)
		tab.Y = append(tab.Y, math.Sin(a)+b)
	}
	var refs []shard.Ref
	var tabs []*shard.Table
	offsets := []int{0}
	for i, hi := range []int{60, 200, 200, 350, 480, 610, 700} {
		lo := offsets[len(offsets)-1]
		refs = append(refs, shard.Ref{Index: i, Source: "mem", First: lo, Rows: hi - lo})
		tabs = append(tabs, tab.Slice(lo, hi))
		offsets = append(offsets, hi)
	}
	// One op per hyperparameter value; the local engine's keeps its blocks, the workers
	// decode their own (each worker its own decoder and cache).
	op := &tasks.KernelOp{
		Kernel:  kernel.Kernel{Family: kernel.Matern52, Lengthscales: []float64{0.8, 1.9}, SignalVariance: 2.3},
		X:       tab.X,
		Offsets: offsets,
	}
	n := op.N()
	vec := func(k int, seed uint64) []float64 {
		r := rand.New(rand.NewPCG(seed, 1))
		v := make([]float64, n*k)
		for i := range v {
			v[i] = r.NormFloat64() * 1e3 // large values make any reordering show in the low bits
		}
		return v
	}
	cases := []struct {
		name string
		task engine.Task
	}{
		{"mvm", &tasks.KernelTask{Op: op, Kind: tasks.KernelMVM, K: 4, V: vec(4, 1)}},
		{"mvm over columns", &tasks.KernelTask{Op: op, Kind: tasks.KernelMVM, K: 2, V: vec(2, 4)[:2*6], Idx: []int{5, 699, 0, 300, 301, 5}}},
		{"quad", &tasks.KernelTask{Op: op, Kind: tasks.KernelQuad, K: 3, A: vec(3, 2), B: vec(3, 3)}},
		{"cols", &tasks.KernelTask{Op: op, Kind: tasks.KernelCols, Idx: []int{0, 59, 60, 699, 350}}},
	}
	for _, workers := range []int{2, 3} {
		t.Run(fmt.Sprintf("%d workers", workers), func(t *testing.T) {
			c := newCluster(t)
			c.tab, c.refs, c.tabs = tab, refs, tabs
			for i := 1; i <= workers; i++ {
				c.start(fmt.Sprintf("w%d", i), nil)
			}
			rem := c.engine(nil)
			loc, err := engine.NewLocal(refs, tabs, 3)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for _, tc := range cases {
				// Twice: the second time the workers run on their cached kernel blocks.
				for pass := 1; pass <= 2; pass++ {
					want, err := loc.Reduce(ctx, tc.task)
					if err != nil {
						t.Fatal(err)
					}
					got, err := rem.Reduce(ctx, tc.task)
					if err != nil {
						t.Fatalf("%s: %v", tc.name, err)
					}
					if !bytes.Equal(statBytes(t, got), statBytes(t, want)) {
						t.Fatalf("%s, pass %d: the remote engine's merged result differs from the local one", tc.name, pass)
					}
				}
				wantParts, err := loc.Gather(ctx, tc.task)
				if err != nil {
					t.Fatal(err)
				}
				gotParts, err := rem.Gather(ctx, tc.task)
				if err != nil {
					t.Fatal(err)
				}
				if len(gotParts) != len(refs) || len(wantParts) != len(refs) {
					t.Fatalf("%s: gathered %d and %d parts for %d shards", tc.name, len(gotParts), len(wantParts), len(refs))
				}
				for i := range gotParts {
					if !bytes.Equal(statBytes(t, gotParts[i]), statBytes(t, wantParts[i])) {
						t.Errorf("%s: shard %d differs", tc.name, i)
					}
				}
			}
			// Every worker took part.
			for i := 1; i <= workers; i++ {
				if len(c.worker(fmt.Sprintf("w%d", i)).shardsRun(1)) == 0 {
					t.Errorf("w%d ran no shard in round 1", i)
				}
			}
		})
	}
}
