package model

import (
	"fmt"
	"math"

	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/vof"
)

// The posterior of the vof method (variational orthogonal features): the model's shape and
// every learned parameter, the variational q(u) = N(m, S) included, predicting by eq. 2 of
// Burt, Rasmussen and van der Wilk with Kuu = I (vof.Predict).

func init() {
	RegisterPosterior(vofName, func(d *Decoder) Posterior {
		p := &VOFPosterior{}
		p.Basis = d.Str()
		p.M1 = d.Int()
		p.Additive = d.Bool()
		p.Dense = d.Bool()
		q := &p.Params
		q.Lengthscales = d.Floats()
		q.Variances = d.Floats()
		q.Noise = d.Float()
		q.Feature = d.Floats()
		q.Mean = d.Floats()
		q.Chol = d.Floats()
		return p
	})
}

const vofName = "vof"

// VOFPosterior is the posterior of vof: the basis ("hermite" or "trig"), the 1-D features
// per input M1, the layout (tensor or additive), the covariance form, and the learned
// parameters (standardized units; the kernel family is Model.Kernel and the input dimension
// Model.D). Params.Variances holds one kernel variance (tensor) or one per input (additive).
type VOFPosterior struct {
	Basis    string
	M1       int
	Additive bool
	Dense    bool
	Params   vof.Params
}

// Name returns "vof".
func (p *VOFPosterior) Name() string { return vofName }

// shape returns the vof.Model of the posterior in a model of m.D inputs.
func (p *VOFPosterior) shape(m *Model) (vof.Model, error) {
	b, err := vof.ParseBasis(p.Basis)
	if err != nil {
		return vof.Model{}, fmt.Errorf("vof posterior: %w", err)
	}
	fam, err := kernel.ParseFamily(m.Kernel)
	if err != nil {
		return vof.Model{}, fmt.Errorf("vof posterior: %w", err)
	}
	// The budget was enforced at training; a stored model is only bounded by its own size.
	return vof.Model{Basis: b, Family: fam, Dim: m.D, M1: p.M1, Additive: p.Additive, Dense: p.Dense, MaxFeatures: math.MaxInt32}, nil
}

// NumFeatures returns M.
func (p *VOFPosterior) NumFeatures() int { return len(p.Params.Mean) }

// AdditiveKernel reports whether the model's kernel is the additive layout's sum of one-input
// kernels (Predict then measures extrapolation per input).
func (p *VOFPosterior) AdditiveKernel() bool { return p.Additive }

// Validate checks the shape and the parameters (vof.Model.Check).
func (p *VOFPosterior) Validate(m *Model) error {
	mod, err := p.shape(m)
	if err != nil {
		return err
	}
	if _, err := mod.Check(&p.Params); err != nil {
		return fmt.Errorf("vof posterior: %w", err)
	}
	for _, v := range append(append([]float64(nil), p.Params.Mean...), p.Params.Chol...) {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("vof posterior: the variational mean or covariance factor holds %v", v)
		}
	}
	return nil
}

// vofQuadBucket rounds TrigVOF quadrature node counts up to a multiple of itself, so that a
// prediction builds few quadrature maps; vofMaxQuadNodes is the most nodes per input a
// prediction uses (about 6300/a standardized units from the origin: far beyond any data).
const (
	vofQuadBucket   = 16
	vofMaxQuadNodes = 4096
)

// Predictor returns vof.Predict with the closed-form Hermite features, or for TrigVOF with
// Gauss-Legendre features whose node count is chosen per row from its largest |x_k|
// (vof.TrigQuadNodes, rounded up to a multiple of vofQuadBucket): a row's prediction does not
// depend on the other rows of its block. A row whose rule would need more than
// vofMaxQuadNodes nodes per input, or more points than vof's quadrature budget in all
// inputs, gets the prior (mean 0, variance k(x, x)).
func (p *VOFPosterior) Predictor(m *Model) (BlockPredictor, error) {
	mod, err := p.shape(m)
	if err != nil {
		return nil, err
	}
	d := m.D
	var prior float64
	for _, v := range p.Params.Variances {
		prior += v
	}
	if mod.Basis == vof.Hermite {
		fm, err := vof.NewFeatureMap(mod, &p.Params, 0, 0)
		if err != nil {
			return nil, fmt.Errorf("vof posterior: %w", err)
		}
		return func(xs []float64, rows int, mean, latentVar []float64) {
			if err := vof.Predict(mod, &p.Params, fm, xs[:rows*d], mean[:rows], latentVar[:rows]); err != nil {
				for i := 0; i < rows; i++ { // unreachable for a valid model
					mean[i], latentVar[i] = 0, prior
				}
			}
		}, nil
	}
	maps := map[int]vof.FeatureMap{}
	failed := map[int]bool{}
	return func(xs []float64, rows int, mean, latentVar []float64) {
		for i := 0; i < rows; i++ {
			x := xs[i*d : (i+1)*d]
			var xmax float64
			for _, v := range x {
				xmax = math.Max(xmax, math.Abs(v))
			}
			q := vof.TrigQuadNodes(p.M1, p.Params.Feature, xmax)
			q = (q + vofQuadBucket - 1) / vofQuadBucket * vofQuadBucket
			fm, ok := maps[q]
			if !ok && !failed[q] && q <= vofMaxQuadNodes {
				var err error
				if fm, err = vof.NewFeatureMap(mod, &p.Params, q, 0); err != nil {
					failed[q] = true
				} else {
					maps[q] = fm
				}
			}
			if fm == nil || vof.Predict(mod, &p.Params, fm, x, mean[i:i+1], latentVar[i:i+1]) != nil {
				mean[i], latentVar[i] = 0, prior
			}
		}
	}, nil
}

// Encode writes the basis, M1, the layout and covariance flags, then the parameters.
func (p *VOFPosterior) Encode(e *Encoder) {
	e.Str(p.Basis)
	e.Int(p.M1)
	e.Bool(p.Additive)
	e.Bool(p.Dense)
	q := &p.Params
	e.Floats(q.Lengthscales)
	e.Floats(q.Variances)
	e.Float(q.Noise)
	e.Floats(q.Feature)
	e.Floats(q.Mean)
	e.Floats(q.Chol)
}

// Describe lists the basis, the feature counts, the layout, the covariance form and the
// feature parameters (sigma_in for hermite, a for trig).
func (p *VOFPosterior) Describe() []Field {
	layout, cov := "tensor", "diag"
	if p.Additive {
		layout = "additive"
	}
	if p.Dense {
		cov = "dense"
	}
	return []Field{
		{"basis", p.Basis},
		{"features", len(p.Params.Mean)},
		{"features_per_input", p.M1},
		{"layout", layout},
		{"covariance", cov},
		{"feature_parameters", p.Params.Feature},
	}
}
