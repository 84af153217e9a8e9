package model

import (
	"fmt"

	"github.com/gpreduce/gpreduce/internal/features"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/solver"
)

// The feature-space posteriors of the gl and rff methods: a feature map z(x) of s real
// features and the Bayesian linear-model posterior over their weights
// (solver.FeaturePredictor).

func init() {
	RegisterPosterior(glName, func(d *Decoder) Posterior {
		return &GLPosterior{Map: GLParams{U: d.Floats(), NodesPerDim: d.Ints()}, Features: decodeFeaturePredictor(d)}
	})
	RegisterPosterior(rffName, func(d *Decoder) Posterior {
		return &RFFPosterior{Map: RFFParams{Omega: d.Floats(), Features: d.Int()}, Features: decodeFeaturePredictor(d)}
	})
}

const (
	glName  = "gl"
	rffName = "rff"
)

// GLParams fixes a Gauss-Legendre feature map: the box half-widths U (angular frequency per
// standardized input unit) and nodes per dimension.
type GLParams struct {
	U           []float64
	NodesPerDim []int
}

// RFFParams fixes a random Fourier feature map: base frequencies (Features/2 rows of D).
type RFFParams struct {
	Omega    []float64
	Features int
}

// GLPosterior is the posterior of the gl method: the Gauss-Legendre feature map of the
// model's kernel family and the feature-weight posterior.
type GLPosterior struct {
	Map      GLParams
	Features *solver.FeaturePredictor
}

// RFFPosterior is the posterior of the rff method: the random Fourier feature map of the
// model's kernel family, scaled by the model's lengthscales (Model.Hyper), and the
// feature-weight posterior.
type RFFPosterior struct {
	Map      RFFParams
	Features *solver.FeaturePredictor
}

// Name returns "gl".
func (p *GLPosterior) Name() string { return glName }

// Name returns "rff".
func (p *RFFPosterior) Name() string { return rffName }

// NumFeatures returns the number of real features s.
func (p *GLPosterior) NumFeatures() int { return len(p.Features.Beta) }

// NumFeatures returns the number of real features s.
func (p *RFFPosterior) NumFeatures() int { return len(p.Features.Beta) }

// Validate checks the node counts against D and the posterior's s features.
func (p *GLPosterior) Validate(m *Model) error {
	s, err := validateFeaturePredictor(glName, p.Features)
	if err != nil {
		return err
	}
	d := m.D
	if len(p.Map.U) != d || len(p.Map.NodesPerDim) != d {
		return fmt.Errorf("gl posterior: feature map has %d box widths and %d node counts for d=%d", len(p.Map.U), len(p.Map.NodesPerDim), d)
	}
	prod := 1
	for _, k := range p.Map.NodesPerDim {
		if k < 1 || prod > s {
			return fmt.Errorf("gl posterior: node counts %v do not give %d features", p.Map.NodesPerDim, s)
		}
		prod *= k
	}
	if prod != s {
		return fmt.Errorf("gl posterior: node counts %v do not give %d features", p.Map.NodesPerDim, s)
	}
	return nil
}

// Validate checks the frequencies against D and the posterior's s features.
func (p *RFFPosterior) Validate(m *Model) error {
	s, err := validateFeaturePredictor(rffName, p.Features)
	if err != nil {
		return err
	}
	if p.Map.Features != s || s < 2 || s%2 != 0 || len(p.Map.Omega) != s/2*m.D {
		return fmt.Errorf("rff posterior: map of %d features and %d frequencies for s=%d", p.Map.Features, len(p.Map.Omega), s)
	}
	return nil
}

// validateFeaturePredictor checks the shapes of a feature-weight posterior and returns its
// number of features s.
func validateFeaturePredictor(name string, f *solver.FeaturePredictor) (int, error) {
	if f == nil {
		return 0, fmt.Errorf("%s posterior: no feature-weight posterior", name)
	}
	s := len(f.Beta)
	if s < 1 || len(f.SqrtH) != s || len(f.R) != s*s {
		return 0, fmt.Errorf("%s posterior: feature posterior shapes disagree (s=%d)", name, s)
	}
	return s, nil
}

// Predictor rebuilds the Gauss-Legendre feature map.
func (p *GLPosterior) Predictor(m *Model) (BlockPredictor, error) {
	fam, err := kernel.ParseFamily(m.Kernel)
	if err != nil {
		return nil, err
	}
	gl, err := features.NewGL(fam, p.Map.U, p.Map.NodesPerDim)
	if err != nil {
		return nil, fmt.Errorf("rebuild features: %w", err)
	}
	return featureBlocks(gl.NumFeatures(), gl.MapBlock, p.Features), nil
}

// Predictor rebuilds the random Fourier feature map at the model's lengthscales.
func (p *RFFPosterior) Predictor(m *Model) (BlockPredictor, error) {
	fam, err := kernel.ParseFamily(m.Kernel)
	if err != nil {
		return nil, err
	}
	r := &features.RFF{Family: fam, D: m.D, Omega: p.Map.Omega}
	ls := m.Hyper.Lengthscales
	fm := func(x []float64, rows int, dst []float64) { r.MapBlock(ls, x, rows, dst) }
	return featureBlocks(p.Map.Features, fm, p.Features), nil
}

// featureBlocks predicts a block by mapping its rows to s features with fm, then through the
// feature-weight posterior f.
func featureBlocks(s int, fm func(x []float64, rows int, dst []float64), f *solver.FeaturePredictor) BlockPredictor {
	var z []float64
	return func(xs []float64, rows int, mean, latentVar []float64) {
		if len(z) < rows*s {
			z = make([]float64, rows*s)
		}
		fm(xs, rows, z)
		f.Predict(z, rows, mean, latentVar)
	}
}

// Encode writes the box half-widths, the node counts and the feature-weight posterior.
func (p *GLPosterior) Encode(e *Encoder) {
	e.Floats(p.Map.U)
	e.Ints(p.Map.NodesPerDim)
	encodeFeaturePredictor(e, p.Features)
}

// Encode writes the frequencies, the feature count and the feature-weight posterior.
func (p *RFFPosterior) Encode(e *Encoder) {
	e.Floats(p.Map.Omega)
	e.Int(p.Map.Features)
	encodeFeaturePredictor(e, p.Features)
}

func encodeFeaturePredictor(e *Encoder, f *solver.FeaturePredictor) {
	if f == nil {
		e.Fail(fmt.Errorf("no feature-weight posterior"))
		return
	}
	e.Float(f.SF2)
	e.Float(f.SN2)
	e.Floats(f.SqrtH)
	e.Floats(f.Beta)
	e.Floats(f.R)
}

func decodeFeaturePredictor(d *Decoder) *solver.FeaturePredictor {
	f := &solver.FeaturePredictor{}
	f.SF2 = d.Float()
	f.SN2 = d.Float()
	f.SqrtH = d.Floats()
	f.Beta = d.Floats()
	f.R = d.Floats()
	return f
}

// Describe lists the feature count, the node counts and the box half-widths.
func (p *GLPosterior) Describe() []Field {
	return []Field{
		{"features", len(p.Features.Beta)},
		{"nodes_per_dim", p.Map.NodesPerDim},
		{"box_half_widths", p.Map.U},
	}
}

// Describe lists the feature count.
func (p *RFFPosterior) Describe() []Field {
	return []Field{{"features", p.Map.Features}}
}
