package train

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/model"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/solver"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// f1 and f2 are the synthetic functions of Fink Shustin & Avron 2022, §7.
func f1(x float64) float64 { return math.Sin(2*x) + math.Sin(6*math.Exp(x)) }
func f2(x1, x2 float64) float64 {
	return (math.Sin(x1) + math.Sin(10*math.Exp(x1))) * (math.Sin(x2) + math.Sin(10*math.Exp(x2)))
}

// f1Data is the paper's f1 setup: n equispaced points on [-1, 1], noise variance 0.5^2;
// the test set is uniform on [-1, 1] with noiseless targets.
func f1Data(n, nTest int) (tr, te *shard.Table) {
	rng := rand.New(rand.NewPCG(21, 1))
	tr = &shard.Table{Source: "f1 train", D: 1}
	for i := 0; i < n; i++ {
		x := -1 + 2*float64(i)/float64(n-1)
		tr.X = append(tr.X, x)
		tr.Y = append(tr.Y, f1(x)+0.5*rng.NormFloat64())
	}
	te = &shard.Table{Source: "f1 test", D: 1}
	for i := 0; i < nTest; i++ {
		x := -1 + 2*rng.Float64()
		te.X = append(te.X, x)
		te.Y = append(te.Y, f1(x))
	}
	return tr, te
}

// f2Data: an m x m grid on [-1, 1]^2 with noise variance 0.3^2; test points uniform.
func f2Data(m, nTest int) (tr, te *shard.Table) {
	rng := rand.New(rand.NewPCG(22, 2))
	tr = &shard.Table{Source: "f2 train", D: 2}
	for i := 0; i < m; i++ {
		for j := 0; j < m; j++ {
			a, b := -1+2*float64(i)/float64(m-1), -1+2*float64(j)/float64(m-1)
			tr.X = append(tr.X, a, b)
			tr.Y = append(tr.Y, f2(a, b)+0.3*rng.NormFloat64())
		}
	}
	te = &shard.Table{Source: "f2 test", D: 2}
	for i := 0; i < nTest; i++ {
		a, b := -1+2*rng.Float64(), -1+2*rng.Float64()
		te.X = append(te.X, a, b)
		te.Y = append(te.Y, f2(a, b))
	}
	return tr, te
}

func trainOn(t *testing.T, tab *shard.Table, spec Spec, shards, workers int) *model.Model {
	t.Helper()
	m, err := Train(context.Background(), localEngine(t, tab, shards, workers), spec, nil)
	if err != nil {
		t.Fatalf("%s: %v", spec.Method, err)
	}
	return m
}

func testMSE(t *testing.T, m *model.Model, te *shard.Table) float64 {
	t.Helper()
	p, err := m.Predict(te.X, te.N())
	if err != nil {
		t.Fatal(err)
	}
	var se float64
	for i, y := range te.Y {
		se += (p.Mean[i] - y) * (p.Mean[i] - y)
	}
	return se / float64(te.N())
}

// TestF1GLReachesExactError: on the paper's f1, GL trained through the whole pipeline
// reaches the exact GP's test error and likelihood, and RFF with the same number of features
// is a worse approximation.
func TestF1GLReachesExactError(t *testing.T) {
	tr, te := f1Data(800, 500)
	spec := DefaultSpec("gl")
	spec.LengthscaleBounds = [2]float64{0.03, 0.3}
	spec.NoiseVarianceBounds = [2]float64{0.01, 2}
	set(&spec, "max_features", 4096)
	gl := trainOn(t, tr, spec, 4, 2)
	switchMethod(&spec, "exact")
	ex := trainOn(t, tr, spec, 4, 2)
	switchMethod(&spec, "rff")
	set(&spec, "features", gl.NumFeatures()+gl.NumFeatures()%2)
	set(&spec, "max_features", 4096)
	spec.MaxIter = 40
	rf := trainOn(t, tr, spec, 4, 2)
	eGL, eEx, eRFF := testMSE(t, gl, te), testMSE(t, ex, te), testMSE(t, rf, te)
	t.Logf("f1 test MSE: exact %.5f (l=%.4g), gl %.5f (s=%d, l=%.4g), rff %.5f (s=%d)", eEx, ex.Original().Lengthscales[0], eGL, gl.NumFeatures(), gl.Original().Lengthscales[0], eRFF, rffSettings(&spec).GetFeatures())
	if eGL > eEx*1.02+1e-4 {
		t.Errorf("gl test MSE %.5f does not reach the exact GP's %.5f", eGL, eEx)
	}
	if relErr(gl.LogLik, ex.LogLik) > 1e-4 {
		t.Errorf("gl optimum log likelihood %.8g differs from exact %.8g", gl.LogLik, ex.LogLik)
	}
	// With the shared hyperparameter search both feature methods reach the exact GP's basin;
	// at s = 542 in one dimension RFF's Monte Carlo error then costs about 1% of test MSE (the
	// former 5% margin measured RFF's weaker start search). RFF stays the worse approximation:
	// its optimum likelihood is further from the exact GP's, and its test error is not lower.
	if !(relErr(rf.LogLik, ex.LogLik) > relErr(gl.LogLik, ex.LogLik)) || eRFF < eGL {
		t.Errorf("rff with the same number of features (MSE %.5f, LML %.8g) is not worse than gl (MSE %.5f, LML %.8g; exact %.8g)", eRFF, rf.LogLik, eGL, gl.LogLik, ex.LogLik)
	}
}

