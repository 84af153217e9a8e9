package tasks

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
)

// TestKernelChunksKeepBits checks that the kernel products give the same bits whether the
// shards' kernel blocks are cached (one chunk of product rows) or formed on the fly (chunks
// of chunkRows rows, here more than one per shard), for RBF (whose derivative forms then take
// Q from the cached K) and a Matern kernel, on one and on three shards, and under a context
// budget (WithKernelCacheBytes) as under the op's own.
func TestKernelChunksKeepBits(t *testing.T) {
	const n, d, k = 3000, 4, 3
	if chunkRows(n, n) >= n {
		t.Fatalf("chunkRows(%d, %d) = %d: the on-the-fly product would not be chunked", n, n, chunkRows(n, n))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float64, n*d)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	V := make([]float64, n*k)
	W := make([]float64, n*k)
	for i := range V {
		V[i], W[i] = rng.NormFloat64(), rng.NormFloat64()
	}
	run := func(t *testing.T, ctx context.Context, op *KernelOp, task KernelTask) []float64 {
		t.Helper()
		task.Op = op
		var acc reduce.Stats
		for i := 0; i+1 < len(op.Offsets); i++ {
			st, err := task.Map(ctx, shard.Ref{Index: i}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if acc == nil {
				acc = st
			} else if err := acc.Merge(st); err != nil {
				t.Fatal(err)
			}
		}
		switch s := acc.(type) {
		case *reduce.Rows:
			return s.X
		case *reduce.Sum:
			return s.Parts[0]
		}
		t.Fatalf("result %T", acc)
		return nil
	}
	for _, fam := range []kernel.Family{kernel.RBF, kernel.Matern52} {
		for _, offsets := range [][]int{{0, n}, {0, 1100, 1101, n}} {
			for _, task := range []KernelTask{
				{Kind: KernelMVM, K: k, V: V},
				{Kind: KernelQuad, K: k, A: V, B: W},
			} {
				t.Run(fam.String(), func(t *testing.T) {
					newOp := func(cache int64) *KernelOp {
						return &KernelOp{Kernel: kernel.Kernel{Family: fam, Lengthscales: []float64{0.8, 1.1, 1.5, 0.6}, SignalVariance: 1.3},
							X: x, Offsets: offsets, CacheBytes: cache}
					}
					bg := context.Background()
					onTheFly := run(t, bg, newOp(-1), task)
					for name, got := range map[string][]float64{
						"op budget":      run(t, bg, newOp(1<<30), task),
						"context budget": run(t, WithKernelCacheBytes(bg, 1<<30), newOp(0), task),
					} {
						if len(got) != len(onTheFly) {
							t.Fatalf("%s: %d values, on the fly %d", name, len(got), len(onTheFly))
						}
						for i := range got {
							if math.Float64bits(got[i]) != math.Float64bits(onTheFly[i]) {
								t.Fatalf("kind %d, %d shards, %s: value %d cached %v, on the fly %v", task.Kind, len(offsets)-1, name, i, got[i], onTheFly[i])
							}
						}
					}
				})
			}
		}
	}
}

// TestKernelCacheBudget checks which budget a task's op uses: its own, else the context's,
// else the default, and that a budget too small for a shard's block caches nothing.
func TestKernelCacheBudget(t *testing.T) {
	op := &KernelOp{}
	bg := context.Background()
	cases := []struct {
		name string
		own  int64
		ctx  context.Context
		want int64
	}{
		{"default", 0, bg, DefaultKernelCacheBytes()},
		{"context", 0, WithKernelCacheBytes(bg, 5<<20), 5 << 20},
		{"context none", 0, WithKernelCacheBytes(bg, -1), -1},
		{"own over context", 7 << 20, WithKernelCacheBytes(bg, 5<<20), 7 << 20},
		{"own none", -1, bg, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			op.CacheBytes = tc.own
			if got := kernelCacheBytes(tc.ctx, op); got != tc.want {
				t.Errorf("budget %d, want %d", got, tc.want)
			}
		})
	}
	if DefaultKernelCacheBytes() <= 0 {
		t.Errorf("default budget %d", DefaultKernelCacheBytes())
	}
	small := &KernelOp{Kernel: kernel.Kernel{Family: kernel.RBF, Lengthscales: []float64{1}, SignalVariance: 1}, X: []float64{0, 1, 2, 3}, Offsets: []int{0, 2, 4}}
	if b := small.block(2*4*8-1, 0, 0, 2); b != nil {
		t.Errorf("a block of 64 bytes was cached under a budget of 63")
	}
	if b := small.block(2*4*8, 0, 0, 2); len(b) != 8 {
		t.Errorf("a block of 64 bytes under a budget of 64: %d values, want 8", len(b))
	}
}

// TestMemTotal checks the meminfo and cgroup parsers on sample files.
func TestMemTotal(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name string
		f    func(string) int64
		text string
		want int64
	}{
		{"meminfo", memTotal, "MemFree:  10 kB\nMemTotal:       24576 kB\n", 24576 << 10},
		{"meminfo without MemTotal", memTotal, "MemFree:  10 kB\n", 0},
		{"meminfo garbage", memTotal, "MemTotal: lots kB\n", 0},
		{"cgroup limit", cgroupLimit, "4294967296\n", 4 << 30},
		{"cgroup max", cgroupLimit, "max\n", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.f(write(tc.name, tc.text)); got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
	if got := memTotal(dir + "/absent"); got != 0 {
		t.Errorf("absent file: %d", got)
	}
}
