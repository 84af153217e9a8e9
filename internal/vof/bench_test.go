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