// TestF2GLReachesExactError: the paper's f2 on a 32 x 32 grid (the paper used 64 x 64; the
// exact GP's O(n^3) optimisation bounds the size here). The grid is under-resolved on
// purpose (40 nodes per dimension in a box of 20 rad per standard deviation), as in the
// paper, which reached the exact error far below the theoretical s.
func TestF2GLReachesExactError(t *testing.T) {
	if testing.Short() {
		t.Skip("f2 trains an exact GP on 1024 points")
	}
	tr, te := f2Data(32, 400)
	spec := DefaultSpec("gl")
	spec.LengthscaleBounds = [2]float64{0.05, 1}
	spec.NoiseVarianceBounds = [2]float64{0.01, 2}
	set(&spec, "gl_box", []float64{20, 20})
	set(&spec, "nodes_per_dim", []int{40, 40})
	spec.MaxIter = 60
	gl := trainOn(t, tr, spec, 4, 2)
	switchMethod(&spec, "exact")
	ex := trainOn(t, tr, spec, 4, 2)
	switchMethod(&spec, "rff")
	set(&spec, "features", 1600)
	spec.MaxIter = 20
	rf := trainOn(t, tr, spec, 4, 2)
	eGL, eEx, eRFF := testMSE(t, gl, te), testMSE(t, ex, te), testMSE(t, rf, te)
	t.Logf("f2 test MSE: exact %.5f, gl %.5f (s=1600), rff %.5f (s=1600)", eEx, eGL, eRFF)
	if eGL > eEx*1.05+1e-4 {
		t.Errorf("gl test MSE %.5f does not reach the exact GP's %.5f", eGL, eEx)
	}
	// With the shared hyperparameter search both feature methods reach the exact GP's basin;
	// at s = 542 in one dimension RFF's Monte Carlo error then costs about 1% of test MSE (the
	// former 5% margin measured RFF's weaker start search). RFF stays the worse approximation:
	// its optimum likelihood is further from the exact GP's, and its test error is not lower.
	if !(relErr(rf.LogLik, ex.LogLik) > relErr(gl.LogLik, ex.LogLik)) || eRFF < eGL {
		t.Errorf("rff with the same number of features (MSE %.5f, LML %.8g) is not worse than gl (MSE %.5f, LML %.8g; exact %.8g)", eRFF, rf.LogLik, eGL, gl.LogLik, ex.LogLik)
	}
}

// TestModelBitwiseIdenticalAcrossWorkers: the same shards give the same model bytes on 1 and
// 4 goroutines, for every method.
func TestModelBitwiseIdenticalAcrossWorkers(t *testing.T) {
	tab := synthTable(1500, 2, 31)
	for _, method := range []string{"gl", "rff", "exact"} {
		t.Run(method, func(t *testing.T) {
			spec := DefaultSpec(method)
			spec.LengthscaleBounds = [2]float64{0.5, 1}
			set(&spec, "nodes_per_dim", []int{16, 16}) // small s: this test is about bits, not accuracy
			spec.MaxIter = 15
			set(&spec, "features", 64)
			spec.Seed = 5
			if method == "exact" {
				tab = synthTable(400, 2, 31)
			}
			var enc [][]byte
			for _, w := range []int{1, 4} {
				m := trainOn(t, tab, spec, 8, w)
				b, err := m.Bytes()
				if err != nil {
					t.Fatal(err)
				}
				enc = append(enc, b)
			}
			if !bytes.Equal(enc[0], enc[1]) {
				t.Errorf("model differs between --workers 1 and --workers 4")
			}
		})
	}
}

