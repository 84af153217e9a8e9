package vof

import (
	"fmt"
	"math"

	"github.com/gpreduce/gpreduce/internal/features"
	"github.com/gpreduce/gpreduce/internal/kernel"
)

// Basis selects the orthogonal family of a VOF model.
type Basis int

const (
	// Hermite is the closed-form Hermite VOF of the SE kernel (Section 3.1.1); feature
	// parameter sigma_in per input.
	Hermite Basis = iota
	// Trig is TrigVOF (Section 3.1.2), the Fourier basis on [-a, a]; feature parameter a per input.
	Trig
)

// String returns "hermite" or "trig".
func (b Basis) String() string {
	switch b {
	case Hermite:
		return "hermite"
	case Trig:
		return "trig"
	}
	return fmt.Sprintf("Basis(%d)", int(b))
}

// ParseBasis reads "hermite" or "trig".
func ParseBasis(s string) (Basis, error) {
	switch s {
	case "hermite":
		return Hermite, nil
	case "trig":
		return Trig, nil
	}
	return 0, fmt.Errorf("unknown VOF basis %q: use hermite or trig", s)
}

// Model is the static shape of a VOF model: basis, kernel family, input dimension, features
// per dimension, layout and the form of the variational covariance S.
type Model struct {
	Basis  Basis
	Family kernel.Family
	Dim    int
	// M1 is the number of 1-D features per input (odd for Trig: M1 = 2K+1).
	M1 int
	// Additive selects the additive layout (one 1-D VOF per input, kernel sum_k v_k k(x_k, x'_k))
	// instead of the tensor product (kernel v prod_k k(x_k, x'_k) for RBF, the ARD kernel otherwise).
	Additive bool
	// Dense selects a dense S = L L^T (L lower triangular); otherwise S is diagonal.
	Dense bool
	// MaxFeatures bounds M (0: features.DefaultMaxVOFFeatures).
	MaxFeatures int
}

// Layout returns the feature layout.
func (m Model) Layout() features.VOFLayout {
	return features.VOFLayout{Dim: m.Dim, M1: m.M1, Additive: m.Additive, MaxFeatures: m.MaxFeatures}
}

// Validate checks the model shape and returns M.
func (m Model) Validate() (int, error) {
	if m.Basis != Hermite && m.Basis != Trig {
		return 0, fmt.Errorf("VOF basis %v: use hermite or trig", m.Basis)
	}
	if m.Basis == Hermite && m.Family != kernel.RBF {
		return 0, fmt.Errorf("hermite VOF need the rbf kernel, not %v: use --basis trig for the Matern kernels", m.Family)
	}
	if m.Basis == Trig && m.M1%2 != 1 {
		return 0, fmt.Errorf("TrigVOF features per dimension %d: use an odd number 2K+1", m.M1)
	}
	return m.Layout().NumFeatures()
}

// NumVariances is the number of kernel variances: d for the additive layout, 1 otherwise.
func (m Model) NumVariances() int {
	if m.Additive {
		return m.Dim
	}
	return 1
}

// Params holds every learned quantity of a VOF model.
type Params struct {
	// Lengthscales has d entries; Variances has Model.NumVariances() entries.
	Lengthscales []float64
	Variances    []float64
	// Noise is the Gaussian noise variance sigma^2.
	Noise float64
	// Feature holds the feature parameter per input: sigma_in (Hermite) or a (Trig).
	Feature []float64
	// Mean is the variational mean m (M entries).
	Mean []float64
	// Chol is the lower Cholesky factor L of S = L L^T: M x M row-major (only the lower
	// triangle is read) when Model.Dense, else the M diagonal entries sqrt(S_jj).
	Chol []float64
}

// Grad has the shape of Params and holds derivatives of the ELBO: with respect to the logs of
// the positive scalars (Lengthscales, Variances, Noise, Feature) and to the raw entries of
// Mean and Chol (lower triangle; the upper triangle is zero).
type Grad Params

// NewGrad returns a zero gradient for the model with M features.
func (m Model) NewGrad(M int) *Grad {
	g := &Grad{Lengthscales: make([]float64, m.Dim), Variances: make([]float64, m.NumVariances()),
		Feature: make([]float64, m.Dim), Mean: make([]float64, M)}
	if m.Dense {
		g.Chol = make([]float64, M*M)
	} else {
		g.Chol = make([]float64, M)
	}
	return g
}

// Check reports parameters of the wrong shape or outside their domain.
func (m Model) Check(p *Params) (int, error) {
	M, err := m.Validate()
	if err != nil {
		return 0, err
	}
	if len(p.Lengthscales) != m.Dim || len(p.Variances) != m.NumVariances() || len(p.Feature) != m.Dim {
		return 0, fmt.Errorf("VOF parameters: %d lengthscales, %d variances, %d feature parameters for %d inputs (want %d, %d, %d)",
			len(p.Lengthscales), len(p.Variances), len(p.Feature), m.Dim, m.Dim, m.NumVariances(), m.Dim)
	}
	nc := M
	if m.Dense {
		nc = M * M
	}
	if len(p.Mean) != M || len(p.Chol) != nc {
		return 0, fmt.Errorf("VOF parameters: mean has %d and covariance factor %d values for %d features (want %d and %d)", len(p.Mean), len(p.Chol), M, M, nc)
	}
	pos := func(name string, v []float64) error {
		for i, x := range v {
			if !(x > 0) || math.IsInf(x, 0) {
				return fmt.Errorf("VOF parameters: %s %d is %v: it must be positive and finite", name, i, x)
			}
		}
		return nil
	}
	if err := pos("lengthscale", p.Lengthscales); err != nil {
		return 0, err
	}
	if err := pos("kernel variance", p.Variances); err != nil {
		return 0, err
	}
	if err := pos("noise variance", []float64{p.Noise}); err != nil {
		return 0, err
	}
	if err := pos("feature parameter", p.Feature); err != nil {
		return 0, err
	}
	for j := 0; j < M; j++ {
		if d := m.cholDiag(p.Chol, M, j); !(d > 0) || math.IsInf(d, 0) {
			return 0, fmt.Errorf("VOF parameters: covariance factor diagonal %d is %v: it must be positive", j, d)
		}
	}
	return M, nil
}

