package reduce

import (
	"fmt"
	"slices"
)

// Distinct holds, per column j, the sorted distinct values of that column over the rows seen,
// truncated to the smallest Cap+1 of them:
//
//	Values[j] = the min(Cap+1, |V_j|) smallest elements of V_j, increasing,   V_j = { x_ij : rows i }.
//
// So len(Values[j]) <= Cap means Values[j] is exactly V_j, and len(Values[j]) == Cap+1 means
// |V_j| > Cap ("many"). Keeping the smallest values (not the first seen) makes the statistic a
// function of the set of rows alone: Merge is the truncated union, which is associative and
// commutative, so any split of the rows over shards gives the same result. It feeds the GP-GRIEF
// grid placement (features.GRIEFGrid with Cap = mbar). Values compare by ==, so -0 and +0 are one
// value; NaN values are ignored.
type Distinct struct {
	Cap    int
	Values [][]float64
}

// NewDistinct returns an empty Distinct over cols columns keeping at most maxValues+1 values
// each (Cap = maxValues).
func NewDistinct(cols, maxValues int) *Distinct {
	v := make([][]float64, cols)
	for j := range v {
		v[j] = []float64{}
	}
	return &Distinct{Cap: maxValues, Values: v}
}

// Add inserts the values of one row (one per column) into their columns' sorted sets, keeping
// the smallest Cap+1. It panics if the row has the wrong length.
func (s *Distinct) Add(row []float64) {
	if len(row) != len(s.Values) {
		panic(fmt.Sprintf("reduce: Distinct over %d columns given a row of %d", len(s.Values), len(row)))
	}
	for j, v := range row {
		s.Values[j] = insertCapped(s.Values[j], v, s.Cap+1)
	}
}

// insertCapped inserts v into the increasing list vs unless present, keeping at most n values.
func insertCapped(vs []float64, v float64, n int) []float64 {
	if v != v { // NaN
		return vs
	}
	if len(vs) == n && !(v < vs[n-1]) {
		return vs
	}
	i, found := slices.BinarySearch(vs, v)
	if found {
		return vs
	}
	vs = slices.Insert(vs, i, v)
	if len(vs) > n {
		vs = vs[:n]
	}
	return vs
}

// check reports a malformed Distinct: a negative cap, or a column that is not strictly
// increasing or holds more than Cap+1 values.
func (s *Distinct) check() error {
	if s.Cap < 0 {
		return fmt.Errorf("distinct values with cap %d", s.Cap)
	}
	for j, vs := range s.Values {
		if len(vs) > s.Cap+1 {
			return fmt.Errorf("distinct values: column %d holds %d values, more than cap+1 = %d", j, len(vs), s.Cap+1)
		}
		for i := 1; i < len(vs); i++ {
			if !(vs[i] > vs[i-1]) {
				return fmt.Errorf("distinct values: column %d is not strictly increasing at %d", j, i)
			}
		}
	}
	return nil
}

// Merge sets each column of s to the smallest Cap+1 values of the union of its values and
// next's. The caps and column counts must match.
func (s *Distinct) Merge(next Stats) error {
	o, ok := next.(*Distinct)
	if !ok {
		return fmt.Errorf("merge Distinct with %T", next)
	}
	if o.Cap != s.Cap || len(o.Values) != len(s.Values) {
		return fmt.Errorf("merge Distinct of %d columns (cap %d) with one of %d columns (cap %d)", len(s.Values), s.Cap, len(o.Values), o.Cap)
	}
	if err := s.check(); err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	if err := o.check(); err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	n := s.Cap + 1
	for j := range s.Values {
		a, b := s.Values[j], o.Values[j]
		out := make([]float64, 0, min(n, len(a)+len(b)))
		ia, ib := 0, 0
		for len(out) < n && (ia < len(a) || ib < len(b)) {
			switch {
			case ib == len(b) || (ia < len(a) && a[ia] < b[ib]):
				out = append(out, a[ia])
				ia++
			case ia == len(a) || b[ib] < a[ia]:
				out = append(out, b[ib])
				ib++
			default: // equal
				out = append(out, a[ia])
				ia++
				ib++
			}
		}
		s.Values[j] = out
	}
	return nil
}
