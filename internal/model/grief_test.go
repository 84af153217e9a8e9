package model

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gpreduce/gpreduce/internal/features"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/shard"
)

// griefModel is a small valid GP-GRIEF model: rbf, D = 2, a 3 x 4 grid, p = 7, random beta
// and C = L L^T.
func griefModel(t testing.TB) *Model {
	t.Helper()
	return mustGRIEFModel()
}

// mustGRIEFModel is griefModel for validModels, which has no testing.TB.
func mustGRIEFModel() *Model {
	g, err := features.NewGRIEF(kernel.RBF, []float64{0.8, 1.1}, 1.4, [][]float64{{-1, 0, 1}, {-1.5, -0.5, 0.5, 1.5}}, 7)
	if err != nil {
		panic(err) // fixed, valid settings: unreachable
	}
	p := g.NumFeatures()
	rng := rand.New(rand.NewPCG(9, 10))
	q := &GRIEFPost{Inference: "type1", Beta: make([]float64, p), C: make([]float64, p*p), W: make([]float64, p), Samples: 12}
	L := make([]float64, p*p)
	for i := range L {
		L[i] = 0.3 * rng.NormFloat64()
	}
	for i := 0; i < p; i++ {
		q.Beta[i] = rng.NormFloat64()
		q.W[i] = rng.Float64()
		for j := 0; j < p; j++ {
			for k := 0; k < p; k++ {
				q.C[i*p+j] += L[i*p+k] * L[j*p+k]
			}
		}
	}
	return &Model{
		Version: Version, Method: "grief", Kernel: "rbf", D: 2,
		Transform: shard.Transform{XMean: []float64{1, -1}, XScale: []float64{2, 0.5}, YMean: 3, YScale: 2},
		Hyper:     Hyper{Lengthscales: []float64{0.8, 1.1}, SignalVariance: 1.4, NoiseVariance: 0.03},
		LogLik:    -5, Trace: []float64{7, 6}, Iterations: 2, NTrain: 30,
		Posterior: &GRIEFPosterior{
			Map: GRIEFParams{Lengthscales: g.Lengthscales, SignalVariance: g.SignalVariance, Grid: g.Grid, Q: g.Q,
				LogLam: g.LogLam, Idx: g.Idx, LogLamP: g.LogLamP},
			Post: q,
		},
	}
}

func TestGRIEFModelPredictAndRoundTrip(t *testing.T) {
	m := griefModel(t)
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	g, err := griefOf(m).FeatureMap(m.Kernel)
	if err != nil {
		t.Fatal(err)
	}
	const rows = 700 // more than one predict block
	x := testRows(m, rows, 5)
	pr, err := m.Predict(x, rows)
	if err != nil {
		t.Fatal(err)
	}
	p := g.NumFeatures()
	xs, z := make([]float64, 2), make([]float64, p)
	for i := 0; i < rows; i++ {
		m.Transform.ApplyRow(x[i*2:(i+1)*2], xs)
		g.Map(xs, z)
		var mu, v float64
		for a := 0; a < p; a++ {
			mu += z[a] * griefOf(m).Post.Beta[a]
			for b := 0; b < p; b++ {
				v += z[a] * griefOf(m).Post.C[a*p+b] * z[b]
			}
		}
		wantMean, wantVar := mu*2+3, math.Max(0, v)*4
		if math.Abs(pr.Mean[i]-wantMean) > 1e-10*math.Max(1, math.Abs(wantMean)) || math.Abs(pr.LatentVar[i]-wantVar) > 1e-10*math.Max(1, wantVar) {
			t.Fatalf("row %d: mean %g var %g, want %g %g", i, pr.Mean[i], pr.LatentVar[i], wantMean, wantVar)
		}
		if math.Abs(pr.NoisyVar[i]-pr.LatentVar[i]-0.03*4) > 1e-12 {
			t.Fatalf("row %d: noisy variance %g for latent %g", i, pr.NoisyVar[i], pr.LatentVar[i])
		}
	}
	b := encode(t, m)
	m2, err := Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(encode(t, m2), b) {
		t.Error("GRIEF model does not round-trip to the same bytes")
	}
	pr2, err := m2.Predict(x, rows)
	if err != nil {
		t.Fatal(err)
	}
	for i := range pr.Mean {
		if pr.Mean[i] != pr2.Mean[i] || pr.LatentVar[i] != pr2.LatentVar[i] {
			t.Fatal("decoded GRIEF model predicts differently")
		}
	}
	// Every strict prefix fails cleanly.
	for n := 0; n < len(b); n += 7 {
		if mm, panicked, err := decodeSafely(b[:n]); panicked != nil || err == nil || mm != nil {
			t.Fatalf("prefix %d of %d: panic %v, err %v", n, len(b), panicked, err)
		}
	}
}

