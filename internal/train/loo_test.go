package train

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/gpreduce/gpreduce/internal/features"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/model"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/solver"
	"github.com/gpreduce/gpreduce/internal/tasks"
)

// TestWarnLOO: residuals whose standardized mean square is 1 give no warning; too large or
// too small a mean square beyond the band warns with the side and the factor; fewer than
// looMinRows rows are not judged; the band narrows with n.
func TestWarnLOO(t *testing.T) {
	for _, c := range []struct {
		name string
		n    int
		z    float64 // every standardized residual is +-z
		want string  // "" for no warning, else a substring of the message
	}{
		{"calibrated", 300, 1, ""},
		{"inside the band", 300, math.Sqrt(1.3), ""},
		{"too narrow", 300, math.Sqrt(1.5), "too narrow (by about 1.2x"},
		{"too wide", 300, 0.5, "too wide (by about 2x"},
		{"few rows", looMinRows - 1, 3, ""},
		{"large n, small excess", 100000, math.Sqrt(1.2), ""},
		{"large n, band floor", 100000, math.Sqrt(1.26), "too narrow"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resid, variance := make([]float64, c.n), make([]float64, c.n)
			for i := range resid {
				variance[i] = 0.1 + float64(i%7) // the check is per row's own scale
				resid[i] = c.z * math.Sqrt(variance[i])
				if i%2 == 1 {
					resid[i] = -resid[i]
				}
			}
			var m model.Model
			warnLOO(&m, resid, variance, "")
			switch {
			case c.want == "" && len(m.Warnings) != 0:
				t.Errorf("unexpected warning %v", m.Warnings)
			case c.want != "" && (len(m.Warnings) != 1 || m.Warnings[0].Code != model.WarnCalibration || !strings.Contains(m.Warnings[0].Message, c.want)):
				t.Errorf("warnings %v, want one %s containing %q", m.Warnings, model.WarnCalibration, c.want)
			}
		})
	}
	if b := looBand(277); !(math.Abs(b-4*math.Sqrt(2.0/277)) < 1e-15) {
		t.Errorf("looBand(277) = %v", b)
	}
}

// looSums runs the leave-one-out map round of m over tab: the mean of z_i^2 and the share of
// |z_i| <= 1.96.
func looSums(t *testing.T, m *model.Model, tab *shard.Table) (ms, cov float64) {
	t.Helper()
	st, err := localEngine(t, tab, 3, 2).Reduce(context.Background(), &tasks.LOOTask{Model: m})
	if err != nil {
		t.Fatal(err)
	}
	sum := st.(*reduce.Sum)
	if sum.N != tab.N() || sum.Parts[0][2] != float64(tab.N()) {
		t.Fatalf("the pass counted %v rows of %d", sum.Parts[0][2], tab.N())
	}
	return sum.Parts[0][0] / float64(tab.N()), sum.Parts[0][1] / float64(tab.N())
}

// TestLOOTaskMatchesExactLOO: the map round's z_i = r_i / sqrt(s2 - v_i), from one in-sample
// prediction per row, gives on an exact model the mean square and coverage of R&W eq. 5.12
// computed from the inverse's diagonal (solver.Exact.LOO, itself checked against n refits).
func TestLOOTaskMatchesExactLOO(t *testing.T) {
	tab := synthTable(200, 2, 61)
	eng := localEngine(t, tab, 3, 2)
	ref := newReference(t, eng, kernel.RBF)
	theta := []float64{math.Log(0.5), math.Log(0.8), 0, math.Log(0.02)}
	e, err := solver.NewExact(kernel.Kernel{Family: kernel.RBF, Lengthscales: []float64{0.5, 0.8}, SignalVariance: 1}, 0.02, ref.rows.X, 2, ref.rows.Y)
	if err != nil {
		t.Fatal(err)
	}
	resid, variance, err := e.LOO()
	if err != nil {
		t.Fatal(err)
	}
	var want, inside float64
	for i, r := range resid {
		want += r * r / variance[i]
		if r*r <= 1.96*1.96*variance[i] {
			inside++
		}
	}
	want /= float64(len(resid))
	m := &model.Model{Version: model.Version, Method: "exact", Kernel: "rbf", D: 2, NTrain: tab.N(), Transform: ref.p.tf,
		Hyper: hyperOf(theta, 2), Posterior: &model.ExactPosterior{Exact: e.Predictor()}}
	ms, cov := looSums(t, m, tab)
	t.Logf("mean square %.12g (eq. 5.12: %.12g), coverage %.4f", ms, want, cov)
	if math.Abs(ms-want) > 1e-8*want || cov != inside/float64(len(resid)) {
		t.Errorf("map round: mean square %.12g, coverage %v; eq. 5.12: %.12g, %v", ms, cov, want, inside/float64(len(resid)))
	}
	// Stride 3 on one shard checks rows 0, 3, ..., 198: 67 of them.
	st, err := localEngine(t, tab, 1, 1).Reduce(context.Background(), &tasks.LOOTask{Model: m, Stride: 3})
	if err != nil {
		t.Fatal(err)
	}
	var every3 float64
	for i := 0; i < len(resid); i += 3 {
		every3 += resid[i] * resid[i] / variance[i]
	}
	got := st.(*reduce.Sum).Parts[0]
	if got[2] != 67 || math.Abs(got[0]-every3) > 1e-8*every3 {
		t.Errorf("stride 3: %v rows, sum of z^2 %.12g; want 67 rows, %.12g", got[2], got[0], every3)
	}
}

