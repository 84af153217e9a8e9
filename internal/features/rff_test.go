package features

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gpreduce/gpreduce/internal/kernel"
)

func TestNewRFFErrors(t *testing.T) {
	for _, c := range []struct {
		f    kernel.Family
		d, s int
	}{
		{kernel.RBF, 0, 4}, {kernel.RBF, 2, 0}, {kernel.RBF, 2, 3}, {kernel.RBF, 2, -2},
		{kernel.RBF, 1, MaxGLFeatures + 2}, {kernel.Family(7), 2, 4},
	} {
		if _, err := NewRFF(c.f, c.d, c.s, 1); err == nil {
			t.Errorf("NewRFF(%v, %d, %d): expected an error", c.f, c.d, c.s)
		}
	}
}

func TestRFFDeterministic(t *testing.T) {
	a, err := NewRFF(kernel.Matern32, 3, 64, 42)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewRFF(kernel.Matern32, 3, 64, 42)
	c, _ := NewRFF(kernel.Matern32, 3, 64, 43)
	if a.NumFeatures() != 64 || len(a.Omega) != 32*3 {
		t.Fatalf("NumFeatures %d, len(Omega) %d", a.NumFeatures(), len(a.Omega))
	}
	same := true
	for i := range a.Omega {
		if math.Float64bits(a.Omega[i]) != math.Float64bits(b.Omega[i]) {
			t.Fatal("same seed gave different frequencies")
		}
		if a.Omega[i] != c.Omega[i] {
			same = false
		}
	}
	if same {
		t.Error("different seeds gave the same frequencies")
	}
	ls := []float64{0.5, 1, 2}
	x := []float64{0.3, -0.7, 1.1}
	za, zb := make([]float64, 64), make([]float64, 64)
	a.Map(ls, x, za)
	b.Map(ls, x, zb)
	for j := range za {
		if math.Float64bits(za[j]) != math.Float64bits(zb[j]) {
			t.Fatal("same seed gave different features")
		}
	}
	if got, want := a.LogWeight(), math.Log(2.0/64); got != want {
		t.Errorf("LogWeight %v, want %v", got, want)
	}
}

func TestRFFMapGradAndBlock(t *testing.T) {
	r, err := NewRFF(kernel.RBF, 3, 40, 7)
	if err != nil {
		t.Fatal(err)
	}
	s, d := r.NumFeatures(), r.D
	ls := []float64{0.7, 1.3, 2.1}
	x := []float64{0.9, -1.4, 0.35}
	z := make([]float64, s)
	dls := make([]float64, d*s)
	r.MapGrad(ls, x, z, dls)
	zm := make([]float64, s)
	r.Map(ls, x, zm)
	for j := range z {
		if z[j] != zm[j] {
			t.Fatalf("MapGrad and Map differ at %d", j)
		}
	}
	for q := 0; q < s/2; q++ {
		var a float64
		for k := 0; k < d; k++ {
			a += x[k] * r.Omega[q*d+k] / ls[k]
		}
		if math.Abs(z[2*q]-math.Cos(a)) > 1e-14 || math.Abs(z[2*q+1]-math.Sin(a)) > 1e-14 {
			t.Fatalf("pair %d: (%v, %v), want cos/sin(%v)", q, z[2*q], z[2*q+1], a)
		}
	}
	const h = 1e-6
	zp, zn := make([]float64, s), make([]float64, s)
	for k := 0; k < d; k++ {
		lp := append([]float64(nil), ls...)
		ln := append([]float64(nil), ls...)
		lp[k] *= math.Exp(h)
		ln[k] *= math.Exp(-h)
		r.Map(lp, x, zp)
		r.Map(ln, x, zn)
		for j := 0; j < s; j++ {
			fd := (zp[j] - zn[j]) / (2 * h)
			if math.Abs(fd-dls[k*s+j]) > 1e-7 {
				t.Errorf("dz_%d/dlog l_%d = %v, finite difference %v", j, k, dls[k*s+j], fd)
			}
		}
	}
	// MapBlock = Map row by row.
	rows := 5
	rng := rand.New(rand.NewPCG(1, 1))
	xs := make([]float64, rows*d)
	for i := range xs {
		xs[i] = rng.NormFloat64()
	}
	block := make([]float64, rows*s)
	r.MapBlock(ls, xs, rows, block)
	for i := 0; i < rows; i++ {
		r.Map(ls, xs[i*d:(i+1)*d], zm)
		for j := range zm {
			if zm[j] != block[i*s+j] {
				t.Fatalf("MapBlock row %d feature %d differs from Map", i, j)
			}
		}
	}
}

