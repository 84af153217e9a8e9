package features

import "math"

// TrigVOFBasis1D evaluates the M = 2K+1 orthonormal Fourier functions of L^2([-a, a]) at the
// scaled frequency xi = w / a in [-1, 1], without the a^(-1/2) factor:
//
//	psi_j(w) = a^(-1/2) dst[j],  dst[0] = 1/sqrt(2),
//	dst[2k-1] = sin(pi k xi),  dst[2k] = cos(pi k xi),  k = 1..K.
//
// These are the TrigVOF functions of Burt, Rasmussen and van der Wilk, "Variational Orthogonal
// Features", Section 3.1.2, with the standard Fourier basis: the basis printed there,
// cos(pi m w/(2a)) and sin((m-1) pi w/(2a)), is not orthogonal. Index parity equals function
// parity (even j: even function, feature uses cos(w x); odd j: odd function, feature uses
// sin(w x); Section 2.3's real-valuedness rule). len(dst) must be odd.
func TrigVOFBasis1D(xi float64, dst []float64) {
	if len(dst) == 0 {
		return
	}
	dst[0] = 1 / math.Sqrt2
	K := (len(dst) - 1) / 2
	if K == 0 {
		return
	}
	// Angle addition keeps the cost at one sin and cos; the recursion's rounding stays
	// near 1e-16 K, far below what the estimators resolve.
	s1, c1 := math.Sincos(math.Pi * xi)
	s, c := s1, c1
	for k := 1; k <= K; k++ {
		dst[2*k-1] = s
		dst[2*k] = c
		s, c = s*c1+c*s1, c*c1-s*s1
	}
}
