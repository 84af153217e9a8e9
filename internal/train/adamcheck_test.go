package train

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gpreduce/gpreduce/internal/optimizer"
)

// TestAdamReason: a trace that has settled (flat, with or without estimator noise) is not
// flagged; one still falling faster than its noise and settleTol is; short runs are not
// judged.
func TestAdamReason(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	trace := func(steps int, f func(i int) float64) []float64 {
		out := make([]float64, steps)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	const n = 1000
	for _, c := range []struct {
		name  string
		trace []float64
		want  string
	}{
		{"flat", trace(100, func(int) float64 { return -500 }), ""},
		{"settled with noise", trace(100, func(i int) float64 { return -500 + 500*math.Exp(-float64(i)/5) + 3*rng.NormFloat64() }), ""},
		{"still falling", trace(100, func(i int) float64 { return -5 * float64(i) }), optimizer.ReasonMaxIter},
		{"still falling under noise", trace(100, func(i int) float64 { return -0.5*float64(i) + rng.NormFloat64() }), optimizer.ReasonMaxIter},
		{"falls less than its noise", trace(100, func(i int) float64 { return -0.01*float64(i) + 20*rng.NormFloat64() }), ""},
		{"falls less than settleTol", trace(100, func(i int) float64 { return -0.01 * float64(i) }), ""},
		{"too short", trace(20, func(i int) float64 { return -5 * float64(i) }), ""},
	} {
		if got := adamReason(c.trace, n); got != c.want {
			t.Errorf("%s: adamReason = %q, want %q", c.name, got, c.want)
		}
	}
}
