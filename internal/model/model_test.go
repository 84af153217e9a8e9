package model

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/gpreduce/gpreduce/internal/features"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/solver"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	for name, m := range validModels() {
		t.Run(name, func(t *testing.T) {
			b1 := encode(t, m)
			if b2 := encode(t, m); !bytes.Equal(b1, b2) {
				t.Fatalf("two encodings of the same model differ")
			}
			if !bytes.HasPrefix(b1, []byte("GPRMODEL")) || binary.LittleEndian.Uint32(b1[8:12]) != EncodingVersion {
				t.Fatalf("header % x, want GPRMODEL and version %d", b1[:12], EncodingVersion)
			}
			d, err := Decode(bytes.NewReader(b1))
			if err != nil {
				t.Fatal(err)
			}
			if b3 := encode(t, d); !bytes.Equal(b1, b3) {
				t.Fatalf("re-encoding the decoded model gives different bytes (%d vs %d)", len(b3), len(b1))
			}
			// The decoded model predicts the same bits.
			x := testRows(m, 7, 1)
			p1, err := m.Predict(x, 7)
			if err != nil {
				t.Fatal(err)
			}
			p2, err := d.Predict(x, 7)
			if err != nil {
				t.Fatal(err)
			}
			for _, pair := range [][2][]float64{{p1.Mean, p2.Mean}, {p1.LatentVar, p2.LatentVar}, {p1.NoisyVar, p2.NoisyVar}} {
				for i := range pair[0] {
					if math.Float64bits(pair[0][i]) != math.Float64bits(pair[1][i]) {
						t.Fatalf("row %d: decoded model predicts %v, original %v", i, pair[1][i], pair[0][i])
					}
				}
			}
			if d.Method != m.Method || d.NTrain != m.NTrain || d.LogLik != m.LogLik || len(d.Trace) != len(m.Trace) {
				t.Errorf("metadata lost: %q %d %v %v", d.Method, d.NTrain, d.LogLik, d.Trace)
			}
		})
	}
}

// directFeature computes what Predict must return for a feature model, row by row: the
// standardized features from the model's own map, the posterior by hand (mean = sf2 z^T beta,
// latent = sf2 ||R^-T D z||^2 by forward substitution), then the transform back to original
// units. It also returns the standardized values the predictor itself gives.
func directFeature(t *testing.T, m *Model, x []float64) (want Prediction) {
	t.Helper()
	fam, err := kernel.ParseFamily(m.Kernel)
	if err != nil {
		t.Fatal(err)
	}
	d := m.D
	rows := len(x) / d
	var f *solver.FeaturePredictor
	switch p := m.Posterior.(type) {
	case *GLPosterior:
		f = p.Features
	case *RFFPosterior:
		f = p.Features
	default:
		t.Fatalf("directFeature of a %s model", p.Name())
	}
	s := len(f.Beta)
	z := make([]float64, s)
	xs := make([]float64, d)
	want = Prediction{Mean: make([]float64, rows), LatentVar: make([]float64, rows), NoisyVar: make([]float64, rows)}
	for i := 0; i < rows; i++ {
		for k := 0; k < d; k++ {
			xs[k] = (x[i*d+k] - m.Transform.XMean[k]) / m.Transform.XScale[k]
		}
		switch p := m.Posterior.(type) {
		case *GLPosterior:
			gl, err := features.NewGL(fam, p.Map.U, p.Map.NodesPerDim)
			if err != nil {
				t.Fatal(err)
			}
			gl.MapBlock(xs, 1, z)
		case *RFFPosterior:
			r := &features.RFF{Family: fam, D: d, Omega: p.Map.Omega}
			r.Map(m.Hyper.Lengthscales, xs, z)
		}
		var mean float64
		for j := range z {
			mean += z[j] * f.Beta[j]
		}
		mean *= f.SF2
		// Solve R^T w = D z (R upper, so R^T lower): forward substitution.
		w := make([]float64, s)
		for r := 0; r < s; r++ {
			v := f.SqrtH[r] * z[r]
			for q := 0; q < r; q++ {
				v -= f.R[q*s+r] * w[q]
			}
			w[r] = v / f.R[r*s+r]
		}
		var lv float64
		for _, v := range w {
			lv += v * v
		}
		lv *= f.SF2
		// Cross-check against the predictor on the same feature row.
		pm, pv := make([]float64, 1), make([]float64, 1)
		f.Predict(z, 1, pm, pv)
		if relErr(pm[0], mean) > 1e-12 || relErr(pv[0], lv) > 1e-12 {
			t.Fatalf("row %d: FeaturePredictor gives %v, %v; by hand %v, %v", i, pm[0], pv[0], mean, lv)
		}
		ys, y2 := m.Transform.YScale, m.Transform.YScale*m.Transform.YScale
		want.Mean[i] = ys*mean + m.Transform.YMean
		want.LatentVar[i] = y2 * lv
		want.NoisyVar[i] = y2*lv + y2*m.Hyper.NoiseVariance
	}
	return want
}

