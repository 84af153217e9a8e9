package reduce

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// mergeTree merges parts (in order) by a random binary grouping: the result must not depend on it.
func mergeTree[T Stats](t *testing.T, rng *rand.Rand, parts []T) T {
	t.Helper()
	for len(parts) > 1 {
		i := rng.IntN(len(parts) - 1)
		if err := parts[i].Merge(parts[i+1]); err != nil {
			t.Fatal(err)
		}
		parts = slices.Delete(parts, i+1, i+2)
	}
	return parts[0]
}

// cuts splits n rows into k contiguous shards at random boundaries (shards may be empty).
func cuts(rng *rand.Rand, n, k int) []int {
	c := []int{0, n}
	for i := 1; i < k; i++ {
		c = append(c, rng.IntN(n+1))
	}
	slices.Sort(c)
	return c
}

func TestSampleMergeEqualsSinglePass(t *testing.T) {
	tests := []struct {
		name      string
		n, d, k   int
		shards    int
		keyLevels int // 0: continuous keys; else keys from this many levels (ties)
	}{
		{"continuous", 500, 3, 40, 7, 0},
		{"ties", 400, 2, 50, 9, 5},
		{"k above n", 30, 2, 100, 4, 0},
		{"k zero", 30, 1, 0, 3, 0},
		{"one shard", 100, 2, 10, 1, 3},
		{"no inputs", 60, 0, 8, 5, 4},
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			keys := make([]float64, tc.n)
			x := make([]float64, tc.n*tc.d)
			y := make([]float64, tc.n)
			for i := range keys {
				if tc.keyLevels > 0 {
					keys[i] = float64(rng.IntN(tc.keyLevels)) / float64(tc.keyLevels)
				} else {
					keys[i] = rng.Float64()
				}
				y[i] = float64(i)
				for j := 0; j < tc.d; j++ {
					x[i*tc.d+j] = float64(i*10 + j)
				}
			}
			// Brute force: stable sort of row indices by key, first k.
			ord := make([]int, tc.n)
			for i := range ord {
				ord[i] = i
			}
			slices.SortStableFunc(ord, func(a, b int) int { return cmp.Compare(keys[a], keys[b]) })
			want := NewSample(tc.k, tc.d)
			for _, i := range ord[:min(tc.k, tc.n)] {
				want.Keys = append(want.Keys, keys[i])
				want.X = append(want.X, x[i*tc.d:(i+1)*tc.d]...)
				want.Y = append(want.Y, y[i])
			}
			single := NewSample(tc.k, tc.d)
			for i := range keys {
				single.Add(keys[i], x[i*tc.d:(i+1)*tc.d], y[i])
			}
			if !sampleEqual(single, want) {
				t.Fatalf("single pass %v, want %v", single.Y, want.Y)
			}
			for rep := 0; rep < 5; rep++ {
				c := cuts(rng, tc.n, tc.shards)
				var parts []*Sample
				for s := 0; s+1 < len(c); s++ {
					p := NewSample(tc.k, tc.d)
					for i := c[s]; i < c[s+1]; i++ {
						p.Add(keys[i], x[i*tc.d:(i+1)*tc.d], y[i])
					}
					parts = append(parts, p)
				}
				got := mergeTree(t, rng, parts)
				if !sampleEqual(got, want) {
					t.Fatalf("merged %v, want %v", got.Y, want.Y)
				}
			}
		})
	}
}

func sampleEqual(a, b *Sample) bool {
	return a.K == b.K && a.D == b.D && slices.Equal(a.Keys, b.Keys) && slices.Equal(a.X, b.X) && slices.Equal(a.Y, b.Y)
}

