package train

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/tasks"
)

// BenchmarkCGIteration times one batched CG iteration's product K_hat V (11 columns: 10
// probes and y) over 16 shards of n rows, d = 8, on the local engine with 1 to 4 goroutines,
// with the kernel blocks cached (formed once per hyperparameter value, outside the timer) and
// formed on the fly. GFLOP/s counts the 2 n^2 k multiply-adds of the product alone. n is
// 4096, or GPREDUCE_CG_BENCH_N (elevators' 14940 training rows: the cached blocks then take
// 1.8 GB).
func BenchmarkCGIteration(b *testing.B) {
	const d, k, shards = 8, 11, 16
	n := 4096
	if v := os.Getenv("GPREDUCE_CG_BENCH_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < shards {
			b.Fatalf("GPREDUCE_CG_BENCH_N=%q: want a row count of at least %d", v, shards)
		}
	}
	{
		tab := synthTable(n, d, 3)
		rng := rand.New(rand.NewPCG(1, 1))
		V := make([]float64, n*k)
		for i := range V {
			V[i] = rng.NormFloat64()
		}
		for _, cached := range []bool{true, false} {
			for _, workers := range []int{1, 2, 4} {
				b.Run(fmt.Sprintf("n=%d/cached=%v/workers=%d", n, cached, workers), func(b *testing.B) {
					refs, tabs := shard.PartitionCount(tab, shards)
					eng := localEngine(b, tab, shards, workers)
					offsets := []int{0}
					for _, t := range tabs {
						offsets = append(offsets, offsets[len(offsets)-1]+t.N())
					}
					_ = refs
					op := &tasks.KernelOp{Kernel: kernel.Kernel{Family: kernel.RBF, Lengthscales: []float64{1, 1, 1, 1, 1, 1, 1, 1}, SignalVariance: 1}, X: tab.X, Offsets: offsets}
					if !cached {
						op.CacheBytes = -1
					}
					kop := &kernelOperator{ctx: context.Background(), eng: eng, op: op, noise: 0.1}
					dst := make([]float64, n*k)
					if err := kop.MulVecs(dst, V, k); err != nil { // forms the cache
						b.Fatal(err)
					}
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						if err := kop.MulVecs(dst, V, k); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(b.N)*2*math.Pow(float64(n), 2)*k/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}
