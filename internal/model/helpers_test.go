package model

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/solver"
	"github.com/gpreduce/gpreduce/internal/vof"
)

// glModel is a small valid Gauss-Legendre model built by hand: rbf kernel, D = 1, U = [5],
// 8 nodes (s = 8), a feature posterior with positive SqrtH, random Beta and an upper
// triangular R with a positive diagonal, and a non-trivial standardization.
func glModel() *Model {
	const s = 8
	rng := rand.New(rand.NewPCG(1, 2))
	f := &solver.FeaturePredictor{SF2: 1.3, SN2: 0.05, SqrtH: make([]float64, s), Beta: make([]float64, s), R: make([]float64, s*s)}
	for j := 0; j < s; j++ {
		f.SqrtH[j] = 0.2 + rng.Float64()
		f.Beta[j] = rng.NormFloat64()
		f.R[j*s+j] = 1 + rng.Float64()
		for k := j + 1; k < s; k++ {
			f.R[j*s+k] = 0.3 * rng.NormFloat64()
		}
	}
	return &Model{
		Version:    Version,
		Method:     "gl",
		Kernel:     "rbf",
		D:          1,
		Columns:    []string{"t"},
		Target:     "co2",
		Transform:  shard.Transform{XMean: []float64{2}, XScale: []float64{3}, YMean: 10, YScale: 4},
		Hyper:      Hyper{Lengthscales: []float64{0.7}, SignalVariance: 1.3, NoiseVariance: 0.05},
		LogLik:     -12.5,
		Trace:      []float64{20, 15, 12.5},
		Iterations: 3,
		NTrain:     40,
		Posterior:  &GLPosterior{Map: GLParams{U: []float64{5}, NodesPerDim: []int{8}}, Features: f},
	}
}

// rffModel is a small valid random-Fourier-feature model: matern52, D = 2, s = 6.
func rffModel() *Model {
	const s, d = 6, 2
	rng := rand.New(rand.NewPCG(3, 4))
	f := &solver.FeaturePredictor{SF2: 0.8, SN2: 0.2, SqrtH: make([]float64, s), Beta: make([]float64, s), R: make([]float64, s*s)}
	for j := 0; j < s; j++ {
		f.SqrtH[j] = math.Sqrt(2.0 / s)
		f.Beta[j] = rng.NormFloat64()
		f.R[j*s+j] = 1 + rng.Float64()
		for k := j + 1; k < s; k++ {
			f.R[j*s+k] = 0.2 * rng.NormFloat64()
		}
	}
	omega := make([]float64, s/2*d)
	for i := range omega {
		omega[i] = rng.NormFloat64()
	}
	return &Model{
		Version:   Version,
		Method:    "rff",
		Kernel:    "matern52",
		D:         d,
		Transform: shard.Transform{XMean: []float64{-1, 100}, XScale: []float64{0.5, 20}, YMean: -3, YScale: 0.25},
		Hyper:     Hyper{Lengthscales: []float64{0.9, 1.7}, SignalVariance: 0.8, NoiseVariance: 0.2},
		Posterior: &RFFPosterior{Map: RFFParams{Omega: omega, Features: s}, Features: f},
	}
}

// exactModel is a small valid exact model over 6 standardized training rows in D = 2.
func exactModel() *Model { return exactModelOf(kernel.RBF) }

// exactModelOf is exactModel with another kernel family.
func exactModelOf(fam kernel.Family) *Model {
	const n, d = 6, 2
	rng := rand.New(rand.NewPCG(5, 6))
	X := make([]float64, n*d)
	y := make([]float64, n)
	for i := range X {
		X[i] = rng.NormFloat64()
	}
	for i := range y {
		y[i] = math.Sin(X[2*i]) + 0.5*X[2*i+1]
	}
	k := kernel.Kernel{Family: fam, Lengthscales: []float64{0.8, 1.4}, SignalVariance: 1.1}
	e, err := solver.NewExact(k, 0.1, X, d, y)
	if err != nil {
		panic(err) // fixed, well-conditioned data: unreachable
	}
	return &Model{
		Version:   Version,
		Method:    "exact",
		Kernel:    fam.String(),
		D:         d,
		Transform: shard.Transform{XMean: []float64{5, -2}, XScale: []float64{2, 0.5}, YMean: 100, YScale: 7},
		Hyper:     Hyper{Lengthscales: []float64{0.8, 1.4}, SignalVariance: 1.1, NoiseVariance: 0.1},
		NTrain:    n,
		Posterior: &ExactPosterior{Exact: e.Predictor()},
	}
}

// expansionModel is a cg model over the data of exactModelOf(fam): the exact posterior as a
// kernel expansion, Alpha = K^-1 y and Minus = R^-1 (K = R^T R, so Minus Minus^T = K^-1),
// with no Plus term. It predicts what the exact model predicts.
func expansionModel(fam kernel.Family) *Model {
	m := exactModelOf(fam)
	e := exactOf(m).Exact
	n := len(e.Alpha)
	var R, Rinv mat.TriDense
	R.SetRawTriangular(blas64.Triangular{Uplo: blas.Upper, Diag: blas.NonUnit, N: n, Stride: n, Data: e.R})
	if err := Rinv.InverseTri(&R); err != nil {
		panic(err) // a Cholesky factor of a well-conditioned matrix: unreachable
	}
	minus := make([]float64, n*n)
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			minus[i*n+j] = Rinv.At(i, j)
		}
	}
	m.Method = "cg"
	m.Posterior = &ExpansionPosterior{Expansion: &solver.ExpansionPredictor{Kernel: e.Kernel, X: e.X, D: e.D, Alpha: e.Alpha, Minus: minus, RMinus: n}}
	return m
}

