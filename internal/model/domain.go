package model

import (
	"fmt"
	"math"
)

// Domain is the box of standardized inputs, Lo_k <= (x_k - XMean_k) / XScale_k <= Hi_k for
// every k, in which a model's approximation is accurate. A Gauss-Legendre model's features
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

// domainOriginal returns the domain box in the original units of the inputs.
func (m *Model) domainOriginal() (lo, hi []float64) {
	lo, hi = make([]float64, m.D), make([]float64, m.D)
	for k := range lo {
		lo[k] = m.Domain.Lo[k]*m.Transform.XScale[k] + m.Transform.XMean[k]
		hi[k] = m.Domain.Hi[k]*m.Transform.XScale[k] + m.Transform.XMean[k]
	}
	return lo, hi
}

// DomainString describes the model's domain in the original input units, e.g.
// "year in [1950.2, 2010.7]"; it is empty for a model without a domain.
func (m *Model) DomainString() string {
	if m.Domain == nil {
		return ""
	}
	lo, hi := m.domainOriginal()
	out := ""
	for k := range lo {
		if k > 0 {
			out += ", "
		}
		name := fmt.Sprintf("x%d", k)
		if k < len(m.Columns) && m.Columns[k] != "" {
			name = m.Columns[k]
		}
		out += fmt.Sprintf("%s in [%.6g, %.6g]", name, lo[k], hi[k])
	}
	return out
}

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

func validateDomain(m *Model) error {
	if d := m.Domain; d != nil {
		if len(d.Lo) != m.D || len(d.Hi) != m.D {
			return fmt.Errorf("domain box of %d and %d bounds for d=%d", len(d.Lo), len(d.Hi), m.D)
		}
		for k := range d.Lo {
			if math.IsNaN(d.Lo[k]) || math.IsNaN(d.Hi[k]) || d.Lo[k] > d.Hi[k] {
				return fmt.Errorf("domain box: dimension %d has bounds %v, %v", k, d.Lo[k], d.Hi[k])
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
