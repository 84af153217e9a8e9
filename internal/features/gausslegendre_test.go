package features

import (
	"math"
	"math/big"
	"math/cmplx"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func relErr(got, want float64) float64 {
	if want == 0 {
		return math.Abs(got)
	}
	return math.Abs(got-want) / math.Abs(want)
}

func TestGaussLegendreErrors(t *testing.T) {
	for _, m := range []int{0, -3, MaxGaussLegendrePoints + 1} {
		if _, _, err := GaussLegendre(m); err == nil {
			t.Errorf("GaussLegendre(%d): expected an error", m)
		}
	}
}

func TestGaussLegendreClosedForms(t *testing.T) {
	s65 := math.Sqrt(6.0 / 5.0)
	s107 := math.Sqrt(10.0 / 7.0)
	s30 := math.Sqrt(30.0)
	s70 := math.Sqrt(70.0)
	cases := []struct {
		x, w []float64
	}{
		{[]float64{0}, []float64{2}},
		{[]float64{-1 / math.Sqrt(3), 1 / math.Sqrt(3)}, []float64{1, 1}},
		{[]float64{-math.Sqrt(0.6), 0, math.Sqrt(0.6)}, []float64{5.0 / 9, 8.0 / 9, 5.0 / 9}},
		{
			[]float64{-math.Sqrt(3.0/7 + 2.0/7*s65), -math.Sqrt(3.0/7 - 2.0/7*s65), math.Sqrt(3.0/7 - 2.0/7*s65), math.Sqrt(3.0/7 + 2.0/7*s65)},
			[]float64{(18 - s30) / 36, (18 + s30) / 36, (18 + s30) / 36, (18 - s30) / 36},
		},
		{
			[]float64{-math.Sqrt(5+2*s107) / 3, -math.Sqrt(5-2*s107) / 3, 0, math.Sqrt(5-2*s107) / 3, math.Sqrt(5+2*s107) / 3},
			[]float64{(322 - 13*s70) / 900, (322 + 13*s70) / 900, 128.0 / 225, (322 + 13*s70) / 900, (322 - 13*s70) / 900},
		},
	}
	for i, c := range cases {
		m := i + 1
		x, w, err := GaussLegendre(m)
		if err != nil {
			t.Fatal(err)
		}
		for j := range c.x {
			if math.Abs(x[j]-c.x[j]) > 4e-16 {
				t.Errorf("m=%d node %d = %.17g, want %.17g", m, j, x[j], c.x[j])
			}
			if relErr(w[j], c.w[j]) > 4e-15 {
				t.Errorf("m=%d weight %d = %.17g, want %.17g", m, j, w[j], c.w[j])
			}
		}
	}
}

func TestGaussLegendreSymmetryAndSum(t *testing.T) {
	for _, m := range []int{1, 2, 3, 7, 10, 33, 64, 101, 500, 1000, 2001, 5000} {
		x, w, err := GaussLegendre(m)
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < m; j++ {
			if x[m-1-j] != -x[j] || w[m-1-j] != w[j] {
				t.Fatalf("m=%d: node/weight %d not mirrored bitwise", m, j)
			}
			if j > 0 && !(x[j] > x[j-1]) {
				t.Fatalf("m=%d: nodes not strictly ascending at %d", m, j)
			}
			if !(w[j] > 0) || math.Abs(x[j]) >= 1 {
				t.Fatalf("m=%d: bad node %v weight %v", m, x[j], w[j])
			}
		}
		if m%2 == 1 && (x[m/2] != 0 || math.Signbit(x[m/2])) {
			t.Fatalf("m=%d: middle node %v, want +0", m, x[m/2])
		}
		// Sum in order of increasing weight (from both ends inwards) to keep the check itself accurate.
		var sum, comp float64
		for j := 0; j < m; j++ {
			k := j / 2
			if j%2 == 1 {
				k = m - 1 - j/2
			}
			y := w[k] - comp
			tt := sum + y
			comp = (tt - sum) - y
			sum = tt
		}
		if relErr(sum, 2) > 1e-14 {
			t.Errorf("m=%d: sum of weights = %.17g", m, sum)
		}
	}
}

func TestGaussLegendreMonomials(t *testing.T) {
	for _, m := range []int{1, 2, 3, 5, 8, 13, 20, 40} {
		x, w, _ := GaussLegendre(m)
		for k := 0; k <= 2*m-1; k++ {
			var got float64
			for j := range x {
				got += w[j] * math.Pow(x[j], float64(k))
			}
			want := 0.0
			if k%2 == 0 {
				want = 2 / float64(k+1)
			}
			// Odd k cancel exactly by symmetry; even k sum positive terms.
			if math.Abs(got-want) > 2e-15*float64(m)*math.Max(want, 1e-2) {
				t.Errorf("m=%d: int x^%d = %.17g, want %.17g", m, k, got, want)
			}
		}
		// Degree 2m is no longer exact (sanity check that the test has teeth).
		if m <= 8 {
			var got float64
			for j := range x {
				got += w[j] * math.Pow(x[j], float64(2*m))
			}
			if math.Abs(got-2/float64(2*m+1)) < 1e-6 {
				t.Errorf("m=%d: x^%d integrated exactly, which GL cannot do", m, 2*m)
			}
		}
	}
}

// TestGaussLegendreGolubWelsch cross-checks against the eigen-decomposition of the Jacobi matrix
// (Golub-Welsch): nodes are the eigenvalues, weights 2 v_0^2.
func TestGaussLegendreGolubWelsch(t *testing.T) {
	for _, m := range []int{6, 50, 200} {
		J := mat.NewSymDense(m, nil)
		for k := 1; k < m; k++ {
			b := float64(k) / math.Sqrt(4*float64(k)*float64(k)-1)
			J.SetSym(k-1, k, b)
		}
		var es mat.EigenSym
		if !es.Factorize(J, true) {
			t.Fatal("eigen decomposition failed")
		}
		vals := es.Values(nil)
		var V mat.Dense
		es.VectorsTo(&V)
		x, w, _ := GaussLegendre(m)
		for j := 0; j < m; j++ {
			v0 := V.At(0, j)
			if math.Abs(vals[j]-x[j]) > 2e-14 {
				t.Errorf("m=%d node %d: %.17g vs Golub-Welsch %.17g", m, j, x[j], vals[j])
			}
			if relErr(w[j], 2*v0*v0) > 1e-11 {
				t.Errorf("m=%d weight %d: %.17g vs Golub-Welsch %.17g", m, j, w[j], 2*v0*v0)
			}
		}
	}
}

// bigLegendreRoot polishes x0 to a root of P_m with Newton's method in 256-bit arithmetic and returns
// the root and its weight 2/((1-x^2) P_m'(x)^2).
func bigLegendreRoot(m int, x0 float64) (root, weight float64) {
	const prec = 256
	nf := func(v float64) *big.Float { return new(big.Float).SetPrec(prec).SetFloat64(v) }
	x := nf(x0)
	one := nf(1)
	eval := func(x *big.Float) (p, dp *big.Float) {
		p0, p1 := nf(1), new(big.Float).SetPrec(prec).Set(x)
		t := new(big.Float).SetPrec(prec)
		u := new(big.Float).SetPrec(prec)
		for k := 1; k < m; k++ {
			// p2 = ((2k+1) x p1 - k p0) / (k+1)
			t.Mul(x, p1)
			t.Mul(t, nf(float64(2*k+1)))
			u.Mul(p0, nf(float64(k)))
			t.Sub(t, u)
			t.Quo(t, nf(float64(k+1)))
			p0.Set(p1)
			p1.Set(t)
		}
		// P'_m = m (P_{m-1} - x P_m) / (1 - x^2)
		omx2 := new(big.Float).SetPrec(prec).Mul(x, x)
		omx2.Sub(one, omx2)
		dp = new(big.Float).SetPrec(prec).Mul(x, p1)
		dp.Sub(p0, dp)
		dp.Mul(dp, nf(float64(m)))
		dp.Quo(dp, omx2)
		return p1, dp
	}
	for it := 0; it < 3; it++ { // quadratic convergence from a float64 root: 2^-53 -> 2^-106 -> 2^-212
		p, dp := eval(x)
		p.Quo(p, dp)
		x.Sub(x, p)
	}
	_, dp := eval(x)
	wq := new(big.Float).SetPrec(prec).Mul(x, x)
	wq.Sub(one, wq)
	wq.Mul(wq, dp)
	wq.Mul(wq, dp)
	wq.Quo(nf(2), wq)
	root, _ = x.Float64()
	weight, _ = wq.Float64()
	return root, weight
}

func TestGaussLegendreHighPrecision(t *testing.T) {
	for _, m := range []int{1000, 5000} {
		x, w, err := GaussLegendre(m)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range []int{0, 1, 2, 3, 4, 10, 50, m / 3, m/2 - 1, m - 2, m - 1} {
			rx, rw := bigLegendreRoot(m, x[j])
			ulp := math.Nextafter(math.Abs(rx), 2) - math.Abs(rx)
			if math.Abs(rx-x[j]) > ulp {
				t.Errorf("m=%d node %d: %.17g, 256-bit %.17g (diff %.3g)", m, j, x[j], rx, rx-x[j])
			}
			if e := relErr(w[j], rw); e > 1e-15 {
				t.Errorf("m=%d weight %d: %.17g, 256-bit %.17g (rel %.3g)", m, j, w[j], rw, e)
			}
		}
	}
}

func TestGaussLegendreSmoothIntegral(t *testing.T) {
	// Int_{-1}^{1} e^x cos(10x) dx = Re[(e^{1+10i} - e^{-1-10i}) / (1+10i)].
	z := complex(1, 10)
	want := real((cmplx.Exp(z) - cmplx.Exp(-z)) / z)
	for _, c := range []struct {
		m   int
		tol float64
	}{{30, 1e-14}, {1000, 1e-14}, {5000, 1e-14}} {
		x, w, _ := GaussLegendre(c.m)
		var got float64
		for j := range x {
			got += w[j] * math.Exp(x[j]) * math.Cos(10*x[j])
		}
		if math.Abs(got-want) > c.tol {
			t.Errorf("m=%d: %.17g, want %.17g (diff %.3g)", c.m, got, want, got-want)
		}
	}
}
