package reduce

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

// otherStats is a Stats of a type no merge accepts.
type otherStats struct{}

func (otherStats) Merge(Stats) error { return nil }

func TestMergeMismatchErrors(t *testing.T) {
	tests := []struct {
		name string
		recv Stats
		next Stats
		want string // substring of the error
	}{
		{"gram/type", NewGram(2), &Sum{}, "merge Gram with *reduce.Sum"},
		{"gram/foreign type", NewGram(2), otherStats{}, "merge Gram with reduce.otherStats"},
		{"gram/features", NewGram(2), NewGram(3), "2 features with one of 3"},
		{"sum/type", &Sum{Parts: [][]float64{{1}}}, NewGram(1), "merge Sum with *reduce.Gram"},
		{"sum/parts", &Sum{Parts: [][]float64{{1}, {2}}}, &Sum{Parts: [][]float64{{1}}}, "2 parts with one of 1"},
		{"sum/part length", &Sum{Parts: [][]float64{{1}, {2, 3}}}, &Sum{Parts: [][]float64{{1}, {2}}}, "part 1: length 2 with 1"},
		{"moments/type", NewMoments(2), &Rows{}, "merge Moments with *reduce.Rows"},
		{"moments/columns", NewMoments(2), NewMoments(3), "2 columns with 3"},
		{"moments/columns into empty", NewMoments(1), func() *Moments { m := NewMoments(2); m.Add([]float64{1, 2}); return m }(), "1 columns with 2"},
		{"rows/type", &Rows{D: 1}, NewMoments(1), "merge Rows with *reduce.Moments"},
		{"rows/columns", &Rows{D: 2, X: []float64{1, 2}, Y: []float64{3}}, &Rows{D: 1, X: []float64{1}, Y: []float64{2}}, "2 columns with 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := fmt.Sprintf("%+v", tc.recv)
			err := tc.recv.Merge(tc.next)
			if err == nil {
				t.Fatalf("Merge succeeded, want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			if after := fmt.Sprintf("%+v", tc.recv); after != before {
				t.Errorf("failed merge modified the receiver:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

func TestSumMerge(t *testing.T) {
	tests := []struct {
		name  string
		a, b  *Sum
		want  [][]float64
		wantN int
	}{
		{"empty", &Sum{}, &Sum{N: 3}, [][]float64{}, 3},
		{"one part", &Sum{Parts: [][]float64{{1, 2}}, N: 1}, &Sum{Parts: [][]float64{{10, 20}}, N: 2}, [][]float64{{11, 22}}, 3},
		{"ragged parts", &Sum{Parts: [][]float64{{1}, {}, {1, 2, 3}}, N: 4}, &Sum{Parts: [][]float64{{-1}, {}, {0.5, 0.25, -3}}, N: 5},
			[][]float64{{0}, {}, {1.5, 2.25, 0}}, 9},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next := fmt.Sprintf("%v", tc.b)
			if err := tc.a.Merge(tc.b); err != nil {
				t.Fatal(err)
			}
			if tc.a.N != tc.wantN {
				t.Errorf("N = %d, want %d", tc.a.N, tc.wantN)
			}
			if len(tc.a.Parts) != len(tc.want) {
				t.Fatalf("%d parts, want %d", len(tc.a.Parts), len(tc.want))
			}
			for i := range tc.want {
				if !slices.Equal(tc.a.Parts[i], tc.want[i]) {
					t.Errorf("part %d = %v, want %v", i, tc.a.Parts[i], tc.want[i])
				}
			}
			if got := fmt.Sprintf("%v", tc.b); got != next {
				t.Errorf("merge modified next: %s, was %s", got, next)
			}
		})
	}
}

// TestGramMergeUpperTriangle pins what Gram.Merge promises about G: only the upper triangle
// (j >= i, diagonal included) is kept current. Merge adds next's upper triangle into the
// receiver's; it never reads next's strict lower triangle (NaN there must not leak) and never
// writes the receiver's (it keeps whatever it held before the merge). B, YY and N are summed.
func TestGramMergeUpperTriangle(t *testing.T) {
	for _, s := range []int{1, 2, 3, 7} {
		t.Run(fmt.Sprint("s=", s), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(s), 1))
			a, b := NewGram(s), NewGram(s)
			for i := 0; i < s; i++ {
				for j := 0; j < s; j++ {
					if j >= i {
						a.G[i*s+j] = rng.NormFloat64()
						b.G[i*s+j] = rng.NormFloat64()
					} else {
						a.G[i*s+j] = -1000 - float64(i*s+j) // a sentinel Merge must leave alone
						b.G[i*s+j] = math.NaN()             // a value Merge must not read
					}
				}
				a.B[i], b.B[i] = rng.NormFloat64(), rng.NormFloat64()
			}
			a.YY, b.YY, a.N, b.N = 2.5, 4.25, 10, 7
			a0 := slices.Clone(a.G)
			aB := slices.Clone(a.B)
			if err := a.Merge(b); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < s; i++ {
				for j := 0; j < s; j++ {
					got := a.G[i*s+j]
					if j >= i {
						if want := a0[i*s+j] + b.G[i*s+j]; got != want {
							t.Errorf("G[%d,%d] = %v, want %v", i, j, got, want)
						}
					} else if got != a0[i*s+j] {
						t.Errorf("lower G[%d,%d] = %v, want it untouched (%v)", i, j, got, a0[i*s+j])
					}
				}
				if want := aB[i] + b.B[i]; a.B[i] != want {
					t.Errorf("B[%d] = %v, want %v", i, a.B[i], want)
				}
			}
			if a.YY != 6.75 || a.N != 17 {
				t.Errorf("YY, N = %v, %d; want 6.75, 17", a.YY, a.N)
			}
			for i := 1; i < s; i++ {
				for j := 0; j < i; j++ {
					if !math.IsNaN(b.G[i*s+j]) {
						t.Errorf("merge modified next's lower G[%d,%d]", i, j)
					}
				}
			}
		})
	}
}

// welford is the single-pass reference: Add over every row.
func welford(rows [][]float64, k int) *Moments {
	m := NewMoments(k)
	for _, r := range rows {
		m.Add(r)
	}
	return m
}

// twoPassVar is the textbook two-pass sample variance of column j.
func twoPassVar(rows [][]float64, j int) float64 {
	var s float64
	for _, r := range rows {
		s += r[j]
	}
	mean := s / float64(len(rows))
	var ss float64
	for _, r := range rows {
		d := r[j] - mean
		ss += d * d
	}
	return ss / float64(len(rows)-1)
}

func relErr(got, want float64) float64 {
	if got == want {
		return 0
	}
	return math.Abs(got-want) / math.Max(math.Abs(want), 1e-300)
}

// randomRows returns n rows of k columns with column j centred near offs[j] with spread scales[j].
func randomRows(rng *rand.Rand, n int, offs, scales []float64) [][]float64 {
	rows := make([][]float64, n)
	for i := range rows {
		r := make([]float64, len(offs))
		for j := range r {
			r[j] = offs[j] + scales[j]*rng.NormFloat64()
		}
		rows[i] = r
	}
	return rows
}

// mergeSplit computes Moments per piece of rows cut at cuts (sorted, in [0, len(rows)]) and
// merges them in order.
func mergeSplit(t *testing.T, rows [][]float64, k int, cuts []int) *Moments {
	t.Helper()
	bounds := append(append([]int{0}, cuts...), len(rows))
	var acc *Moments
	for p := 0; p+1 < len(bounds); p++ {
		m := welford(rows[bounds[p]:bounds[p+1]], k)
		if acc == nil {
			acc = m
			continue
		}
		if err := acc.Merge(m); err != nil {
			t.Fatal(err)
		}
	}
	return acc
}

func TestMomentsMergeAnySplit(t *testing.T) {
	const n = 600
	rng := rand.New(rand.NewPCG(42, 7))
	offs := []float64{0, 1e3, -50, 3}
	scales := []float64{1, 2.5, 1e-2, 100}
	rows := randomRows(rng, n, offs, scales)
	k := len(offs)
	everyRow := make([]int, n-1)
	for i := range everyRow {
		everyRow[i] = i + 1
	}
	randomCuts := func(seed uint64, m int) []int {
		r := rand.New(rand.NewPCG(seed, 0))
		c := make([]int, m)
		for i := range c {
			c[i] = r.IntN(n + 1) // may repeat or hit 0 / n: empty pieces
		}
		slices.Sort(c)
		return c
	}
	tests := []struct {
		name string
		cuts []int
	}{
		{"whole", nil},
		{"halves", []int{n / 2}},
		{"one then rest", []int{1}},
		{"rest then one", []int{n - 1}},
		{"empty first and last", []int{0, 0, n / 3, n, n}},
		{"every row", everyRow},
		{"random 5", randomCuts(1, 5)},
		{"random 37", randomCuts(2, 37)},
		{"random 200", randomCuts(3, 200)},
	}
	ref := welford(rows, k)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := mergeSplit(t, rows, k, tc.cuts)
			if got.N != n {
				t.Fatalf("N = %d, want %d", got.N, n)
			}
			for j := 0; j < k; j++ {
				if e := relErr(got.Mean[j], ref.Mean[j]); e > 1e-12 {
					t.Errorf("col %d mean %v, Welford %v (rel %.2g)", j, got.Mean[j], ref.Mean[j], e)
				}
				if e := relErr(got.M2[j], ref.M2[j]); e > 1e-12 {
					t.Errorf("col %d M2 %v, Welford %v (rel %.2g)", j, got.M2[j], ref.M2[j], e)
				}
				if e := relErr(got.Var(j), twoPassVar(rows, j)); e > 1e-12 {
					t.Errorf("col %d Var %v, two-pass %v (rel %.2g)", j, got.Var(j), twoPassVar(rows, j), e)
				}
				if got.Min[j] != ref.Min[j] || got.Max[j] != ref.Max[j] {
					t.Errorf("col %d min/max %v/%v, want %v/%v", j, got.Min[j], got.Max[j], ref.Min[j], ref.Max[j])
				}
			}
		})
	}
}

