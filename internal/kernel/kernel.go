package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// Family names a stationary kernel shape k0(r) of the scaled distance
// r = ||L^-1 (x - x')||_2, L = diag(lengthscales).
type Family int

const (
	// RBF is the squared exponential k0(r) = exp(-r^2/2).
	RBF Family = iota
	// Matern12 is the Matern kernel with nu = 1/2: k0(r) = exp(-r).
	Matern12
	// Matern32 is the Matern kernel with nu = 3/2: k0(r) = (1 + sqrt3 r) exp(-sqrt3 r).
	Matern32
	// Matern52 is the Matern kernel with nu = 5/2: k0(r) = (1 + sqrt5 r + 5 r^2/3) exp(-sqrt5 r).
	Matern52
)

var familyNames = [...]string{RBF: "rbf", Matern12: "matern12", Matern32: "matern32", Matern52: "matern52"}

// String returns the name used on the command line and in job specs.
func (f Family) String() string {
	if f < 0 || int(f) >= len(familyNames) {
		return fmt.Sprintf("Family(%d)", int(f))
	}
	return familyNames[f]
}

// FamilyNames returns the kernel names ParseFamily accepts, in the order of the Family
// constants.
func FamilyNames() []string { return append([]string(nil), familyNames[:]...) }

// ParseFamily reads a kernel name: rbf, matern12, matern32 or matern52.
func ParseFamily(s string) (Family, error) {
	for i, n := range familyNames {
		if strings.EqualFold(s, n) {
			return Family(i), nil
		}
	}
	return 0, fmt.Errorf("unknown kernel %q: use one of rbf, matern12, matern32, matern52", s)
}

// Nu is the Matern smoothness nu; +Inf for RBF.
func (f Family) Nu() float64 {
	switch f {
	case Matern12:
		return 0.5
	case Matern32:
		return 1.5
	case Matern52:
		return 2.5
	}
	return math.Inf(1)
}

// shape returns k0(r) and q(r) = -k0'(r)/r for the scaled distance r >= 0, with r2 = r^2.
// q is what the lengthscale gradient needs: dk0/dlog l_k = q(r) * delta_k^2 / l_k^2.
// For Matern 1/2, q is singular at r = 0 but the gradient tends to 0 there; shape returns
// q = 0 at r = 0 so the product is the limit.
func (f Family) shape(r2 float64) (k0, q float64) {
	switch f {
	case RBF:
		k0 = math.Exp(-r2 / 2)
		return k0, k0
	case Matern12:
		r := math.Sqrt(r2)
		k0 = math.Exp(-r)
		if r == 0 {
			return k0, 0
		}
		return k0, k0 / r
	case Matern32:
		a := math.Sqrt(3) * math.Sqrt(r2)
		e := math.Exp(-a)
		return (1 + a) * e, 3 * e
	case Matern52:
		a := math.Sqrt(5) * math.Sqrt(r2)
		e := math.Exp(-a)
		return (1 + a + a*a/3) * e, 5.0 / 3.0 * (1 + a) * e
	}
	panic("kernel: invalid family") // unreachable for values made by ParseFamily or the constants
}

// Profile returns the unit-variance kernel shape k0 at squared scaled distance r2 = r^2, so
// that k(x, y) = SignalVariance * Profile(||L^-1 (x - y)||^2).
func (f Family) Profile(r2 float64) float64 {
	k0, _ := f.shape(r2)
	return k0
}

// ProfileGrad returns k0(r) and q(r) = -k0'(r)/r at r2 = r^2: with t = L^-1 (x - y),
// dk/dlog l_j = SignalVariance * q * t_j^2 (q = 0 at r = 0 for Matern 1/2, the limit of the
// product).
func (f Family) ProfileGrad(r2 float64) (k0, q float64) { return f.shape(r2) }

// Kernel is a stationary ARD kernel k(x, x') = SignalVariance * k0(||L^-1 (x - x')||).
// Lengthscales are in the units of the inputs; SignalVariance in squared units of the target.
type Kernel struct {
	Family         Family
	Lengthscales   []float64
	SignalVariance float64
}

// Dim is the input dimension d.
func (k Kernel) Dim() int { return len(k.Lengthscales) }

// NumParams is the number of kernel log-hyperparameters, d + 1: the log lengthscales then
// the log signal variance.
func (k Kernel) NumParams() int { return len(k.Lengthscales) + 1 }