// TestModelRoundTripAndPredict: an encoded model decodes to one that predicts the same bits,
// and predictions are in original units (mean near the data, variances scaled).
func TestModelRoundTripAndPredict(t *testing.T) {
	tab := synthTable(300, 1, 41)
	for i := range tab.Y {
		tab.Y[i] = 1000 + 50*tab.Y[i] // original units far from standardized ones
		tab.X[i] = 10 + 3*tab.X[i]
	}
	spec := DefaultSpec("gl")
	spec.LengthscaleBounds = [2]float64{0.2, 1}
	m := trainOn(t, tab, spec, 2, 2)
	b, err := m.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	m2, err := model.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	x := []float64{10, 11.5}
	p1, err := m.Predict(x, 2)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := m2.Predict(x, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i := range x {
		if p1.Mean[i] != p2.Mean[i] || p1.NoisyVar[i] != p2.NoisyVar[i] {
			t.Errorf("decoded model predicts differently")
		}
		want := 1000 + 50*math.Sin(3*(x[i]-10)/3)
		if math.Abs(p1.Mean[i]-want) > 25 {
			t.Errorf("x=%g: mean %g, want about %g (original units)", x[i], p1.Mean[i], want)
		}
		noise := m.Original().NoiseVariance
		if math.Abs(p1.NoisyVar[i]-p1.LatentVar[i]-noise) > 1e-9*noise {
			t.Errorf("noisy variance is not latent + noise")
		}
	}
	if ls := m.Original().Lengthscales[0]; math.Abs(ls-3*m.Hyper.Lengthscales[0]*m.Transform.XScale[0]/3) > 1e-12 {
		t.Errorf("original lengthscale %g not scaled by the column's standard deviation", ls)
	}
}

// TestExactMethodMatchesSolver: the exact method's model predicts like the solver at the
// model's hyperparameters, and its optimum has a vanishing projected gradient.
func TestExactMethodMatchesSolver(t *testing.T) {
	tab := synthTable(200, 2, 51)
	spec := exactSE()
	m := trainOn(t, tab, spec, 3, 2)
	eng := localEngine(t, tab, 3, 2)
	ref := newReference(t, eng, kernel.RBF)
	theta := make([]float64, 4)
	for k := 0; k < 2; k++ {
		theta[k] = math.Log(m.Hyper.Lengthscales[k])
	}
	theta[2], theta[3] = math.Log(m.Hyper.SignalVariance), math.Log(m.Hyper.NoiseVariance)
	lml, g := ref.exact(t, theta)
	if relErr(lml, m.LogLik) > 1e-12 {
		t.Errorf("model log likelihood %g, solver %g", m.LogLik, lml)
	}
	lo, hi := box(spec, 2)
	for i, gi := range g {
		atBound := theta[i] <= lo[i]+1e-9 || theta[i] >= hi[i]-1e-9
		if !atBound && math.Abs(gi) > 1e-3*math.Max(1, math.Abs(lml)/100) {
			t.Errorf("gradient %d is %g at the optimum", i, gi)
		}
	}
	_ = solver.Exact{}
}

// TestTrainRejectsBadSpecs: each bad spec gives an error naming the field, never a panic.
func TestTrainRejectsBadSpecs(t *testing.T) {
	tab := synthTable(50, 1, 61)
	tab3 := synthTable(200, 6, 62)
	cases := []struct {
		name string
		tab  *shard.Table
		mod  func(*Spec)
		want string
	}{
		{"inverted lengthscale bounds", tab, func(s *Spec) { s.LengthscaleBounds = [2]float64{2, 0.1} }, "lengthscale-bounds"},
		{"inverted noise bounds", tab, func(s *Spec) { s.NoiseVarianceBounds = [2]float64{1, 0.1} }, "noise-variance-bounds"},
		{"nonpositive bound", tab, func(s *Spec) { s.SignalVarianceBounds = [2]float64{0, 1} }, "signal-variance-bounds"},
		{"unknown method", tab, func(s *Spec) { s.Method = "svgp" }, "method"},
		{"unknown kernel", tab, func(s *Spec) { s.Kernel = "periodic" }, "kernel"},
		{"odd rff features", tab, func(s *Spec) { s.Method = "rff"; s.Settings = &pb.RFFSettings{Features: 7} }, "features"},
		{"nodes per dim count", tab, func(s *Spec) { set(s, "nodes_per_dim", []int{4, 4}) }, "nodes-per-dim"},
		{"d too large for the tensor grid", tab3, func(s *Spec) {}, "rff"},
		{"exact too large", tab, func(s *Spec) { s.Method = "exact"; s.Settings = &pb.ExactSettings{ExactMaxRows: 10} }, "exact-max-rows"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := DefaultSpec("gl")
			c.mod(&spec)
			_, err := Train(context.Background(), localEngine(t, c.tab, 2, 2), spec, nil)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not mention %q", err, c.want)
			}
		})
	}
}
