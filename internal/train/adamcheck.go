package train

import (
	"math"

	"github.com/gpreduce/gpreduce/internal/optimizer"
)

// settleTol is the fall of the mean objective, in nats per training row, between the last
// two quarters of an Adam run above which the run is taken to be still descending.
const settleTol = 1e-3

// adamReason says whether an Adam run had settled, from trace, the objective (or its
// stochastic estimate, in nats over the n training rows) after each step. Adam runs a fixed
// number of steps, so its state always ends at the iteration limit; this test decides
// whether the limit, or the learning-rate decays of the multistep schedule (at 50%, 70% and
// 90% of the steps), froze a descent. It compares the means of two adjacent windows of an
// eighth of the steps each: those just before the first decay (steps 25-37.5% and
// 37.5-50%), where the run still moves at the full rate, and the last two. When either mean
// fell by more than three standard errors of the difference (from the scatter of the steps
// about each window's mean, which for a stochastic objective is mostly the estimator's
// noise) and by more than settleTol per row, the run was still descending and adamReason
// returns optimizer.ReasonMaxIter, which warnFit reports as not converged; otherwise "".
// Runs of fewer than 24 steps are not judged.
func adamReason(trace []float64, n int) string {
	w := len(trace) / 8
	if w < 3 || n < 1 {
		return ""
	}
	half := len(trace) / 2
	for _, end := range []int{half, len(trace)} {
		prev, last := trace[end-2*w:end-w], trace[end-w:end]
		mp, vp := meanVar(prev)
		ml, vl := meanVar(last)
		fall := mp - ml
		se := math.Sqrt(vp/float64(w) + vl/float64(w))
		if fall > 3*se && fall > settleTol*float64(n) {
			return optimizer.ReasonMaxIter
		}
	}
	return ""
}

// meanVar returns the mean and the sample variance of v (len(v) >= 2).
func meanVar(v []float64) (mean, variance float64) {
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	for _, x := range v {
		variance += (x - mean) * (x - mean)
	}
	return mean, variance / float64(len(v)-1)
}
