package optimizer

import (
	"bytes"
	"encoding/gob"
	"encoding/json"
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// guarded wraps obj so that the test fails if obj is ever called at a point outside
// [lower, upper] (or at a NaN); outside the box it returns a tempting garbage value, as the
// surrogate likelihood would. *calls counts the calls.
func guarded(t *testing.T, obj Objective, lower, upper []float64, calls *int) Objective {
	t.Helper()
	return func(x, grad []float64) (float64, error) {
		if calls != nil {
			*calls++
		}
		for i, v := range x {
			if !(v >= lower[i] && v <= upper[i]) {
				t.Errorf("objective evaluated outside the box: x[%d] = %v not in [%v, %v]", i, v, lower[i], upper[i])
				return -1e300, nil
			}
		}
		return obj(x, grad)
	}
}

// quadratic is f(x) = 0.5 (x-c)^T A (x-c) with A symmetric, row-major n x n.
func quadratic(a []float64, c []float64) Objective {
	n := len(c)
	return func(x, grad []float64) (float64, error) {
		d := make([]float64, n)
		for i := range n {
			d[i] = x[i] - c[i]
		}
		f := 0.0
		for i := range n {
			gi := 0.0
			for j := range n {
				gi += float64(a[i*n+j] * d[j])
			}
			grad[i] = gi
			f += float64(0.5 * float64(d[i]*gi))
		}
		return f, nil
	}
}

func diag(v ...float64) []float64 {
	n := len(v)
	a := make([]float64, n*n)
	for i, d := range v {
		a[i*n+i] = d
	}
	return a
}

// spd returns the n x n matrix B^T B + shift I for a fixed, deterministic B.
func spd(n int, shift float64) []float64 {
	b := make([]float64, n*n)
	s := uint64(12345)
	for i := range b {
		s = s*6364136223846793005 + 1442695040888963407
		b[i] = float64(int64(s>>11)%2001-1000) / 1000
	}
	a := make([]float64, n*n)
	for i := range n {
		for j := range n {
			v := 0.0
			for k := range n {
				v += b[k*n+i] * b[k*n+j]
			}
			a[i*n+j] = v
		}
		a[i*n+i] += shift
	}
	return a
}

// boxQPSolution finds the minimiser of 0.5 (x-c)^T A (x-c) over the box by trying every
// assignment of the variables to {lower, upper, free} (3^n, for small n) and keeping the
// feasible KKT point.
func boxQPSolution(t *testing.T, a, c, lower, upper []float64) []float64 {
	t.Helper()
	n := len(c)
	A := mat.NewDense(n, n, a)
	total := 1
	for range n {
		total *= 3
	}
	for code := range total {
		state := make([]int, n) // 0 free, 1 lower, 2 upper
		k := code
		for i := range n {
			state[i] = k % 3
			k /= 3
		}
		x := make([]float64, n)
		var freeIdx []int
		for i := range n {
			switch state[i] {
			case 1:
				x[i] = lower[i]
			case 2:
				x[i] = upper[i]
			default:
				freeIdx = append(freeIdx, i)
			}
		}
		if len(freeIdx) > 0 {
			// A_FF (x_F - c_F) = -A_FB (x_B - c_B)
			m := len(freeIdx)
			aff := mat.NewDense(m, m, nil)
			rhs := mat.NewVecDense(m, nil)
			for r, i := range freeIdx {
				for s, j := range freeIdx {
					aff.Set(r, s, A.At(i, j))
				}
				v := 0.0
				for j := range n {
					if state[j] != 0 {
						v -= A.At(i, j) * (x[j] - c[j])
					}
				}
				rhs.SetVec(r, v)
			}
			var sol mat.VecDense
			if err := sol.SolveVec(aff, rhs); err != nil {
				continue
			}
			for r, i := range freeIdx {
				x[i] = c[i] + sol.AtVec(r)
			}
		}
		g := make([]float64, n)
		ok := true
		for i := range n {
			for j := range n {
				g[i] += A.At(i, j) * (x[j] - c[j])
			}
			switch state[i] {
			case 0:
				ok = ok && x[i] > lower[i] && x[i] < upper[i]
			case 1:
				ok = ok && g[i] >= -1e-12
			case 2:
				ok = ok && g[i] <= 1e-12
			}
		}
		if ok {
			return x
		}
	}
	t.Fatal("no KKT point found")
	return nil
}

// rosenbrock is the chained Rosenbrock function sum 100 (x_{i+1} - x_i^2)^2 + (1 - x_i)^2,
// minimised at all ones.
func rosenbrock(x, grad []float64) (float64, error) {
	n := len(x)
	f := 0.0
	for i := range grad {
		grad[i] = 0
	}
	for i := 0; i+1 < n; i++ {
		a := x[i+1] - float64(x[i]*x[i])
		b := 1 - x[i]
		f += float64(100*float64(a*a)) + float64(b*b)
		grad[i] += float64(-400*float64(a*x[i])) - float64(2*b)
		grad[i+1] += float64(200 * a)
	}
	return f, nil
}

func ones(n int, v float64) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = v
	}
	return x
}

// roundTrip deep-copies v through gob or JSON encoding into out.
func roundTrip(t *testing.T, codec string, v, out any) {
	t.Helper()
	switch codec {
	case "gob":
		var buf bytes.Buffer
		if err := gob.NewEncoder(&buf).Encode(v); err != nil {
			t.Fatal(err)
		}
		if err := gob.NewDecoder(&buf).Decode(out); err != nil {
			t.Fatal(err)
		}
	case "json":
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("unknown codec %q", codec)
	}
}

func sameBits(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

func maxAbsDiff(a, b []float64) float64 {
	m := 0.0
	for i := range a {
		m = max(m, math.Abs(a[i]-b[i]))
	}
	return m
}