// priorVariance is k(x, x): v for the tensor layout, sum_k v_k for the additive one.
func priorVariance(p *Params) float64 {
	var v float64
	for _, x := range p.Variances {
		v += x
	}
	return v
}

// InitParams returns a starting point: the given hyperparameters, m = 0 and S = I.
func (m Model) InitParams(lengthscales, variances []float64, noise float64, feature []float64) (*Params, error) {
	M, err := m.Validate()
	if err != nil {
		return nil, err
	}
	p := &Params{Lengthscales: append([]float64(nil), lengthscales...), Variances: append([]float64(nil), variances...),
		Noise: noise, Feature: append([]float64(nil), feature...), Mean: make([]float64, M)}
	if m.Dense {
		p.Chol = make([]float64, M*M)
		for j := 0; j < M; j++ {
			p.Chol[j*M+j] = 1
		}
	} else {
		p.Chol = make([]float64, M)
		for j := range p.Chol {
			p.Chol[j] = 1
		}
	}
	if _, err := m.Check(p); err != nil {
		return nil, err
	}
	return p, nil
}

// NumParams is the length of the flat vector of Pack: d log lengthscales, the log variances,
// the log noise, d log feature parameters, M means, then the covariance factor: M log
// diagonal entries followed (dense) by the M(M-1)/2 strictly lower entries row by row.
func (m Model) NumParams(M int) int {
	n := 2*m.Dim + m.NumVariances() + 1 + 2*M
	if m.Dense {
		n += M * (M - 1) / 2
	}
	return n
}

// Pack writes p into a flat unconstrained vector (layout in NumParams).
func (m Model) Pack(p *Params) []float64 {
	M := len(p.Mean)
	x := make([]float64, 0, m.NumParams(M))
	for _, v := range p.Lengthscales {
		x = append(x, math.Log(v))
	}
	for _, v := range p.Variances {
		x = append(x, math.Log(v))
	}
	x = append(x, math.Log(p.Noise))
	for _, v := range p.Feature {
		x = append(x, math.Log(v))
	}
	x = append(x, p.Mean...)
	for j := 0; j < M; j++ {
		x = append(x, math.Log(m.cholDiag(p.Chol, M, j)))
	}
	if m.Dense {
		for i := 1; i < M; i++ {
			x = append(x, p.Chol[i*M:i*M+i]...)
		}
	}
	return x
}

func (m Model) cholDiag(c []float64, M, j int) float64 {
	if m.Dense {
		return c[j*M+j]
	}
	return c[j]
}

// Unpack reads a flat vector written by Pack into new Params with M features.
func (m Model) Unpack(x []float64, M int) (*Params, error) {
	if len(x) != m.NumParams(M) {
		return nil, fmt.Errorf("VOF parameter vector has %d values, want %d for %d features", len(x), m.NumParams(M), M)
	}
	p := &Params{}
	i := 0
	next := func(n int, exp bool) []float64 {
		v := make([]float64, n)
		for k := range v {
			v[k] = x[i+k]
			if exp {
				v[k] = math.Exp(v[k])
			}
		}
		i += n
		return v
	}
	p.Lengthscales = next(m.Dim, true)
	p.Variances = next(m.NumVariances(), true)
	p.Noise = next(1, true)[0]
	p.Feature = next(m.Dim, true)
	p.Mean = next(M, false)
	diag := next(M, true)
	if m.Dense {
		p.Chol = make([]float64, M*M)
		for j := 0; j < M; j++ {
			p.Chol[j*M+j] = diag[j]
		}
		for r := 1; r < M; r++ {
			copy(p.Chol[r*M:r*M+r], next(r, false))
		}
	} else {
		p.Chol = diag
	}
	return p, nil
}

// PackGrad writes g (a gradient at p) in the layout of Pack: the log-diagonal entries of the
// covariance factor get dF/dL_jj L_jj.
func (m Model) PackGrad(p *Params, g *Grad) []float64 {
	M := len(p.Mean)
	x := make([]float64, 0, m.NumParams(M))
	x = append(x, g.Lengthscales...)
	x = append(x, g.Variances...)
	x = append(x, g.Noise)
	x = append(x, g.Feature...)
	x = append(x, g.Mean...)
	for j := 0; j < M; j++ {
		x = append(x, m.cholDiag(g.Chol, M, j)*m.cholDiag(p.Chol, M, j))
	}
	if m.Dense {
		for i := 1; i < M; i++ {
			x = append(x, g.Chol[i*M:i*M+i]...)
		}
	}
	return x
}
