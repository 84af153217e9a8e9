package features

import (
	"fmt"
	"math"
)

// MaxGaussLegendrePoints is the largest rule GaussLegendre computes. The solver costs O(m^2)
// operations: about 0.1 s at m = 5000 and some 20 s at this limit, a size whose s x s Gram matrix
// (32 GiB) is already far beyond what the feature maps can use in one dimension.
const MaxGaussLegendrePoints = 1 << 16

// GaussLegendre returns the m-point Gauss-Legendre rule on [-1, 1]:
//
//	Int_{-1}^{1} f(x) dx ~= sum_j weights[j] f(nodes[j]),
//
// exact for polynomials of degree <= 2m-1. The nodes chi_j are the roots of the Legendre polynomial
// P_m, in ascending order, and the weights are w_j = 2 / ((1 - chi_j^2) P_m'(chi_j)^2).
//
// Only the nodes in [0, 1) are computed; the others are their mirror images, so the rule is exactly
// symmetric: nodes[m-1-j] == -nodes[j] and weights[m-1-j] == weights[j] bitwise, and the middle
// node of an odd rule is exactly 0. Each node is found by Newton's method from Tricomi's estimate
// x ~= (1 - 1/(8m^2) + 1/(8m^3)) cos(pi (4i-1)/(4m+2)). The iteration runs in the variable
// y = 1 - x with the three-term recurrence rewritten for y (legendreRec), so that y and
// 1 - x^2 = y (2-y) keep full relative precision even for the nodes that crowd against x = 1.
// A final compensated evaluation (an error-free-transformation version of the same recurrence)
// removes the ~sqrt(m) eps rounding that plain float64 accumulates, and a first-order correction
// carries it into the node and the weight. Checked against 256-bit Newton for m up to 5000: nodes
// within one unit in the last place, weights within a few 1e-16 relative. The cost is O(m^2).
func GaussLegendre(m int) (nodes, weights []float64, err error) {
	if m < 1 || m > MaxGaussLegendrePoints {
		return nil, nil, fmt.Errorf("gauss-legendre: %d points requested: the rule needs 1 to %d points", m, MaxGaussLegendrePoints)
	}
	nodes = make([]float64, m)
	weights = make([]float64, m)
	rec := newLegendreRec(m)
	mf := float64(m)
	corr := 1/(8*mf*mf) - 1/(8*mf*mf*mf) // Tricomi: x ~= (1 - corr) cos(theta)
	half := (m + 1) / 2                  // nodes with x >= 0, counted from the largest
	for i := 1; i <= half; i++ {
		y := 1.0 // the middle node of an odd rule: P_m(0) = 0 exactly
		if !(m%2 == 1 && i == half) {
			theta := math.Pi * float64(4*i-1) / float64(4*m+2)
			sh := math.Sin(theta / 2)
			// y = 1 - (1 - corr) cos(theta), written without cancellation.
			y = 2*sh*sh + corr*math.Cos(theta)
			prev := math.Inf(1)
			for it := 0; it < 60; it++ {
				p, dm := rec.eval(y)
				// Newton on f(y) = P_m(1-y): f'(y) = -P_m'(x) with
				// (1 - x^2) P_m'(x) = m (P_{m-1} - x P_m) = m (y P_m - D_m), 1 - x^2 = y (2 - y),
				// so y <- y + P_m / P_m'(x).
				dy := p * y * (2 - y) / (mf * (y*p - dm))
				y += dy
				a := math.Abs(dy)
				// Quadratic convergence: once a step is ~1e-15 relative the iterate is exact to
				// rounding. A step that stops shrinking is rounding noise.
				if a <= 4e-15*y || (it >= 6 && a >= prev/2) {
					break
				}
				prev = a
			}
		}
		// The float64 recurrence accumulates about sqrt(m) roundings (1e-14 relative at m = 5000),
		// which limits both y and the weight. Evaluate once more with compensated arithmetic, at the
		// float64 iterate y: P = P_m(1-y) and Q = y P_m - D_m = (1-x^2) P_m'(x)/m. Then
		//   delta = P y (2-y) / (m Q)                    the last Newton step, below rounding of y,
		//   Q(y+delta) ~= Q + (m+1) P delta              (dQ/dy = (m+1) P_m by Legendre's equation,
		//                                                 so Q is stationary at the root),
		//   w = 2/((1-x^2) P_m'^2) = 2 y(2-y) / (m Q)^2 evaluated at y + delta to first order:
		//   d log(y(2-y))/dy = 2(1-y)/(y(2-y)).
		q, p := rec.weightTerm(y)
		if m%2 == 1 && i == half {
			p = 0 // exactly, by parity; keeps the middle node at 0
		}
		omx2 := y * (2 - y)
		delta := p * omx2 / (mf * q)
		q += (mf + 1) * p * delta
		w := 2 * omx2 / (mf * mf * q * q) * (1 + 2*(1-y)*delta/omx2)
		x := (1 - y) - delta
		nodes[i-1], weights[i-1] = -x, w
		nodes[m-i], weights[m-i] = x, w // for the middle node this leaves +0
	}
	return nodes, weights, nil
}

