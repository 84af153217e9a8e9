package shard

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gpreduce/gpreduce/internal/reduce"
)

// randomTable returns n rows of d inputs with per-column offsets and scales, and a target.
func randomTable(rng *rand.Rand, n, d int) *Table {
	t := &Table{Source: "rand.csv", Target: "y", D: d, X: make([]float64, n*d), Y: make([]float64, n)}
	for j := 0; j < d; j++ {
		t.Columns = append(t.Columns, "x"+string(rune('0'+j)))
	}
	for i := 0; i < n; i++ {
		for j := 0; j < d; j++ {
			t.X[i*d+j] = 100*float64(j) + float64(j+1)*rng.NormFloat64()
		}
		t.Y[i] = 5000 + 30*rng.NormFloat64()
	}
	return t
}

// moments returns the merged moments of t over the given number of shards.
func moments(t *testing.T, tab *Table, shards int) *reduce.Moments {
	t.Helper()
	refs, tabs := PartitionCount(tab, shards)
	var acc reduce.Stats
	for i := range refs {
		st, err := MomentsTask{}.Map(context.Background(), refs[i], tabs[i])
		if err != nil {
			t.Fatal(err)
		}
		if acc == nil {
			acc = st
		} else if err := acc.Merge(st); err != nil {
			t.Fatal(err)
		}
	}
	return acc.(*reduce.Moments)
}

func approx(a, b, tol float64) bool {
	return math.Abs(a-b) <= tol*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

func TestMomentsTaskAndTransform(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	tab := randomTable(rng, 1000, 3)
	// Direct two-pass statistics.
	mean := func(col func(i int) float64) (m, s float64) {
		for i := 0; i < tab.N(); i++ {
			m += col(i)
		}
		m /= float64(tab.N())
		for i := 0; i < tab.N(); i++ {
			s += (col(i) - m) * (col(i) - m)
		}
		return m, math.Sqrt(s / float64(tab.N()-1))
	}
	for _, shards := range []int{1, 2, 7, 1000} {
		m := moments(t, tab, shards)
		if m.N != 1000 || len(m.Mean) != 4 {
			t.Fatalf("%d shards: moments over %d rows and %d columns", shards, m.N, len(m.Mean))
		}
		tr, err := NewTransform(m, tab)
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 3; j++ {
			mu, sd := mean(func(i int) float64 { return tab.Row(i)[j] })
			if !approx(tr.XMean[j], mu, 1e-12) || !approx(tr.XScale[j], sd, 1e-10) {
				t.Errorf("%d shards, column %d: mean %v scale %v, want %v %v", shards, j, tr.XMean[j], tr.XScale[j], mu, sd)
			}
		}
		mu, sd := mean(func(i int) float64 { return tab.Y[i] })
		if !approx(tr.YMean, mu, 1e-12) || !approx(tr.YScale, sd, 1e-10) {
			t.Errorf("%d shards, target: mean %v scale %v, want %v %v", shards, tr.YMean, tr.YScale, mu, sd)
		}
	}

	tr, err := NewTransform(moments(t, tab, 3), nil)
	if err != nil {
		t.Fatal(err)
	}
	orig := slices.Clone(tab.X)
	std := tr.Apply(tab)
	if !slices.Equal(tab.X, orig) {
		t.Error("Apply modified its input")
	}
	if std.Source != tab.Source || !slices.Equal(std.Columns, tab.Columns) || std.Target != tab.Target || std.N() != tab.N() {
		t.Errorf("Apply changed the table's names or size")
	}
	sm := moments(t, std, 1)
	for j := range sm.Mean {
		if math.Abs(sm.Mean[j]) > 1e-10 || !approx(sm.Var(j), 1, 1e-10) {
			t.Errorf("standardized column %d: mean %v variance %v", j, sm.Mean[j], sm.Var(j))
		}
	}
	// ApplyRow in place, and the target helpers.
	row := slices.Clone(tab.Row(5))
	tr.ApplyRow(row, row)
	if !slices.Equal(row, std.Row(5)) {
		t.Errorf("ApplyRow in place: %v, want %v", row, std.Row(5))
	}
	for _, y := range []float64{tab.Y[0], -3, 0, 1e6} {
		if got := tr.YOrig(tr.Y(y)); !approx(got, y, 1e-14) {
			t.Errorf("YOrig(Y(%v)) = %v", y, got)
		}
	}
	if got, want := tr.VarOrig(2), 2*tr.YScale*tr.YScale; got != want {
		t.Errorf("VarOrig(2) = %v, want %v", got, want)
	}
	if got := tr.Y(tr.YMean + tr.YScale); !approx(got, 1, 1e-12) {
		t.Errorf("Y(mean+scale) = %v, want 1", got)
	}
}

func TestTransformConstantInput(t *testing.T) {
	tab := &Table{Source: "c.csv", Columns: []string{"a", "k"}, Target: "y", D: 2,
		X: []float64{1, 7, 2, 7, 4, 7}, Y: []float64{1, 2, 4}}
	tr, err := NewTransform(moments(t, tab, 2), tab)
	if err != nil {
		t.Fatal(err)
	}
	if tr.XScale[1] != 1 || tr.XMean[1] != 7 {
		t.Errorf("constant input: mean %v scale %v, want 7 and 1", tr.XMean[1], tr.XScale[1])
	}
	std := tr.Apply(tab)
	for i := 0; i < std.N(); i++ {
		if std.Row(i)[1] != 0 {
			t.Errorf("row %d: constant input standardized to %v, want 0", i, std.Row(i)[1])
		}
	}
}

func TestNewTransformErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		tab  *Table
		want []string
	}{
		{"constant target", &Table{Source: "data.csv", Columns: []string{"a"}, Target: "ppm", D: 1,
			X: []float64{1, 2, 3}, Y: []float64{5, 5, 5}},
			[]string{`target "ppm" is constant`, "every row is 5", "nothing to learn"}},
		{"one row", &Table{Source: "data.csv", Columns: []string{"a"}, Target: "ppm", D: 1,
			X: []float64{1}, Y: []float64{5}},
			[]string{`target "ppm" has 1 rows`, "nothing to learn", "add data"}},
		{"no rows", &Table{Source: "data.csv", Columns: []string{"a"}, Target: "ppm", D: 1,
			X: []float64{}, Y: []float64{}},
			[]string{`target "ppm" has 0 rows`}},
		{"huge target", &Table{Source: "data.csv", Columns: []string{"a"}, Target: "ppm", D: 1,
			X: []float64{1, 2}, Y: []float64{-1e300, 1e300}},
			[]string{`target "ppm" has values too large`, "rescale"}},
		{"huge input", &Table{Source: "data.csv", Columns: []string{"a"}, Target: "ppm", D: 1,
			X: []float64{-1e300, 1e300}, Y: []float64{1, 2}},
			[]string{`input "a" has values too large`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewTransform(moments(t, tc.tab, 1), tc.tab)
			checkParseError(t, err, "data.csv", 0, 0, tc.want...)
		})
	}

	// Without a table the target is still named, generically.
	m := reduce.NewMoments(2)
	m.Add([]float64{1, 3})
	m.Add([]float64{2, 3})
	_, err := NewTransform(m, nil)
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Msg == "" {
		t.Errorf("no table: got %v", err)
	}
	if _, err := NewTransform(reduce.NewMoments(1), nil); err == nil {
		t.Error("moments of one column accepted")
	}
	if _, err := NewTransform(reduce.NewMoments(3), &Table{D: 1}); err == nil {
		t.Error("moments of the wrong width accepted")
	}
}

func TestMomentsTaskCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tab := randomTable(rand.New(rand.NewPCG(2, 2)), 10, 2)
	if _, err := (MomentsTask{}).Map(ctx, Ref{}, tab); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

// TestStandardizeFromFile runs the whole pass on a file read in byte ranges.
func TestStandardizeFromFile(t *testing.T) {
	content := "a,b,y\n1,10,100\n2,10,200\n3,10,300\n4,10,400\n"
	path := writeFile(t, "s.csv", content)
	refs, err := SplitRanges(path, 3)
	if err != nil {
		t.Fatal(err)
	}
	var acc reduce.Stats
	var last *Table
	for _, r := range refs {
		tab, err := ReadRange(path, r, CSVOptions{Header: true})
		if err != nil {
			t.Fatal(err)
		}
		st, err := MomentsTask{}.Map(context.Background(), r, tab)
		if err != nil {
			t.Fatal(err)
		}
		if acc == nil {
			acc = st
		} else if err := acc.Merge(st); err != nil {
			t.Fatal(err)
		}
		last = tab
	}
	tr, err := NewTransform(acc.(*reduce.Moments), last)
	if err != nil {
		t.Fatal(err)
	}
	sd := math.Sqrt(5.0 / 3)
	want := Transform{XMean: []float64{2.5, 10}, XScale: []float64{sd, 1}, YMean: 250, YScale: 100 * sd}
	if !approx(tr.XMean[0], want.XMean[0], 1e-15) || !approx(tr.XScale[0], want.XScale[0], 1e-15) ||
		tr.XMean[1] != 10 || tr.XScale[1] != 1 || !approx(tr.YMean, 250, 1e-15) || !approx(tr.YScale, want.YScale, 1e-15) {
		t.Errorf("got %+v, want %+v", tr, want)
	}
}
