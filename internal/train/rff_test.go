package train

import (
	"context"
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/gpreduce/gpreduce/internal/features"
	"github.com/gpreduce/gpreduce/internal/kernel"
)

func newRFFLik(t *testing.T, ref *reference, s int, seed uint64) *rffLikelihood {
	t.Helper()
	rff, err := features.NewRFF(ref.fam, ref.p.d, s, seed)
	if err != nil {
		t.Fatal(err)
	}
	logh := make([]float64, s)
	for j := range logh {
		logh[j] = rff.LogWeight()
	}
	return &rffLikelihood{ctx: context.Background(), rff: rff, tf: ref.p.tf, logh: logh}
}

// denseRFFLML is the log marginal likelihood of the RFF kernel matrix
// K~ = sigma_f^2 (2/s) Z(l) Z(l)^T + sigma_n^2 I by a dense Cholesky.
func denseRFFLML(t *testing.T, rff *features.RFF, ref *reference, theta []float64) float64 {
	t.Helper()
	d, n, s := ref.p.d, len(ref.rows.Y), rff.NumFeatures()
	ls := make([]float64, d)
	for k := range ls {
		ls[k] = math.Exp(theta[k])
	}
	Z := make([]float64, n*s)
	rff.MapBlock(ls, ref.rows.X, n, Z)
	zm := mat.NewDense(n, s, Z)
	var K mat.Dense
	K.Mul(zm, zm.T())
	sf2, sn2 := math.Exp(theta[d]), math.Exp(theta[d+1])
	Ks := mat.NewSymDense(n, nil)
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			Ks.SetSym(i, j, sf2*2/float64(s)*K.At(i, j))
		}
		Ks.SetSym(i, i, Ks.At(i, i)+sn2)
	}
	var ch mat.Cholesky
	if !ch.Factorize(Ks) {
		t.Fatal("RFF kernel matrix not positive definite")
	}
	yv := mat.NewVecDense(n, ref.rows.Y)
	var a mat.VecDense
	if err := ch.SolveVecTo(&a, yv); err != nil {
		t.Fatal(err)
	}
	return -0.5*mat.Dot(yv, &a) - 0.5*ch.LogDet() - float64(n)/2*math.Log(2*math.Pi)
}

// TestRFFLikelihoodMatchesDenseRFFKernel checks the pass-based RFF likelihood and its
// gradient, including the lengthscale gradient through dG = E + E^T, against the dense GP
// with the same RFF kernel: the value to 1e-9, the gradient against central differences of
// the dense likelihood to 1e-6.
func TestRFFLikelihoodMatchesDenseRFFKernel(t *testing.T) {
	for _, fam := range []kernel.Family{kernel.RBF, kernel.Matern52} {
		t.Run(fam.String(), func(t *testing.T) {
			d := 2
			eng := localEngine(t, synthTable(150, d, 11), 3, 2)
			ref := newReference(t, eng, fam)
			lik := newRFFLik(t, ref, 64, 3)
			lik.eng = eng
			th := thetaAt(d, 0.7, 1.5, 0.08)
			g := make([]float64, d+2)
			f, err := lik.objective(th, g)
			if err != nil {
				t.Fatal(err)
			}
			want := denseRFFLML(t, lik.rff, ref, th)
			if relErr(-f, want) > 1e-9 {
				t.Errorf("log likelihood %.12g, dense %.12g", -f, want)
			}
			const h = 1e-5
			for i := range th {
				tp := append([]float64(nil), th...)
				tm := append([]float64(nil), th...)
				tp[i] += h
				tm[i] -= h
				fd := (denseRFFLML(t, lik.rff, ref, tp) - denseRFFLML(t, lik.rff, ref, tm)) / (2 * h)
				if relErr(-g[i], fd) > 1e-6 {
					t.Errorf("param %d: gradient %.10g, dense finite difference %.10g", i, -g[i], fd)
				}
			}
		})
	}
}

// TestRFFApproachesExactSlowly shows the Monte Carlo convergence of RFF to the exact
// likelihood: the error, averaged over seeds, falls as s grows (about 1/sqrt(s)), and stays
// far above GL's at equal s.
func TestRFFApproachesExactSlowly(t *testing.T) {
	d := 1
	eng := localEngine(t, synthTable(300, d, 12), 2, 2)
	ref := newReference(t, eng, kernel.RBF)
	th := thetaAt(d, 0.6, 1, 0.05)
	el, _ := ref.exact(t, th)
	var errs []float64
	for _, s := range []int{16, 128, 1024} {
		var sum float64
		const seeds = 4
		for seed := uint64(0); seed < seeds; seed++ {
			lik := newRFFLik(t, ref, s, seed)
			lik.eng = eng
			f, _, err := lik.eval(th, false)
			if err != nil {
				t.Fatal(err)
			}
			sum += math.Abs(f.LML-el) / math.Abs(el)
		}
		errs = append(errs, sum/seeds)
		t.Logf("s=%d: mean relative likelihood error %.3g", s, sum/seeds)
	}
	if !(errs[1] < errs[0] && errs[2] < errs[1] && errs[2] < errs[0]/4) {
		t.Errorf("RFF error does not fall with s: %v", errs)
	}
	// GL with 64 features on the same problem.
	U := autoBox(t, ref, 0.6, 1.5)
	gl := glLik(t, eng, ref, U, 64)
	f, err := gl.eval(th, false)
	if err != nil {
		t.Fatal(err)
	}
	glErr := math.Abs(f.LML-el) / math.Abs(el)
	t.Logf("GL s=64: relative likelihood error %.3g", glErr)
	if !(glErr < errs[2]/100) {
		t.Errorf("GL with 64 features (%.3g) is not far better than RFF with 1024 (%.3g)", glErr, errs[2])
	}
}
