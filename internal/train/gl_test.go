package train

import (
	"context"
	"fmt"
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/features"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/solver"
	"github.com/gpreduce/gpreduce/internal/tasks"
)

// thetaAt packs lengthscales near l (distinct per dimension, to exercise ARD), a signal and
// a noise variance into theta.
func thetaAt(d int, l, sf2, sn2 float64) []float64 {
	th := make([]float64, d+2)
	for k := 0; k < d; k++ {
		th[k] = math.Log(l * (1 + 0.05*float64(k)))
	}
	th[d], th[d+1] = math.Log(sf2), math.Log(sn2)
	return th
}

// autoBox is fac times the automatic box for lengthscales >= lmin, signal variance <= 2 and
// noise variance >= 0.01.
func autoBox(t *testing.T, ref *reference, lmin, fac float64) []float64 {
	t.Helper()
	ls := make([]float64, ref.p.d)
	for k := range ls {
		ls[k] = lmin
	}
	U, _, err := features.SizeGL(kernel.RBF, features.GLSizing{N: ref.p.n, LengthscaleMin: ls, LengthscaleMax: ls,
		SignalVarianceMax: 2, NoiseVarianceMin: 0.01, Range: ref.p.ranges, MaxFeatures: 1 << 24})
	if err != nil {
		t.Fatal(err)
	}
	for k := range U {
		U[k] *= fac
	}
	return U
}

func nodesOf(d, n int) []int {
	out := make([]int, d)
	for k := range out {
		out[k] = n
	}
	return out
}

// glLik runs the Gram pass and returns the GL likelihood over the reduced statistic.
func glLik(t *testing.T, eng engine.Engine, ref *reference, U []float64, nodes int) *glLikelihood {
	t.Helper()
	gl, err := features.NewGL(kernel.RBF, U, nodesOf(ref.p.d, nodes))
	if err != nil {
		t.Fatal(err)
	}
	st, err := eng.Reduce(context.Background(), &tasks.GramTask{Features: gl, Transform: ref.p.tf})
	if err != nil {
		t.Fatal(err)
	}
	return newGLLikelihood(gl, st.(*reduce.Gram))
}

// TestGLLikelihoodMatchesExact is the acceptance test of the O(s^3) path: with enough nodes
// the GL log marginal likelihood and its gradient, computed from the reduced Gram statistic
// alone, agree with the exact Cholesky reference to 1e-6 relative at several
// hyperparameters, and the error falls as the node count grows.
func TestGLLikelihoodMatchesExact(t *testing.T) {
	cases := []struct {
		d, n  int
		lmin  float64
		fac   float64 // box = fac * automatic U: the paper's U targets spectral equivalence, which is looser than 1e-6
		nodes []int   // increasing; the last must reach 1e-6
	}{
		{d: 1, n: 800, lmin: 0.5, fac: 1.5, nodes: []int{16, 32, 64, 96}},
		{d: 2, n: 500, lmin: 1, fac: 1.2, nodes: []int{16, 32, 48}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("d=%d", c.d), func(t *testing.T) {
			eng := localEngine(t, synthTable(c.n, c.d, uint64(c.d)), 4, 2)
			ref := newReference(t, eng, kernel.RBF)
			// Lengthscales from lmin to 1.3 lmin: a fixed grid resolves p(eta; l) up to about
			// nodes / (5 U), so the grid is sized for this range (features.SizeGL's resolution rule).
			thetas := [][]float64{thetaAt(c.d, c.lmin, 1, 0.01), thetaAt(c.d, 1.15*c.lmin, 0.5, 0.1), thetaAt(c.d, 1.3*c.lmin, 2, 0.05)}
			U := autoBox(t, ref, c.lmin, c.fac)
			errs := make([]float64, len(c.nodes))
			for i, nn := range c.nodes {
				lik := glLik(t, eng, ref, U, nn)
				for _, th := range thetas {
					g := make([]float64, len(th))
					f, err := lik.objective(th, g)
					if err != nil {
						t.Fatal(err)
					}
					lml, grad := negate(f, g)
					el, eg := ref.exact(t, th)
					errs[i] = math.Max(errs[i], math.Max(math.Abs(lml-el)/math.Abs(el), gradErr(grad, eg)))
				}
				t.Logf("U=%.3g, %d nodes per dimension (s=%d): worst relative error %.3g", U[0], nn, lik.gl.NumFeatures(), errs[i])
			}
			if last := errs[len(errs)-1]; last > 1e-6 {
				t.Errorf("with %d nodes per dimension the error is %.3g, want <= 1e-6", c.nodes[len(c.nodes)-1], last)
			}
			if errs[0] < 1e-3 {
				t.Errorf("the smallest grid already has error %.3g: the test does not show convergence", errs[0])
			}
		})
	}
}

