package kernel

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// blockShapes are the m x n kernel blocks the methods form (d = 8 in the benchmark): a large
// cached block of cg/kmcg rows, the 64-row blocks of the exact GP's gradient and the 256-row
// blocks of exact prediction, for n = 3000 training rows. scripts/bench-core.py times torch
// on the same shapes.
var blockShapes = [][2]int{{1024, 8192}, {64, 3000}, {256, 3000}}

// BenchmarkScaledBlock forms m x n kernel blocks for d = 8 and reports ns per entry (wall
// time, all goroutines); compare with torch.cdist + exp in the same run (README, "Compute
// core"). "direct" is the per-pair loop train.KernelOp (now tasks.KernelOp) used before (differences, math.Exp).
func BenchmarkScaledBlock(b *testing.B) {
	const d = 8
	rng := rand.New(rand.NewPCG(1, 1))
	for _, sh := range blockShapes {
		m, n := sh[0], sh[1]
		xa, xb := make([]float64, m*d), make([]float64, n*d)
		for i := range xa {
			xa[i] = rng.NormFloat64()
		}
		for i := range xb {
			xb[i] = rng.NormFloat64()
		}
		dst := make([]float64, m*n)
		for _, fam := range []Family{RBF, Matern32} {
			b.Run(fmt.Sprintf("%v/%dx%d", fam, m, n), func(b *testing.B) {
				for b.Loop() {
					fam.ScaledBlock(BlockK, 1, xa, xb, d, dst, n)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(m*n), "ns/entry")
			})
			if m != 1024 {
				continue
			}
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
}
