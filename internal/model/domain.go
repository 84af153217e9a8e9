package model

import (
	"fmt"
	"math"
)

// Domain is a box of standardized inputs, Lo_k <= (x_k - XMean_k) / XScale_k <= Hi_k for
// every k: a model's Domain, in which its approximation is accurate (below), or its
// TrainBox, the training inputs' extremes, beyond which Predict only flags rows.
//
// A model's Domain is where its approximation is accurate. A Gauss-Legendre model's features
// reproduce the kernel only for input lags up to the width its grid was sized for (with s_k
// nodes over the box of half-width U_k the features alias beyond lags of about 2 s_k / U_k and
// the approximate kernel repeats itself), so its domain is the set of points within that lag
// of every training input. Predict flags rows outside the domain and returns the prior there.
type Domain struct {
	Lo, Hi []float64
}

// Contains reports whether the standardized row xs lies in the box.
func (d *Domain) Contains(xs []float64) bool {
	for k, v := range xs {
		if !(v >= d.Lo[k] && v <= d.Hi[k]) {
			return false
		}
	}
	return true
}

// boxString describes the standardized box b in the original input units, e.g.
// "year in [1950.2, 2010.7]"; it is empty for a nil box.
func (m *Model) boxString(b *Domain) string {
	if b == nil {
		return ""
	}
	out := ""
	for k := range b.Lo {
		if k > 0 {
			out += ", "
		}
		lo := b.Lo[k]*m.Transform.XScale[k] + m.Transform.XMean[k]
		hi := b.Hi[k]*m.Transform.XScale[k] + m.Transform.XMean[k]
		out += fmt.Sprintf("%s in [%.6g, %.6g]", m.ColumnName(k), lo, hi)
	}
	return out
}

// DomainString describes the model's domain in the original input units, e.g.
// "year in [1950.2, 2010.7]"; it is empty for a model without a domain.
func (m *Model) DomainString() string { return m.boxString(m.Domain) }

// TrainBoxString describes the training inputs' box in their original units, e.g.
// "year in [1958.2, 1997.7]"; it is empty for a model that does not record it.
func (m *Model) TrainBoxString() string { return m.boxString(m.TrainBox) }

// Sizing records how a method's automatic sizing bounded the hyperparameters it could
// learn: the lengthscale bounds per dimension (standardized units) the optimizer used, which
// differ from the requested ones when the feature budget forced a narrower window. The
// model's WarnSizing warning says what was changed and why.
type Sizing struct {
	LengthscaleMin, LengthscaleMax []float64
}

// MethodChoice records the method chosen for --method auto and why.
type MethodChoice struct {
	Requested string // "auto"
	Reason    string
}

// ExtrapolationLengthscales is how far beyond the training inputs' box a row must lie, in
// lengthscales, for Predict to flag it as an extrapolation. The distance is the scaled
// Euclidean distance to the box, sqrt(sum_k (dist(x_k, [Lo_k, Hi_k]) / l_k)^2), which bounds
// the scaled distance to every training row from below: one lengthscale out, a stationary
// kernel's correlation with every training row is at most k(1) (0.61 for the squared
// exponential, 0.52 for Matern 5/2, 0.48 for Matern 3/2, 0.37 for Matern 1/2; Rasmussen and
// Williams 2006, eq. 4.9 and 4.14-4.17), and it falls from there to zero, so the prediction
// returns towards the prior mean: the model does not follow a trend or any signal its kernel
// does not represent beyond the data. For an additive kernel (vof's additive layout) the
// argument holds per input, so the distance is the largest per-input one, and only that
// input's component returns to its prior.
const ExtrapolationLengthscales = 1.0

// additive reports whether the model's kernel is a sum of one-input kernels.
func (m *Model) additive() bool {
	a, ok := m.Posterior.(interface{ AdditiveKernel() bool })
	return ok && a.AdditiveKernel()
}

// beyondTrainBox returns how far the standardized row xs lies beyond the training box, in
// lengthscales (ExtrapolationLengthscales: the scaled Euclidean distance, or for an additive
// kernel the largest per-input distance; 0 inside, +Inf for a NaN input), and the input
// with the largest per-input distance (-1 inside the box).
func (m *Model) beyondTrainBox(xs []float64, additive bool) (float64, int) {
	sum, worst, at := 0.0, 0.0, -1
	for k, v := range xs {
		var out float64
		switch {
		case math.IsNaN(v):
			out = math.Inf(1)
		case v < m.TrainBox.Lo[k]:
			out = m.TrainBox.Lo[k] - v
		case v > m.TrainBox.Hi[k]:
			out = v - m.TrainBox.Hi[k]
		}
		r := out / m.Hyper.Lengthscales[k]
		if r > worst {
			worst, at = r, k
		}
		sum += r * r
	}
	if additive {
		return worst, at
	}
	return math.Sqrt(sum), at
}

// ColumnName returns the name of input k: its column name, else "x<k>".
func (m *Model) ColumnName(k int) string {
	if k < len(m.Columns) && m.Columns[k] != "" {
		return m.Columns[k]
	}
	return fmt.Sprintf("x%d", k)
}

func validateBox(what string, b *Domain, d int) error {
	if len(b.Lo) != d || len(b.Hi) != d {
		return fmt.Errorf("%s of %d and %d bounds for d=%d", what, len(b.Lo), len(b.Hi), d)
	}
	for k := range b.Lo {
		if math.IsNaN(b.Lo[k]) || math.IsNaN(b.Hi[k]) || b.Lo[k] > b.Hi[k] {
			return fmt.Errorf("%s: dimension %d has bounds %v, %v", what, k, b.Lo[k], b.Hi[k])
		}
	}
	return nil
}

func validateDomain(m *Model) error {
	if d := m.Domain; d != nil {
		if err := validateBox("domain box", d, m.D); err != nil {
			return err
		}
	}
	if b := m.TrainBox; b != nil {
		if err := validateBox("training box", b, m.D); err != nil {
			return err
		}
		for k := range b.Lo {
			if math.IsInf(b.Lo[k], 0) || math.IsInf(b.Hi[k], 0) {
				return fmt.Errorf("training box: dimension %d has bounds %v, %v; want finite ones", k, b.Lo[k], b.Hi[k])
			}
		}
	}
	if s := m.Sizing; s != nil {
		if len(s.LengthscaleMin) != m.D || len(s.LengthscaleMax) != m.D {
			return fmt.Errorf("sizing record of %d and %d lengthscale bounds for d=%d", len(s.LengthscaleMin), len(s.LengthscaleMax), m.D)
		}
		for k := range s.LengthscaleMin {
			if !(s.LengthscaleMin[k] > 0) || !(s.LengthscaleMin[k] <= s.LengthscaleMax[k]) || math.IsInf(s.LengthscaleMax[k], 0) {
				return fmt.Errorf("sizing record: dimension %d has lengthscale bounds %v, %v", k, s.LengthscaleMin[k], s.LengthscaleMax[k])
			}
		}
	}
	if c := m.Choice; c != nil && (c.Requested == "" || c.Reason == "") {
		return fmt.Errorf("method choice without the requested method or the reason")
	}
	return nil
}