// TestGLKernelLikelihoodMatchesExactD3 checks the GL approximation in d = 3 where the O(s^3)
// path is too slow for a unit test (about 30 nodes per dimension are needed for 1e-6, so
// s ~ 3e4): it forms the GL kernel matrix K~ = sigma_f^2 Z W Z^T + sigma_n^2 I densely (n x n)
// and compares its likelihood and gradient with the exact kernel's. The O(s^3) route is
// algebraically the same likelihood (solver's TestFeatureFitEqualsDenseLikelihood, 1e-10).
func TestGLKernelLikelihoodMatchesExactD3(t *testing.T) {
	d, n := 3, 200
	eng := localEngine(t, synthTable(n, d, 3), 2, 2)
	ref := newReference(t, eng, kernel.RBF)
	U := autoBox(t, ref, 1, 1.2)
	th := thetaAt(d, 1, 1, 0.05)
	el, eg := ref.exact(t, th)
	var errs []float64
	for _, nn := range []int{12, 24, 40} {
		gl, err := features.NewGL(kernel.RBF, U, nodesOf(d, nn))
		if err != nil {
			t.Fatal(err)
		}
		lml, grad := denseGLLikelihood(t, gl, ref, th)
		e := math.Max(math.Abs(lml-el)/math.Abs(el), gradErr(grad, eg))
		t.Logf("d=3, %d nodes per dimension (s=%d): relative error %.3g", nn, gl.NumFeatures(), e)
		errs = append(errs, e)
	}
	if errs[2] > 1e-6 {
		t.Errorf("d=3 with 40 nodes per dimension: error %.3g, want <= 1e-6", errs[2])
	}
	if !(errs[0] > errs[2]) {
		t.Errorf("error did not fall with the node count: %v", errs)
	}
}

// denseGLLikelihood evaluates the log marginal likelihood of the GL kernel matrix and its
// gradient in theta by dense O(n^3) formulas.
func denseGLLikelihood(t *testing.T, gl *features.GL, ref *reference, theta []float64) (float64, []float64) {
	t.Helper()
	d, n, s := ref.p.d, len(ref.rows.Y), gl.NumFeatures()
	Z := make([]float64, n*s)
	gl.MapBlock(ref.rows.X, n, Z)
	ls := make([]float64, d)
	for k := range ls {
		ls[k] = math.Exp(theta[k])
	}
	logh := make([]float64, s)
	dlogh := make([]float64, s*d)
	gl.LogWeights(ls, logh, dlogh)
	sf2, sn2 := math.Exp(theta[d]), math.Exp(theta[d+1])
	zm := mat.NewDense(n, s, Z)
	// weighted returns sf2 Z diag(w) Z^T.
	weighted := func(w []float64) *mat.Dense {
		zw := mat.NewDense(n, s, nil)
		zw.Apply(func(i, j int, v float64) float64 { return v * w[j] }, zm)
		var out mat.Dense
		out.Mul(zw, zm.T())
		out.Scale(sf2, &out)
		return &out
	}
	h := make([]float64, s)
	for j := range h {
		h[j] = math.Exp(logh[j])
	}
	Kd := weighted(h)
	K := mat.NewSymDense(n, nil)
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			K.SetSym(i, j, Kd.At(i, j))
		}
		K.SetSym(i, i, K.At(i, i)+sn2)
	}
	var ch mat.Cholesky
	if !ch.Factorize(K) {
		t.Fatal("GL kernel matrix not positive definite")
	}
	yv := mat.NewVecDense(n, ref.rows.Y)
	var a mat.VecDense
	if err := ch.SolveVecTo(&a, yv); err != nil {
		t.Fatal(err)
	}
	lml := -0.5*mat.Dot(yv, &a) - 0.5*ch.LogDet() - float64(n)/2*math.Log(2*math.Pi)
	var Kinv mat.SymDense
	if err := ch.InverseTo(&Kinv); err != nil {
		t.Fatal(err)
	}
	// dL = 1/2 tr((a a^T - K^-1) dK).
	traceWith := func(dK func(i, j int) float64) float64 {
		var v float64
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				v += (a.AtVec(i)*a.AtVec(j) - Kinv.At(i, j)) * dK(i, j)
			}
		}
		return v / 2
	}
	grad := make([]float64, d+2)
	for k := 0; k < d; k++ {
		w := make([]float64, s)
		for j := range w {
			w[j] = h[j] * dlogh[j*d+k]
		}
		dK := weighted(w)
		grad[k] = traceWith(dK.At)
	}
	grad[d] = traceWith(Kd.At)
	grad[d+1] = traceWith(func(i, j int) float64 {
		if i == j {
			return sn2
		}
		return 0
	})
	return lml, grad
}

