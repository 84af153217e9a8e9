package features

import "fmt"

// DefaultMaxVOFFeatures is the feature limit of a VOF layout when VOFLayout.MaxFeatures is 0:
// the coordinator holds dense M x M matrices (the covariance factor and the data statistics),
// 4096^2 float64 values are 128 MiB each.
const DefaultMaxVOFFeatures = 4096

// VOFLayout describes how 1-D orthogonal bases of M1 functions each are combined into the
// features of a d-dimensional VOF model. Burt, Rasmussen and van der Wilk, "Variational
// Orthogonal Features" (2020), give no D > 1 construction (Section 4.3, "Scaling in dimension
// and additive models", points to additive structure in the prior, as in VFF):
//
//   - Tensor (Additive false): psi_j(w) = prod_k psi_{j_k}(w_k), orthonormal in L^2(R^d),
//     M = M1^d features; the multi-index j_1..j_d is stored with j_1 varying slowest.
//   - Additive (Additive true): one 1-D VOF model per input, for the additive kernel
//     sum_k k_k(x_k, x'_k); features of different components are independent under the prior,
//     so Kuu = I still holds; M = d M1, component k holding features k M1 .. (k+1) M1 - 1.
type VOFLayout struct {
	Dim         int
	M1          int
	Additive    bool
	MaxFeatures int
}

// NumFeatures returns M, or an error naming what to change when the layout is invalid or M
// exceeds the budget.
func (l VOFLayout) NumFeatures() (int, error) {
	if l.Dim < 1 {
		return 0, fmt.Errorf("VOF layout: input dimension %d must be at least 1", l.Dim)
	}
	if l.M1 < 1 {
		return 0, fmt.Errorf("VOF layout: %d features per dimension: use at least 1", l.M1)
	}
	maxF := l.MaxFeatures
	if maxF <= 0 {
		maxF = DefaultMaxVOFFeatures
	}
	if l.Additive || l.Dim == 1 {
		m := l.Dim * l.M1
		if m > maxF {
			return 0, fmt.Errorf("VOF layout: %d inputs x %d features = %d features exceeds the budget of %d: lower the features per dimension", l.Dim, l.M1, m, maxF)
		}
		return m, nil
	}
	m := 1
	for k := 0; k < l.Dim; k++ {
		m *= l.M1
		if m > maxF {
			return 0, fmt.Errorf("VOF layout: a tensor product of %d features in each of %d inputs needs %d^%d features, over the budget of %d: lower the features per dimension or use the additive layout", l.M1, l.Dim, l.M1, l.Dim, maxF)
		}
	}
	return m, nil
}

// Multi writes the per-dimension indices of tensor feature j into dst (length Dim); for an
// additive layout it returns the component k and writes j - k M1 into dst[0].
func (l VOFLayout) Multi(j int, dst []int) (component int) {
	if l.Additive {
		dst[0] = j % l.M1
		return j / l.M1
	}
	for k := l.Dim - 1; k >= 0; k-- {
		dst[k] = j % l.M1
		j /= l.M1
	}
	return 0
}

// Parity returns 0 when feature j is even (its feature uses cos(w.x)) and 1 when odd (sin(w.x)):
// the parity of the sum of its 1-D indices, by Section 2.3's real-valuedness rule applied to the
// product of even and odd factors.
func (l VOFLayout) Parity(j int) int {
	if l.Additive {
		return (j % l.M1) & 1
	}
	p := 0
	for k := 0; k < l.Dim; k++ {
		p += j % l.M1
		j /= l.M1
	}
	return p & 1
}