// directExact is the same for an exact model, through the ExactPredictor on standardized rows
// and, independently, mean = sum_i k(x, X_i) alpha_i.
func directExact(t *testing.T, m *Model, x []float64) Prediction {
	t.Helper()
	d := m.D
	rows := len(x) / d
	xs := make([]float64, len(x))
	for i := 0; i < rows; i++ {
		for k := 0; k < d; k++ {
			xs[i*d+k] = (x[i*d+k] - m.Transform.XMean[k]) / m.Transform.XScale[k]
		}
	}
	mean, lv := make([]float64, rows), make([]float64, rows)
	e := exactOf(m).Exact
	e.Predict(xs, mean, lv)
	want := Prediction{Mean: make([]float64, rows), LatentVar: make([]float64, rows), NoisyVar: make([]float64, rows)}
	n := len(e.Alpha)
	for i := 0; i < rows; i++ {
		var mu float64
		for j := 0; j < n; j++ {
			mu += e.Kernel.Eval(xs[i*d:(i+1)*d], e.X[j*d:(j+1)*d]) * e.Alpha[j]
		}
		if relErr(mean[i], mu) > 1e-12 {
			t.Fatalf("row %d: ExactPredictor mean %v, k^T alpha %v", i, mean[i], mu)
		}
		y2 := m.Transform.YScale * m.Transform.YScale
		want.Mean[i] = m.Transform.YScale*mean[i] + m.Transform.YMean
		want.LatentVar[i] = y2 * lv[i]
		want.NoisyVar[i] = y2*lv[i] + y2*m.Hyper.NoiseVariance
	}
	return want
}

func relErr(got, want float64) float64 {
	if got == want {
		return 0
	}
	return math.Abs(got-want) / math.Max(math.Abs(want), 1e-300)
}

func TestPredictOriginalUnits(t *testing.T) {
	tests := []struct {
		name string
		m    *Model
		rows int
	}{
		{"gl/1 row", glModel(), 1},
		{"gl/several blocks", glModel(), 2*predictBlock + 7},
		{"rff/3 rows", rffModel(), 3},
		{"rff/one block and one row", rffModel(), predictBlock + 1},
		{"exact/5 rows", exactModel(), 5},
		{"exact matern32/4 rows", exactModelOf(kernel.Matern32), 4},
		{"exact/two blocks", exactModel(), predictBlock + 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := testRows(tc.m, tc.rows, uint64(tc.rows))
			got, err := tc.m.Predict(x, tc.rows)
			if err != nil {
				t.Fatal(err)
			}
			var want Prediction
			if _, ok := tc.m.Posterior.(*ExactPosterior); ok {
				want = directExact(t, tc.m, x)
			} else {
				want = directFeature(t, tc.m, x)
			}
			for i := 0; i < tc.rows; i++ {
				for _, c := range []struct {
					what      string
					got, want float64
				}{
					{"mean", got.Mean[i], want.Mean[i]},
					{"latent variance", got.LatentVar[i], want.LatentVar[i]},
					{"noisy variance", got.NoisyVar[i], want.NoisyVar[i]},
				} {
					if relErr(c.got, c.want) > 1e-12 {
						t.Fatalf("row %d %s = %v, want %v", i, c.what, c.got, c.want)
					}
				}
				if !(got.LatentVar[i] >= 0) || !(got.NoisyVar[i] > got.LatentVar[i]) {
					t.Fatalf("row %d: latent %v, noisy %v", i, got.LatentVar[i], got.NoisyVar[i])
				}
			}
		})
	}
}

