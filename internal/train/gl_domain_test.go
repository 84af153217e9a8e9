package train

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gpreduce/gpreduce/internal/model"
	"github.com/gpreduce/gpreduce/internal/shard"
)

// tailData is a one-dimensional series in the spirit of Mauna Loa CO2 with --test-tail 0.6:
// a trend plus a yearly cycle sampled monthly; the first 40% of the rows train, the last 60%
// test, so the test inputs reach 2.5 times the training extent.
func tailData() (tr, te *shard.Table) {
	rng := rand.New(rand.NewPCG(7, 9))
	all := &shard.Table{Source: "tail", D: 1, Columns: []string{"year"}, Target: "y"}
	for i := 0; i < 300; i++ {
		x := float64(i) / 12
		all.X = append(all.X, x)
		all.Y = append(all.Y, 0.5*x+2*math.Sin(2*math.Pi*x)+0.3*rng.NormFloat64())
	}
	return all.Slice(0, 120), all.Slice(120, 300)
}

func tailSpec(method string) Spec {
	s := DefaultSpec(method)
	s.LengthscaleBounds = [2]float64{0.05, 0.3}
	s.MaxIter = 60
	return s
}

func nllOf(t *testing.T, m *model.Model, te *shard.Table) (model.Metrics, model.Prediction) {
	t.Helper()
	p, err := m.Predict(te.X, te.N())
	if err != nil {
		t.Fatal(err)
	}
	sc, err := model.Score(p, te.Y)
	if err != nil {
		t.Fatal(err)
	}
	return sc, p
}

// TestGLTailKnownTestInputsMatchesExact: when the inputs to predict are known (as eval
// knows its test rows), gl sizes its grid for them, every test row is in its domain, and its
// test NLL is within 10% of the exact GP's.
func TestGLTailKnownTestInputsMatchesExact(t *testing.T) {
	tr, te := tailData()
	ex := trainOn(t, tr, tailSpec("exact"), 2, 2)
	spec := tailSpec("gl")
	spec.PredictMin, spec.PredictMax = []float64{te.X[0]}, []float64{te.X[te.N()-1]}
	gl := trainOn(t, tr, spec, 2, 2)
	scEx, _ := nllOf(t, ex, te)
	scGL, p := nllOf(t, gl, te)
	t.Logf("test NLL: exact %.4f, gl %.4f (%d features, domain %s)", scEx.NLL, scGL.NLL, gl.NumFeatures(), gl.DomainString())
	if p.NOutside != 0 {
		t.Fatalf("%d test rows outside the domain %s of a grid sized for them", p.NOutside, gl.DomainString())
	}
	if math.Abs(scGL.NLL-scEx.NLL) > 0.1*math.Abs(scEx.NLL) {
		t.Errorf("gl test NLL %.4f is not within 10%% of exact's %.4f", scGL.NLL, scEx.NLL)
	}
}

// TestGLTailOutsideDomainPredictsPrior: sized for the training rows alone, the model's domain
// ends within about 1.2 training extents; every test row beyond it is flagged and gets the
// prior (mean of the training target, latent variance sigma_f^2), never the aliased fit.
// Without the domain check the same rows get the aliased prediction: confidently wrong.
func TestGLTailOutsideDomainPredictsPrior(t *testing.T) {
	tr, te := tailData()
	gl := trainOn(t, tr, tailSpec("gl"), 2, 2)
	if gl.Domain == nil {
		t.Fatal("gl model without a domain")
	}
	hiOrig := gl.Domain.Hi[0]*gl.Transform.XScale[0] + gl.Transform.XMean[0]
	trainHi := tr.X[tr.N()-1]
	if !(hiOrig > trainHi && hiOrig < trainHi+0.5*(trainHi-tr.X[0])) {
		t.Fatalf("domain ends at %g; training inputs end at %g, want a little beyond", hiOrig, trainHi)
	}
	_, p := nllOf(t, gl, te)
	h := gl.Original()
	beyond := 0
	for i := 0; i < te.N(); i++ {
		out := te.X[i] > hiOrig
		if p.Outside[i] != out {
			t.Fatalf("row %d (x = %g): outside = %v, domain ends at %g", i, te.X[i], p.Outside[i], hiOrig)
		}
		if !out {
			continue
		}
		beyond++
		if p.Mean[i] != gl.Transform.YMean || math.Abs(p.LatentVar[i]-h.SignalVariance) > 1e-12*h.SignalVariance ||
			math.Abs(p.NoisyVar[i]-h.SignalVariance-h.NoiseVariance) > 1e-12*p.NoisyVar[i] {
			t.Fatalf("row %d outside: mean %g, latent %g, noisy %g; want the prior %g, %g, %g", i,
				p.Mean[i], p.LatentVar[i], p.NoisyVar[i], gl.Transform.YMean, h.SignalVariance, h.SignalVariance+h.NoiseVariance)
		}
	}
	if beyond == 0 || beyond != p.NOutside {
		t.Fatalf("%d rows beyond the domain, %d counted", beyond, p.NOutside)
	}
	// The aliased values the domain check replaces: far past the domain the raw features
	// repeat the training fit with a small latent variance.
	raw := *gl
	raw.Domain = nil
	q, err := raw.Predict(te.X, te.N())
	if err != nil {
		t.Fatal(err)
	}
	small := 0
	for i := range q.LatentVar {
		if p.Outside[i] && q.LatentVar[i] < 0.5*h.SignalVariance {
			small++
		}
	}
	t.Logf("%d of %d test rows beyond the domain %s; %d of them have an aliased latent variance below half the prior's", beyond, te.N(), gl.DomainString(), small)
	if small == 0 {
		t.Errorf("no aliased row beyond the domain: the test does not show what the check prevents")
	}
}
