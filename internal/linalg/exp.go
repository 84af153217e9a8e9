package linalg

import "math"

// The exponential: x = k ln 2 + r with k = round(x log2 e) and |r| <= ln 2 / 2 (Cody and
// Waite's two-part ln 2, here with fused multiply-adds), exp(r) by its Taylor polynomial of
// degree 13 in Horner form (truncation error below 5e-18 relative), and 2^k applied as two
// exact powers of two so that results down to the subnormal range need no special case.
// Accuracy: within 2 ulp of math.Exp (tested).
const (
	expLog2e = 1.4426950408889634
	expLn2Hi = 6.93147180369123816490e-01
	expLn2Lo = 1.90821492927058770002e-10
	expHi    = 709.78 // above: +Inf
	expLo    = -745.2 // below: 0
	expDeg   = 13
)

// expTable is read by the assembly: log2 e, ln 2 (high, low), the range limits, +Inf, the
// exponent bias as an integer, then the Taylor coefficients 1/j! from degree 13 down to 0.
var expTable = [8 + expDeg + 1]float64{
	expLog2e, expLn2Hi, expLn2Lo, expHi, expLo, math.Inf(1), math.Float64frombits(1023), 0,
	1.0 / 6227020800, 1.0 / 479001600, 1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880, 1.0 / 40320, 1.0 / 5040,
	1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 1.0 / 2, 1, 1,
}

// expGo is the portable exponential, the same operations as the assembly lane by lane.
func expGo(x float64) float64 {
	switch {
	case x != x:
		return x
	case x > expHi:
		return math.Inf(1)
	case x < expLo:
		return 0
	}
	kf := math.RoundToEven(x * expLog2e)
	r := math.FMA(-kf, expLn2Hi, x)
	r = math.FMA(-kf, expLn2Lo, r)
	c := expTable[8:]
	p := c[0]
	for _, cj := range c[1:] {
		p = math.FMA(p, r, cj)
	}
	k := int64(kf)
	k1 := k >> 1
	k2 := k - k1
	return p * math.Float64frombits(uint64(k1+1023)<<52) * math.Float64frombits(uint64(k2+1023)<<52)
}

// ExpTo sets dst[i] = exp(x[i]) for i < len(dst) (x at least as long), four lanes at a time in
// AVX2 + FMA assembly when the CPU allows; the bits are the same either way. dst may be x.
func ExpTo(dst, x []float64) {
	x = x[:len(dst)]
	done := expVec(dst, x)
	for i := done; i < len(dst); i++ {
		dst[i] = expGo(x[i])
	}
}