// TestPredictTransformScaling: scaling YScale by c scales the mean's deviation from YMean by c
// and every variance by c^2; moving YMean shifts the mean only; moving XMean shifts the inputs.
func TestPredictTransformScaling(t *testing.T) {
	for name, base := range validModels() {
		t.Run(name, func(t *testing.T) {
			x := testRows(base, 4, 9)
			p0, err := base.Predict(x, 4)
			if err != nil {
				t.Fatal(err)
			}
			m := clone(t, base)
			m.Transform.YScale *= 3
			m.Transform.YMean += 50
			for k := range m.Transform.XMean {
				m.Transform.XMean[k] += 1.5
			}
			shift := make([]float64, len(x))
			for i := range x {
				shift[i] = x[i] + 1.5
			}
			p1, err := m.Predict(shift, 4)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 4; i++ {
				if want := 3*(p0.Mean[i]-base.Transform.YMean) + base.Transform.YMean + 50; relErr(p1.Mean[i], want) > 1e-12 {
					t.Errorf("row %d mean %v, want %v", i, p1.Mean[i], want)
				}
				if relErr(p1.LatentVar[i], 9*p0.LatentVar[i]) > 1e-12 || relErr(p1.NoisyVar[i], 9*p0.NoisyVar[i]) > 1e-12 {
					t.Errorf("row %d variances %v, %v; want 9x %v, %v", i, p1.LatentVar[i], p1.NoisyVar[i], p0.LatentVar[i], p0.NoisyVar[i])
				}
			}
		})
	}
}

func TestPredictErrors(t *testing.T) {
	tests := []struct {
		name string
		m    *Model
		x    []float64
		rows int
	}{
		{"short x", glModel(), []float64{1, 2}, 3},
		{"long x", exactModel(), []float64{1, 2, 3}, 1},
		{"negative rows", glModel(), nil, -1},
		{"no posterior", func() *Model { m := glModel(); m.Posterior = nil; return m }(), []float64{1}, 1},
		{"bad kernel", func() *Model { m := glModel(); m.Kernel = "cubic"; return m }(), []float64{1}, 1},
		{"bad GL nodes", func() *Model { m := glModel(); glOf(m).Map.NodesPerDim = []int{0}; return m }(), []float64{1}, 1},
		{"bad kernel rff", func() *Model { m := rffModel(); m.Kernel = "cubic"; return m }(), []float64{1, 2}, 1},
		{"bad kernel grief", func() *Model { m := mustGRIEFModel(); m.Kernel = "cubic"; return m }(), []float64{1, 2}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, p, err := predictSafely(tc.m, tc.x, tc.rows)
			if p != nil {
				t.Fatalf("Predict panicked: %v", p)
			}
			if err == nil {
				t.Fatalf("Predict succeeded")
			}
		})
	}
	// Zero rows is not an error.
	p, err := glModel().Predict(nil, 0)
	if err != nil || len(p.Mean) != 0 {
		t.Errorf("Predict of 0 rows: %v, %d means", err, len(p.Mean))
	}
}

func TestOriginalHyper(t *testing.T) {
	m := exactModel()
	h := m.Original()
	want := Hyper{Lengthscales: []float64{0.8 * 2, 1.4 * 0.5}, SignalVariance: 1.1 * 49, NoiseVariance: 0.1 * 49}
	if relErr(h.SignalVariance, want.SignalVariance) > 1e-15 || relErr(h.NoiseVariance, want.NoiseVariance) > 1e-15 {
		t.Errorf("variances %v, %v; want %v, %v", h.SignalVariance, h.NoiseVariance, want.SignalVariance, want.NoiseVariance)
	}
	for k := range want.Lengthscales {
		if relErr(h.Lengthscales[k], want.Lengthscales[k]) > 1e-15 {
			t.Errorf("lengthscale %d = %v, want %v", k, h.Lengthscales[k], want.Lengthscales[k])
		}
	}
	if m.Hyper.Lengthscales[0] != 0.8 {
		t.Errorf("Original modified the model's lengthscales")
	}
}

