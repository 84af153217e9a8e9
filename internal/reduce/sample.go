package reduce

import (
	"fmt"
	"sort"
)

// Sample is a bottom-K priority sample of rows: every row i carries a key u_i (typically uniform
// on [0, 1) from a seeded generator), and the sample is the K rows with the smallest keys,
//
//	S = the first min(K, n) rows of the stable sort of all rows by key,
//
// kept in that order (increasing key; equal keys in original row order, the receiver's rows
// before next's in a merge). With i.i.d. continuous keys S is a uniform random subset of size
// min(K, n). Keys[r] is the key of sample row r, X its inputs (row-major, D columns) and Y its
// target. Since the stable sort of a concatenation truncated to K equals the truncated stable
// sort of the truncated parts, Merge is associative: merging the shards' samples in shard order
// gives the same rows however the shards were grouped, and the same as one pass over all rows.
type Sample struct {
	K    int
	Keys []float64
	D    int
	X    []float64
	Y    []float64
}

// NewSample returns an empty sample of at most k rows of d inputs.
func NewSample(k, d int) *Sample {
	return &Sample{K: k, Keys: []float64{}, D: d, X: []float64{}, Y: []float64{}}
}

// Add offers one row (inputs x of length D, target y) with key u. It is kept if fewer than K rows
// are held or u is smaller than the largest key held; a row offered later loses ties, so Add in row
// order keeps the K smallest keys with ties broken by row order. It panics on a row of the wrong
// length.
func (s *Sample) Add(u float64, x []float64, y float64) {
	if len(x) != s.D {
		panic(fmt.Sprintf("reduce: Sample of %d columns given a row of %d", s.D, len(x)))
	}
	n := len(s.Keys)
	if s.K <= 0 || (n == s.K && !(u < s.Keys[n-1])) {
		return
	}
	i := sort.Search(n, func(r int) bool { return s.Keys[r] > u }) // after equal keys
	if n == s.K {
		n-- // drop the largest
		s.Keys, s.X, s.Y = s.Keys[:n], s.X[:n*s.D], s.Y[:n]
	}
	s.Keys = append(s.Keys, 0)
	copy(s.Keys[i+1:], s.Keys[i:n])
	s.Keys[i] = u
	s.Y = append(s.Y, 0)
	copy(s.Y[i+1:], s.Y[i:n])
	s.Y[i] = y
	s.X = append(s.X, x...)
	copy(s.X[(i+1)*s.D:], s.X[i*s.D:n*s.D])
	copy(s.X[i*s.D:(i+1)*s.D], x)
}

// check reports a malformed sample: negative K or D, more than K rows, shapes that disagree,
// or keys that are NaN or out of order.
func (s *Sample) check() error {
	n := len(s.Keys)
	if s.K < 0 || s.D < 0 || n > s.K || len(s.Y) != n || len(s.X) != n*s.D {
		return fmt.Errorf("sample of at most %d rows of %d columns with %d keys, %d values and %d targets", s.K, s.D, n, len(s.X), len(s.Y))
	}
	for r, u := range s.Keys {
		if u != u || (r > 0 && u < s.Keys[r-1]) {
			return fmt.Errorf("sample keys are not in increasing order at %d", r)
		}
	}
	return nil
}

// Merge sets s to the first K rows of the stable merge by key of s's rows and then next's.
// K and D must match.
func (s *Sample) Merge(next Stats) error {
	o, ok := next.(*Sample)
	if !ok {
		return fmt.Errorf("merge Sample with %T", next)
	}
	if o.K != s.K || o.D != s.D {
		return fmt.Errorf("merge Sample of %d rows of %d columns with one of %d rows of %d columns", s.K, s.D, o.K, o.D)
	}
	if err := s.check(); err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	if err := o.check(); err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	n := min(s.K, len(s.Keys)+len(o.Keys))
	keys, x, y := make([]float64, 0, n), make([]float64, 0, n*s.D), make([]float64, 0, n)
	ia, ib := 0, 0
	for len(keys) < n {
		if ib == len(o.Keys) || (ia < len(s.Keys) && !(o.Keys[ib] < s.Keys[ia])) {
			keys, y = append(keys, s.Keys[ia]), append(y, s.Y[ia])
			x = append(x, s.X[ia*s.D:(ia+1)*s.D]...)
			ia++
		} else {
			keys, y = append(keys, o.Keys[ib]), append(y, o.Y[ib])
			x = append(x, o.X[ib*o.D:(ib+1)*o.D]...)
			ib++
		}
	}
	s.Keys, s.X, s.Y = keys, x, y
	return nil
}
