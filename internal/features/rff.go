package features

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gpreduce/gpreduce/internal/kernel"
)

// rffStream is the second PCG seed word of NewRFF; it only fixes which stream a seed selects.
const rffStream = 0x6770726564756365 // "gpreduce"

// RFF is the random-Fourier-feature map with fixed base frequencies (Rahimi & Recht 2008; the
// baseline of Fink Shustin & Avron 2022, §4.3). The m = s/2 base frequencies omega_r are drawn once from the
// spectral density with unit lengthscales (kernel.SampleSpectral), and the lengthscales rescale them:
// the frequency of pair r is L^-1 omega_r. With
//
//	a_r(x) = sum_k x_k Omega[r,k] / l_k,   z_{2r}(x) = cos a_r(x),   z_{2r+1}(x) = sin a_r(x),
//
// the estimate
//
//	k~(x, x') = sigma_f^2 (2/s) sum_{j<s} z_j(x) z_j(x') = sigma_f^2 (1/m) sum_r cos(a_r(x) - a_r(x'))
//
// is an unbiased Monte Carlo estimate of k(x, x') (Bochner), with standard deviation at most
// sigma_f^2/sqrt(m). Unlike GL features, z depends on the lengthscales.
//
// An RFF is read-only after NewRFF and safe for concurrent use; do not modify its fields.
type RFF struct {
	// Family is the kernel family the frequencies were drawn for.
	Family kernel.Family
	// D is the input dimension d.
	D int
	// Omega holds the m x d base frequencies, row-major, drawn from p(.; unit lengthscales).
	Omega []float64
}

// NewRFF draws s/2 base frequencies for family f in d dimensions from a PCG generator
// (math/rand/v2) seeded with seed, so the same arguments always give the same bits. s must be even
// and at least 2 (and at most MaxGLFeatures), d at least 1.
func NewRFF(f kernel.Family, d, s int, seed uint64) (*RFF, error) {
	if err := checkFamily(f); err != nil {
		return nil, err
	}
	if d < 1 {
		return nil, fmt.Errorf("rff features: input dimension %d: need at least 1", d)
	}
	if s < 2 || s%2 != 0 || s > MaxGLFeatures {
		return nil, fmt.Errorf("rff features: %d features requested: need an even number between 2 and %d (cos/sin pairs)", s, MaxGLFeatures)
	}
	m := s / 2
	if m > math.MaxInt/d {
		return nil, fmt.Errorf("rff features: %d features in %d dimensions is too large", s, d)
	}
	rng := rand.New(rand.NewPCG(seed, rffStream))
	omega := make([]float64, m*d)
	for r := 0; r < m; r++ {
		kernel.SampleSpectral(f, rng, omega[r*d:(r+1)*d])
	}
	return &RFF{Family: f, D: d, Omega: omega}, nil
}

// NumFeatures is the number of real features s = 2m.
func (r *RFF) NumFeatures() int { return 2 * (len(r.Omega) / r.D) }

// LogWeight is log h with h = 2/s, the weight of every feature: k~ = sigma_f^2 h sum_j z_j z_j'.
func (r *RFF) LogWeight() float64 { return math.Log(2 / float64(r.NumFeatures())) }

// scaledInput writes x_k / l_k into buf.
func (r *RFF) scaledInput(ls, x, buf []float64) []float64 {
	if len(ls) != r.D {
		panic(fmt.Sprintf("rff features: %d lengthscales for %d dimensions", len(ls), r.D))
	}
	for k := range buf {
		buf[k] = x[k] / ls[k]
	}
	return buf
}

func (r *RFF) scratch() []float64 {
	return make([]float64, r.D)
}

// Map writes the s features z(x) for lengthscales ls (length d) into dst (length >= s).
func (r *RFF) Map(ls, x, dst []float64) {
	s := r.NumFeatures()
	if len(x) != r.D || len(dst) < s {
		panic(fmt.Sprintf("rff features: Map with len(x) = %d, len(dst) = %d; need %d and >= %d", len(x), len(dst), r.D, s))
	}
	r.mapRow(r.scaledInput(ls, x, r.scratch()), dst)
}

func (r *RFF) mapRow(xs, dst []float64) {
	d := r.D
	m := len(r.Omega) / d
	out := dst[:2*m]
	for q := 0; q < m; q++ {
		om := r.Omega[q*d : (q+1)*d]
		var a float64
		for k, v := range om {
			a += xs[k] * v
		}
		sn, cs := math.Sincos(a)
		out[2*q], out[2*q+1] = cs, sn
	}
}

// MapGrad writes z(x) into dst (length >= s) and its derivatives with respect to the log
// lengthscales into dls (length >= d*s), k-major: dls[k*s+j] = d z_j / d log l_k. With
// b_rk = x_k Omega[r,k] / l_k, d a_r / d log l_k = -b_rk, so
//
//	d z_{2r} / d log l_k = sin(a_r) b_rk,   d z_{2r+1} / d log l_k = -cos(a_r) b_rk.
func (r *RFF) MapGrad(ls, x, dst, dls []float64) {
	d := r.D
	s := r.NumFeatures()
	if len(x) != d || len(dst) < s || len(dls) < d*s {
		panic(fmt.Sprintf("rff features: MapGrad with len(x) = %d, len(dst) = %d, len(dls) = %d; need %d, >= %d, >= %d", len(x), len(dst), len(dls), d, s, d*s))
	}
	xs := r.scaledInput(ls, x, r.scratch())
	m := s / 2
	for q := 0; q < m; q++ {
		om := r.Omega[q*d : (q+1)*d]
		var a float64
		for k, v := range om {
			a += xs[k] * v
		}
		sn, cs := math.Sincos(a)
		dst[2*q], dst[2*q+1] = cs, sn
		for k, v := range om {
			b := xs[k] * v
			dls[k*s+2*q] = sn * b
			dls[k*s+2*q+1] = -cs * b
		}
	}
}

// MapBlock writes the features of rows inputs for lengthscales ls: x is rows x d row-major, dst
// rows x s row-major, dst[i*s+j] = z_j(x_i).
func (r *RFF) MapBlock(ls []float64, x []float64, rows int, dst []float64) {
	d := r.D
	s := r.NumFeatures()
	if rows < 0 || len(x) < rows*d || len(dst) < rows*s {
		panic(fmt.Sprintf("rff features: MapBlock with %d rows, len(x) = %d, len(dst) = %d; need >= %d and >= %d", rows, len(x), len(dst), rows*d, rows*s))
	}
	buf := r.scratch()
	for i := 0; i < rows; i++ {
		r.mapRow(r.scaledInput(ls, x[i*d:(i+1)*d], buf), dst[i*s:(i+1)*s])
	}
}
