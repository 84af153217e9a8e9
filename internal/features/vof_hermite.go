package features

import (
	"fmt"
	"math"
)

// HermiteVOF1D evaluates the 1-D Hermite variational orthogonal features of the unit-variance
// SE kernel exp(-(x-x')^2 / (2 l^2)) at the input x (Burt, Rasmussen and van der Wilk,
// "Variational Orthogonal Features", Section 3.1.1 and Appendix B, eq. 17 with Kuu = I):
//
//	Kuf[m, x] = 2^(1/4) sqrt(l r / B) exp(-x^2 / (2B)) (A/B)^(m/2) h_m(r x / sqrt(A B)),
//	A = r^2 - l^2/2,  B = r^2 + l^2/2,  h_m(z) = H_m(z) / sqrt(2^m m!),
//
// for m = 0..len(kuf)-1. For kernel variance v multiply by sqrt(v). This is the paper's
// main-text cross-covariance with the (2 pi)^(-1/4) scaling of eq. 17 (so that Kuu = I),
// sqrt(v) in the numerator (Appendix B prints it in the denominator) and H_1 = 2x (Appendix B
// prints H_1 = x), rewritten with the normalised recursion
//
//	h_0 = 1,  h_1 = sqrt(2) z,  h_{m+1} = sqrt(2/(m+1)) z h_m - sqrt(m/(m+1)) h_{m-1},
//
// which neither overflows nor loses precision at large m.
//
// The feature parameter is sigmaIn > 0, the standard deviation of the Gaussian input density
// for which these are the eigenfunction features (Section 3.1.1, eq. 19-20; Appendix E.2):
// r^4 = l^2 sigmaIn^2 + l^4/4, so 2 r^2 > l^2 holds for every sigmaIn > 0 and sqrt(A B) = l sigmaIn.
//
// If dLogL and dLogS are not nil (same length as kuf) they receive dKuf/dlog l and
// dKuf/dlog sigmaIn; both use h_m'(z) = sqrt(2m) h_{m-1}(z).
func HermiteVOF1D(l, sigmaIn, x float64, kuf, dLogL, dLogS []float64) {
	M := len(kuf)
	if M == 0 {
		return
	}
	l2, s2 := l*l, sigmaIn*sigmaIn
	q := l2*s2 + l2*l2/4
	r2 := math.Sqrt(q) // r^2
	A := r2 - l2/2
	// A = r^2 - l^2/2 cancels when sigmaIn << l; A B = l^2 sigmaIn^2 gives it without cancellation.
	B := r2 + l2/2
	A = l2 * s2 / B
	rho := math.Sqrt(A / B)
	z := math.Sqrt(r2) * x / (l * sigmaIn)
	base := math.Pow(2, 0.25) * math.Sqrt(l*math.Sqrt(r2)/B) * math.Exp(-x*x/(2*B))
	grad := dLogL != nil && dLogS != nil
	// Derivatives of the logs of r^2, A, B with respect to log l and log sigmaIn.
	// q = l^2 s^2 + l^4/4: dq/dlog l = 2 l^2 s^2 + l^4, dq/dlog s = 2 l^2 s^2.
	var dr2L, dr2S, dBL, dBS, dAL, dAS float64
	if grad {
		dr2L = (2*l2*s2 + l2*l2) / (2 * r2) // d r^2 / dlog l
		dr2S = (2 * l2 * s2) / (2 * r2)     // d r^2 / dlog s
		dBL = (dr2L + l2) / B               // dlog B / dlog l
		dBS = dr2S / B
		// log A = log(l^2 s^2) - log B.
		dAL = 2 - dBL
		dAS = 2 - dBS
	}
	// Common part of dlog Kuf_m: 1/2 dlog l + 1/4 dlog r^2 - 1/2 dlog B + x^2/(2B) dlog B.
	var cL, cS, zL, zS float64
	if grad {
		cL = 0.5 + 0.25*dr2L/r2 - 0.5*dBL + x*x/(2*B)*dBL
		cS = 0.25*dr2S/r2 - 0.5*dBS + x*x/(2*B)*dBS
		// log z = 1/2 log r^2 + log x - log l - log s.
		zL = z * (0.5*dr2L/r2 - 1)
		zS = z * (0.5*dr2S/r2 - 1)
	}
	hPrev, h := 0.0, 1.0
	pw := 1.0 // rho^m
	for m := 0; m < M; m++ {
		if m == 1 {
			hPrev, h = h, math.Sqrt2*z
		} else if m > 1 {
			fm := float64(m - 1)
			hPrev, h = h, math.Sqrt(2/(fm+1))*z*h-math.Sqrt(fm/(fm+1))*hPrev
		}
		b := base * pw
		kuf[m] = b * h
		if grad {
			// dlog rho^m = m/2 (dlog A - dlog B).
			em := float64(m) / 2
			dh := math.Sqrt(2*float64(m)) * hPrev // h_m'(z); hPrev = h_{m-1}
			dLogL[m] = b * (h*(cL+em*(dAL-dBL)) + dh*zL)
			dLogS[m] = b * (h*(cS+em*(dAS-dBS)) + dh*zS)
		}
		pw *= rho
	}
}

// HermiteVOFCheck reports parameters for which HermiteVOF1D is undefined.
func HermiteVOFCheck(l, sigmaIn float64) error {
	if !(l > 0) || math.IsInf(l, 0) {
		return fmt.Errorf("hermite VOF: lengthscale %v must be positive and finite", l)
	}
	if !(sigmaIn > 0) || math.IsInf(sigmaIn, 0) {
		return fmt.Errorf("hermite VOF: feature parameter sigma_in %v must be positive and finite", sigmaIn)
	}
	return nil
}
