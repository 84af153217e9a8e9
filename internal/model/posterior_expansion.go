package model

import (
	"fmt"

	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/solver"
)

// The posterior of the conjugate-gradient methods cg and kmcg: a kernel expansion over stored
// standardized inputs with low-rank variance terms (solver.ExpansionPredictor).

func init() {
	RegisterPosterior(expansionName, func(d *Decoder) Posterior {
		return &ExpansionPosterior{Expansion: decodeExpansionPredictor(d)}
	})
}

// decodeExpansionPredictor reads what ExpansionPosterior.Encode writes (the same fields in
// the same order as the Version-1 expansion section).
func decodeExpansionPredictor(d *Decoder) *solver.ExpansionPredictor {
	x := &solver.ExpansionPredictor{Kernel: d.kernel()}
	x.X = d.Floats()
	x.D = d.Int()
	x.Alpha = d.Floats()
	x.Minus = d.Floats()
	x.RMinus = d.Int()
	x.Plus = d.Floats()
	x.RPlus = d.Int()
	x.PlusScale = d.Float()
	return x
}

const expansionName = "expansion"

// ExpansionPosterior is the posterior of cg and kmcg: mean k(x, X) Alpha and latent variance
// k(x, x) - ||k(x, X) Minus||^2 + PlusScale ||k(x, X) Plus||^2.
type ExpansionPosterior struct {
	Expansion *solver.ExpansionPredictor
}

// Name returns "expansion".
func (p *ExpansionPosterior) Name() string { return expansionName }

// Validate checks the predictor (solver.ExpansionPredictor.Validate) and that its kernel is
// the model's, of D lengthscales.
func (p *ExpansionPosterior) Validate(m *Model) error {
	x, d := p.Expansion, m.D
	if x == nil {
		return fmt.Errorf("expansion posterior: no predictor")
	}
	if err := x.Validate(); err != nil {
		return err
	}
	if x.D != d || x.Kernel.Dim() != d {
		return fmt.Errorf("expansion posterior: D=%d and a kernel of %d lengthscales for d=%d", x.D, x.Kernel.Dim(), d)
	}
	if fam, _ := kernel.ParseFamily(m.Kernel); x.Kernel.Family != fam {
		return fmt.Errorf("expansion posterior: %s kernel in a %s model", x.Kernel.Family, m.Kernel)
	}
	return nil
}

// Predictor returns the expansion predictor's Predict.
func (p *ExpansionPosterior) Predictor(*Model) (BlockPredictor, error) {
	return func(xs []float64, rows int, mean, latentVar []float64) {
		p.Expansion.Predict(xs, mean[:rows], latentVar[:rows])
	}, nil
}

// Encode writes the kernel, the stored inputs, the weights and the two variance terms.
func (p *ExpansionPosterior) Encode(e *Encoder) {
	x := p.Expansion
	if x == nil {
		e.Fail(fmt.Errorf("expansion posterior: no predictor"))
		return
	}
	e.kernel(x.Kernel)
	e.Floats(x.X)
	e.Int(x.D)
	e.Floats(x.Alpha)
	e.Floats(x.Minus)
	e.Int(x.RMinus)
	e.Floats(x.Plus)
	e.Int(x.RPlus)
	e.Float(x.PlusScale)
}

// Describe lists the number of stored inputs and the ranks of the variance terms.
func (p *ExpansionPosterior) Describe() []Field {
	x := p.Expansion
	f := []Field{{"stored_rows", len(x.Alpha)}, {"variance_rank", x.RMinus}}
	if x.RPlus > 0 {
		f = append(f, Field{"correction_rank", x.RPlus})
	}
	return f
}
