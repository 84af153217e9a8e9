package vof

import (
	"math"
	"math/rand/v2"
	"testing"
)

// randomParams returns parameters with a random mean and covariance factor.
func randomParams(t *testing.T, mod Model, ls, vs []float64, noise float64, feat []float64, seed uint64) *Params {
	t.Helper()
	p, err := mod.InitParams(ls, vs, noise, feat)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	M := len(p.Mean)
	for i := range p.Mean {
		p.Mean[i] = rng.NormFloat64()
	}
	if mod.Dense {
		for i := 0; i < M; i++ {
			for j := 0; j < i; j++ {
				p.Chol[i*M+j] = 0.2 * rng.NormFloat64()
			}
			p.Chol[i*M+i] = 0.5 + rng.Float64()
		}
	} else {
		for i := range p.Chol {
			p.Chol[i] = 0.5 + rng.Float64()
		}
	}
	return p
}

// gpData draws n rows of d inputs uniformly in [-r, r] and y = sum sin(x) + noise.
func gpData(n, d int, r float64, seed uint64) ([]float64, []float64) {
	rng := rand.New(rand.NewPCG(seed, 3))
	X := make([]float64, n*d)
	y := make([]float64, n)
	for i := 0; i < n; i++ {
		for k := 0; k < d; k++ {
			X[i*d+k] = r * (2*rng.Float64() - 1)
			y[i] += math.Sin(1.3 * X[i*d+k])
		}
		y[i] += 0.1 * rng.NormFloat64()
	}
	return X, y
}

// checkGrad compares the packed gradient with central differences of f on the packed vector.
func checkGrad(t *testing.T, name string, x, grad []float64, f func(x []float64) float64, tol float64) {
	t.Helper()
	for i := range x {
		h := 1e-5 * math.Max(1, math.Abs(x[i]))
		xp := append([]float64(nil), x...)
		xm := append([]float64(nil), x...)
		xp[i] += h
		xm[i] -= h
		fd := (f(xp) - f(xm)) / (2 * h)
		if diff := math.Abs(fd - grad[i]); !(diff <= tol*math.Max(1, math.Abs(fd))) { // NaN fails
			t.Errorf("%s: gradient %d: analytic %.10g, central difference %.10g", name, i, grad[i], fd)
		}
	}
}

// kufStats returns the statistics of the rows X, y for mod at p, with their gradients when
// grad is set (the feature map built with quad quadrature nodes and inputs bounded by xmax).
func kufStats(tb testing.TB, mod Model, p *Params, X, y []float64, quad int, xmax float64, grad bool) *KufStats {
	tb.Helper()
	fm, err := NewFeatureMap(mod, p, quad, xmax)
	if err != nil {
		tb.Fatal(err)
	}
	st, err := AccumulateKuf(fm, p, X, y, mod.Dim, grad)
	if err != nil {
		tb.Fatal(err)
	}
	return st
}
