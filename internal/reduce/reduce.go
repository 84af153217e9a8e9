package reduce

import (
	"fmt"
	"math"
)

// Stats is a per-shard statistic. Merge folds next, the statistic of the shards that follow
// the receiver's in shard order, into the receiver. A merge of the wrong type or shape is an error.
type Stats interface {
	Merge(next Stats) error
}

// Gram is the sufficient statistic of a feature model with s features over n rows:
// G = Z^T Z (s x s, row-major, only the upper triangle is kept current), B = Z^T y, YY = y^T y.
type Gram struct {
	S  int
	G  []float64
	B  []float64
	YY float64
	N  int
}

// NewGram returns a zero Gram statistic for s features.
func NewGram(s int) *Gram {
	return &Gram{S: s, G: make([]float64, s*s), B: make([]float64, s)}
}

// Merge adds next into g: G, B, YY and N are sums over rows.
func (g *Gram) Merge(next Stats) error {
	o, ok := next.(*Gram)
	if !ok {
		return fmt.Errorf("merge Gram with %T", next)
	}
	if o.S != g.S {
		return fmt.Errorf("merge Gram of %d features with one of %d", g.S, o.S)
	}
	if len(g.G) != g.S*g.S || len(o.G) != g.S*g.S || len(g.B) != g.S || len(o.B) != g.S {
		return fmt.Errorf("merge Gram of %d features: malformed (G %d and %d values, b %d and %d)", g.S, len(g.G), len(o.G), len(g.B), len(o.B))
	}
	for i := 0; i < g.S; i++ {
		row, orow := g.G[i*g.S:(i+1)*g.S], o.G[i*g.S:(i+1)*g.S]
		for j := i; j < g.S; j++ {
			row[j] += orow[j]
		}
	}
	for i := range g.B {
		g.B[i] += o.B[i]
	}
	g.YY += o.YY
	g.N += o.N
	return nil
}

// Sum is a list of arrays merged by element-wise addition, with a row count.
type Sum struct {
	Parts [][]float64
	N     int
}

// Merge adds next into s element by element.
func (s *Sum) Merge(next Stats) error {
	o, ok := next.(*Sum)
	if !ok {
		return fmt.Errorf("merge Sum with %T", next)
	}
	if len(o.Parts) != len(s.Parts) {
		return fmt.Errorf("merge Sum of %d parts with one of %d", len(s.Parts), len(o.Parts))
	}
	// Check every shape before adding anything, so a failed merge leaves s unchanged.
	for i := range s.Parts {
		if len(o.Parts[i]) != len(s.Parts[i]) {
			return fmt.Errorf("merge Sum part %d: length %d with %d", i, len(s.Parts[i]), len(o.Parts[i]))
		}
	}
	for i := range s.Parts {
		for j, v := range o.Parts[i] {
			s.Parts[i][j] += v
		}
	}
	s.N += o.N
	return nil
}

// Moments holds per-column count, mean, sum of squared deviations M2, minimum and maximum.
// The variance of column j is M2[j] / (N - 1).
type Moments struct {
	N    int
	Mean []float64
	M2   []float64
	Min  []float64
	Max  []float64
}

// NewMoments returns empty moments over k columns.
func NewMoments(k int) *Moments {
	m := &Moments{Mean: make([]float64, k), M2: make([]float64, k), Min: make([]float64, k), Max: make([]float64, k)}
	for j := range m.Min {
		m.Min[j] = math.Inf(1)
		m.Max[j] = math.Inf(-1)
	}
	return m
}

// Add accumulates one row by Welford's update.
func (m *Moments) Add(row []float64) {
	m.N++
	n := float64(m.N)
	for j, v := range row {
		d := v - m.Mean[j]
		m.Mean[j] += d / n
		m.M2[j] += d * (v - m.Mean[j])
		m.Min[j] = math.Min(m.Min[j], v)
		m.Max[j] = math.Max(m.Max[j], v)
	}
}

// Merge combines next into m by Chan et al.'s pairwise formula:
// delta = mean_b - mean_a, mean = mean_a + delta n_b/n, M2 = M2_a + M2_b + delta^2 n_a n_b / n.
func (m *Moments) Merge(next Stats) error {
	o, ok := next.(*Moments)
	if !ok {
		return fmt.Errorf("merge Moments with %T", next)
	}
	k := len(m.Mean)
	if len(o.Mean) != k || len(o.M2) != k || len(o.Min) != k || len(o.Max) != k || len(m.M2) != k || len(m.Min) != k || len(m.Max) != k {
		return fmt.Errorf("merge Moments of %d columns with %d (malformed)", k, len(o.Mean))
	}
	if o.N == 0 {
		return nil
	}
	if m.N == 0 {
		m.N = o.N
		copy(m.Mean, o.Mean)
		copy(m.M2, o.M2)
		copy(m.Min, o.Min)
		copy(m.Max, o.Max)
		return nil
	}
	na, nb := float64(m.N), float64(o.N)
	n := na + nb
	for j := range m.Mean {
		d := o.Mean[j] - m.Mean[j]
		m.Mean[j] += d * nb / n
		m.M2[j] += o.M2[j] + d*d*na*nb/n
		m.Min[j] = math.Min(m.Min[j], o.Min[j])
		m.Max[j] = math.Max(m.Max[j], o.Max[j])
	}
	m.N += o.N
	return nil
}

// Var returns the sample variance of column j (divisor N - 1; 0 when N < 2).
func (m *Moments) Var(j int) float64 {
	if m.N < 2 {
		return 0
	}
	return m.M2[j] / float64(m.N-1)
}

// Rows is a block of rows (inputs X, row-major with D columns, and targets Y). Merge
// concatenates, so a merge in shard order reproduces the rows in their original order.
type Rows struct {
	D int
	X []float64
	Y []float64
}

// Merge appends next's rows after r's.
func (r *Rows) Merge(next Stats) error {
	o, ok := next.(*Rows)
	if !ok {
		return fmt.Errorf("merge Rows with %T", next)
	}
	if o.D != r.D {
		return fmt.Errorf("merge Rows of %d columns with %d", r.D, o.D)
	}
	if len(o.X) != len(o.Y)*o.D || len(r.X) != len(r.Y)*r.D {
		return fmt.Errorf("merge Rows: %d values for %d rows of %d columns", len(o.X), len(o.Y), o.D)
	}
	r.X = append(r.X, o.X...)
	r.Y = append(r.Y, o.Y...)
	return nil
}