func TestMomentsVarSmallN(t *testing.T) {
	tests := []struct {
		name string
		rows [][]float64
		want float64
	}{
		{"none", nil, 0},
		{"one", [][]float64{{5}}, 0},
		{"two", [][]float64{{1}, {3}}, 2},
		{"three", [][]float64{{1}, {2}, {6}}, 7},
		{"constant", [][]float64{{4}, {4}, {4}, {4}}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := welford(tc.rows, 1)
			if got := m.Var(0); math.Abs(got-tc.want) > 1e-15 {
				t.Errorf("Var = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestMomentsMergeEmptySide checks Chan's merge when either side has no rows: merging empty
// moments is a no-op, and merging into empty moments copies next (without aliasing it).
func TestMomentsMergeEmptySide(t *testing.T) {
	full := func() *Moments {
		return welford([][]float64{{1, -2}, {4, 8}, {-3, 0.5}}, 2)
	}
	tests := []struct {
		name       string
		recv, next *Moments
		want       *Moments
	}{
		{"empty next", full(), NewMoments(2), full()},
		{"empty receiver", NewMoments(2), full(), full()},
		{"both empty", NewMoments(2), NewMoments(2), NewMoments(2)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.recv.Merge(tc.next); err != nil {
				t.Fatal(err)
			}
			if !momentsBitsEqual(tc.recv, tc.want) {
				t.Fatalf("merged %+v, want %+v", tc.recv, tc.want)
			}
			// The receiver must own its storage: changing next afterwards changes nothing.
			tc.next.Add([]float64{1e6, -1e6})
			if !momentsBitsEqual(tc.recv, tc.want) {
				t.Errorf("receiver aliases next: after next.Add it is %+v, want %+v", tc.recv, tc.want)
			}
		})
	}
}

func TestMomentsMergeAssociative(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	rows := randomRows(rng, 90, []float64{10, -3}, []float64{2, 0.1})
	parts := [][][]float64{rows[:17], rows[17:60], rows[60:]}
	mk := func(i int) *Moments { return welford(parts[i], 2) }
	left := mk(0) // (a b) c
	_ = left.Merge(mk(1))
	_ = left.Merge(mk(2))
	bc := mk(1) // a (b c)
	_ = bc.Merge(mk(2))
	right := mk(0)
	_ = right.Merge(bc)
	for j := 0; j < 2; j++ {
		if e := relErr(left.Mean[j], right.Mean[j]); e > 1e-13 {
			t.Errorf("col %d mean: (ab)c %v, a(bc) %v", j, left.Mean[j], right.Mean[j])
		}
		if e := relErr(left.M2[j], right.M2[j]); e > 1e-12 {
			t.Errorf("col %d M2: (ab)c %v, a(bc) %v", j, left.M2[j], right.M2[j])
		}
	}
	if left.N != right.N || left.N != 90 {
		t.Errorf("N %d, %d; want 90", left.N, right.N)
	}
}

func TestRowsMergePreservesOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n, d = 101, 3
	X := make([]float64, n*d)
	Y := make([]float64, n)
	for i := range X {
		X[i] = rng.NormFloat64()
	}
	for i := range Y {
		Y[i] = float64(i) // row i's target names it
	}
	tests := []struct {
		name string
		cuts []int
	}{
		{"one", nil},
		{"two", []int{50}},
		{"empty pieces", []int{0, 0, 20, 20, 101}},
		{"uneven", []int{1, 2, 3, 50, 99, 100}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := append(append([]int{0}, tc.cuts...), n)
			var acc *Rows
			for p := 0; p+1 < len(b); p++ {
				lo, hi := b[p], b[p+1]
				r := &Rows{D: d, X: slices.Clone(X[lo*d : hi*d]), Y: slices.Clone(Y[lo:hi])}
				if acc == nil {
					acc = r
				} else if err := acc.Merge(r); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(acc.X, X) || !slices.Equal(acc.Y, Y) {
				t.Errorf("merged rows out of order: Y = %v", acc.Y)
			}
		})
	}
}

// shardStats computes one statistic of each kind for a shard of rows (X row-major with d
// columns, targets y): a Gram over the features (1, x_0, .., x_{d-1}), a Sum, Moments and Rows.
func shardStats(X, y []float64, d int) []Stats {
	s := d + 1
	g := NewGram(s)
	sum := &Sum{Parts: [][]float64{make([]float64, d), make([]float64, 1)}}
	m := NewMoments(d + 1)
	z := make([]float64, s)
	row := make([]float64, d+1)
	for i := range y {
		x := X[i*d : (i+1)*d]
		z[0] = 1
		copy(z[1:], x)
		for a := 0; a < s; a++ {
			for b := a; b < s; b++ {
				g.G[a*s+b] += z[a] * z[b]
			}
			g.B[a] += z[a] * y[i]
		}
		g.YY += y[i] * y[i]
		g.N++
		for j, v := range x {
			sum.Parts[0][j] += v
		}
		sum.Parts[1][0] += y[i]
		sum.N++
		copy(row, x)
		row[d] = y[i]
		m.Add(row)
	}
	rows := &Rows{D: d, X: slices.Clone(X), Y: slices.Clone(y)}
	return []Stats{g, sum, m, rows}
}

// TestMergeInShardOrderBitwise: per-shard statistics computed concurrently (goroutines
// started in a random order and finishing in any order) and merged in shard order equal, bit
// for bit, the ones computed one after another. TestStatsBitsEqualDetects shows the comparison
// catches a one-ulp difference.
func TestMergeInShardOrderBitwise(t *testing.T) {
	const d = 3
	rng := rand.New(rand.NewPCG(77, 1))
	for _, k := range []int{1, 2, 5, 16} {
		t.Run(fmt.Sprint("shards=", k), func(t *testing.T) {
			type shardData struct{ X, y []float64 }
			data := make([]shardData, k)
			for i := range data {
				n := 1 + rng.IntN(40)
				sd := shardData{X: make([]float64, n*d), y: make([]float64, n)}
				for j := range sd.X {
					sd.X[j] = 1e2*float64(i) + rng.NormFloat64()*math.Pow(10, float64(rng.IntN(6)-3))
				}
				for j := range sd.y {
					sd.y[j] = rng.NormFloat64() * 1e3
				}
				data[i] = sd
			}
			merge := func(per [][]Stats) []Stats {
				acc := per[0]
				for _, p := range per[1:] {
					for j := range acc {
						if err := acc[j].Merge(p[j]); err != nil {
							t.Fatal(err)
						}
					}
				}
				return acc
			}
			seq := make([][]Stats, k)
			for i, sd := range data {
				seq[i] = shardStats(sd.X, sd.y, d)
			}
			want := merge(seq)
			for trial := 0; trial < 5; trial++ {
				conc := make([][]Stats, k)
				var wg sync.WaitGroup
				for _, i := range rng.Perm(k) { // start in a random order
					wg.Go(func() { conc[i] = shardStats(data[i].X, data[i].y, d) })
				}
				wg.Wait()
				got := merge(conc)
				for j := range want {
					if !statsBitsEqual(got[j], want[j]) {
						t.Fatalf("trial %d: concurrent %T differs from sequential", trial, want[j])
					}
				}
			}
		})
	}
}

func bitsEqual(a, b []float64) bool {
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

func momentsBitsEqual(a, b *Moments) bool {
	return a.N == b.N && bitsEqual(a.Mean, b.Mean) && bitsEqual(a.M2, b.M2) && bitsEqual(a.Min, b.Min) && bitsEqual(a.Max, b.Max)
}

func statsBitsEqual(a, b Stats) bool {
	switch a := a.(type) {
	case *Gram:
		b, ok := b.(*Gram)
		return ok && a.S == b.S && a.N == b.N && bitsEqual(a.G, b.G) && bitsEqual(a.B, b.B) &&
			math.Float64bits(a.YY) == math.Float64bits(b.YY)
	case *Sum:
		b, ok := b.(*Sum)
		if !ok || a.N != b.N || len(a.Parts) != len(b.Parts) {
			return false
		}
		for i := range a.Parts {
			if !bitsEqual(a.Parts[i], b.Parts[i]) {
				return false
			}
		}
		return true
	case *Moments:
		b, ok := b.(*Moments)
		return ok && momentsBitsEqual(a, b)
	case *Rows:
		b, ok := b.(*Rows)
		return ok && a.D == b.D && bitsEqual(a.X, b.X) && bitsEqual(a.Y, b.Y)
	}
	return false
}

// TestStatsBitsEqualDetects makes sure the comparison used by the bitwise tests can fail:
// a one-ulp change and a reordering of shards are both detected.
func TestStatsBitsEqualDetects(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	X := make([]float64, 30)
	y := make([]float64, 10)
	for i := range X {
		X[i] = rng.NormFloat64()
	}
	for i := range y {
		y[i] = rng.NormFloat64()
	}
	a := shardStats(X, y, 3)
	b := shardStats(X, y, 3)
	for j := range a {
		if !statsBitsEqual(a[j], b[j]) {
			t.Fatalf("%T: equal computations compare unequal", a[j])
		}
	}
	b[0].(*Gram).G[0] = math.Nextafter(b[0].(*Gram).G[0], math.Inf(1))
	b[1].(*Sum).Parts[1][0] = math.Nextafter(b[1].(*Sum).Parts[1][0], math.Inf(1))
	b[2].(*Moments).M2[0] = math.Nextafter(b[2].(*Moments).M2[0], math.Inf(1))
	b[3].(*Rows).Y[9], b[3].(*Rows).Y[8] = b[3].(*Rows).Y[8], b[3].(*Rows).Y[9]
	for j := range a {
		if statsBitsEqual(a[j], b[j]) {
			t.Errorf("%T: a one-ulp change or reordering is not detected", a[j])
		}
	}
}
