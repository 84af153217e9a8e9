package shard

import (
	"context"
	"fmt"
	"math"

	"github.com/gpreduce/gpreduce/internal/reduce"
)

// Transform standardizes inputs and target:
//
//	x_std[j] = (x[j] - XMean[j]) / XScale[j]
//	y_std    = (y - YMean) / YScale
//
// A model trained on standardized data predicts y_std; YOrig and VarOrig map its predictive
// mean and variance back to the original units of y.
type Transform struct {
	XMean, XScale []float64
	YMean, YScale float64
}

// MomentsTask is the engine task of the standardization pass: it computes the column moments
// of a shard, which merge across shards by Chan's formula (see reduce.Moments). The result
// feeds NewTransform.
type MomentsTask struct{}

// momentsCheckEvery is how many rows MomentsTask.Map reads between context checks.
const momentsCheckEvery = 1 << 16

// Map returns a *reduce.Moments over the t.D+1 columns of t: the inputs in order, then the
// target. It stops with ctx's error if ctx is done.
func (MomentsTask) Map(ctx context.Context, ref Ref, t *Table) (reduce.Stats, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m := reduce.NewMoments(t.D + 1)
	row := make([]float64, t.D+1)
	for i := 0; i < t.N(); i++ {
		if i%momentsCheckEvery == momentsCheckEvery-1 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		copy(row, t.Row(i))
		row[t.D] = t.Y[i]
		m.Add(row)
	}
	return m, nil
}

// NewTransform returns the standardization of the data whose moments over inputs and target
// (as computed by MomentsTask) are m. The means are the column means and the scales the
// sample standard deviations (divisor N-1).
//
// An input column that is constant (zero variance) gets XScale 1, so it standardizes to 0
// and carries no information but does no harm; this is not an error. A constant target, or
// fewer than two rows, is an error naming the target column: there is nothing to learn.
//
// t is used only for the names of the source and columns in errors, and may be nil; if it
// is given, its D must match m.
func NewTransform(m *reduce.Moments, t *Table) (Transform, error) {
	if m == nil || len(m.Mean) < 2 {
		return Transform{}, fmt.Errorf("standardize: need moments over at least one input and the target")
	}
	d := len(m.Mean) - 1
	if t != nil && t.D != d {
		return Transform{}, fmt.Errorf("standardize: moments over %d columns for a table of %d inputs and a target",
			len(m.Mean), t.D)
	}
	source, target := "", "target"
	inputName := func(j int) string { return fmt.Sprintf("input %d", j) }
	if t != nil {
		source = t.Source
		if t.Target != "" {
			target = fmt.Sprintf("target %q", t.Target)
		}
		if len(t.Columns) == d {
			inputName = func(j int) string { return fmt.Sprintf("input %q", t.Columns[j]) }
		}
	}
	switch {
	case m.N < 2:
		return Transform{}, &ParseError{File: source, Msg: fmt.Sprintf(
			"%s has %d rows: with fewer than 2 rows there is nothing to learn; add data", target, m.N)}
	case m.Min[d] == m.Max[d] || m.Var(d) == 0:
		return Transform{}, &ParseError{File: source, Msg: fmt.Sprintf(
			"%s is constant (every row is %g): there is nothing to learn; choose another target column or check the data",
			target, m.Mean[d])}
	}
	scale := func(j int) (float64, error) {
		s := math.Sqrt(m.Var(j))
		if math.IsNaN(s) || math.IsInf(s, 0) {
			name := target
			if j < d {
				name = inputName(j)
			}
			return 0, &ParseError{File: source, Msg: fmt.Sprintf(
				"%s has values too large to standardize (spread %g to %g): rescale the column", name, m.Min[j], m.Max[j])}
		}
		return s, nil
	}
	tr := Transform{XMean: make([]float64, d), XScale: make([]float64, d), YMean: m.Mean[d]}
	for j := 0; j < d; j++ {
		s, err := scale(j)
		if err != nil {
			return Transform{}, err
		}
		if m.Min[j] == m.Max[j] || s == 0 {
			s = 1
		}
		tr.XMean[j], tr.XScale[j] = m.Mean[j], s
	}
	s, err := scale(d)
	if err != nil {
		return Transform{}, err
	}
	tr.YScale = s
	return tr, nil
}

// Apply returns a standardized copy of t, which must have len(tr.XMean) inputs. The copy
// keeps t's source and column names.
func (tr Transform) Apply(t *Table) *Table {
	if t.D != len(tr.XMean) {
		panic(fmt.Sprintf("shard: Transform of %d inputs applied to a table of %d", len(tr.XMean), t.D))
	}
	out := &Table{Source: t.Source, Columns: t.Columns, Target: t.Target, D: t.D,
		X: make([]float64, len(t.X)), Y: make([]float64, len(t.Y))}
	for i := 0; i < t.N(); i++ {
		tr.ApplyRow(t.Row(i), out.Row(i))
		out.Y[i] = tr.Y(t.Y[i])
	}
	return out
}

// ApplyRow stores the standardized input row x in dst, which may be x itself. Both must have
// len(tr.XMean) elements.
func (tr Transform) ApplyRow(x, dst []float64) {
	if len(x) != len(tr.XMean) || len(dst) != len(tr.XMean) {
		panic(fmt.Sprintf("shard: Transform of %d inputs applied to a row of %d into %d", len(tr.XMean), len(x), len(dst)))
	}
	for j, v := range x {
		dst[j] = (v - tr.XMean[j]) / tr.XScale[j]
	}
}

// Y returns the standardized target (y - YMean) / YScale.
func (tr Transform) Y(y float64) float64 { return (y - tr.YMean) / tr.YScale }

// YOrig maps a standardized target value, such as a predictive mean, back to original
// units: mean*YScale + YMean.
func (tr Transform) YOrig(mean float64) float64 { return mean*tr.YScale + tr.YMean }

// VarOrig maps a variance of the standardized target, such as a predictive or noise
// variance, back to original units: v*YScale².
func (tr Transform) VarOrig(v float64) float64 { return v * tr.YScale * tr.YScale }