// TestLOOTaskFeatureModels: for GRIEF-II and rff models the map round equals leave-one-out by
// n refits of the features' Bayesian linear regression (the dense GP with K = Phi Phi^T +
// s2 I on n - 1 rows, predicting the left-out row), and trained feature models carry the
// calibration warning exactly when the mean square leaves the band.
func TestLOOTaskFeatureModels(t *testing.T) {
	tab := synthTable(120, 2, 62)
	for _, method := range []string{"grief", "rff"} {
		t.Run(method, func(t *testing.T) {
			spec := DefaultSpec(method)
			if method == "grief" {
				set(&spec, "eigenfunctions", 30)
			} else {
				set(&spec, "features", 40)
			}
			m := trainOn(t, tab, spec, 3, 2)
			n := tab.N()
			xs := make([]float64, n*2)
			ys := make([]float64, n)
			for i := 0; i < n; i++ {
				m.Transform.ApplyRow(tab.Row(i), xs[2*i:2*i+2])
				ys[i] = m.Transform.Y(tab.Y[i])
			}
			phi := featureRows(t, m, xs, n)
			s2 := m.Hyper.NoiseVariance
			var want float64
			for i := 0; i < n; i++ {
				mu, v := denseLeaveOut(t, phi, ys, s2, i)
				want += (ys[i] - mu) * (ys[i] - mu) / (v + s2)
			}
			want /= float64(n)
			ms, _ := looSums(t, m, tab)
			t.Logf("%s: mean square %.10g, by %d refits %.10g; warnings %v", method, ms, n, want, m.Warnings)
			if math.Abs(ms-want) > 1e-6*want {
				t.Errorf("map round %.10g, refits %.10g", ms, want)
			}
			if got := m.HasWarning(model.WarnCalibration); got != (math.Abs(ms-1) > looBand(n)) {
				t.Errorf("calibration warning %v at mean square %.4g (band %.3g)", got, ms, looBand(n))
			}
		})
	}
}

// featureRows is the n x p matrix Phi of m's features at standardized rows xs, scaled so that
// the prior weights are unit and the latent prior covariance is Phi Phi^T (grief type2: the
// eigenfunctions; rff: the features times sqrt(sf2 h_j)).
func featureRows(t *testing.T, m *model.Model, xs []float64, n int) *mat.Dense {
	t.Helper()
	switch q := m.Posterior.(type) {
	case *model.GRIEFPosterior:
		g, err := q.FeatureMap(m.Kernel)
		if err != nil {
			t.Fatal(err)
		}
		z := make([]float64, n*g.NumFeatures())
		g.MapBlock(xs, n, z)
		return mat.NewDense(n, g.NumFeatures(), z)
	case *model.RFFPosterior:
		// K = sf2 Z H Z^T (solver.FeaturePredictor): phi_ij = sqrt(sf2 h_j) z_ij.
		fam, err := kernel.ParseFamily(m.Kernel)
		if err != nil {
			t.Fatal(err)
		}
		s := q.Map.Features
		z := make([]float64, n*s)
		(&features.RFF{Family: fam, D: m.D, Omega: q.Map.Omega}).MapBlock(m.Hyper.Lengthscales, xs, n, z)
		for i := 0; i < n; i++ {
			for j := 0; j < s; j++ {
				z[i*s+j] *= math.Sqrt(q.Features.SF2) * q.Features.SqrtH[j]
			}
		}
		return mat.NewDense(n, s, z)
	}
	t.Fatalf("no feature rows for %T", m.Posterior)
	return nil
}

// denseLeaveOut is the latent mean and variance at row i of the GP with kernel Phi Phi^T and
// noise s2 trained on the other rows, by a dense Cholesky.
func denseLeaveOut(t *testing.T, phi *mat.Dense, y []float64, s2 float64, i int) (float64, float64) {
	t.Helper()
	var K mat.Dense
	K.Mul(phi, phi.T())
	return denseLeaveOutK(t, &K, y, s2, i)
}

