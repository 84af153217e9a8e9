package solver

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/reduce"
)

func randData(rng *rand.Rand, n, d int) ([]float64, []float64) {
	X := make([]float64, n*d)
	y := make([]float64, n)
	for i := range X {
		X[i] = rng.Float64()*4 - 2
	}
	for i := 0; i < n; i++ {
		y[i] = math.Sin(2*X[i*d]) + 0.1*rng.NormFloat64()
		if d > 1 {
			y[i] += math.Cos(X[i*d+1])
		}
	}
	return X, y
}

func relErr(a, b float64) float64 { return math.Abs(a-b) / math.Max(1, math.Abs(b)) }

// lmlAt is the exact log marginal likelihood at theta = (log l..., log sf2, log sn2).
func lmlAt(t *testing.T, fam kernel.Family, theta, X []float64, d int, y []float64) float64 {
	t.Helper()
	ls := make([]float64, d)
	for i := range ls {
		ls[i] = math.Exp(theta[i])
	}
	e, err := NewExact(kernel.Kernel{Family: fam, Lengthscales: ls, SignalVariance: math.Exp(theta[d])}, math.Exp(theta[d+1]), X, d, y)
	if err != nil {
		t.Fatal(err)
	}
	return e.LogMarginalLikelihood()
}

func TestExactGradientMatchesFiniteDifferences(t *testing.T) {
	for _, fam := range []kernel.Family{kernel.RBF, kernel.Matern12, kernel.Matern32, kernel.Matern52} {
		t.Run(fam.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(fam)))
			d := 2
			X, y := randData(rng, 40, d)
			theta := []float64{math.Log(0.7), math.Log(1.3), math.Log(1.5), math.Log(0.05)}
			ls := []float64{0.7, 1.3}
			e, err := NewExact(kernel.Kernel{Family: fam, Lengthscales: ls, SignalVariance: 1.5}, 0.05, X, d, y)
			if err != nil {
				t.Fatal(err)
			}
			g := e.Gradient()
			const h = 1e-5
			for i := range theta {
				tp := append([]float64(nil), theta...)
				tm := append([]float64(nil), theta...)
				tp[i] += h
				tm[i] -= h
				fd := (lmlAt(t, fam, tp, X, d, y) - lmlAt(t, fam, tm, X, d, y)) / (2 * h)
				if relErr(g[i], fd) > 1e-6 {
					t.Errorf("param %d: analytic %.10g, finite difference %.10g", i, g[i], fd)
				}
			}
		})
	}
}

func TestExactPredictionMatchesDenseSolve(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	d := 2
	X, y := randData(rng, 30, d)
	Xs, _ := randData(rng, 5, d)
	k := kernel.Kernel{Family: kernel.Matern52, Lengthscales: []float64{0.8, 1.1}, SignalVariance: 2}
	noise := 0.1
	e, err := NewExact(k, noise, X, d, y)
	if err != nil {
		t.Fatal(err)
	}
	mean := make([]float64, 5)
	lv := make([]float64, 5)
	e.Predict(Xs, mean, lv)
	// Dense reference by LU: K^-1 [y, k_*].
	n := len(y)
	K := mat.NewDense(n, n, nil)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			K.Set(i, j, k.Eval(X[i*d:(i+1)*d], X[j*d:(j+1)*d]))
		}
		K.Set(i, i, K.At(i, i)+noise)
	}
	for tt := 0; tt < 5; tt++ {
		x := Xs[tt*d : (tt+1)*d]
		ks := mat.NewVecDense(n, nil)
		for i := 0; i < n; i++ {
			ks.SetVec(i, k.Eval(x, X[i*d:(i+1)*d]))
		}
		var sol mat.VecDense
		if err := sol.SolveVec(K, ks); err != nil {
			t.Fatal(err)
		}
		wantMean := mat.Dot(&sol, mat.NewVecDense(n, y))
		wantVar := k.Eval(x, x) - mat.Dot(&sol, ks)
		if relErr(mean[tt], wantMean) > 1e-9 || relErr(lv[tt], wantVar) > 1e-9 {
			t.Errorf("point %d: mean %g want %g, var %g want %g", tt, mean[tt], wantMean, lv[tt], wantVar)
		}
	}
}

