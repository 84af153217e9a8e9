package solver

import (
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/gpreduce/gpreduce/internal/kernel"
)

// BenchmarkExactObjective is one exact-GP objective evaluation at n = 3000, d = 18 (the
// exact method on a 3000-row UCI sample): K by kernel.Family.ScaledBlock, the Cholesky
// factorisation, alpha, the inverse and the gradient traces; "fresh" allocates its n x n
// buffers every time (NewExact), "workspace" reuses them as the exact method's evaluations do
// (NewExactIn). Not in CI:
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
	var ws ExactWorkspace
	for _, reuse := range []bool{false, true} {
		name := map[bool]string{false: "fresh", true: "workspace"}[reuse]
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				w := &ws
				if !reuse {
					w = new(ExactWorkspace)
				}
				e, err := NewExactIn(w, k, 0.1, X, d, y)
				if err != nil {
					b.Fatal(err)
				}
				_ = e.Gradient()
			}
		})
	}
}

// BenchmarkExactPredict predicts 1500 rows with variances from an exact GP on n = 3000, d = 18:
// "blocked" is ExactPredictor.Predict, "per-row" the Kernel.Eval and gonum Trsv per row that
// it replaced. Not in CI.
func BenchmarkExactPredict(b *testing.B) {
	const n, d, rows = 3000, 18, 1500
	rng := rand.New(rand.NewPCG(1, 1))
	X, y, xs := make([]float64, n*d), make([]float64, n), make([]float64, rows*d)
	for _, v := range [][]float64{X, y, xs} {
		for i := range v {
			v[i] = rng.NormFloat64()
		}
	}
	ls := make([]float64, d)
	for i := range ls {
		ls[i] = 2 + rng.Float64()
	}
	k := kernel.Kernel{Family: kernel.RBF, Lengthscales: ls, SignalVariance: 1}
	e, err := NewExact(k, 0.1, X, d, y)
	if err != nil {
		b.Fatal(err)
	}
	p := e.Predictor()
	mean, lv := make([]float64, rows), make([]float64, rows)
	b.Run("blocked", func(b *testing.B) {
		for b.Loop() {
			p.Predict(xs, mean, lv)
		}
	})
	b.Run("per-row", func(b *testing.B) {
		r := blas64.Triangular{Uplo: blas.Upper, Diag: blas.NonUnit, N: n, Stride: n, Data: p.R}
		ks := make([]float64, n)
		for b.Loop() {
			for t := range rows {
				x := xs[t*d : (t+1)*d]
				for i := range n {
					ks[i] = k.Eval(x, X[i*d:(i+1)*d])
				}
				mean[t] = dot(ks, p.Alpha)
				blas64.Trsv(blas.Trans, r, blas64.Vector{N: n, Inc: 1, Data: ks})
				lv[t] = k.Eval(x, x) - dot(ks, ks)
			}
		}
	})
}
