package optimizer

import (
	"fmt"
	"math"
)

// Objective evaluates the function to minimise at x and writes its gradient into grad, which
// has len(x) entries and is zeroed before every call. The optimizers pass a private copy of
// the point, so the objective may not keep or rely on x after it returns. A non-nil error
// aborts the optimisation and is returned wrapped.
type Objective func(x, grad []float64) (float64, error)

// Reasons recorded in the Reason field of a finished state.
const (
	// ReasonGradTol: the infinity norm of the projected gradient fell to GradTol or below.
	ReasonGradTol = "projected gradient below tolerance"
	// ReasonFuncTol: the relative decrease of the objective stayed at or below FuncTol for
	// FuncTolIters consecutive iterations.
	ReasonFuncTol = "relative decrease below tolerance"
	// ReasonMaxIter: the iteration limit was reached.
	ReasonMaxIter = "iteration limit reached"
	// ReasonMaxEvals: the evaluation limit was reached.
	ReasonMaxEvals = "evaluation limit reached"
	// ReasonLineSearch: neither the quasi-Newton direction nor projected steepest descent gave
	// an acceptable step; the point is as good as floating point lets the line search get.
	ReasonLineSearch = "line search found no acceptable step"
)

// checkBox validates a box of n variables: equal lengths, finite bounds, lower <= upper.
func checkBox(lower, upper []float64, n int) error {
	if len(lower) != n || len(upper) != n {
		return fmt.Errorf("box has %d lower and %d upper bounds for %d variables: give one of each per variable", len(lower), len(upper), n)
	}
	for i := range n {
		l, u := lower[i], upper[i]
		if !finite(l) || !finite(u) {
			return fmt.Errorf("bounds of variable %d are [%v, %v]: they must be finite", i, l, u)
		}
		if l > u {
			return fmt.Errorf("bounds of variable %d are inverted: lower %v > upper %v", i, l, u)
		}
	}
	return nil
}

// checkFinite reports the first entry of x that is NaN or infinite.
func checkFinite(name string, x []float64) error {
	for i, v := range x {
		if !finite(v) {
			return fmt.Errorf("%s[%d] is %v: it must be finite", name, i, v)
		}
	}
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func allFinite(x []float64) bool {
	for _, v := range x {
		if !finite(v) {
			return false
		}
	}
	return true
}

// clip projects v onto [l, u]; NaN maps to l so that no caller can produce a point outside
// the box (callers never pass NaN, this is a last line of defence).
func clip(v, l, u float64) float64 {
	if !(v >= l) {
		return l
	}
	if v > u {
		return u
	}
	return v
}

// clipInto projects x onto the box in place and reports whether anything changed.
func clipInto(x, lower, upper []float64) bool {
	changed := false
	for i, v := range x {
		c := clip(v, lower[i], upper[i])
		if math.Float64bits(c) != math.Float64bits(v) {
			x[i] = c
			changed = true
		}
	}
	return changed
}

// The arithmetic below converts every product explicitly to float64 before adding it: the Go
// spec then forbids fusing the multiply and add into an FMA, so results do not depend on the
// architecture or GOAMD64 level the binary was built for.

func dot(a, b []float64) float64 {
	s := 0.0
	for i, v := range a {
		s += float64(v * b[i])
	}
	return s
}

// dotMasked is dot over the entries with free[i] set.
func dotMasked(a, b []float64, free []bool) float64 {
	s := 0.0
	for i, v := range a {
		if free[i] {
			s += float64(v * b[i])
		}
	}
	return s
}

func norm2(a []float64) float64 { return math.Sqrt(dot(a, a)) }

// evaluate calls obj on a private copy of x with a zeroed gradient buffer.
func evaluate(obj Objective, x []float64) (float64, []float64, error) {
	xc := append([]float64(nil), x...)
	g := make([]float64, len(x))
	f, err := obj(xc, g)
	return f, g, err
}

// canon maps -0 to +0. gob drops zero-valued struct fields, so a scalar -0 would come back
// as +0; stored scalars are canonicalised to keep saved and live states bitwise equal.
func canon(v float64) float64 {
	if v == 0 {
		return 0
	}
	return v
}

func cloneVec(x []float64) []float64 {
	if x == nil {
		return nil
	}
	return append([]float64(nil), x...)
}