func TestScore(t *testing.T) {
	// Three points: residuals 0.5, 0, -1 with noisy variances 1, 4, 0.25 (sd 1, 2, 0.5).
	p := Prediction{Mean: []float64{1, 2, 3}, LatentVar: []float64{0.5, 3, 0.2}, NoisyVar: []float64{1, 4, 0.25}}
	y := []float64{1.5, 2, 2}
	l2pi := math.Log(2 * math.Pi)
	tests := []struct {
		name string
		p    Prediction
		y    []float64
		want Metrics
	}{
		{
			name: "three points",
			p:    p, y: y,
			want: Metrics{
				N:    3,
				RMSE: math.Sqrt((0.25 + 0 + 1) / 3), // 0.6454972243679028
				// -log N(y; m, v) = (log 2 pi + log v)/2 + r^2/(2v): 0.125, 0, 2 for the quadratic terms.
				NLL: ((0.5*l2pi + 0.125) + (0.5*(l2pi+math.Log(4)) + 0) + (0.5*(l2pi+math.Log(0.25)) + 2)) / 3,
				// |r| <= 1.96 sd: 0.5 <= 1.96 yes, 0 <= 3.92 yes, 1 <= 0.98 no.
				Coverage95: 2.0 / 3,
			},
		},
		{
			name: "one exact hit",
			p:    Prediction{Mean: []float64{7}, NoisyVar: []float64{1}}, y: []float64{7},
			want: Metrics{N: 1, RMSE: 0, NLL: 0.5 * l2pi, Coverage95: 1},
		},
		{
			name: "on the 1.96 boundary",
			p:    Prediction{Mean: []float64{0, 0}, NoisyVar: []float64{1, 1}}, y: []float64{1.96, -1.9600001},
			want: Metrics{N: 2, RMSE: math.Sqrt((1.96*1.96 + 1.9600001*1.9600001) / 2), NLL: 0.5*l2pi + (1.96*1.96+1.9600001*1.9600001)/4, Coverage95: 0.5},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Score(tc.p, tc.y)
			if err != nil {
				t.Fatal(err)
			}
			if got.N != tc.want.N || got.Coverage95 != tc.want.Coverage95 {
				t.Errorf("N, coverage = %d, %v; want %d, %v", got.N, got.Coverage95, tc.want.N, tc.want.Coverage95)
			}
			if math.Abs(got.RMSE-tc.want.RMSE) > 1e-14 || math.Abs(got.NLL-tc.want.NLL) > 1e-14 {
				t.Errorf("RMSE, NLL = %.17g, %.17g; want %.17g, %.17g", got.RMSE, got.NLL, tc.want.RMSE, tc.want.NLL)
			}
		})
	}
	// The hand value of the three-point NLL as a number: (1.0439385332 + 1.6120857137 + 2.2257913526) / 3.
	if got, _ := Score(p, y); math.Abs(got.NLL-1.6272718665380062) > 1e-12 {
		t.Errorf("three-point NLL %.17g, want 1.6272718665380062", got.NLL)
	}
	for _, bad := range []struct {
		name string
		p    Prediction
		y    []float64
	}{
		{"empty", Prediction{}, nil},
		{"more targets", p, []float64{1, 2, 3, 4}},
		{"fewer targets", p, []float64{1}},
	} {
		if _, err := Score(bad.p, bad.y); err == nil {
			t.Errorf("%s: Score succeeded", bad.name)
		}
	}
}

// mutation changes a copy of a valid model into an invalid one.
type mutation struct {
	name   string
	base   string // a key of validModels
	mutate func(m *Model)
}

