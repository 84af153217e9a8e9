package vof

import (
	"fmt"
	"math"
	"testing"

	"github.com/gpreduce/gpreduce/internal/kernel"
)

// exactELBO is the ELBO with Kuf by Gauss-Legendre quadrature (TrigVOF) or in closed form.
func exactELBO(t *testing.T, mod Model, p *Params, X, y []float64, nTotal, quad int) float64 {
	t.Helper()
	fm, err := NewFeatureMap(mod, p, quad, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, err := AccumulateKuf(fm, p, X, y, mod.Dim, false)
	if err != nil {
		t.Fatal(err)
	}
	F, err := ELBOKuf(mod, p, st, nTotal, nil)
	if err != nil {
		t.Fatal(err)
	}
	return F
}

// TestTrigELBOUnbiased: over 500 seeds the mean of the TrigVOF estimate is within 3 standard
// errors of the ELBO computed with quadrature (Section 3.3, Appendix E.1).
func TestTrigELBOUnbiased(t *testing.T) {
	const seeds = 500
	cases := []struct {
		mod  Model
		feat []float64
		T1   int
	}{
		{Model{Basis: Trig, Family: kernel.Matern52, Dim: 1, M1: 11}, []float64{5}, 10},
		{Model{Basis: Trig, Family: kernel.Matern52, Dim: 1, M1: 11, Dense: true}, []float64{5}, 10},
		{Model{Basis: Trig, Family: kernel.RBF, Dim: 2, M1: 3, Additive: true, Dense: true}, []float64{3, 4}, 6},
		{Model{Basis: Trig, Family: kernel.Matern32, Dim: 2, M1: 3, Dense: true}, []float64{3, 2}, 5},
	}
	for ci, c := range cases {
		t.Run(fmt.Sprintf("%d_d%d_add%v_dense%v", ci, c.mod.Dim, c.mod.Additive, c.mod.Dense), func(t *testing.T) {
			d := c.mod.Dim
			X, y := gpData(60, d, 3, 17)
			p := randomParams(t, c.mod, []float64{0.8, 1.2}[:d], []float64{1.1, 0.6}[:c.mod.NumVariances()], 0.2, c.feat, 23)
			want := exactELBO(t, c.mod, p, X, y, 60, 200)
			var sum, sum2 float64
			for s := 0; s < seeds; s++ {
				grid, err := TrigGridForStep(c.mod, c.T1, 1000+uint64(ci), uint64(s))
				if err != nil {
					t.Fatal(err)
				}
				st, err := AccumulateTrig(grid, p.Feature, X, y, false)
				if err != nil {
					t.Fatal(err)
				}
				F, err := ELBOTrig(c.mod, p, grid, st, 60, nil)
				if err != nil {
					t.Fatal(err)
				}
				sum += F
				sum2 += F * F
			}
			mean := sum / seeds
			se := math.Sqrt((sum2/seeds - mean*mean) / (seeds - 1))
			t.Logf("exact %.6f, mean of %d estimates %.6f, standard error %.3g", want, seeds, mean, se)
			if math.Abs(mean-want) > 3*se {
				t.Errorf("mean estimate %.6f is %.2f standard errors from the quadrature ELBO %.6f", mean, math.Abs(mean-want)/se, want)
			}
			if !(se > 0) || se > 0.05*math.Abs(want) {
				t.Errorf("standard error %g: the estimator should vary a little between seeds and stay small", se)
			}
		})
	}
}

// TestTrigEstimatesUnbiased checks the pieces of the estimate entry by entry: KY_hat and
// KK_hat (the outer product of two independent grids) average to the quadrature values of
// sum k_n y_n and sum k_n k_n^T. Pairing the grids (one shift for both) makes the diagonal
// of KK_hat biased upwards, which this test detects.
func TestTrigEstimatesUnbiased(t *testing.T) {
	const seeds = 500
	mod := Model{Basis: Trig, Family: kernel.Matern32, Dim: 1, M1: 7}
	X, y := gpData(80, 1, 3, 19)
	p := randomParams(t, mod, []float64{0.7}, []float64{1}, 0.2, []float64{6}, 29)
	M := len(p.Mean)
	fm, err := NewFeatureMap(mod, p, 200, 0)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := AccumulateKuf(fm, p, X, y, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]float64(nil), ex.KY...), ex.KK...)
	sum := make([]float64, len(want))
	sum2 := make([]float64, len(want))
	for s := 0; s < seeds; s++ {
		grid, err := TrigGridForStep(mod, 6, 77, uint64(s))
		if err != nil {
			t.Fatal(err)
		}
		st, err := AccumulateTrig(grid, p.Feature, X, y, false)
		if err != nil {
			t.Fatal(err)
		}
		W1, W2 := grid.Frequencies(p.Feature)
		e := trigEstimate(mod, p, grid, st, W1, W2, M)
		for i, v := range append(append([]float64(nil), e.KY...), e.KK...) {
			sum[i] += v
			sum2[i] += v * v
		}
	}
	var beyond int
	var worst float64
	for i := range want {
		mean := sum[i] / seeds
		se := math.Sqrt(math.Max(sum2[i]/seeds-mean*mean, 0) / (seeds - 1))
		z := math.Abs(mean-want[i]) / math.Max(se, 1e-12*math.Max(1, math.Abs(want[i])))
		worst = math.Max(worst, z)
		if z > 3 {
			beyond++
		}
	}
	t.Logf("%d entries, %d beyond 3 standard errors, largest %.2f", len(want), beyond, worst)
	if worst > 4.5 || beyond > len(want)/20+1 {
		t.Errorf("estimates biased: %d of %d entries beyond 3 standard errors, largest %.2f", beyond, len(want), worst)
	}
}