// Validate reports a kernel whose lengthscales or signal variance are not positive and finite.
func (k Kernel) Validate() error {
	if len(k.Lengthscales) == 0 {
		return fmt.Errorf("kernel has no lengthscales")
	}
	for i, l := range k.Lengthscales {
		if !(l > 0) || math.IsInf(l, 0) {
			return fmt.Errorf("lengthscale %d is %v: it must be positive and finite", i, l)
		}
	}
	if !(k.SignalVariance > 0) || math.IsInf(k.SignalVariance, 0) {
		return fmt.Errorf("signal variance is %v: it must be positive and finite", k.SignalVariance)
	}
	return nil
}

func (k Kernel) scaledDist2(x, y []float64) float64 {
	var r2 float64
	for i, l := range k.Lengthscales {
		t := (x[i] - y[i]) / l
		r2 += t * t
	}
	return r2
}

// Eval returns k(x, y).
func (k Kernel) Eval(x, y []float64) float64 {
	k0, _ := k.Family.shape(k.scaledDist2(x, y))
	return k.SignalVariance * k0
}

// EvalGrad returns k(x, y) and writes its gradient with respect to the log-hyperparameters
// into grad (length d + 1): grad[i] = dk/dlog l_i for i < d, grad[d] = dk/dlog sigma_f^2 = k.
func (k Kernel) EvalGrad(x, y, grad []float64) float64 {
	k0, q := k.Family.shape(k.scaledDist2(x, y))
	sf2 := k.SignalVariance
	for i, l := range k.Lengthscales {
		t := (x[i] - y[i]) / l
		grad[i] = sf2 * q * t * t
	}
	grad[len(k.Lengthscales)] = sf2 * k0
	return sf2 * k0
}

// LogSpectralDensity returns log p(eta) for the normalised spectral density of the kernel
// shape with lengthscales ls, in the angular convention k0(tau) = Int exp(-i tau^T eta) p(eta) d eta
// (so Int p = 1 and k(x,x) = sigma_f^2). If dlogl is not nil it receives
// d log p / d log l_k (length d). The densities are those of Fink Shustin & Avron 2022, Table 2;
// the derivatives in log l_k are derived here by differentiating them:
//
//	RBF:    p = (2 pi)^(-d/2) prod l_k exp(-||L eta||^2 / 2),              dlog p/dlog l_k = 1 - l_k^2 eta_k^2
//	Matern: p = Gamma(nu+d/2) prod l_k / (Gamma(nu) (2 pi nu)^(d/2)) (1 + ||L eta||^2/(2nu))^-(nu+d/2),
//	        dlog p/dlog l_k = 1 - (2 nu + d) (l_k^2 eta_k^2 / (2 nu)) / (1 + ||L eta||^2 / (2 nu))
func LogSpectralDensity(f Family, ls, eta, dlogl []float64) float64 {
	d := float64(len(ls))
	var sumLogL, q float64
	for i, l := range ls {
		sumLogL += math.Log(l)
		t := l * eta[i]
		q += t * t
	}
	if f == RBF {
		if dlogl != nil {
			for i, l := range ls {
				t := l * eta[i]
				dlogl[i] = 1 - t*t
			}
		}
		return -d/2*math.Log(2*math.Pi) + sumLogL - q/2
	}
	nu := f.Nu()
	lgA, _ := math.Lgamma(nu + d/2)
	lgB, _ := math.Lgamma(nu)
	base := 1 + q/(2*nu)
	if dlogl != nil {
		for i, l := range ls {
			t := l * eta[i]
			dlogl[i] = 1 - (2*nu+d)*(t*t/(2*nu))/base
		}
	}
	return lgA - lgB - d/2*math.Log(2*math.Pi*nu) + sumLogL - (nu+d/2)*math.Log1p(q/(2*nu))
}

// SampleSpectral draws one frequency eta from the spectral density with unit lengthscales,
// writing it into dst (length d). For lengthscales L the frequency is L^-1 eta.
// RBF: eta ~ N(0, I). Matern nu: eta is multivariate Student t with 2 nu degrees of freedom,
// eta = z / sqrt(u / (2 nu)), z ~ N(0, I), u ~ chi^2 with 2 nu degrees of freedom.
func SampleSpectral(f Family, rng *rand.Rand, dst []float64) {
	for i := range dst {
		dst[i] = rng.NormFloat64()
	}
	if f == RBF {
		return
	}
	df := 2 * f.Nu()
	// chi^2 with integer df (1, 3 or 5): a sum of squared normals.
	var u float64
	for j := 0; j < int(df); j++ {
		z := rng.NormFloat64()
		u += z * z
	}
	s := 1 / math.Sqrt(u/df)
	for i := range dst {
		dst[i] *= s
	}
}
