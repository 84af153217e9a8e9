package kernel

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkScaledBlock forms an m x n kernel block for d = 8 and reports ns per entry (wall
// time, all goroutines); compare with torch.cdist + exp in the same run (README, "Compute
// core"). "direct" is the per-pair loop train.KernelOp (now tasks.KernelOp) used before (differences, math.Exp).
func BenchmarkScaledBlock(b *testing.B) {
	const m, n, d = 1024, 8192, 8
	rng := rand.New(rand.NewPCG(1, 1))
	xa, xb := make([]float64, m*d), make([]float64, n*d)
	for i := range xa {
		xa[i] = rng.NormFloat64()
	}
	for i := range xb {
		xb[i] = rng.NormFloat64()
	}
	dst := make([]float64, m*n)
	for _, fam := range []Family{RBF, Matern32} {
		b.Run(fmt.Sprintf("%v/block", fam), func(b *testing.B) {
			for b.Loop() {
				fam.ScaledBlock(BlockK, 1, xa, xb, d, dst, n)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(m*n), "ns/entry")
		})
		b.Run(fmt.Sprintf("%v/direct", fam), func(b *testing.B) {
			for b.Loop() {
				for i := range m {
					for j := range n {
						var r2 float64
						for k := range d {
							t := xa[i*d+k] - xb[j*d+k]
							r2 += t * t
						}
						dst[i*n+j] = fam.Profile(r2)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(m*n), "ns/entry")
		})
	}
}
