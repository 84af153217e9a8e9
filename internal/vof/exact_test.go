package vof

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gpreduce/gpreduce/internal/features"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/solver"
)

// paperHermiteKuf is the main-text Hermite VOF cross-covariance of Section 3.1.1, with
// physicists' H_m (H_1 = 2x) and factorials, valid for small m:
//
//	cov(u_m, f(x)) = sqrt(2 pi) v l c_m B^(-1/2) exp(-x^2/(2B)) (A/B)^m H_m(r x / sqrt(AB)),
//	c_m = 2^((-m-1/2)/2) sqrt(r) / sqrt(m! pi v l) (B/A)^(m/2).
func paperHermiteKuf(v, l, r, x float64, M int) []float64 {
	A, B := r*r-l*l/2, r*r+l*l/2
	z := r * x / math.Sqrt(A*B)
	H := make([]float64, M)
	out := make([]float64, M)
	fact := 1.0
	for m := 0; m < M; m++ {
		switch m {
		case 0:
			H[0] = 1
		case 1:
			H[1] = 2 * z
		default:
			H[m] = 2*z*H[m-1] - 2*float64(m-1)*H[m-2]
		}
		if m > 0 {
			fact *= float64(m)
		}
		cm := math.Pow(2, (-float64(m)-0.5)/2) * math.Sqrt(r) / math.Sqrt(fact*math.Pi*v*l) * math.Pow(B/A, float64(m)/2)
		out[m] = math.Sqrt(2*math.Pi) * v * l * cm / math.Sqrt(B) * math.Exp(-x*x/(2*B)) * math.Pow(A/B, float64(m)) * H[m]
	}
	return out
}

// paperHermiteG is g_m(x) = c_m A^(-1/2) exp(-x^2/(2A)) H_m(r x / sqrt(AB)) (Section 3.1.1).
func paperHermiteG(v, l, r, x float64, m int) float64 {
	A, B := r*r-l*l/2, r*r+l*l/2
	z := r * x / math.Sqrt(A*B)
	h0, h1 := 1.0, 2*z
	fact := 1.0
	for k := 1; k <= m; k++ {
		fact *= float64(k)
	}
	hm := h0
	if m >= 1 {
		hm = h1
		for k := 2; k <= m; k++ {
			h0, h1 = h1, 2*z*h1-2*float64(k-1)*h0
			hm = h1
		}
	}
	cm := math.Pow(2, (-float64(m)-0.5)/2) * math.Sqrt(r) / math.Sqrt(fact*math.Pi*v*l) * math.Pow(B/A, float64(m)/2)
	return cm / math.Sqrt(A) * math.Exp(-x*x/(2*A)) * hm
}

func rOf(l, sigmaIn float64) float64 { return math.Pow(l*l*sigmaIn*sigmaIn+l*l*l*l/4, 0.25) }