func TestGRIEFModelInvalid(t *testing.T) {
	for name, mod := range map[string]func(m *Model){
		"no posterior":       func(m *Model) { griefOf(m).Post = nil },
		"no map":             func(m *Model) { griefOf(m).Map = GRIEFParams{} },
		"short beta":         func(m *Model) { q := griefOf(m).Post; q.Beta = q.Beta[1:] },
		"short C":            func(m *Model) { q := griefOf(m).Post; q.C = q.C[1:] },
		"nan C":              func(m *Model) { griefOf(m).Post.C[3] = math.NaN() },
		"inf beta":           func(m *Model) { griefOf(m).Post.Beta[0] = math.Inf(1) },
		"bad inference":      func(m *Model) { griefOf(m).Post.Inference = "type3" },
		"negative samples":   func(m *Model) { griefOf(m).Post.Samples = -1 },
		"long w":             func(m *Model) { q := griefOf(m).Post; q.W = append(q.W, 1) },
		"bad index":          func(m *Model) { griefOf(m).Map.Idx[0] = 99 },
		"short grid":         func(m *Model) { g := &griefOf(m).Map; g.Grid = g.Grid[:1] },
		"wrong dimension":    func(m *Model) { m.D = 3 },
		"bad lengthscale":    func(m *Model) { griefOf(m).Map.Lengthscales[1] = -1 },
		"ascending loglam p": func(m *Model) { g := &griefOf(m).Map; g.LogLamP[1] = g.LogLamP[0] + 1 },
	} {
		m := griefModel(t)
		mod(m)
		if err := m.Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
		var bb bytes.Buffer
		if err := m.Encode(&bb); err != nil {
			continue // not encodable at all (a map without a posterior) is fine too
		}
		if _, err := Decode(&bb); err == nil {
			t.Errorf("%s: Decode accepted it", name)
		}
	}
}

// TestGRIEFPostPredictBlocks checks the blocked variance z C z^T (one product per block of
// rows) against the quadratic form summed row by row, over more rows than one block and a p
// that is not a multiple of the product's tile, with C = L L^T + a negative-definite rank
// one so that a clipped row (variance below zero) is exercised too.
func TestGRIEFPostPredictBlocks(t *testing.T) {
	const p, rows = 37, griefPredictBlock + 45
	rng := rand.New(rand.NewPCG(3, 4))
	L := make([]float64, p*p)
	for i := range p {
		for j := 0; j <= i; j++ {
			L[i*p+j] = rng.NormFloat64()
		}
	}
	u := make([]float64, p)
	for i := range u {
		u[i] = rng.NormFloat64()
	}
	q := &GRIEFPost{Inference: "type2", Beta: make([]float64, p), C: make([]float64, p*p)}
	for i := range p {
		q.Beta[i] = rng.NormFloat64()
		for j := range p {
			var s float64
			for k := 0; k <= min(i, j); k++ {
				s += L[i*p+k] * L[j*p+k]
			}
			q.C[i*p+j] = s - 40*u[i]*u[j]
		}
	}
	z := make([]float64, rows*p)
	for i := range z {
		z[i] = rng.NormFloat64()
	}
	mean, v := make([]float64, rows), make([]float64, rows)
	for i := range v {
		mean[i], v[i] = math.NaN(), math.NaN() // a row Predict skips fails below
	}
	q.Predict(z, rows, mean, v)
	clipped := 0
	for i := range rows {
		zi := z[i*p : (i+1)*p]
		var mu, vr, scale float64
		for j := range p {
			mu += zi[j] * q.Beta[j]
			for k := range p {
				vr += zi[j] * q.C[j*p+k] * zi[k]
				scale += math.Abs(zi[j] * q.C[j*p+k] * zi[k])
			}
		}
		if !(math.Abs(mean[i]-mu) <= 1e-12*(1+math.Abs(mu))) {
			t.Fatalf("row %d: mean %v, want %v", i, mean[i], mu)
		}
		want := math.Max(0, vr)
		if vr < 0 {
			clipped++
		}
		if !(math.Abs(v[i]-want) <= 1e-12*scale) {
			t.Fatalf("row %d: latent variance %v, want %v (terms' scale %v)", i, v[i], want, scale)
		}
	}
	if clipped == 0 || clipped == rows {
		t.Fatalf("%d of %d rows clipped: the test needs both kinds", clipped, rows)
	}
	q.Predict(z, rows, mean, nil) // means alone
}
