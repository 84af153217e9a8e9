package vof

import (
	"testing"

	"github.com/gpreduce/gpreduce/internal/kernel"
)

// BenchmarkAccumulateKuf: Hermite statistics with gradients, 10^4 rows, M = 31.
func BenchmarkAccumulateKuf(b *testing.B) {
	mod := Model{Basis: Hermite, Family: kernel.RBF, Dim: 1, M1: 31, Dense: true}
	p, _ := mod.InitParams([]float64{0.5}, []float64{1}, 0.01, []float64{3})
	X, y := gpData(10000, 1, 5, 1)
	fm, _ := NewFeatureMap(mod, p, 0, 0)
	for b.Loop() {
		if _, err := AccumulateKuf(fm, p, X, y, 1, true); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAccumulateTrig: trig statistics with a-moments, 10^4 rows, T = 50.
func BenchmarkAccumulateTrig(b *testing.B) {
	mod := Model{Basis: Trig, Family: kernel.RBF, Dim: 1, M1: 31}
	g, _ := TrigGridForStep(mod, 50, 1, 1)
	X, y := gpData(10000, 1, 5, 1)
	for b.Loop() {
		if _, err := AccumulateTrig(g, []float64{5}, X, y, true); err != nil {
			b.Fatal(err)
		}
	}
}

// benchTensor3 returns the Hermite model of 15 features on each of 3 inputs (M = 3375, the
// tensor layout vof's auto sizing takes for d = 3), its parameters and statistics with
// gradients over 200 rows: the coordinator-side work of one evaluation at that size.
func benchTensor3(b *testing.B, dense bool) (Model, *Params, *KufStats) {
	mod := Model{Basis: Hermite, Family: kernel.RBF, Dim: 3, M1: 15, Dense: dense}
	p, err := mod.InitParams([]float64{0.5, 0.7, 1}, []float64{1}, 0.05, []float64{1, 1, 1})
	if err != nil {
		b.Fatal(err)
	}
	X, y := gpData(200, 3, 2, 1)
	st := kufStats(b, mod, p, X, y, 0, 0, true)
	if p.Mean, p.Chol, err = OptimalQ(mod, p, st.KY, st.KK, st.N, 2000); err != nil {
		b.Fatal(err)
	}
	return mod, p, st
}

// BenchmarkOptimalQ: the optimal q at M = 3375, diagonal S (one Cholesky factorisation and a
// solve) and dense S (two factorisations and a triangular inverse). Reference: scipy's
// cho_factor (LAPACK dpotrf) and dtrtri through OpenBLAS at n = 3375 (README).
func BenchmarkOptimalQ(b *testing.B) {
	for _, dense := range []bool{false, true} {
		b.Run(map[bool]string{false: "diag", true: "dense"}[dense], func(b *testing.B) {
			mod, p, st := benchTensor3(b, dense)
			for b.Loop() {
				if _, _, err := OptimalQ(mod, p, st.KY, st.KK, st.N, 2000); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkELBOKufDense: the dense-S ELBO and its full gradient at M = 3375 (S = L L^T by
// Syrk, KKs L by Gemm).
func BenchmarkELBOKufDense(b *testing.B) {
	mod, p, st := benchTensor3(b, true)
	g := mod.NewGrad(st.M)
	for b.Loop() {
		if _, err := ELBOKuf(mod, p, st, 2000, g); err != nil {
			b.Fatal(err)
		}
	}
}