func TestExactRejectsBadInput(t *testing.T) {
	k := kernel.Kernel{Family: kernel.RBF, Lengthscales: []float64{1}, SignalVariance: 1}
	cases := map[string]func() error{
		"zero noise": func() error { _, err := NewExact(k, 0, []float64{0, 1}, 1, []float64{0, 1}); return err },
		"dim":        func() error { _, err := NewExact(k, 0.1, []float64{0, 1}, 2, []float64{0}); return err },
		"empty":      func() error { _, err := NewExact(k, 0.1, nil, 1, nil); return err },
		"lengthscale": func() error {
			_, err := NewExact(kernel.Kernel{Lengthscales: []float64{-1}, SignalVariance: 1}, 0.1, []float64{0}, 1, []float64{0})
			return err
		},
	}
	for name, f := range cases {
		if f() == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// featureProblem is a random feature model: K~ = sf2 Z W Z^T + sn2 I.
type featureProblem struct {
	n, s int
	Z    []float64
	y    []float64
	logh []float64
}

func newFeatureProblem(rng *rand.Rand, n, s int) featureProblem {
	p := featureProblem{n: n, s: s, Z: make([]float64, n*s), y: make([]float64, n), logh: make([]float64, s)}
	for i := range p.Z {
		p.Z[i] = rng.NormFloat64()
	}
	for i := range p.y {
		p.y[i] = rng.NormFloat64()
	}
	for j := range p.logh {
		p.logh[j] = -4 + 3*rng.Float64()
	}
	p.logh[s-1] = -80 // a weight that has all but underflowed, as at a GL box edge
	return p
}

func (p featureProblem) gram() *reduce.Gram {
	g := reduce.NewGram(p.s)
	for i := 0; i < p.n; i++ {
		z := p.Z[i*p.s : (i+1)*p.s]
		for a := 0; a < p.s; a++ {
			for b := a; b < p.s; b++ {
				g.G[a*p.s+b] += z[a] * z[b]
			}
			g.B[a] += z[a] * p.y[i]
		}
		g.YY += p.y[i] * p.y[i]
	}
	g.N = p.n
	return g
}

func (p featureProblem) dense(sf2, sn2 float64) *mat.SymDense {
	K := mat.NewSymDense(p.n, nil)
	for i := 0; i < p.n; i++ {
		for j := i; j < p.n; j++ {
			var v float64
			for a := 0; a < p.s; a++ {
				v += p.Z[i*p.s+a] * math.Exp(p.logh[a]) * p.Z[j*p.s+a]
			}
			v *= sf2
			if i == j {
				v += sn2
			}
			K.SetSym(i, j, v)
		}
	}
	return K
}

func denseLML(K *mat.SymDense, y []float64) float64 {
	var c mat.Cholesky
	if !c.Factorize(K) {
		panic("not SPD")
	}
	var a mat.VecDense
	yv := mat.NewVecDense(len(y), y)
	if err := c.SolveVecTo(&a, yv); err != nil {
		panic(err)
	}
	return -0.5*mat.Dot(yv, &a) - 0.5*c.LogDet() - float64(len(y))/2*math.Log(2*math.Pi)
}

func TestFeatureFitEqualsDenseLikelihood(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	p := newFeatureProblem(rng, 60, 12)
	for _, v := range [][2]float64{{1, 0.1}, {3, 1e-3}, {0.2, 2}} {
		f, err := FitFeatures(p.gram(), p.logh, v[0], v[1], false)
		if err != nil {
			t.Fatal(err)
		}
		want := denseLML(p.dense(v[0], v[1]), p.y)
		if relErr(f.LML, want) > 1e-10 {
			t.Errorf("sf2=%g sn2=%g: LML %.14g, dense %.14g", v[0], v[1], f.LML, want)
		}
	}
}

func TestFeatureFitGradientMatchesFiniteDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	p := newFeatureProblem(rng, 50, 10)
	g := p.gram()
	sf2, sn2 := 1.7, 0.2
	f, err := FitFeatures(g, p.logh, sf2, sn2, true)
	if err != nil {
		t.Fatal(err)
	}
	lml := func(logh []float64, lsf2, lsn2 float64) float64 {
		ff, err := FitFeatures(g, logh, math.Exp(lsf2), math.Exp(lsn2), false)
		if err != nil {
			t.Fatal(err)
		}
		return ff.LML
	}
	const h = 1e-6
	ls, ln := math.Log(sf2), math.Log(sn2)
	fd := (lml(p.logh, ls+h, ln) - lml(p.logh, ls-h, ln)) / (2 * h)
	if relErr(f.GradLogSF2, fd) > 1e-6 {
		t.Errorf("dlog sf2: %g vs fd %g", f.GradLogSF2, fd)
	}
	fd = (lml(p.logh, ls, ln+h) - lml(p.logh, ls, ln-h)) / (2 * h)
	if relErr(f.GradLogSN2, fd) > 1e-6 {
		t.Errorf("dlog sn2: %g vs fd %g", f.GradLogSN2, fd)
	}
	for j := range p.logh {
		lp := append([]float64(nil), p.logh...)
		lm := append([]float64(nil), p.logh...)
		lp[j] += h
		lm[j] -= h
		fd := (lml(lp, ls, ln) - lml(lm, ls, ln)) / (2 * h)
		if relErr(f.GradLogH[j], fd) > 1e-6 {
			t.Errorf("dlog h_%d: %g vs fd %g", j, f.GradLogH[j], fd)
		}
	}
}

func TestGramDerivativeMatchesFiniteDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	p := newFeatureProblem(rng, 40, 8)
	dZ := make([]float64, len(p.Z))
	for i := range dZ {
		dZ[i] = rng.NormFloat64()
	}
	at := func(tt float64) featureProblem {
		q := p
		q.Z = make([]float64, len(p.Z))
		for i := range q.Z {
			q.Z[i] = p.Z[i] + tt*dZ[i]
		}
		return q
	}
	sf2, sn2 := 1.2, 0.3
	f, err := FitFeatures(p.gram(), p.logh, sf2, sn2, true)
	if err != nil {
		t.Fatal(err)
	}
	s := p.s
	E := make([]float64, s*s)
	e := make([]float64, s)
	for i := 0; i < p.n; i++ {
		for a := 0; a < s; a++ {
			for b := 0; b < s; b++ {
				E[a*s+b] += dZ[i*s+a] * p.Z[i*s+b]
			}
			e[a] += dZ[i*s+a] * p.y[i]
		}
	}
	got, err := f.GramDerivative(E, e)
	if err != nil {
		t.Fatal(err)
	}
	const h = 1e-6
	lp, _ := FitFeatures(at(h).gram(), p.logh, sf2, sn2, false)
	lm, _ := FitFeatures(at(-h).gram(), p.logh, sf2, sn2, false)
	fd := (lp.LML - lm.LML) / (2 * h)
	if relErr(got, fd) > 1e-6 {
		t.Errorf("gram derivative %g, finite difference %g", got, fd)
	}
}

func TestFeaturePredictorMatchesDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	p := newFeatureProblem(rng, 40, 9)
	sf2, sn2 := 1.4, 0.15
	f, err := FitFeatures(p.gram(), p.logh, sf2, sn2, false)
	if err != nil {
		t.Fatal(err)
	}
	pr := f.Predictor()
	rows := 4
	zs := make([]float64, rows*p.s)
	for i := range zs {
		zs[i] = rng.NormFloat64()
	}
	mean := make([]float64, rows)
	lv := make([]float64, rows)
	pr.Predict(zs, rows, mean, lv)
	var c mat.Cholesky
	c.Factorize(p.dense(sf2, sn2))
	kk := func(a, b []float64) float64 {
		var v float64
		for j := range a {
			v += a[j] * math.Exp(p.logh[j]) * b[j]
		}
		return sf2 * v
	}
	for tt := 0; tt < rows; tt++ {
		zt := zs[tt*p.s : (tt+1)*p.s]
		ks := mat.NewVecDense(p.n, nil)
		for i := 0; i < p.n; i++ {
			ks.SetVec(i, kk(zt, p.Z[i*p.s:(i+1)*p.s]))
		}
		var sol mat.VecDense
		if err := c.SolveVecTo(&sol, ks); err != nil {
			t.Fatal(err)
		}
		wm := mat.Dot(&sol, mat.NewVecDense(p.n, p.y))
		wv := kk(zt, zt) - mat.Dot(&sol, ks)
		if relErr(mean[tt], wm) > 1e-9 || relErr(lv[tt], wv) > 1e-9 {
			t.Errorf("row %d: mean %g want %g; var %g want %g", tt, mean[tt], wm, lv[tt], wv)
		}
	}
}