// kmcgModel is a kmcg-shaped model: the data of exactModelOf(matern52), a rank-3 Minus and a
// rank-2 Plus scaled by the noise variance.
func kmcgModel() *Model {
	m := expansionModel(kernel.Matern52)
	x := expansionOf(m).Expansion
	n := len(x.Alpha)
	rng := rand.New(rand.NewPCG(7, 8))
	x.Minus, x.RMinus = make([]float64, n*3), 3
	x.Plus, x.RPlus, x.PlusScale = make([]float64, n*2), 2, m.Hyper.NoiseVariance
	for _, v := range [][]float64{x.Minus, x.Plus} {
		for i := range v {
			v[i] = 0.2 * rng.NormFloat64()
		}
	}
	m.Method = "kmcg"
	return m
}

// validModels are the hand-built models every round-trip and fuzz test starts from, at
// least one per registered posterior (TestPosteriorRegistryRoundTrip checks).
func validModels() map[string]*Model {
	return map[string]*Model{
		"gl": glModel(), "rff": rffModel(), "exact": exactModel(), "exact-matern32": exactModelOf(kernel.Matern32),
		"expansion": expansionModel(kernel.RBF), "expansion-kmcg": kmcgModel(), "grief": mustGRIEFModel(),
		"vof-hermite": vofModel("hermite"), "vof-trig": vofModel("trig"),
	}
}

// vofModel is a small valid vof model: hermite (rbf, D = 1, M1 = 7, dense S) or trig
// (matern32, D = 2, additive, M1 = 5, diagonal S), with a random mean and covariance factor.
func vofModel(basis string) *Model {
	rng := rand.New(rand.NewPCG(9, 10))
	post := &VOFPosterior{Basis: basis}
	m := &Model{Version: Version, Method: "vof", NTrain: 50}
	if basis == "hermite" {
		post.M1, post.Dense = 7, true
		post.Params = vofParams(rng, 7, true, []float64{0.6}, []float64{1.2}, []float64{1.4})
		m.Kernel, m.D = "rbf", 1
		m.Transform = shard.Transform{XMean: []float64{3}, XScale: []float64{2}, YMean: -1, YScale: 3}
		m.Hyper = Hyper{Lengthscales: []float64{0.6}, SignalVariance: 1.2, NoiseVariance: 0.1}
	} else {
		post.M1, post.Additive = 5, true
		post.Params = vofParams(rng, 10, false, []float64{0.9, 1.3}, []float64{0.7, 0.4}, []float64{6, 5})
		m.Kernel, m.D = "matern32", 2
		m.Transform = shard.Transform{XMean: []float64{0, 10}, XScale: []float64{1, 4}, YMean: 2, YScale: 0.5}
		m.Hyper = Hyper{Lengthscales: []float64{0.9, 1.3}, SignalVariance: 1.1, NoiseVariance: 0.1}
	}
	m.Posterior = post
	return m
}

func vofParams(rng *rand.Rand, M int, dense bool, ls, vs, feat []float64) vof.Params {
	p := vof.Params{Lengthscales: ls, Variances: vs, Noise: 0.1, Feature: feat, Mean: make([]float64, M)}
	for i := range p.Mean {
		p.Mean[i] = rng.NormFloat64()
	}
	if !dense {
		p.Chol = make([]float64, M)
		for i := range p.Chol {
			p.Chol[i] = 0.2 + 0.5*rng.Float64()
		}
		return p
	}
	p.Chol = make([]float64, M*M)
	for i := 0; i < M; i++ {
		p.Chol[i*M+i] = 0.2 + 0.5*rng.Float64()
		for j := 0; j < i; j++ {
			p.Chol[i*M+j] = 0.1 * rng.NormFloat64()
		}
	}
	return p
}

// The posterior of a hand-built model, by type: a test of one posterior's numbers reaches
// its fields through these (a wrong type panics, failing the test).
func glOf(m *Model) *GLPosterior               { return m.Posterior.(*GLPosterior) }
func rffOf(m *Model) *RFFPosterior             { return m.Posterior.(*RFFPosterior) }
func exactOf(m *Model) *ExactPosterior         { return m.Posterior.(*ExactPosterior) }
func griefOf(m *Model) *GRIEFPosterior         { return m.Posterior.(*GRIEFPosterior) }
func expansionOf(m *Model) *ExpansionPosterior { return m.Posterior.(*ExpansionPosterior) }

func encode(t testing.TB, m *Model) []byte {
	t.Helper()
	b, err := m.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// clone returns a deep copy of m through its encoding (which must not fail for a valid model).
func clone(t testing.TB, m *Model) *Model {
	t.Helper()
	c, err := Decode(bytes.NewReader(encode(t, m)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testRows returns rows x D inputs in original units around the transform's means.
func testRows(m *Model, rows int, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 0))
	x := make([]float64, rows*m.D)
	for i := 0; i < rows; i++ {
		for k := 0; k < m.D; k++ {
			x[i*m.D+k] = m.Transform.XMean[k] + 2*m.Transform.XScale[k]*rng.NormFloat64()
		}
	}
	return x
}

// predictSafely runs Predict and turns a panic into an error mentioning it.
func predictSafely(m *Model, x []float64, rows int) (p Prediction, panicked any, err error) {
	defer func() {
		if r := recover(); r != nil {
			panicked = r
		}
	}()
	p, err = m.Predict(x, rows)
	return p, nil, err
}

// decodeSafely runs Decode and reports a panic as a value instead of crashing the test.
func decodeSafely(b []byte) (m *Model, panicked any, err error) {
	defer func() {
		if r := recover(); r != nil {
			panicked = fmt.Sprint(r)
		}
	}()
	m, err = Decode(bytes.NewReader(b))
	return m, nil, err
}