func invalidModels() []mutation {
	glf := func(m *Model) *solver.FeaturePredictor { return glOf(m).Features }
	rfff := func(m *Model) *solver.FeaturePredictor { return rffOf(m).Features }
	ex := func(m *Model) *solver.ExactPredictor { return exactOf(m).Exact }
	xp := func(m *Model) *solver.ExpansionPredictor { return expansionOf(m).Expansion }
	return []mutation{
		{name: "model version 3", base: "gl", mutate: func(m *Model) { m.Version = 3 }},
		{name: "model version 1 in the Version-2 layout", base: "exact", mutate: func(m *Model) { m.Version = 1 }},
		{name: "model version 1 in the Version-2 layout, gl", base: "gl", mutate: func(m *Model) { m.Version = 1 }},
		{name: "unknown kernel", base: "gl", mutate: func(m *Model) { m.Kernel = "cubic" }},
		{name: "zero D", base: "gl", mutate: func(m *Model) { m.D = 0 }},
		{name: "D larger than slices", base: "gl", mutate: func(m *Model) { m.D = 2 }},
		{name: "extra lengthscale", base: "exact", mutate: func(m *Model) { m.Hyper.Lengthscales = append(m.Hyper.Lengthscales, 1) }},
		{name: "missing column mean", base: "rff", mutate: func(m *Model) { m.Transform.XMean = m.Transform.XMean[:1] }},
		{name: "missing column scale", base: "rff", mutate: func(m *Model) { m.Transform.XScale = nil }},
		{name: "zero YScale", base: "gl", mutate: func(m *Model) { m.Transform.YScale = 0 }},
		{name: "negative YScale", base: "exact", mutate: func(m *Model) { m.Transform.YScale = -4 }},
		{name: "NaN YScale", base: "gl", mutate: func(m *Model) { m.Transform.YScale = math.NaN() }},
		{name: "infinite XScale", base: "rff", mutate: func(m *Model) { m.Transform.XScale[1] = math.Inf(1) }},
		{name: "zero XScale", base: "gl", mutate: func(m *Model) { m.Transform.XScale[0] = 0 }},
		{name: "zero noise", base: "gl", mutate: func(m *Model) { m.Hyper.NoiseVariance = 0 }},
		{name: "negative signal", base: "exact", mutate: func(m *Model) { m.Hyper.SignalVariance = -1 }},
		{name: "NaN lengthscale", base: "rff", mutate: func(m *Model) { m.Hyper.Lengthscales[1] = math.NaN() }},
		{name: "R too short", base: "gl", mutate: func(m *Model) { glf(m).R = glf(m).R[:63] }},
		{name: "R of s entries", base: "gl", mutate: func(m *Model) { glf(m).R = glf(m).R[:8] }},
		{name: "SqrtH too long", base: "gl", mutate: func(m *Model) { glf(m).SqrtH = append(glf(m).SqrtH, 1) }},
		{name: "Beta too short", base: "rff", mutate: func(m *Model) { rfff(m).Beta = rfff(m).Beta[:5] }},
		{name: "GL U for 2 dims", base: "gl", mutate: func(m *Model) { glOf(m).Map.U = []float64{5, 5} }},
		{name: "GL nodes not s", base: "gl", mutate: func(m *Model) { glOf(m).Map.NodesPerDim = []int{4} }},
		{name: "GL zero nodes", base: "gl", mutate: func(m *Model) { glOf(m).Map.NodesPerDim = []int{0} }},
		{name: "GL negative nodes", base: "gl", mutate: func(m *Model) { glOf(m).Map.NodesPerDim = []int{-8} }},
		{name: "GL two negative node counts", base: "gl", mutate: func(m *Model) {
			// A 2-D model whose node counts multiply to s = 8 although both are negative.
			m.D = 2
			m.Hyper.Lengthscales = []float64{0.7, 0.7}
			m.Transform.XMean, m.Transform.XScale = []float64{2, 2}, []float64{3, 3}
			glOf(m).Map = GLParams{U: []float64{5, 5}, NodesPerDim: []int{-2, -4}}
		}},
		{name: "RFF count", base: "rff", mutate: func(m *Model) { rffOf(m).Map.Features = 4 }},
		{name: "RFF omega length", base: "rff", mutate: func(m *Model) { p := rffOf(m); p.Map.Omega = p.Map.Omega[:4] }},
		{name: "GL features without a posterior", base: "gl", mutate: func(m *Model) {
			p := glOf(m)
			p.Features = &solver.FeaturePredictor{SF2: p.Features.SF2, SN2: p.Features.SN2}
		}},
		{name: "RFF posterior of zero features", base: "rff",
			mutate: func(m *Model) {
				rffOf(m).Map = RFFParams{Features: 0}
				rffOf(m).Features = &solver.FeaturePredictor{SF2: 1, SN2: 1}
			}},
		{name: "exact D", base: "exact", mutate: func(m *Model) { ex(m).D = 1 }},
		{name: "exact X short", base: "exact", mutate: func(m *Model) { ex(m).X = ex(m).X[:10] }},
		{name: "exact R short", base: "exact", mutate: func(m *Model) { ex(m).R = ex(m).R[:35] }},
		{name: "exact alpha long", base: "exact", mutate: func(m *Model) { ex(m).Alpha = append(ex(m).Alpha, 0) }},
		{name: "exact zero noise", base: "exact", mutate: func(m *Model) { ex(m).Noise = 0 }},
		{name: "exact posterior of zero rows", base: "exact",
			mutate: func(m *Model) { ex(m).Alpha, ex(m).X, ex(m).R = nil, nil, nil }},
		{name: "exact kernel of unknown family", base: "exact",
			mutate: func(m *Model) { ex(m).Kernel.Family = kernel.Family(9) }},
		{name: "exact kernel with more lengthscales than D", base: "exact",
			mutate: func(m *Model) { ex(m).Kernel.Lengthscales = []float64{1, 1, 1} }},
		{name: "exact kernel with fewer lengthscales than D", base: "exact",
			mutate: func(m *Model) { ex(m).Kernel.Lengthscales = []float64{1} }},

		{name: "expansion D", base: "expansion", mutate: func(m *Model) { xp(m).D = 1 }},
		{name: "expansion of another dimension", base: "expansion", mutate: func(m *Model) {
			x := xp(m) // a valid 1-D expansion in a 2-D model
			x.D, x.Kernel.Lengthscales, x.X = 1, x.Kernel.Lengthscales[:1], x.X[:len(x.Alpha)]
		}},
		{name: "expansion kernel of another family", base: "expansion", mutate: func(m *Model) { xp(m).Kernel.Family = kernel.Matern32 }},
		{name: "expansion kernel of unknown family", base: "expansion", mutate: func(m *Model) { xp(m).Kernel.Family = kernel.Family(9) }},
		{name: "expansion kernel with more lengthscales than D", base: "expansion",
			mutate: func(m *Model) { xp(m).Kernel.Lengthscales = []float64{1, 1, 1} }},
		{name: "expansion zero signal", base: "expansion", mutate: func(m *Model) { xp(m).Kernel.SignalVariance = 0 }},
		{name: "expansion of zero inputs", base: "expansion",
			mutate: func(m *Model) { xp(m).Alpha, xp(m).X, xp(m).Minus = nil, nil, nil }},
		{name: "expansion X short", base: "expansion", mutate: func(m *Model) { xp(m).X = xp(m).X[:11] }},
		{name: "expansion alpha long", base: "expansion", mutate: func(m *Model) { xp(m).Alpha = append(xp(m).Alpha, 0) }},
		{name: "expansion Minus short", base: "expansion", mutate: func(m *Model) { xp(m).Minus = xp(m).Minus[:35] }},
		{name: "expansion RMinus zero", base: "expansion", mutate: func(m *Model) { xp(m).RMinus = 0 }},
		{name: "expansion RMinus wrong", base: "expansion-kmcg", mutate: func(m *Model) { xp(m).RMinus = 2 }},
		{name: "expansion RMinus huge", base: "expansion-kmcg", mutate: func(m *Model) { xp(m).RMinus = math.MaxInt32 }},
		{name: "expansion Plus without rank", base: "expansion-kmcg", mutate: func(m *Model) { xp(m).RPlus = 0 }},
		{name: "expansion RPlus negative", base: "expansion-kmcg", mutate: func(m *Model) { xp(m).RPlus = -2 }},
		{name: "expansion Plus short", base: "expansion-kmcg", mutate: func(m *Model) { xp(m).Plus = xp(m).Plus[:11] }},
		{name: "expansion negative Plus scale", base: "expansion-kmcg", mutate: func(m *Model) { xp(m).PlusScale = -0.1 }},
		{name: "expansion NaN Plus scale", base: "expansion-kmcg", mutate: func(m *Model) { xp(m).PlusScale = math.NaN() }},
		{name: "expansion NaN alpha", base: "expansion", mutate: func(m *Model) { xp(m).Alpha[2] = math.NaN() }},
		{name: "expansion infinite X", base: "expansion", mutate: func(m *Model) { xp(m).X[0] = math.Inf(1) }},
		{name: "expansion NaN Minus", base: "expansion", mutate: func(m *Model) { xp(m).Minus[5] = math.NaN() }},
		{name: "expansion infinite Plus", base: "expansion-kmcg", mutate: func(m *Model) { xp(m).Plus[3] = math.Inf(-1) }},

		{name: "grief short beta", base: "grief", mutate: func(m *Model) { q := griefOf(m).Post; q.Beta = q.Beta[1:] }},
		{name: "grief NaN C", base: "grief", mutate: func(m *Model) { griefOf(m).Post.C[3] = math.NaN() }},
		{name: "grief bad index", base: "grief", mutate: func(m *Model) { griefOf(m).Map.Idx[0] = 99 }},
		{name: "grief empty map", base: "grief", mutate: func(m *Model) { griefOf(m).Map = GRIEFParams{} }},
	}
}