// TestHermiteMatchesPaper: the stable recursion equals the paper's closed form, and the
// features' covariances by quadrature of g_m against k and Kuf are I and Kuf.
func TestHermiteMatchesPaper(t *testing.T) {
	const v, l, sin = 1.7, 0.6, 1.3
	r := rOf(l, sin)
	const M = 16
	got := make([]float64, M)
	for _, x := range []float64{-4, -1.1, 0, 0.3, 2.5} {
		features.HermiteVOF1D(l, sin, x, got, nil, nil)
		want := paperHermiteKuf(v, l, r, x, M)
		for m := range got {
			g := math.Sqrt(v) * got[m]
			if math.Abs(g-want[m]) > 1e-12*math.Max(1e-3, math.Abs(want[m])) {
				t.Errorf("x=%v m=%d: stable %.15g, paper %.15g", x, m, g, want[m])
			}
		}
	}
	// Kuu[m,m'] = Int g_m(x) Kuf[m', x] dx and Kuf[m, x'] = Int g_m(x) k(x, x') dx.
	A := r*r - l*l/2
	R := 14 * math.Sqrt(r*r+l*l/2)
	nodes, weights, err := features.GaussLegendre(600)
	if err != nil {
		t.Fatal(err)
	}
	const Mq = 10
	kuu := make([]float64, Mq*Mq)
	kx := make([]float64, Mq)
	kern := kernel.Kernel{Family: kernel.RBF, Lengthscales: []float64{l}, SignalVariance: v}
	kufq := make([]float64, Mq)
	xp := 0.7
	for q, xi := range nodes {
		x := R * xi
		w := R * weights[q]
		features.HermiteVOF1D(l, sin, x, kx, nil, nil)
		for m := 0; m < Mq; m++ {
			g := paperHermiteG(v, l, r, x, m)
			for mp := 0; mp < Mq; mp++ {
				kuu[m*Mq+mp] += w * g * math.Sqrt(v) * kx[mp]
			}
			kufq[m] += w * g * kern.Eval([]float64{x}, []float64{xp})
		}
	}
	_ = A
	for m := 0; m < Mq; m++ {
		for mp := 0; mp < Mq; mp++ {
			want := 0.0
			if m == mp {
				want = 1
			}
			if math.Abs(kuu[m*Mq+mp]-want) > 1e-8 {
				t.Errorf("Kuu[%d,%d] = %.3g by quadrature, want %v", m, mp, kuu[m*Mq+mp], want)
			}
		}
	}
	features.HermiteVOF1D(l, sin, xp, kx, nil, nil)
	for m := 0; m < Mq; m++ {
		if math.Abs(kufq[m]-math.Sqrt(v)*kx[m]) > 1e-9 {
			t.Errorf("Kuf[%d, %v]: quadrature of g_m k %.12g, closed form %.12g", m, xp, kufq[m], math.Sqrt(v)*kx[m])
		}
	}
}

