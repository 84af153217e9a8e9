package train

import (
	"context"
	"fmt"
	"math"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/model"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/tasks"
)

// looMinRows is the fewest training rows for which the leave-one-out check is made.
const looMinRows = 20

// looMaxRows is about the most training rows the map-round check predicts (checkLOO): each
// standardized residual depends on its row alone, and at 50,000 rows the mean square's
// standard error, about sqrt(2/50000) = 0.006, is far inside the band of looBand.
const looMaxRows = 50000

// looBand is the half-width of the band around 1 in which the mean square of n standardized
// leave-one-out residuals of a model that fits the data lies: each is N(0, 1), so their mean
// square has standard deviation about sqrt(2/n); the band is 4 of those, and at least 0.25.
// On the shared UCI sets with the exact method (split 0) the mean squares are 0.98-1.19,
// on yacht's ten splits 1.35-2.00 (test coverage95 0.74-1.00).
func looBand(n int) float64 { return max(0.25, 4*math.Sqrt(2/float64(n))) }

// warnLOO adds a WarnCalibration warning to m when the leave-one-out residuals resid and
// variances variance of the training rows (noise included; solver.Exact.LOO) are not
// calibrated (warnCalibration); of names the model checked when it is not m's own posterior
// ("" for m's).
func warnLOO(m *model.Model, resid, variance []float64, of string) {
	n := len(resid)
	if n < looMinRows {
		return
	}
	var ms float64
	for i, r := range resid {
		ms += r * r / variance[i]
	}
	// The share inside the 95% intervals, as the test metric counts it (model.Score).
	sc, err := model.Score(model.Prediction{Mean: make([]float64, n), NoisyVar: variance}, resid)
	if err != nil {
		return
	}
	warnCalibration(m, n, ms/float64(n), ms/float64(n), sc.Coverage95, of)
}

// checkLOO runs the leave-one-out check of a model whose posterior is the exact GP posterior
// of its finite-rank kernel (gl, rff, grief type2 and type2-weights; gap 0) or the exact GP's
// posterior with latent variances at most a relative gap above the exact ones (cg's mean
// solved to its tolerance and its variance cache) as one map round over the training rows
// (tasks.LOOTask: z_i = r_i / sqrt(s2 - v_i) from one prediction per row, and the bracket that
// gap gives) and adds the WarnCalibration warning of warnCalibration. The model file goes to
// the workers once per shard task; the pass predicts every stride-th row of each shard,
// stride = ceil(n / looMaxRows), so it costs at most about looMaxRows predictions.
func (r *run) checkLOO(ctx context.Context, eng engine.Engine, m *model.Model, gap float64) error {
	if m.NTrain < looMinRows {
		return nil
	}
	stride := (m.NTrain + looMaxRows - 1) / looMaxRows
	rows := fmt.Sprintf("the %d training rows", m.NTrain)
	if stride > 1 {
		rows = fmt.Sprintf("every %d-th of %s", stride, rows)
	}
	r.obs(Event{Phase: "loo", Message: "leave-one-out check on " + rows})
	// The workers need the posterior, not the training box (a flag of Predict's): leaving it
	// out keeps the shipped model readable by workers built before the box was recorded.
	shipped := *m
	shipped.TrainBox = nil
	b, err := shipped.Bytes()
	if err != nil {
		return fmt.Errorf("leave-one-out pass: %w", err)
	}
	st, err := eng.Reduce(ctx, &tasks.LOOTask{Model: &shipped, Encoded: b, Stride: stride, VarianceGap: gap})
	if err != nil {
		return fmt.Errorf("leave-one-out pass: %w", err)
	}
	sum, ok := st.(*reduce.Sum)
	if !ok || len(sum.Parts) != 1 || len(sum.Parts[0]) != 4 || !(sum.Parts[0][2] >= 1) {
		return fmt.Errorf("leave-one-out pass returned %T, not one part of four sums", st)
	}
	n := sum.Parts[0][2]
	lo, hi, cov := sum.Parts[0][3]/n, sum.Parts[0][0]/n, sum.Parts[0][1]/n
	r.obs(Event{Phase: "loo", Message: fmt.Sprintf("standardized leave-one-out residuals: %s (1 +- %.2g for a model that fits), %.1f%% inside their 95%% intervals", meanSquareText(lo, hi, 4), looBand(int(n)), 100*cov)})
	warnCalibration(m, int(n), lo, hi, cov, "")
	return nil
}

// warnCalibration adds a WarnCalibration warning to m (of: as in warnLOO) when the mean square of the n
// standardized leave-one-out residuals z_i = (y_i - mu_-i) / sigma_-i of the training rows,
// known to lie in [msLo, msHi] (equal for an exact posterior), is outside 1 +- looBand(n)
// wherever it lies in that range; coverage is the share of |z_i| <= 1.96.
// Maximum likelihood sets the hyperparameters, leave-one-out checks them on the rows the
// likelihood was fitted to; when the model is misspecified the two disagree (Bachoc 2013,
// "Cross validation and maximum likelihood estimations of hyper-parameters of Gaussian
// processes with model misspecification"), and the test intervals are off by about the
// square root of the mean square (yacht: 1.2-1.4x too narrow).
func warnCalibration(m *model.Model, n int, msLo, msHi, coverage float64, of string) {
	if n < looMinRows {
		return
	}
	band := looBand(n)
	side, ms := "", msHi
	switch {
	case msLo > 1+band:
		side, ms = "too narrow", msLo
	case msHi < 1-band:
		side = "too wide"
	default:
		return
	}
	what := meanSquareText(msLo, msHi, 3)
	if msLo != msHi {
		what += " (the cached variances' tolerance)"
	}
	m.Warn(model.WarnCalibration, "leave-one-out check%s on the %d training rows: the standardized residuals (y_i - mu_-i) / sigma_-i have %s where a model that fits gives 1 +- %.2g, and %.1f%% lie in their 95%% intervals: the predictive intervals are likely %s (by about %.2gx in standard deviation); the kernel or the Gaussian noise does not fit these data (a non-stationary signal, heavy-tailed or input-dependent noise; a transformed target, e.g. its log, may fit better)",
		of, n, what, band, 100*coverage, side, sdFactor(ms))
}

// meanSquareText is "mean square X" for a known mean square, or "mean square between lo and
// hi" for a bracket, to digits significant digits.
func meanSquareText(lo, hi float64, digits int) string {
	if lo == hi {
		return fmt.Sprintf("mean square %.*g", digits, hi)
	}
	return fmt.Sprintf("mean square between %.*g and %.*g", digits, lo, digits, hi)
}

// sdFactor is the factor by which standard deviations are off for a mean square ms: sqrt(ms)
// when they are too narrow, 1/sqrt(ms) when too wide.
func sdFactor(ms float64) float64 {
	if ms >= 1 {
		return math.Sqrt(ms)
	}
	return 1 / math.Sqrt(ms)
}