// TestDecodeInvalidModels encodes invalid models (Encode does not validate) and checks that
// Decode rejects each one with an error and never panics.
func TestDecodeInvalidModels(t *testing.T) {
	for _, tc := range invalidModels() {
		t.Run(tc.name, func(t *testing.T) {
			m := clone(t, validModels()[tc.base])
			tc.mutate(m)
			if err := m.Validate(); err == nil {
				t.Errorf("Validate accepted the model")
			}
			got, p, err := decodeSafely(encode(t, m))
			if p != nil {
				t.Fatalf("Decode panicked: %v", p)
			}
			if err != nil {
				if !strings.HasPrefix(err.Error(), "decode model: ") {
					t.Errorf("error %q does not say it is a model decode error", err)
				}
				return
			}
			x := testRows(got, 2, 1)
			_, pp, perr := predictSafely(got, x, 2)
			outcome := fmt.Sprintf("Predict returns error %v", perr)
			if pp != nil {
				outcome = fmt.Sprintf("Predict panics: %v", pp)
			}
			t.Fatalf("Decode accepted an inconsistent model (%s)", outcome)
		})
	}
}

func TestDecodeBadHeaderAndTruncation(t *testing.T) {
	good := encode(t, glModel())
	with := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	version := func(v uint32) []byte {
		return with(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[8:12], v); return b })
	}
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "bad magic"},
		{"short magic", good[:5], "bad magic"},
		{"bad magic", with(func(b []byte) []byte { b[0] = 'X'; return b }), "bad magic"},
		{"lower-case magic", with(func(b []byte) []byte { copy(b, "gprmodel"); return b }), "bad magic"},
		{"gzip", with(func(b []byte) []byte { b[0], b[1] = 0x1f, 0x8b; return b }), "bad magic"},
		{"no version", good[:8], "decode model"},
		{"short version", good[:10], "decode model"},
		{"version 0", version(0), "encoding version 0"},
		{"version 3", version(3), "encoding version 3"},
		{"version max", version(math.MaxUint32), "encoding version 4294967295"},
		{"no body", good[:12], "decode model"},
		{"half body", good[:len(good)/2], "decode model"},
		{"last byte missing", good[:len(good)-1], "decode model"},
		{"garbage body", append(append([]byte(nil), good[:12]...), bytes.Repeat([]byte{0xff}, 64)...), "decode model"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, p, err := decodeSafely(tc.in)
			if p != nil {
				t.Fatalf("Decode panicked: %v", p)
			}
			if err == nil {
				t.Fatalf("Decode succeeded (%s)", m.Method)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

// TestDecodeEveryPrefix: no proper prefix of a valid encoding decodes.
func TestDecodeEveryPrefix(t *testing.T) {
	for name, m := range validModels() {
		t.Run(name, func(t *testing.T) {
			b := encode(t, m)
			for n := 0; n < len(b); n++ {
				_, p, err := decodeSafely(b[:n])
				if p != nil {
					t.Fatalf("prefix of %d bytes: Decode panicked: %v", n, p)
				}
				if err == nil {
					t.Fatalf("prefix of %d of %d bytes decoded", n, len(b))
				}
			}
		})
	}
}

// FuzzDecode: Decode never panics, and a model it accepts predicts a couple of rows without
// panicking, describes itself, and encodes back to exactly the bytes it was decoded from (a
// Version-1 body: to bytes that decode and encode back to themselves).
func FuzzDecode(f *testing.F) {
	for _, m := range withWarnings(f) {
		f.Add(encode(f, m))
	}
	for name, m := range validModels() {
		b := encode(f, m)
		f.Add(b)
		f.Add(b[:len(b)/2])
		for _, i := range []int{0, 9, 12, 20, len(b) / 3, len(b) - 3} {
			c := append([]byte(nil), b...)
			c[i] ^= 0x5a
			f.Add(c)
		}
		// The body without its checksum, with the posterior's section damaged.
		if name == "gl" || name == "grief" {
			leg := legacy(b)
			at := 12 + bodySplit(f, m).payloadAt
			f.Add(overwrite(leg, at+8, 16))
		}
	}
	for _, mu := range invalidModels() {
		m := clone(f, validModels()[mu.base])
		mu.mutate(m)
		f.Add(encode(f, m))
	}
	// The legacy encoding (no checksum), whole and damaged.
	leg := legacy(encode(f, validModels()["gl"]))
	f.Add(leg)
	f.Add(overwrite(leg, len(leg)/2, 16))
	// Version-1 bodies, whole and damaged (without the checksum, so the damage reaches the
	// body's decoder).
	for _, name := range goldenNames(f) {
		b := readGolden(f, "v1", name)
		f.Add(b)
		if !bytes.HasPrefix(b, []byte("GPRMODEL\x01\x00\x00\x00")) {
			b = legacy(b)
		}
		f.Add(overwrite(b, len(b)/2, 16))
		f.Add(b[:len(b)-8])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(bytes.NewReader(data))
		if err != nil {
			if m != nil {
				t.Fatalf("Decode returned a model with error %v", err)
			}
			return
		}
		x := make([]float64, 2*m.D)
		for i := range x {
			x[i] = float64(i%3) - 0.5
		}
		p, err := m.Predict(x, 2)
		if err == nil && (len(p.Mean) != 2 || len(p.LatentVar) != 2 || len(p.NoisyVar) != 2) {
			t.Fatalf("Predict returned %d/%d/%d values for 2 rows", len(p.Mean), len(p.LatentVar), len(p.NoisyVar))
		}
		_ = m.Original()
		_ = m.Describe()
		b, err := m.Bytes()
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		m2, err := Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("a decoded model does not decode after re-encoding: %v", err)
		}
		if b2 := encode(t, m2); !bytes.Equal(b2, b) {
			t.Fatalf("a re-encoded model re-encodes to %d different bytes (%d)", len(b2), len(b))
		}
		legacyEnvelope := bytes.HasPrefix(data, []byte("GPRMODEL\x01\x00\x00\x00"))
		if bodyVersion(data, legacyEnvelope) == version1 {
			return // read into the Version-2 layout, so its bytes differ
		}
		if legacyEnvelope {
			b = legacy(b) // a legacy model re-encodes to the checksummed encoding
		}
		if !bytes.Equal(b, data) {
			t.Fatalf("a decoded model re-encodes to %d different bytes (read %d)", len(b), len(data))
		}
	})
}