// TestHermiteELBOClosedForm: the ELBO from merged statistics equals the per-row closed form
// sum_n ell_n - KL (Section 3 with Kuu = I, Kuf of the paper's formula) to 1e-10.
func TestHermiteELBOClosedForm(t *testing.T) {
	for _, dense := range []bool{false, true} {
		mod := Model{Basis: Hermite, Family: kernel.RBF, Dim: 1, M1: 12, Dense: dense}
		X, y := gpData(150, 1, 4, 31)
		p := randomParams(t, mod, []float64{0.8}, []float64{1.4}, 0.05, []float64{2.2}, 37)
		M := len(p.Mean)
		fm, err := NewFeatureMap(mod, p, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		var st *KufStats
		for b := 0; b < 3; b++ { // three shards merged in order
			part, err := AccumulateKuf(fm, p, X[b*50:(b+1)*50], y[b*50:(b+1)*50], 1, false)
			if err != nil {
				t.Fatal(err)
			}
			if st == nil {
				st = part
			} else if err := st.Merge(part); err != nil {
				t.Fatal(err)
			}
		}
		got, err := ELBOKuf(mod, p, st, 150, nil)
		if err != nil {
			t.Fatal(err)
		}
		// Closed form, row by row, with S formed explicitly.
		S := make([]float64, M*M)
		for i := 0; i < M; i++ {
			for j := 0; j < M; j++ {
				if !dense {
					if i == j {
						S[i*M+i] = p.Chol[i] * p.Chol[i]
					}
					continue
				}
				for k := 0; k <= min(i, j); k++ {
					S[i*M+j] += p.Chol[i*M+k] * p.Chol[j*M+k]
				}
			}
		}
		v, s2 := p.Variances[0], p.Noise
		r := rOf(p.Lengthscales[0], p.Feature[0])
		var want float64
		for n := range y {
			k := paperHermiteKuf(v, p.Lengthscales[0], r, X[n], M)
			var mu, q float64
			for i := 0; i < M; i++ {
				mu += k[i] * p.Mean[i]
				for j := 0; j < M; j++ {
					sij := S[i*M+j]
					if i == j {
						sij--
					}
					q += k[i] * sij * k[j]
				}
			}
			want += -0.5*math.Log(2*math.Pi*s2) - ((y[n]-mu)*(y[n]-mu)+v+q)/(2*s2)
		}
		var trS, mm, logdet float64
		for i := 0; i < M; i++ {
			trS += S[i*M+i]
			mm += p.Mean[i] * p.Mean[i]
			if dense {
				logdet += 2 * math.Log(p.Chol[i*M+i])
			} else {
				logdet += 2 * math.Log(p.Chol[i])
			}
		}
		want -= 0.5 * (trS + mm - float64(M) - logdet)
		if math.Abs(got-want) > 1e-10*math.Abs(want) {
			t.Errorf("dense=%v: ELBO from statistics %.15g, closed form %.15g (relative %.2g)", dense, got, want, math.Abs(got-want)/math.Abs(want))
		}
	}
}

// qffError returns max |Qff(x, x') - k(x, x')| over a grid of |x|, |x'| <= R.
func qffError(t *testing.T, mod Model, p *Params, kfun func(x, xp []float64) float64, R float64) float64 {
	t.Helper()
	fm, err := NewFeatureMap(mod, p, 0, R*math.Sqrt(float64(mod.Dim)))
	if err != nil {
		t.Fatal(err)
	}
	d := mod.Dim
	M := fm.NumFeatures()
	const G = 7
	pts := make([][]float64, 0)
	for i := 0; i < G; i++ {
		x := make([]float64, d)
		for k := range x {
			x[k] = -R + 2*R*float64((i+k*3)%G)/float64(G-1)
		}
		pts = append(pts, x)
	}
	ks := make([][]float64, len(pts))
	for i, x := range pts {
		ks[i] = make([]float64, M)
		fm.Eval(x, ks[i], nil)
	}
	var worst float64
	for i := range pts {
		for j := range pts {
			var q float64
			for m := 0; m < M; m++ {
				q += ks[i][m] * ks[j][m]
			}
			worst = math.Max(worst, math.Abs(q-kfun(pts[i], pts[j])))
		}
	}
	return worst
}

// TestQffConverges: Qff = Kuf^T Kuu^-1 Kuf with Kuu = I tends to k as M grows (Section 3.4):
// Hermite (1-D and tensor 2-D) to k, TrigVOF to the band-limited kernel, which for a box
// holding all but exp(-a^2 l^2/2) of the spectral mass is k.
func TestQffConverges(t *testing.T) {
	cases := []struct {
		name   string
		basis  Basis
		fam    kernel.Family
		d      int
		feat   float64
		ms     []int
		final  float64
		region float64
	}{
		{"hermite-1d", Hermite, kernel.RBF, 1, 2, []int{5, 15, 40, 80}, 1e-8, 3},
		{"hermite-2d", Hermite, kernel.RBF, 2, 2, []int{3, 9, 21, 35}, 1e-4, 2},
		{"trig-1d-rbf", Trig, kernel.RBF, 1, 9, []int{5, 15, 41, 81}, 1e-8, 3},
		{"trig-1d-matern52", Trig, kernel.Matern52, 1, 40, []int{11, 41, 121, 241}, 2e-3, 3},
		{"trig-2d-rbf", Trig, kernel.RBF, 2, 8, []int{5, 15, 31}, 1e-6, 2},
	}
	// Additive layout: k(x, x') = sum_k v_k k_k(x_k, x'_k).
	t.Run("hermite-additive", func(t *testing.T) {
		ls, vs := []float64{0.8, 1.1}, []float64{1.3, 0.4}
		kadd := func(x, xp []float64) float64 {
			var s float64
			for k := range ls {
				s += kernel.Kernel{Family: kernel.RBF, Lengthscales: ls[k : k+1], SignalVariance: vs[k]}.Eval(x[k:k+1], xp[k:k+1])
			}
			return s
		}
		mod := Model{Basis: Hermite, Family: kernel.RBF, Dim: 2, M1: 60, Additive: true}
		p, err := mod.InitParams(ls, vs, 0.1, []float64{2, 2})
		if err != nil {
			t.Fatal(err)
		}
		if e := qffError(t, mod, p, kadd, 3); e > 1e-8 {
			t.Errorf("additive Hermite: max |Qff - k| = %.3g", e)
		}
	})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ls := []float64{0.8, 1.1}[:c.d]
			kern := kernel.Kernel{Family: c.fam, Lengthscales: ls, SignalVariance: 1.3}
			prev := math.Inf(1)
			var err float64
			for _, M1 := range c.ms {
				mod := Model{Basis: c.basis, Family: c.fam, Dim: c.d, M1: M1}
				feat := make([]float64, c.d)
				for k := range feat {
					feat[k] = c.feat
				}
				p, e := mod.InitParams(ls, []float64{1.3}, 0.1, feat)
				if e != nil {
					t.Fatal(e)
				}
				err = qffError(t, mod, p, kern.Eval, c.region)
				t.Logf("M1=%d: max |Qff - k| = %.3g", M1, err)
				if err > prev*1.05 {
					t.Errorf("M1=%d: error %.3g grew from %.3g", M1, err, prev)
				}
				prev = err
			}
			if err > c.final {
				t.Errorf("largest M: max |Qff - k| = %.3g, want below %.3g", err, c.final)
			}
		})
	}
}

