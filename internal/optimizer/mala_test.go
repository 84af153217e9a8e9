package optimizer

import (
	"context"
	"errors"
	"math"
	"testing"
)

// gauss2 is the log density of N(mu, S) in 2-D with S = [[1, rho], [rho, 1]] * s.
func gauss2(mu [2]float64, s, rho float64) func(x, grad []float64) (float64, error) {
	det := s * s * (1 - rho*rho)
	// S^-1 = 1/det [[s, -rho s], [-rho s, s]]
	p00, p01 := s/det, -rho*s/det
	return func(x, grad []float64) (float64, error) {
		a, b := x[0]-mu[0], x[1]-mu[1]
		ga, gb := p00*a+p01*b, p01*a+p00*b
		grad[0], grad[1] = -ga, -gb
		return -0.5 * (a*ga + b*gb), nil
	}
}

func TestMALAGaussian(t *testing.T) {
	mu := [2]float64{1, -2}
	const s, rho = 2.0, 0.8
	var xs [][2]float64
	rate, err := MALA(context.Background(), gauss2(mu, s, rho), []float64{5, 5},
		MALASettings{Iters: 202000, BurnIn: 2000, Thin: 5}, 42, func(x []float64) { xs = append(xs, [2]float64{x[0], x[1]}) })
	if err != nil {
		t.Fatal(err)
	}
	if len(xs) != 40000 {
		t.Fatalf("%d samples, want 40000", len(xs))
	}
	if math.Abs(rate-0.574) > 0.1 {
		t.Errorf("acceptance rate %.3f after adaptation, want about 0.574", rate)
	}
	var m [2]float64
	for _, x := range xs {
		m[0] += x[0]
		m[1] += x[1]
	}
	m[0] /= float64(len(xs))
	m[1] /= float64(len(xs))
	var c00, c01, c11 float64
	for _, x := range xs {
		a, b := x[0]-m[0], x[1]-m[1]
		c00 += a * a
		c01 += a * b
		c11 += b * b
	}
	k := float64(len(xs) - 1)
	c00, c01, c11 = c00/k, c01/k, c11/k
	// Thinned samples are mildly autocorrelated; with an effective sample size of several
	// thousand the Monte Carlo standard error of the mean is about sqrt(2/5000) = 0.02 and of
	// the covariances a few hundredths.
	if math.Abs(m[0]-mu[0]) > 0.1 || math.Abs(m[1]-mu[1]) > 0.1 {
		t.Errorf("mean %v, want %v", m, mu)
	}
	for _, c := range []struct{ got, want float64 }{{c00, s}, {c11, s}, {c01, rho * s}} {
		if math.Abs(c.got-c.want) > 0.15 {
			t.Errorf("covariance entry %.3f, want %.3f (all: %.3f %.3f %.3f)", c.got, c.want, c00, c01, c11)
		}
	}
}

// A preconditioned chain on a badly scaled Gaussian recovers the scales.
func TestMALAScale(t *testing.T) {
	logp := func(x, g []float64) (float64, error) {
		g[0] = -x[0] / 1e-4
		g[1] = -(x[1] - 3) / 100
		return -0.5 * (x[0]*x[0]/1e-4 + (x[1]-3)*(x[1]-3)/100), nil
	}
	var s0, s1, m1 float64
	k := 0
	_, err := MALA(context.Background(), logp, []float64{0, 3}, MALASettings{Iters: 60000, BurnIn: 2000, Thin: 2, Scale: []float64{1e-2, 10}}, 3,
		func(x []float64) { s0 += x[0] * x[0]; s1 += (x[1] - 3) * (x[1] - 3); m1 += x[1]; k++ })
	if err != nil {
		t.Fatal(err)
	}
	if v := s0 / float64(k); math.Abs(v/1e-4-1) > 0.15 {
		t.Errorf("variance of x0 %g, want 1e-4", v)
	}
	if v := s1 / float64(k); math.Abs(v/100-1) > 0.15 {
		t.Errorf("variance of x1 %g, want 100", v)
	}
}

func TestMALADeterministic(t *testing.T) {
	run := func(seed uint64) []float64 {
		var out []float64
		if _, err := MALA(context.Background(), gauss2([2]float64{0, 0}, 1, 0.5), []float64{1, 1}, MALASettings{Iters: 3000, BurnIn: 500, Thin: 10}, seed,
			func(x []float64) { out = append(out, x...) }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	a, b, c := run(7), run(7), run(8)
	if len(a) != 2*250 {
		t.Fatalf("%d values, want 500", len(a))
	}
	same := true
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			t.Fatalf("same seed, different sample at %d: %v vs %v", i, a[i], b[i])
		}
		if a[i] != c[i] {
			same = false
		}
	}
	if same {
		t.Error("different seeds gave the same chain")
	}
}

func TestMALACancelAndErrors(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	logp := func(x, g []float64) (float64, error) {
		calls++
		if calls == 100 {
			cancel()
		}
		g[0] = -x[0]
		return -x[0] * x[0] / 2, nil
	}
	if _, err := MALA(ctx, logp, []float64{0}, MALASettings{Iters: 100000}, 1, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if calls > 200 {
		t.Errorf("%d evaluations after cancel", calls)
	}
	boom := errors.New("boom")
	if _, err := MALA(context.Background(), func(x, g []float64) (float64, error) { return 0, boom }, []float64{0}, MALASettings{}, 1, nil); !errors.Is(err, boom) {
		t.Errorf("err = %v, want boom", err)
	}
	inf := func(x, g []float64) (float64, error) { return math.Inf(-1), nil }
	if _, err := MALA(context.Background(), inf, []float64{0}, MALASettings{}, 1, nil); err == nil {
		t.Error("a start point of zero density is accepted")
	}
	for _, s := range []MALASettings{{Step: -1}, {Iters: 10, BurnIn: 10}, {TargetAccept: 1.5}, {Scale: []float64{1, 2}}} {
		if _, err := MALA(context.Background(), gauss2([2]float64{}, 1, 0), []float64{0}, s, 1, nil); err == nil {
			t.Errorf("settings %+v accepted", s)
		}
	}
	// A support boundary: logp = -Inf for x < 0 is never accepted.
	half := func(x, g []float64) (float64, error) {
		if x[0] < 0 {
			return math.Inf(-1), nil
		}
		g[0] = -1
		return -x[0], nil
	}
	neg := false
	if _, err := MALA(context.Background(), half, []float64{1}, MALASettings{Iters: 5000, BurnIn: 100, Thin: 1}, 2, func(x []float64) { neg = neg || x[0] < 0 }); err != nil {
		t.Fatal(err)
	}
	if neg {
		t.Error("a state outside the support was accepted")
	}
}