// bodyVersion is the model version at the start of an encoded model's body.
func bodyVersion(data []byte, legacyEnvelope bool) int {
	at := 12 + sha256.Size
	if legacyEnvelope {
		at = 12
	}
	if len(data) < at+8 {
		return -1
	}
	return int(int64(binary.LittleEndian.Uint64(data[at:])))
}

// TestHandBuiltModelsValid: the hand-built models are valid, so the mutation tests start from
// something Decode accepts.
func TestHandBuiltModelsValid(t *testing.T) {
	for name, m := range validModels() {
		if err := m.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if name == "gl" {
			p := glOf(m)
			gl, err := features.NewGL(kernel.RBF, p.Map.U, p.Map.NodesPerDim)
			if err != nil || gl.NumFeatures() != len(p.Features.Beta) {
				t.Errorf("gl: feature map of %v features, posterior of %d (%v)", gl, len(p.Features.Beta), err)
			}
		}
	}
}

// legacy turns an encoded model into the legacy encoding: no checksum after the header.
func legacy(b []byte) []byte {
	out := append([]byte(nil), b[:8]...)
	out = binary.LittleEndian.AppendUint32(out, legacyEncoding)
	return append(out, b[12+sha256.Size:]...)
}

// overwrite returns a copy of b with n bytes from off replaced by a fixed pattern.
func overwrite(b []byte, off, n int) []byte {
	c := append([]byte(nil), b...)
	for i := off; i < off+n && i < len(c); i++ {
		c[i] = byte(0xa5 ^ i)
	}
	return c
}