// TestTrigBasisOrthonormal: Kuu = I for TrigVOF is the orthonormality of psi_j on [-a, a]
// (Prop. 1, eq. 6 with the (2 pi)^(-1/4) scaling of eq. 17), checked by quadrature.
func TestTrigBasisOrthonormal(t *testing.T) {
	const a, M = 2.5, 9
	nodes, weights, err := features.GaussLegendre(64)
	if err != nil {
		t.Fatal(err)
	}
	G := make([]float64, M*M)
	b := make([]float64, M)
	for q, xi := range nodes {
		features.TrigVOFBasis1D(xi, b)
		for i := 0; i < M; i++ {
			for j := 0; j < M; j++ {
				// psi_j(w) = a^-1/2 b_j(w/a), dw = a dxi.
				G[i*M+j] += a * weights[q] * b[i] * b[j] / a
			}
		}
	}
	for i := 0; i < M; i++ {
		for j := 0; j < M; j++ {
			want := 0.0
			if i == j {
				want = 1
			}
			if math.Abs(G[i*M+j]-want) > 1e-13 {
				t.Errorf("<psi_%d, psi_%d> = %.3g, want %v", i, j, G[i*M+j], want)
			}
		}
	}
}

// sampleGP draws y = f(X) + noise from the GP prior with the SE kernel.
func sampleGP(t *testing.T, X []float64, v, l, noise float64, seed uint64) []float64 {
	t.Helper()
	n := len(X)
	e, err := solver.NewExact(kernel.Kernel{Family: kernel.RBF, Lengthscales: []float64{l}, SignalVariance: v}, noise, X, 1, make([]float64, n))
	if err != nil {
		t.Fatal(err)
	}
	_ = e
	// Factor by hand (the exact solver keeps its factor private): K + noise I = L L^T.
	K := make([]float64, n*n)
	for i := 0; i < n; i++ {
		for j := 0; j <= i; j++ {
			d := (X[i] - X[j]) / l
			K[i*n+j] = v * math.Exp(-d*d/2)
		}
		K[i*n+i] += noise
	}
	for j := 0; j < n; j++ {
		s := K[j*n+j]
		for k := 0; k < j; k++ {
			s -= K[j*n+k] * K[j*n+k]
		}
		K[j*n+j] = math.Sqrt(s)
		for i := j + 1; i < n; i++ {
			s := K[i*n+j]
			for k := 0; k < j; k++ {
				s -= K[i*n+k] * K[j*n+k]
			}
			K[i*n+j] = s / K[j*n+j]
		}
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	z := make([]float64, n)
	for i := range z {
		z[i] = rng.NormFloat64()
	}
	y := make([]float64, n)
	for i := 0; i < n; i++ {
		for k := 0; k <= i; k++ {
			y[i] += K[i*n+k] * z[k]
		}
	}
	return y
}

// optimalELBO is the ELBO at the optimal q (dense or diagonal) for the model's hyperparameters.
func optimalELBO(t *testing.T, mod Model, p *Params, X, y []float64, quad int, grad bool) (float64, *Grad) {
	t.Helper()
	F, g, _ := optimalELBOStats(t, mod, p, X, y, quad, grad)
	return F, g
}

// optimalELBOStats is optimalELBO that also returns the statistics it was computed from.
func optimalELBOStats(t *testing.T, mod Model, p *Params, X, y []float64, quad int, grad bool) (float64, *Grad, *KufStats) {
	t.Helper()
	st := kufStats(t, mod, p, X, y, quad, maxAbs(X), grad)
	var err error
	p.Mean, p.Chol, err = OptimalQ(mod, p, st.KY, st.KK, st.N, st.N)
	if err != nil {
		t.Fatal(err)
	}
	var g *Grad
	if grad {
		g = mod.NewGrad(len(p.Mean))
	}
	F, err := ELBOKuf(mod, p, st, st.N, g)
	if err != nil {
		t.Fatal(err)
	}
	return F, g, st
}

func maxAbs(x []float64) float64 {
	var m float64
	for _, v := range x {
		m = math.Max(m, math.Abs(v))
	}
	return m
}

// TestELBOBelowLogML: at fixed hyperparameters the ELBO at its optimal q never exceeds the
// exact log marginal likelihood (Cholesky, internal/solver) and approaches it as M grows.
func TestELBOBelowLogML(t *testing.T) {
	const n, v, l, noise = 200, 1.0, 0.7, 0.01
	rng := rand.New(rand.NewPCG(5, 5))
	X := make([]float64, n)
	for i := range X {
		X[i] = 2 * rng.NormFloat64()
	}
	y := sampleGP(t, X, v, l, noise, 8)
	ex, err := solver.NewExact(kernel.Kernel{Family: kernel.RBF, Lengthscales: []float64{l}, SignalVariance: v}, noise, X, 1, y)
	if err != nil {
		t.Fatal(err)
	}
	lml := ex.LogMarginalLikelihood()
	cases := []struct {
		basis Basis
		feat  float64
		ms    []int
	}{
		{Hermite, 2, []int{5, 11, 21, 41, 61}},
		{Trig, 7, []int{5, 11, 21, 41, 81}},
	}
	for _, c := range cases {
		for _, dense := range []bool{false, true} {
			prev := math.Inf(-1)
			var F float64
			for _, M1 := range c.ms {
				mod := Model{Basis: c.basis, Family: kernel.RBF, Dim: 1, M1: M1, Dense: dense}
				p, err := mod.InitParams([]float64{l}, []float64{v}, noise, []float64{c.feat})
				if err != nil {
					t.Fatal(err)
				}
				F, _ = optimalELBO(t, mod, p, X, y, 0, false)
				t.Logf("%v dense=%v M=%d: ELBO %.6f, log ML %.6f", c.basis, dense, M1, F, lml)
				if F > lml+1e-8*math.Abs(lml) {
					t.Errorf("%v dense=%v M=%d: ELBO %.8f above the log marginal likelihood %.8f", c.basis, dense, M1, F, lml)
				}
				if F < prev-1e-6 {
					t.Errorf("%v dense=%v M=%d: optimal ELBO %.6f fell from %.6f", c.basis, dense, M1, F, prev)
				}
				prev = F
			}
			// A diagonal S keeps a gap (Section 3.2); the dense optimum is the collapsed bound.
			if gap := lml - F; dense && gap > 0.01 {
				t.Errorf("%v dense=%v: gap %.4g nats at the largest M, want below 0.01", c.basis, dense, gap)
			}
		}
	}
}