// legendreRec evaluates P_m at x = 1 - y through Bonnet's recurrence
// (k+1) P_{k+1} = (2k+1) x P_k - k P_{k-1}, written for the differences D_k = P_k - P_{k-1}:
//
//	D_{k+1} = a_k D_k - b_k y P_k,   P_{k+1} = P_k + D_{k+1},   a_k = k/(k+1), b_k = (2k+1)/(k+1),
//
// starting from P_1 = 1 - y, D_1 = -y. It uses y itself, never a rounded 1 - y, so near x = 1,
// where y is tiny, the values keep the relative precision of y. The coefficients are tabulated in
// double-double precision.
type legendreRec struct {
	m    int
	a, b []dd // a[k] = k/(k+1), b[k] = (2k+1)/(k+1), k = 1..m-1 (index 0 unused)
}

func newLegendreRec(m int) *legendreRec {
	r := &legendreRec{m: m, a: make([]dd, m), b: make([]dd, m)}
	for k := 1; k < m; k++ {
		kf := float64(k)
		r.a[k] = ddRatio(kf, kf+1)
		r.b[k] = ddRatio(2*kf+1, kf+1)
	}
	return r
}

// eval returns P_m(1-y) and D_m(1-y) in float64.
func (r *legendreRec) eval(y float64) (p, d float64) {
	p, d = 1-y, -y
	a, b := r.a[1:r.m], r.b[1:r.m]
	for k := range a {
		d = a[k].hi*d - b[k].hi*y*p
		p += d
	}
	return p, d
}

// weightTerm returns Q = y P_m - D_m = (1-x^2) P_m'(x) / m and P_m at x = 1 - y, accurate to a
// few units in the last place even for m in the thousands. It runs the recurrence as a compensated
// algorithm: the float64 values p, d are accompanied by first-order corrections ep, ed (so that
// P_k ~= p + ep), fed with the exact rounding errors of every operation (error-free
// transformations, math.FMA) and with the low parts of the double-double coefficients.
func (r *legendreRec) weightTerm(y float64) (q, pm float64) {
	p := 1 - y
	ep := twoSumErr(1, -y, p)
	d, ed := -y, 0.0
	a, b := r.a[1:r.m], r.b[1:r.m]
	for k := range a {
		ah, bh := a[k].hi, b[k].hi
		u := bh * y
		eu := math.FMA(bh, y, -u) + b[k].lo*y // b_k y = u + eu
		t1 := ah * d
		e1 := math.FMA(ah, d, -t1)
		t2 := u * p
		e2 := math.FMA(u, p, -t2)
		dn := t1 - t2
		e3 := twoSumErr(t1, -t2, dn)
		ed = ah*ed + a[k].lo*d + e1 - (u*ep + eu*p + e2) + e3
		pn := p + dn
		ep += ed + twoSumErr(p, dn, pn)
		p, d = pn, dn
	}
	t := y * p
	et := math.FMA(y, p, -t)
	qh := t - d
	q = qh + (twoSumErr(t, -d, qh) + et + y*ep - ed)
	return q, p + ep
}

// twoSumErr returns the rounding error of s = a + b (Knuth's TwoSum): a + b = s + err exactly.
func twoSumErr(a, b, s float64) float64 {
	bb := s - a
	return (a - (s - bb)) + (b - bb)
}

// dd is an unevaluated sum hi + lo with |lo| <= ulp(hi)/2 (a double-double number).
type dd struct{ hi, lo float64 }

// ddRatio returns the integer ratio a/b (a, b exactly representable) as a double-double: the remainder
// a - hi*b is exact with FMA.
func ddRatio(a, b float64) dd {
	hi := a / b
	return dd{hi, math.FMA(-hi, b, a) / b}
}