func TestSampleMergeErrors(t *testing.T) {
	ok := func() *Sample {
		return &Sample{K: 2, D: 1, Keys: []float64{0.1, 0.2}, X: []float64{1, 2}, Y: []float64{1, 2}}
	}
	tests := []struct {
		name string
		next Stats
	}{
		{"type", &Gram{}},
		{"k", &Sample{K: 3, D: 1}},
		{"d", &Sample{K: 2, D: 2}},
		{"too many rows", &Sample{K: 2, D: 1, Keys: []float64{1, 2, 3}, X: []float64{1, 2, 3}, Y: []float64{1, 2, 3}}},
		{"x shape", &Sample{K: 2, D: 1, Keys: []float64{1}, X: []float64{1, 2}, Y: []float64{1}}},
		{"unsorted", &Sample{K: 2, D: 1, Keys: []float64{2, 1}, X: []float64{1, 2}, Y: []float64{1, 2}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := ok()
			if err := s.Merge(tc.next); err == nil {
				t.Fatal("accepted")
			}
			if !sampleEqual(s, ok()) {
				t.Fatal("failed merge changed the receiver")
			}
		})
	}
}

func TestDistinctMergeEqualsSinglePass(t *testing.T) {
	tests := []struct {
		name    string
		n, cols int
		cap     int
		levels  []int // distinct levels per column (0: continuous)
		shards  int
	}{
		{"mixed", 300, 3, 4, []int{2, 4, 0}, 6},
		{"exactly cap+1", 200, 1, 4, []int{5}, 5},
		{"cap zero", 50, 2, 0, []int{3, 1}, 4},
		{"big cap", 100, 2, 1000, []int{0, 7}, 8},
	}
	rng := rand.New(rand.NewPCG(13, 14))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rows := make([][]float64, tc.n)
			for i := range rows {
				rows[i] = make([]float64, tc.cols)
				for j := range rows[i] {
					if tc.levels[j] > 0 {
						rows[i][j] = float64(rng.IntN(tc.levels[j])) - 1
					} else {
						rows[i][j] = rng.NormFloat64()
					}
				}
			}
			want := NewDistinct(tc.cols, tc.cap)
			for j := 0; j < tc.cols; j++ {
				var all []float64
				for _, r := range rows {
					all = append(all, r[j])
				}
				slices.Sort(all)
				all = slices.Compact(all)
				want.Values[j] = all[:min(len(all), tc.cap+1)]
			}
			single := NewDistinct(tc.cols, tc.cap)
			for _, r := range rows {
				single.Add(r)
			}
			if !distinctEqual(single, want) {
				t.Fatalf("single pass %v, want %v", single.Values, want.Values)
			}
			for rep := 0; rep < 5; rep++ {
				c := cuts(rng, tc.n, tc.shards)
				var parts []*Distinct
				for s := 0; s+1 < len(c); s++ {
					p := NewDistinct(tc.cols, tc.cap)
					for _, r := range rows[c[s]:c[s+1]] {
						p.Add(r)
					}
					parts = append(parts, p)
				}
				rng.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] }) // order-independent
				got := mergeTree(t, rng, parts)
				if !distinctEqual(got, want) {
					t.Fatalf("merged %v, want %v", got.Values, want.Values)
				}
			}
		})
	}
}

func distinctEqual(a, b *Distinct) bool {
	return a.Cap == b.Cap && slices.EqualFunc(a.Values, b.Values, slices.Equal[[]float64])
}

func TestDistinctMergeErrors(t *testing.T) {
	tests := []struct {
		name string
		next Stats
	}{
		{"type", &Rows{}},
		{"cap", &Distinct{Cap: 3, Values: [][]float64{{1}}}},
		{"columns", &Distinct{Cap: 2, Values: [][]float64{{1}, {2}}}},
		{"too many", &Distinct{Cap: 2, Values: [][]float64{{1, 2, 3, 4}}}},
		{"unsorted", &Distinct{Cap: 2, Values: [][]float64{{2, 1}}}},
		{"repeated", &Distinct{Cap: 2, Values: [][]float64{{1, 1}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &Distinct{Cap: 2, Values: [][]float64{{0, 5}}}
			if err := s.Merge(tc.next); err == nil {
				t.Fatal("accepted")
			}
			if !slices.Equal(s.Values[0], []float64{0, 5}) {
				t.Fatal("failed merge changed the receiver")
			}
		})
	}
}
