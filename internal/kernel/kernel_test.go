package kernel

import (
	"math"
	"math/rand/v2"
	"testing"
)

var families = []Family{RBF, Matern12, Matern32, Matern52}

func TestEvalGradMatchesFiniteDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, f := range families {
		for trial := 0; trial < 5; trial++ {
			x := []float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
			y := []float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
			theta := []float64{rng.NormFloat64() * 0.5, rng.NormFloat64() * 0.5, rng.NormFloat64() * 0.5, rng.NormFloat64()}
			at := func(th []float64) Kernel {
				return Kernel{Family: f, Lengthscales: []float64{math.Exp(th[0]), math.Exp(th[1]), math.Exp(th[2])}, SignalVariance: math.Exp(th[3])}
			}
			g := make([]float64, 4)
			v := at(theta).EvalGrad(x, y, g)
			if v != at(theta).Eval(x, y) {
				t.Fatalf("%v: EvalGrad value %g differs from Eval", f, v)
			}
			const h = 1e-6
			for i := range theta {
				tp := append([]float64(nil), theta...)
				tm := append([]float64(nil), theta...)
				tp[i] += h
				tm[i] -= h
				fd := (at(tp).Eval(x, y) - at(tm).Eval(x, y)) / (2 * h)
				if math.Abs(fd-g[i]) > 1e-7*math.Max(1, math.Abs(fd)) {
					t.Errorf("%v param %d: analytic %g, finite difference %g", f, i, g[i], fd)
				}
			}
		}
	}
}

func TestZeroDistance(t *testing.T) {
	for _, f := range families {
		k := Kernel{Family: f, Lengthscales: []float64{0.3, 2}, SignalVariance: 1.7}
		g := make([]float64, 3)
		x := []float64{0.5, -1}
		if v := k.EvalGrad(x, x, g); v != 1.7 || g[0] != 0 || g[1] != 0 || g[2] != 1.7 {
			t.Errorf("%v: k(x,x)=%g grad=%v, want 1.7 and (0,0,1.7)", f, v, g)
		}
	}
}

// TestSpectralDensityIsFourierPair checks k0(tau) = Int cos(tau eta) p(eta) d eta in 1-D
// (the angular convention) by a fine trapezoid rule, and that p integrates to 1.
func TestSpectralDensityIsFourierPair(t *testing.T) {
	for _, f := range []Family{RBF, Matern32, Matern52} {
		l := 0.7
		k := Kernel{Family: f, Lengthscales: []float64{l}, SignalVariance: 1}
		const W, m = 400.0, 400000
		h := 2 * W / m
		for _, tau := range []float64{0, 0.3, 1, 2.5} {
			var sum float64
			for i := 0; i <= m; i++ {
				eta := -W + float64(i)*h
				w := h
				if i == 0 || i == m {
					w = h / 2
				}
				sum += w * math.Cos(tau*eta) * math.Exp(LogSpectralDensity(f, []float64{l}, []float64{eta}, nil))
			}
			want := k.Eval([]float64{tau}, []float64{0})
			if math.Abs(sum-want) > 1e-6 {
				t.Errorf("%v tau=%g: transform %g, kernel %g", f, tau, sum, want)
			}
		}
	}
}

func TestSpectralLogGradient(t *testing.T) {
	for _, f := range families {
		ls := []float64{0.4, 1.3}
		eta := []float64{1.1, -2.3}
		g := make([]float64, 2)
		LogSpectralDensity(f, ls, eta, g)
		const h = 1e-6
		for k := range ls {
			lp := append([]float64(nil), ls...)
			lm := append([]float64(nil), ls...)
			lp[k] *= math.Exp(h)
			lm[k] *= math.Exp(-h)
			fd := (LogSpectralDensity(f, lp, eta, nil) - LogSpectralDensity(f, lm, eta, nil)) / (2 * h)
			if math.Abs(fd-g[k]) > 1e-7 {
				t.Errorf("%v dim %d: analytic %g, fd %g", f, k, g[k], fd)
			}
		}
	}
}

func TestParseFamily(t *testing.T) {
	for _, f := range families {
		got, err := ParseFamily(f.String())
		if err != nil || got != f {
			t.Errorf("ParseFamily(%q) = %v, %v", f.String(), got, err)
		}
	}
	if _, err := ParseFamily("periodic"); err == nil {
		t.Error("unknown kernel accepted")
	}
}
