package solver

import (
	"math/rand/v2"
	"testing"

	"github.com/gpreduce/gpreduce/internal/kernel"
)

// BenchmarkExactObjective is one exact-GP objective evaluation at n = 3000, d = 18 (the
// exact method on a 3000-row UCI sample): K by kernel.Family.ScaledBlock, the Cholesky
// factorisation, alpha, the inverse and the gradient traces. Not in CI:
//
//	go test -run XXX -bench ExactObjective -benchtime 3x ./internal/solver/
func BenchmarkExactObjective(b *testing.B) {
	n, d := 3000, 18
	rng := rand.New(rand.NewPCG(1, 1))
	X, y := make([]float64, n*d), make([]float64, n)
	for i := range X {
		X[i] = rng.NormFloat64()
	}
	for i := range y {
		y[i] = rng.NormFloat64()
	}
	ls := make([]float64, d)
	for i := range ls {
		ls[i] = 2 + rng.Float64()
	}
	k := kernel.Kernel{Family: kernel.RBF, Lengthscales: ls, SignalVariance: 1}
	for b.Loop() {
		e, err := NewExact(k, 0.1, X, d, y)
		if err != nil {
			b.Fatal(err)
		}
		_ = e.Gradient()
	}
}
