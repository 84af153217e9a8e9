package solver

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/gpreduce/gpreduce/internal/linalg"
	"github.com/gpreduce/gpreduce/internal/reduce"
)

// BenchmarkFitFeatures is one gradient evaluation of the feature fit (gl's and rff's step:
// the Cholesky factorisation of M~, the solve, diag(M~^-1) by the triangular inverse and the
// gradients) at s = 1024 and 4096, from the Gram statistic of 2s random rows. Not in CI:
//
//	go test -run XXX -bench FitFeatures -benchtime 3x ./internal/solver/
func BenchmarkFitFeatures(b *testing.B) {
	for _, s := range []int{1024, 4096} {
		b.Run(fmt.Sprintf("s=%d", s), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(2, uint64(s)))
			n := 2 * s
			Z := make([]float64, n*s)
			for i := range Z {
				Z[i] = rng.NormFloat64()
			}
			g := reduce.NewGram(s)
			linalg.Syrk(blas.Trans, 1, blas64.General{Rows: n, Cols: s, Stride: s, Data: Z}, 0, blas64.Symmetric{Uplo: blas.Upper, N: s, Stride: s, Data: g.G})
			for i := 0; i < n; i++ {
				y := rng.NormFloat64()
				for a, z := range Z[i*s : (i+1)*s] {
					g.B[a] += z * y
				}
				g.YY += y * y
			}
			g.N = n
			logh := make([]float64, s)
			for j := range logh {
				logh[j] = -4 + 3*rng.Float64()
			}
			for b.Loop() {
				if _, err := FitFeatures(g, logh, 1.3, 0.1, true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