// rffKernel is (2/s) sum_j z_j(x) z_j(x').
func rffKernel(r *RFF, ls, x, xp []float64) float64 {
	s := r.NumFeatures()
	z, zp := make([]float64, s), make([]float64, s)
	r.Map(ls, x, z)
	r.Map(ls, xp, zp)
	var sum float64
	for j := range z {
		sum += z[j] * zp[j]
	}
	return math.Exp(r.LogWeight()) * sum
}

// TestRFFConvergence: the Monte Carlo error of k~ shrinks like 1/sqrt(s). Each estimate averages
// m = s/2 terms cos(omega^T tau) with variance at most 1, so the RMS error over seeds and pairs is
// at most 1/sqrt(m); the assertions leave a wide margin and use fixed seeds.
func TestRFFConvergence(t *testing.T) {
	pairs := [][2][]float64{
		{{0, 0}, {0.3, -0.2}},
		{{0.5, 1}, {-0.5, 0.2}},
		{{1, -1}, {0.2, 0.6}},
		{{0, 0}, {1.5, 0}},
	}
	ls := []float64{0.8, 1.2}
	for _, f := range []kernel.Family{kernel.RBF, kernel.Matern12, kernel.Matern32, kernel.Matern52} {
		k := kernel.Kernel{Family: f, Lengthscales: ls, SignalVariance: 1}
		const seeds = 40
		rms := map[int]float64{}
		for _, s := range []int{32, 512, 8192} {
			var sq, bias float64
			for seed := uint64(0); seed < seeds; seed++ {
				r, err := NewRFF(f, 2, s, 1000+seed)
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range pairs {
					e := rffKernel(r, ls, p[0], p[1]) - k.Eval(p[0], p[1])
					sq += e * e
					bias += e
				}
			}
			n := float64(seeds * len(pairs))
			rms[s] = math.Sqrt(sq / n)
			bias /= n
			m := float64(s / 2)
			t.Logf("%v s=%d: RMS error %.3g (bound 1/sqrt(m) = %.3g), mean error %.3g", f, s, rms[s], 1/math.Sqrt(m), bias)
			if rms[s] > 1.5/math.Sqrt(m) {
				t.Errorf("%v s=%d: RMS error %.3g above 1.5/sqrt(m) = %.3g", f, s, rms[s], 1.5/math.Sqrt(m))
			}
			// Unbiased: the mean error is within 4 standard errors of 0, counting only the seeds as
			// independent (the pairs of one seed share their frequencies).
			if math.Abs(bias) > 4*rms[s]/math.Sqrt(seeds) {
				t.Errorf("%v s=%d: mean error %.3g suggests bias (RMS %.3g over %v estimates)", f, s, bias, rms[s], n)
			}
		}
		// 16x more features: expect a 4x smaller error; accept anything better than 2.5x.
		if !(rms[512] < rms[32]/2.5 && rms[8192] < rms[512]/2.5) {
			t.Errorf("%v: RMS errors %v do not shrink like 1/sqrt(s)", f, rms)
		}
	}
}

func BenchmarkRFFMapBlockD2S1024(b *testing.B) {
	r, err := NewRFF(kernel.RBF, 2, 1024, 1)
	if err != nil {
		b.Fatal(err)
	}
	const rows = 1024
	x := make([]float64, rows*2)
	rng := rand.New(rand.NewPCG(2, 2))
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	dst := make([]float64, rows*1024)
	ls := []float64{0.5, 0.7}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.MapBlock(ls, x, rows, dst)
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
