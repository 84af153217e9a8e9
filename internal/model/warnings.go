package model

import (
	"fmt"
	"slices"
	"strings"
)

// Warning codes. A Warning says that a model is outside what it can represent, so that a
// user is never handed a confidently wrong answer without being told. The codes are stable:
// they appear in the JSON output and the job status, and scripts may match on them.
const (
	// WarnBound: a learned hyperparameter ended on (within a relative 1e-3 in log space of)
	// a bound of its search box, so the optimum may lie outside the box.
	WarnBound = "hyperparameter_on_bound"
	// WarnNotConverged: the optimizer stopped at its iteration limit without meeting its
	// convergence test, or a solver stopped before its tolerance.
	WarnNotConverged = "not_converged"
	// WarnAllNoise: the fit explains the target as noise (noise variance near the target
	// variance, signal near zero), the degenerate optimum of the marginal likelihood.
	WarnAllNoise = "all_noise"
	// WarnOutsideDomain: inputs to be predicted lie outside the box in which the model's
	// approximation is accurate; such rows are flagged and predicted by the prior.
	WarnOutsideDomain = "outside_domain"
	// WarnSizing: the method's automatic sizing changed a setting the user gave or a default
	// (for example it raised the lower lengthscale bound to fit the feature budget).
	WarnSizing = "sizing"
	// WarnEstimate: a reported quantity is a stochastic estimate or is not comparable with
	// other methods' values of the same name.
	WarnEstimate = "estimate"
	// WarnApproximation: the method's approximation of the kernel leaves out more prior
	// variance per training row than the noise variance (tr(K - K~)/n > sigma_n^2, the
	// trace term of Titsias's 2009 bound, over half a nat per row), so the predictions are
	// limited by the approximation's size rather than by the data.
	WarnApproximation = "approximation"
	// WarnCalibration: the leave-one-out check on the training rows finds the predictive
	// intervals too narrow or too wide: the mean square of the standardized leave-one-out
	// residuals is far from the 1 of a model that fits the data (the kernel or the Gaussian
	// noise model is misspecified; Bachoc 2013). exact, cg, gl, rff and grief (type2,
	// type2-weights) make the check on their own posteriors; kmcg up to exact-max-rows on the
	// exact GP at its hyperparameters.
	WarnCalibration = "calibration"
	// WarnExtrapolation: rows to be predicted lie beyond the training inputs' range by more
	// than ExtrapolationLengthscales lengthscales (the scaled distance to the box), where the prediction returns
	// towards the prior mean; a trend or other signal the kernel does not model is missed
	// there, and the intervals may not cover it. The rows are flagged, not changed.
	WarnExtrapolation = "extrapolation"
)

// Warning is one condition a user should know about a trained model or a prediction.
type Warning struct {
	// Code is one of the Warn* constants.
	Code string
	// Message says what happened, in the units of the data, and what to change.
	Message string
}

// String formats the warning as "code: message".
func (w Warning) String() string { return w.Code + ": " + w.Message }

// Warn appends a warning to the model, unless an identical one is already recorded.
func (m *Model) Warn(code, format string, args ...any) {
	w := Warning{Code: code, Message: fmt.Sprintf(format, args...)}
	if slices.Contains(m.Warnings, w) {
		return
	}
	m.Warnings = append(m.Warnings, w)
}

// HasWarning reports whether the model carries a warning with the given code.
func (m *Model) HasWarning(code string) bool {
	return slices.ContainsFunc(m.Warnings, func(w Warning) bool { return w.Code == code })
}

// validateWarnings checks that every recorded warning has a code and a message without
// control characters, so the encoded form stays printable.
func validateWarnings(ws []Warning) error {
	for i, w := range ws {
		if w.Code == "" || w.Message == "" {
			return fmt.Errorf("warning %d: empty code or message", i)
		}
		if strings.ContainsFunc(w.Code+w.Message, func(r rune) bool { return r < 0x20 && r != '\t' }) {
			return fmt.Errorf("warning %d: control character", i)
		}
	}
	return nil
}
