package model

import (
	"fmt"
	"math"
)

// Metrics scores predictions of held-out targets, all in original units.
type Metrics struct {
	N          int
	RMSE       float64 // sqrt(mean (y - mean)^2)
	NLL        float64 // mean of -log N(y; mean, noisy variance)
	Coverage95 float64 // share of y within mean +- 1.96 sqrt(noisy variance)
}

// Z95 is the half-width of the central 95% interval of a Gaussian in standard deviations:
// the coverage95 metric counts |y - mean| <= Z95 sqrt(noisy variance).
const Z95 = 1.96

// Score compares predictions with the observed targets y.
func Score(p Prediction, y []float64) (Metrics, error) {
	if len(y) != len(p.Mean) || len(y) == 0 {
		return Metrics{}, fmt.Errorf("score: %d targets for %d predictions", len(y), len(p.Mean))
	}
	var se, nll float64
	var in int
	for i, yi := range y {
		r := yi - p.Mean[i]
		v := p.NoisyVar[i]
		se += r * r
		nll += 0.5*math.Log(2*math.Pi*v) + r*r/(2*v)
		if math.Abs(r) <= Z95*math.Sqrt(v) {
			in++
		}
	}
	n := float64(len(y))
	return Metrics{N: len(y), RMSE: math.Sqrt(se / n), NLL: nll / n, Coverage95: float64(in) / n}, nil
}
