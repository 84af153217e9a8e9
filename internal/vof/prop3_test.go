package vof

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gpreduce/gpreduce/internal/kernel"
)

// Fig. 3 input distributions (Appendix E.2): N(0, 3^2); U[-sqrt(108), sqrt(108)] (sd 6); and
// the two-Gaussian mixture with weights 0.7 / 0.3, variances 1 / 0.5, mean 0 and sd 3.
func fig3Inputs(dist string, n int, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 11))
	X := make([]float64, n)
	// Mixture means: 0.7 mu1 + 0.3 mu2 = 0 and 0.7 (1 + mu1^2) + 0.3 (0.5 + mu2^2) = 9.
	mu1 := math.Sqrt((9 - 0.7 - 0.15) / (0.7 + 0.7*0.7/0.3))
	mu2 := -0.7 * mu1 / 0.3
	for i := range X {
		switch dist {
		case "normal":
			X[i] = 3 * rng.NormFloat64()
		case "uniform":
			X[i] = math.Sqrt(108) * (2*rng.Float64() - 1)
		case "mixture":
			if rng.Float64() < 0.7 {
				X[i] = mu1 + rng.NormFloat64()
			} else {
				X[i] = mu2 + math.Sqrt(0.5)*rng.NormFloat64()
			}
		}
	}
	return X
}

// TestProp3 (Section 3.2, Prop. 3 with the corrected constant N S* -> sigma^2 Lambda^-1):
// for Hermite VOF whose implicit input density N(0, sigma_in^2) matches the inputs, the
// optimal dense S is nearly diagonal and restricting S to a diagonal costs under 1e-3 nats
// per point at M = 31; on the two-Gaussian mixture of Fig. 3 the gap is larger.
func TestProp3(t *testing.T) {
	const n, M1, v, l, noise = 1000, 31, 1.0, 0.5, 0.01
	gap := map[string]float64{}
	for _, dist := range []string{"normal", "mixture"} {
		X := fig3Inputs(dist, n, 3)
		y := make([]float64, n)
		for i, x := range X {
			y[i] = math.Sin(2*x) + 0.1*math.Cos(5*x)
		}
		var F [2]float64
		for k, dense := range []bool{false, true} {
			mod := Model{Basis: Hermite, Family: kernel.RBF, Dim: 1, M1: M1, Dense: dense}
			p, err := mod.InitParams([]float64{l}, []float64{v}, noise, []float64{3})
			if err != nil {
				t.Fatal(err)
			}
			F[k], _ = optimalELBO(t, mod, p, X, y, 0, false)
		}
		gap[dist] = (F[1] - F[0]) / n
		t.Logf("%s inputs: optimal ELBO diagonal %.4f, dense %.4f, gap %.3g nats per point", dist, F[0], F[1], gap[dist])
		if gap[dist] < -1e-9 {
			t.Errorf("%s: the diagonal optimum beats the dense one by %g per point", dist, -gap[dist])
		}
	}
	if gap["normal"] >= 1e-3 {
		t.Errorf("N(0, 3^2) inputs: diagonal-dense gap %.3g nats per point, want below 1e-3", gap["normal"])
	}
	if gap["mixture"] <= 2*gap["normal"] {
		t.Errorf("mixture inputs: gap %.3g nats per point, want clearly above the Gaussian-input gap %.3g", gap["mixture"], gap["normal"])
	}
}