// TestGLObjectiveGradientMatchesFiniteDifferences checks the full chain of the GL objective
// (weights, their lengthscale derivatives, the feature likelihood) against central
// differences of the objective itself, with a coarse grid where GL differs from exact.
func TestGLObjectiveGradientMatchesFiniteDifferences(t *testing.T) {
	for _, fam := range []kernel.Family{kernel.RBF, kernel.Matern32} {
		d := 2
		eng := localEngine(t, synthTable(300, d, 5), 3, 2)
		ref := newReference(t, eng, fam)
		gl, err := features.NewGL(fam, []float64{6, 7}, []int{9, 12})
		if err != nil {
			t.Fatal(err)
		}
		st, err := eng.Reduce(context.Background(), &tasks.GramTask{Features: gl, Transform: ref.p.tf})
		if err != nil {
			t.Fatal(err)
		}
		lik := newGLLikelihood(gl, st.(*reduce.Gram))
		th := thetaAt(d, 0.8, 1.3, 0.07)
		g := make([]float64, d+2)
		if _, err := lik.objective(th, g); err != nil {
			t.Fatal(err)
		}
		scratch := make([]float64, d+2)
		const h = 1e-5
		for i := range th {
			tp := append([]float64(nil), th...)
			tm := append([]float64(nil), th...)
			tp[i] += h
			tm[i] -= h
			fp, _ := lik.objective(tp, scratch)
			fm, _ := lik.objective(tm, scratch)
			fd := (fp - fm) / (2 * h)
			if relErr(g[i], fd) > 1e-6 {
				t.Errorf("%v param %d: analytic %.10g, finite difference %.10g", fam, i, g[i], fd)
			}
		}
	}
}

// TestGLPredictionMatchesExact checks the GL posterior (mean and latent variance at test
// points) against the exact GP at the same hyperparameters.
func TestGLPredictionMatchesExact(t *testing.T) {
	d := 1
	eng := localEngine(t, synthTable(400, d, 9), 2, 2)
	ref := newReference(t, eng, kernel.RBF)
	U := autoBox(t, ref, 0.5, 1.5)
	lik := glLik(t, eng, ref, U, 80)
	th := thetaAt(d, 0.6, 1.2, 0.02)
	f, err := lik.eval(th, false)
	if err != nil {
		t.Fatal(err)
	}
	pr := f.Predictor()
	h := hyperOf(th, d)
	ex, err := solver.NewExact(kernel.Kernel{Family: kernel.RBF, Lengthscales: h.Lengthscales, SignalVariance: h.SignalVariance}, h.NoiseVariance, ref.rows.X, d, ref.rows.Y)
	if err != nil {
		t.Fatal(err)
	}
	xs := []float64{-1.7, -0.3, 0, 0.45, 1.2, 1.9}
	z := make([]float64, len(xs)*lik.gl.NumFeatures())
	lik.gl.MapBlock(xs, len(xs), z)
	gm, gv := make([]float64, len(xs)), make([]float64, len(xs))
	em, ev := make([]float64, len(xs)), make([]float64, len(xs))
	pr.Predict(z, len(xs), gm, gv)
	ex.Predict(xs, em, ev)
	for i := range xs {
		if math.Abs(gm[i]-em[i]) > 1e-6 || math.Abs(gv[i]-ev[i]) > 1e-6*math.Max(1e-3, ev[i])*1e3 {
			t.Errorf("x=%g: GL mean %.9g var %.9g, exact mean %.9g var %.9g", xs[i], gm[i], gv[i], em[i], ev[i])
		}
	}
}