// TestDecodeRefusesDamagedModels: a model with 16 bytes overwritten anywhere is refused,
// past the header with an error saying the file is damaged; the intact model decodes.
func TestDecodeRefusesDamagedModels(t *testing.T) {
	for _, name := range []string{"gl", "exact", "expansion"} {
		b := encode(t, validModels()[name])
		if _, err := Decode(bytes.NewReader(b)); err != nil {
			t.Fatalf("%s: the intact model: %v", name, err)
		}
		for off := 0; off < len(b); off += 7 {
			_, err := Decode(bytes.NewReader(overwrite(b, off, 16)))
			switch {
			case err == nil:
				t.Errorf("%s: 16 bytes overwritten at offset %d of %d: accepted", name, off, len(b))
			case off >= 12 && !strings.Contains(err.Error(), "the file is damaged"):
				t.Errorf("%s: 16 bytes overwritten at offset %d: %v, want a checksum error", name, off, err)
			}
		}
	}
}

// TestDecodeLegacyModel: a model of the legacy encoding, without a checksum, still decodes
// to the same model.
func TestDecodeLegacyModel(t *testing.T) {
	m := validModels()["gl"]
	d, err := Decode(bytes.NewReader(legacy(encode(t, m))))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(encode(t, d), encode(t, m)) {
		t.Error("the legacy model decodes to a different model")
	}
	b := encode(t, m)
	binary.LittleEndian.PutUint32(b[8:12], 7)
	if _, err := Decode(bytes.NewReader(b)); err == nil || !strings.Contains(err.Error(), "encoding version 7") {
		t.Errorf("unknown encoding version: %v", err)
	}
}
