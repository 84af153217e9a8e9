package model

import (
	"fmt"

	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/solver"
)

// The posterior of the exact method: the factorised exact GP over the stored standardized
// training inputs (solver.ExactPredictor).

func init() {
	RegisterPosterior(exactName, func(d *Decoder) Posterior { return &ExactPosterior{Exact: decodeExactPredictor(d)} })
}

// decodeExactPredictor reads what ExactPosterior.Encode writes (the same fields in the same
// order as the Version-1 exact group).
func decodeExactPredictor(d *Decoder) *solver.ExactPredictor {
	x := &solver.ExactPredictor{Kernel: d.kernel()}
	x.Noise = d.Float()
	x.X = d.Floats()
	x.D = d.Int()
	x.Alpha = d.Floats()
	x.R = d.Floats()
	return x
}

const exactName = "exact"

// ExactPosterior is the posterior of the exact method: mean k(x, X) Alpha and latent
// variance k(x, x) - ||R^-T k(X, x)||^2 over the n stored training inputs X.
type ExactPosterior struct {
	Exact *solver.ExactPredictor
}

// Name returns "exact".
func (p *ExactPosterior) Name() string { return exactName }

// Validate checks the shapes of the stored inputs, weights and factor, and the kernel.
func (p *ExactPosterior) Validate(m *Model) error {
	x, d := p.Exact, m.D
	if x == nil {
		return fmt.Errorf("exact posterior: no predictor")
	}
	n := len(x.Alpha)
	if n < 1 || x.D != d || len(x.X) != n*d || len(x.R) != n*n {
		return fmt.Errorf("exact posterior shapes disagree (n=%d)", n)
	}
	k := x.Kernel
	if _, err := kernel.ParseFamily(k.Family.String()); err != nil {
		return fmt.Errorf("exact posterior: %w", err)
	}
	if k.Dim() != d {
		return fmt.Errorf("exact posterior: kernel of %d lengthscales for d=%d", k.Dim(), d)
	}
	if err := k.Validate(); err != nil {
		return fmt.Errorf("exact posterior: %w", err)
	}
	if !(x.Noise > 0) {
		return fmt.Errorf("exact posterior: noise variance %v", x.Noise)
	}
	return nil
}

// Predictor returns the exact predictor's Predict.
func (p *ExactPosterior) Predictor(*Model) (BlockPredictor, error) {
	return func(xs []float64, rows int, mean, latentVar []float64) {
		p.Exact.Predict(xs, mean[:rows], latentVar[:rows])
	}, nil
}

// Encode writes the kernel, the noise variance, the stored inputs, the weights and the
// Cholesky factor.
func (p *ExactPosterior) Encode(e *Encoder) {
	x := p.Exact
	if x == nil {
		e.Fail(fmt.Errorf("exact posterior: no predictor"))
		return
	}
	e.kernel(x.Kernel)
	e.Float(x.Noise)
	e.Floats(x.X)
	e.Int(x.D)
	e.Floats(x.Alpha)
	e.Floats(x.R)
}

// Describe lists the number of stored training rows.
func (p *ExactPosterior) Describe() []Field {
	return []Field{{"stored_rows", len(p.Exact.Alpha)}}
}
