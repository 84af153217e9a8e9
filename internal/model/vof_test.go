package model

import (
	"math"
	"testing"
)

// TestVOFPosteriorPredict: a vof model predicts each row independently of the rest of its
// block (TrigVOF picks its quadrature per row), returns non-negative variances, and far
// from the data (where every feature has decayed) returns to the prior: mean YMean and
// latent variance k(x, x) in original units.
func TestVOFPosteriorPredict(t *testing.T) {
	for _, basis := range []string{"hermite", "trig"} {
		t.Run(basis, func(t *testing.T) {
			m := vofModel(basis)
			post := m.Posterior.(*VOFPosterior)
			x := testRows(m, 20, 3)
			alone := make([]float64, 0, len(x))
			for i := 0; i < 20; i++ {
				p, err := m.Predict(x[i*m.D:(i+1)*m.D], 1)
				if err != nil {
					t.Fatal(err)
				}
				alone = append(alone, p.Mean[0], p.LatentVar[0])
			}
			far := make([]float64, m.D)
			for k := range far {
				far[k] = m.Transform.XMean[k] + 1e4*m.Transform.XScale[k]
			}
			p, err := m.Predict(append(append([]float64(nil), x...), far...), 21)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 20; i++ {
				if p.Mean[i] != alone[2*i] || p.LatentVar[i] != alone[2*i+1] {
					t.Errorf("row %d: predicted with a far row %v, %v; alone %v, %v", i, p.Mean[i], p.LatentVar[i], alone[2*i], alone[2*i+1])
				}
				if !(p.LatentVar[i] >= 0) {
					t.Errorf("row %d: latent variance %v", i, p.LatentVar[i])
				}
			}
			var prior float64
			for _, v := range post.Params.Variances {
				prior += v
			}
			s2 := m.Transform.YScale * m.Transform.YScale
			if math.Abs(p.Mean[20]-m.Transform.YMean) > 1e-6*m.Transform.YScale || math.Abs(p.LatentVar[20]-prior*s2) > 1e-6*prior*s2 {
				t.Errorf("far row: mean %v, latent variance %v; want the prior %v, %v", p.Mean[20], p.LatentVar[20], m.Transform.YMean, prior*s2)
			}
		})
	}
}