// denseLeaveOutK is denseLeaveOut for the n x n latent covariance K.
func denseLeaveOutK(t *testing.T, K *mat.Dense, y []float64, s2 float64, i int) (float64, float64) {
	t.Helper()
	n, _ := K.Dims()
	idx := make([]int, 0, n-1)
	for j := 0; j < n; j++ {
		if j != i {
			idx = append(idx, j)
		}
	}
	Ks := mat.NewSymDense(n-1, nil)
	k := mat.NewVecDense(n-1, nil)
	yv := mat.NewVecDense(n-1, nil)
	for a, ja := range idx {
		for b := a; b < n-1; b++ {
			v := K.At(ja, idx[b])
			if a == b {
				v += s2
			}
			Ks.SetSym(a, b, v)
		}
		k.SetVec(a, K.At(i, ja))
		yv.SetVec(a, y[ja])
	}
	var ch mat.Cholesky
	if !ch.Factorize(Ks) {
		t.Fatal("leave-one-out kernel matrix not positive definite")
	}
	var alpha, w mat.VecDense
	if err := ch.SolveVecTo(&alpha, yv); err != nil {
		t.Fatal(err)
	}
	if err := ch.SolveVecTo(&w, k); err != nil {
		t.Fatal(err)
	}
	return mat.Dot(k, &alpha), K.At(i, i) - mat.Dot(k, &w)
}

// TestKMCGLeaveOneOut: kmcg checks the exact GP at its final hyperparameters by leave-one-out:
// the warning is there exactly when the mean square of the standardized residuals of n
// refits on n - 1 rows each (dense Cholesky, on the standardized rows) leaves the band. Data
// that the model fits do not get it (noise 0.1 on sin(3 a) + sin(3 b)); y = exp(4 a) with
// noise 0.01 does: its standardized noise variance, about 6e-7, is below the noise bound's
// floor 1e-4, so the intervals are too wide.
func TestKMCGLeaveOneOut(t *testing.T) {
	for _, c := range []struct {
		name  string
		f     func(a, b float64) float64
		noise float64
		want  bool
	}{
		{"fits", func(a, b float64) float64 { return math.Sin(3*a) + math.Sin(3*b) }, 0.1, false},
		{"noise under its floor", func(a, b float64) float64 { return math.Exp(4 * a) }, 0.01, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			const n = 200
			rng := rand.New(rand.NewPCG(63, 7))
			tab := &shard.Table{Source: "synthetic", D: 2}
			for i := 0; i < n; i++ {
				a, b := 2*rng.Float64()-1, 2*rng.Float64()-1
				tab.X = append(tab.X, a, b)
				tab.Y = append(tab.Y, c.f(a, b)+c.noise*rng.NormFloat64())
			}
			m := trainOn(t, tab, DefaultSpec("kmcg"), 3, 2)
			fam, err := kernel.ParseFamily(m.Kernel)
			if err != nil {
				t.Fatal(err)
			}
			ref := newReference(t, localEngine(t, tab, 3, 2), fam)
			h := m.Hyper
			kern := kernel.Kernel{Family: fam, Lengthscales: h.Lengthscales, SignalVariance: h.SignalVariance}
			K := mat.NewDense(n, n, nil)
			for i := 0; i < n; i++ {
				for j := 0; j < n; j++ {
					K.Set(i, j, kern.Eval(ref.rows.X[i*2:i*2+2], ref.rows.X[j*2:j*2+2]))
				}
			}
			var ms float64
			for i := 0; i < n; i++ {
				mu, v := denseLeaveOutK(t, K, ref.rows.Y, h.NoiseVariance, i)
				ms += (ref.rows.Y[i] - mu) * (ref.rows.Y[i] - mu) / (v + h.NoiseVariance)
			}
			ms /= n
			got := m.HasWarning(model.WarnCalibration)
			t.Logf("%s: noise %.3g, mean square %.4g by %d refits (band 1 +- %.3g), warnings %v", m.Kernel, h.NoiseVariance, ms, n, looBand(n), m.Warnings)
			if got != (math.Abs(ms-1) > looBand(n)) || got != c.want {
				t.Errorf("calibration warning %v at mean square %.4g (band %.3g); want %v", got, ms, looBand(n), c.want)
			}
			if got && !strings.Contains(m.Warnings[len(m.Warnings)-1].Message, "of the exact GP at these hyperparameters") {
				t.Errorf("the warning does not say which model was checked: %v", m.Warnings)
			}
		})
	}
}