// TestExactWorkspaceKeepsBits builds exact GPs one after another in one ExactWorkspace, as an
// optimizer's evaluations do (the gradient overwrites the kernel buffer with K^-1; sizes
// shrink and grow; a factorisation fails in between), and checks each is bitwise the one
// NewExact builds with fresh buffers: log likelihood, gradient, mean and variance.
func TestExactWorkspaceKeepsBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	d := 3
	X, y := randData(rng, 90, d)
	xs, _ := randData(rng, 7, d)
	// Xdup repeats its first row: with noise 1e-300 its K is singular and does not factorise.
	Xdup := append([]float64(nil), X...)
	for r := 1; r < 4; r++ {
		copy(Xdup[r*d:(r+1)*d], Xdup[:d])
	}
	var ws ExactWorkspace
	for i, tc := range []struct {
		n     int
		l     float64
		noise float64
		fails bool
	}{
		{60, 0.7, 0.05, false}, {60, 1.4, 0.2, false}, {30, 0.5, 0.01, false}, {90, 0.9, 0.1, false},
		{90, 0.9, 1e-300, true}, {45, 2.0, 1e-3, false},
	} {
		k := kernel.Kernel{Family: kernel.Matern52, Lengthscales: []float64{tc.l, 1.1 * tc.l, 0.8}, SignalVariance: 1.3}
		x := X
		if tc.fails {
			x = Xdup
		}
		want, werr := NewExact(k, tc.noise, x[:tc.n*d], d, y[:tc.n])
		got, gerr := NewExactIn(&ws, k, tc.noise, x[:tc.n*d], d, y[:tc.n])
		if (werr != nil) != tc.fails || (gerr != nil) != tc.fails {
			t.Fatalf("case %d: errors %v fresh and %v in the workspace; want failure %v", i, werr, gerr, tc.fails)
		}
		if tc.fails {
			continue
		}
		if a, b := got.LogMarginalLikelihood(), want.LogMarginalLikelihood(); a != b {
			t.Errorf("case %d: log likelihood %v in the workspace, %v fresh", i, a, b)
		}
		for j, g := range got.Gradient() {
			if w := want.Gradient()[j]; g != w {
				t.Errorf("case %d: gradient %d is %v in the workspace, %v fresh", i, j, g, w)
			}
		}
		gm, gv, wm, wv := make([]float64, 7), make([]float64, 7), make([]float64, 7), make([]float64, 7)
		got.Predict(xs, gm, gv)
		want.Predict(xs, wm, wv)
		for j := range gm {
			if gm[j] != wm[j] || gv[j] != wv[j] {
				t.Errorf("case %d row %d: prediction (%v, %v) in the workspace, (%v, %v) fresh", i, j, gm[j], gv[j], wm[j], wv[j])
			}
		}
	}
}

// TestExactLOOMatchesRefits: the closed-form leave-one-out residuals and variances (R&W eq.
// 5.12) equal those of n exact GPs refitted without row i and predicting it (mean, latent
// variance plus noise), at 1e-9 relative.
func TestExactLOOMatchesRefits(t *testing.T) {
	for _, fam := range []kernel.Family{kernel.RBF, kernel.Matern32} {
		rng := rand.New(rand.NewPCG(6, uint64(fam)))
		const n, d = 35, 2
		X, y := randData(rng, n, d)
		k := kernel.Kernel{Family: fam, Lengthscales: []float64{0.8, 1.4}, SignalVariance: 1.2}
		const noise = 0.03
		e, err := NewExact(k, noise, X, d, y)
		if err != nil {
			t.Fatal(err)
		}
		resid, variance, err := e.LOO()
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			Xi := append(append([]float64(nil), X[:i*d]...), X[(i+1)*d:]...)
			yi := append(append([]float64(nil), y[:i]...), y[i+1:]...)
			ei, err := NewExact(k, noise, Xi, d, yi)
			if err != nil {
				t.Fatal(err)
			}
			m, v := make([]float64, 1), make([]float64, 1)
			ei.Predict(X[i*d:(i+1)*d], m, v)
			if r := y[i] - m[0]; relErr(resid[i], r) > 1e-9 {
				t.Errorf("%v row %d: LOO residual %.12g, refit %.12g", fam, i, resid[i], r)
			}
			if relErr(variance[i], v[0]+noise) > 1e-9 {
				t.Errorf("%v row %d: LOO variance %.12g, refit %.12g", fam, i, variance[i], v[0]+noise)
			}
		}
	}
}
