package solver

import (
	"fmt"
	"math"
	"testing"
)

// BenchmarkPivotedCholesky times the factor of cg's preconditioner at the shapes of a default
// run: elevators (n = 14,940, the cap 405) and concrete (n = 927, a factor of rank 900). The
// matrix is the Matern 1/2 kernel exp(-|x_i - x_j| / 0.05) on n points of [0, 1], whose slow
// spectral decay keeps the factor growing to the rank asked for; its rows cost n exponentials.
func BenchmarkPivotedCholesky(b *testing.B) {
	for _, c := range []struct{ n, rank int }{{14940, 405}, {927, 900}} {
		b.Run(fmt.Sprintf("n=%d/rank=%d", c.n, c.rank), func(b *testing.B) {
			x := make([]float64, c.n)
			for i := range x {
				x[i] = float64(i) / float64(c.n)
			}
			row := func(i int, dst []float64) {
				for j, xj := range x {
					dst[j] = math.Exp(-math.Abs(x[i]-xj) / 0.05)
				}
			}
			diag := func(int) float64 { return 1 }
			for b.Loop() {
				_, r, err := PivotedCholesky(diag, row, c.n, c.rank, 0, 0)
				if err != nil || r != c.rank {
					b.Fatalf("rank %d, err %v", r, err)
				}
			}
		})
	}
}
