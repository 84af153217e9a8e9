package features

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/gpreduce/gpreduce/internal/kernel"
)

// TestTopProductsBruteForce: Algorithm 1 returns the multiset of the p largest of all prod m_i
// log-eigenvalue sums, with distinct valid index tuples whose sums are the returned values.
func TestTopProductsBruteForce(t *testing.T) {
	tests := []struct {
		name string
		ms   []int
		ties bool
	}{
		{"d1", []int{7}, false},
		{"d2 uneven", []int{5, 3}, false},
		{"d2 ties", []int{4, 6}, true},
		{"d3 uneven", []int{2, 7, 4}, false},
		{"d3 ties", []int{3, 3, 3}, true},
		{"d4 uneven", []int{3, 1, 5, 2}, false},
		{"d4 ties", []int{2, 4, 3, 4}, true},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := len(tc.ms)
			logLam := make([][]float64, d)
			total := 1
			for i, m := range tc.ms {
				logLam[i] = make([]float64, m)
				for j := range logLam[i] {
					if tc.ties {
						logLam[i][j] = math.Log(float64(1 + rng.IntN(3))) // few levels: many ties
					} else {
						logLam[i][j] = math.Log(rng.Float64()*10 + 1e-3)
					}
				}
				slices.Sort(logLam[i])
				slices.Reverse(logLam[i])
				total *= m
			}
			// Brute force: every product, summed in dimension order like the algorithm.
			all := make([]float64, 0, total)
			tuple := make([]int, d)
			for n := 0; n < total; n++ {
				var s float64
				for i := 0; i < d; i++ {
					s += logLam[i][tuple[i]]
				}
				all = append(all, s)
				for i := d - 1; i >= 0; i-- {
					tuple[i]++
					if tuple[i] < tc.ms[i] {
						break
					}
					tuple[i] = 0
				}
			}
			slices.Sort(all)
			slices.Reverse(all)
			for _, p := range []int{1, 2, 5, total - 1, total, total + 3} {
				if p < 1 {
					continue
				}
				idx, lp := topProducts(logLam, p)
				want := min(p, total)
				if len(lp) != want || len(idx) != want*d {
					t.Fatalf("p=%d: %d values and %d indices, want %d values", p, len(lp), len(idx), want)
				}
				seen := map[string]bool{}
				for k := 0; k < want; k++ {
					var s float64
					key := ""
					for i := 0; i < d; i++ {
						j := idx[k*d+i]
						if j < 0 || j >= tc.ms[i] {
							t.Fatalf("p=%d: index %d out of range in dimension %d", p, j, i)
						}
						s += logLam[i][j]
						key += string(rune('a' + j))
					}
					if seen[key] {
						t.Fatalf("p=%d: tuple %q selected twice", p, key)
					}
					seen[key] = true
					if math.Abs(s-lp[k]) > 1e-12 {
						t.Fatalf("p=%d: value %d is %v but its tuple sums to %v", p, k, lp[k], s)
					}
					if k > 0 && lp[k] > lp[k-1] {
						t.Fatalf("p=%d: not descending at %d", p, k)
					}
				}
				got := slices.Clone(lp)
				for k := range got {
					if math.Abs(got[k]-all[k]) > 1e-12 {
						t.Fatalf("p=%d: value %d is %v, brute force %v", p, k, got[k], all[k])
					}
				}
			}
		})
	}
}

// denseKron returns the Kronecker product of row-major square matrices (last factor fastest).
func denseKron(ms [][]float64) (*mat.Dense, int) {
	out := mat.NewDense(1, 1, []float64{1})
	n := 1
	for _, q := range ms {
		m := int(math.Round(math.Sqrt(float64(len(q)))))
		var k mat.Dense
		k.Kronecker(out, mat.NewDense(m, m, q))
		out = &k
		n *= m
	}
	return out, n
}

// griefDense returns K_XU (n x m) for the product kernel on the full grid, in the Kronecker
// order of the grid (last dimension fastest), and the flat grid index of each selected tuple.
func griefDense(g *GRIEF, x []float64, n int) (*mat.Dense, []int) {
	d := g.Dim()
	c := math.Pow(g.SignalVariance, 1/float64(d))
	m := 1
	for _, ax := range g.Grid {
		m *= len(ax)
	}
	kxu := mat.NewDense(n, m, nil)
	tuple := make([]int, d)
	for u := 0; u < m; u++ {
		for j := 0; j < n; j++ {
			v := 1.0
			for i := 0; i < d; i++ {
				v *= newKernel1(g.Family, g.Lengthscales[i], c).eval(x[j*d+i], g.Grid[i][tuple[i]])
			}
			kxu.Set(j, u, v)
		}
		for i := d - 1; i >= 0; i-- {
			tuple[i]++
			if tuple[i] < len(g.Grid[i]) {
				break
			}
			tuple[i] = 0
		}
	}
	sel := make([]int, g.NumFeatures())
	for k := range sel {
		f := 0
		for i := 0; i < d; i++ {
			f = f*len(g.Grid[i]) + g.Idx[k*d+i]
		}
		sel[k] = f
	}
	return kxu, sel
}

func randomGrid(rng *rand.Rand, ms []int) [][]float64 {
	grid := make([][]float64, len(ms))
	for i, m := range ms {
		grid[i] = make([]float64, m)
		for j := range grid[i] {
			grid[i][j] = -1.5 + 3*float64(j)/float64(max(m-1, 1)) + 0.05*rng.Float64()
		}
	}
	return grid
}

func randomInputs(rng *rand.Rand, n, d int) []float64 {
	x := make([]float64, n*d)
	for j := range x {
		x[j] = 4*rng.Float64() - 2
	}
	return x
}

// TestGRIEFTheorem2: MapBlock equals the dense K_XU Q S_p^T Lambda_p^{-1/2} built from the full
// Kronecker product.
func TestGRIEFTheorem2(t *testing.T) {
	tests := []struct {
		name string
		fam  kernel.Family
		ls   []float64
		ms   []int
		p    int
	}{
		{"rbf d1", kernel.RBF, []float64{0.7}, []int{6}, 4},
		{"rbf d2", kernel.RBF, []float64{0.8, 1.3}, []int{5, 4}, 9},
		{"matern32 d3", kernel.Matern32, []float64{0.9, 0.6, 1.5}, []int{3, 4, 2}, 11},
		{"matern12 d2", kernel.Matern12, []float64{1.1, 0.5}, []int{4, 3}, 12},
		{"matern52 d3 p>m", kernel.Matern52, []float64{1, 1, 1}, []int{2, 3, 2}, 100},
		// Few features: most inputs use one eigenfunction (factors common to all features).
		{"rbf d5 p3", kernel.RBF, []float64{0.9, 1.2, 3, 0.7, 2}, []int{4, 3, 5, 2, 3}, 3},
		{"rbf d6 p40", kernel.RBF, []float64{0.9, 1.2, 0.5, 0.7, 2, 0.6}, []int{4, 3, 5, 2, 3, 4}, 40},
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := len(tc.ls)
			g, err := NewGRIEF(tc.fam, tc.ls, 1.7, randomGrid(rng, tc.ms), tc.p)
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Validate(); err != nil {
				t.Fatal(err)
			}
			n, p := 9, g.NumFeatures()
			x := randomInputs(rng, n, d)
			got := make([]float64, n*p)
			g.MapBlock(x, n, got)
			kxu, sel := griefDense(g, x, n)
			Q, _ := denseKron(g.Q)
			var kq mat.Dense
			kq.Mul(kxu, Q)
			for j := 0; j < n; j++ {
				row := make([]float64, p)
				g.Map(x[j*d:(j+1)*d], row)
				for k := 0; k < p; k++ {
					want := kq.At(j, sel[k]) * math.Exp(-0.5*g.LogLamP[k])
					if math.Abs(got[j*p+k]-want) > 1e-10*(1+math.Abs(want)) {
						t.Fatalf("phi_%d(x_%d) = %v, dense %v", k, j, got[j*p+k], want)
					}
					if row[k] != got[j*p+k] {
						t.Fatalf("Map and MapBlock differ at (%d, %d)", j, k)
					}
				}
			}
		})
	}
}

// TestGRIEFNystrom: with p = m the GRIEF kernel Phi Phi^T is the Nystrom kernel
// K_XU K_UU^-1 K_UX of the product kernel (which for RBF is the ARD RBF of package kernel).
func TestGRIEFNystrom(t *testing.T) {
	tests := []struct {
		name string
		fam  kernel.Family
		ls   []float64
		ms   []int
	}{
		{"rbf d2", kernel.RBF, []float64{1.2, 0.9}, []int{4, 3}},
		{"rbf d3", kernel.RBF, []float64{1.5, 1.1, 2}, []int{3, 2, 3}},
		{"matern32 d2", kernel.Matern32, []float64{0.8, 1.4}, []int{4, 4}},
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := len(tc.ls)
			m := 1
			for _, v := range tc.ms {
				m *= v
			}
			sf2 := 2.3
			grid := randomGrid(rng, tc.ms)
			g, err := NewGRIEF(tc.fam, tc.ls, sf2, grid, m)
			if err != nil {
				t.Fatal(err)
			}
			if g.NumFeatures() != m {
				t.Fatalf("p = %d, want %d", g.NumFeatures(), m)
			}
			n := 7
			x := randomInputs(rng, n, d)
			phi := make([]float64, n*m)
			g.MapBlock(x, n, phi)
			var approx mat.Dense
			P := mat.NewDense(n, m, phi)
			approx.Mul(P, P.T())

			// The grid points, flattened in Kronecker order.
			pts := make([][]float64, m)
			tuple := make([]int, d)
			for u := range pts {
				pts[u] = make([]float64, d)
				for i := range tuple {
					pts[u][i] = grid[i][tuple[i]]
				}
				for i := d - 1; i >= 0; i-- {
					tuple[i]++
					if tuple[i] < tc.ms[i] {
						break
					}
					tuple[i] = 0
				}
			}
			kfun := func(a, b []float64) float64 {
				if tc.fam == kernel.RBF { // the product form equals ARD RBF
					return kernel.Kernel{Family: kernel.RBF, Lengthscales: tc.ls, SignalVariance: sf2}.Eval(a, b)
				}
				v := sf2
				for i := range a {
					v *= kernel.Kernel{Family: tc.fam, Lengthscales: tc.ls[i : i+1], SignalVariance: 1}.Eval(a[i:i+1], b[i:i+1])
				}
				return v
			}
			kuu := mat.NewSymDense(m, nil)
			for a := 0; a < m; a++ {
				for b := a; b < m; b++ {
					kuu.SetSym(a, b, kfun(pts[a], pts[b]))
				}
			}
			kxu := mat.NewDense(n, m, nil)
			for j := 0; j < n; j++ {
				for u := 0; u < m; u++ {
					kxu.Set(j, u, kfun(x[j*d:(j+1)*d], pts[u]))
				}
			}
			var ch mat.Cholesky
			if !ch.Factorize(kuu) {
				t.Fatal("K_UU not positive definite")
			}
			var sol, nys mat.Dense
			if err := ch.SolveTo(&sol, kxu.T()); err != nil {
				t.Fatal(err)
			}
			nys.Mul(kxu, &sol)
			var diff mat.Dense
			diff.Sub(&approx, &nys)
			rel := mat.Norm(&diff, 2) / mat.Norm(&nys, 2)
			t.Logf("relative difference %.3g", rel)
			if rel > 1e-8 {
				t.Fatalf("GRIEF kernel differs from Nystrom by %v relative", rel)
			}
		})
	}
}

// TestGRIEFHighDimStable: with many dimensions the products of d factors would underflow, but the
// log form keeps the features finite and non-trivial.
func TestGRIEFHighDimStable(t *testing.T) {
	d := 40
	ls := make([]float64, d)
	for i := range ls {
		ls[i] = 0.8 + 0.01*float64(i)
	}
	ms := make([]int, d)
	for i := range ms {
		ms[i] = 10
	}
	rng := rand.New(rand.NewPCG(7, 8))
	g, err := NewGRIEF(kernel.RBF, ls, 1, randomGrid(rng, ms), 200)
	if err != nil {
		t.Fatal(err)
	}
	n := 5
	x := randomInputs(rng, n, d)
	phi := make([]float64, n*200)
	g.MapBlock(x, n, phi)
	var nz int
	for _, v := range phi {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("feature %v", v)
		}
		if v != 0 {
			nz++
		}
	}
	if nz < len(phi)/2 {
		t.Fatalf("only %d of %d features are non-zero", nz, len(phi))
	}
}

func TestGRIEFGrid(t *testing.T) {
	tests := []struct {
		name     string
		min, max []float64
		distinct [][]float64
		mbar     int
		want     [][]float64
	}{
		{"categorical", []float64{0}, []float64{1}, [][]float64{{0, 1}}, 4, [][]float64{{0, 1}}},
		{"exactly mbar values", []float64{1}, []float64{7}, [][]float64{{1, 2, 7}}, 3, [][]float64{{1, 2, 7}}},
		{"continuous", []float64{-1}, []float64{2}, [][]float64{{-1, 0, 0.5, 2}}, 3, [][]float64{{-1, 0.5, 2}}},
		{"constant", []float64{3}, []float64{3}, [][]float64{{3}}, 5, [][]float64{{3}}},
		{"mixed", []float64{0, 0}, []float64{4, 1}, [][]float64{{0, 1, 2, 3, 4, 5}, {0, 1}}, 5, [][]float64{{0, 1, 2, 3, 4}, {0, 1}}},
		{"mbar 1", []float64{0}, []float64{4}, [][]float64{{0, 1}}, 1, [][]float64{{2}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := GRIEFGrid(tc.min, tc.max, tc.distinct, tc.mbar)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if !slices.Equal(got[i], tc.want[i]) {
					t.Fatalf("axis %d = %v, want %v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// TestGRIEFKMeansAxes: a heavy-tailed column's axis moves to 1-D k-means centres between its
// extremes (a fixed point of Lloyd's step: every interior point is the mean of the sample values
// nearest to it; on 0..99 the closed form 0, 33, 66, 99), even-looking columns, levels and short
// axes keep theirs, and tied quantiles collapse.
func TestGRIEFKMeansAxes(t *testing.T) {
	even := func(lo, hi float64, m int) []float64 {
		ax := make([]float64, m)
		for j := range ax {
			ax[j] = lo + float64(j)*(hi-lo)/float64(m-1)
		}
		return ax
	}
	ramp := make([]float64, 100) // 0..99: range 99, central 80% 79.2, ratio 1.25
	cube := make([]float64, 101) // (j/10)^6: Q(0.1) = 1, Q(0.9) = 531441, range 1e6, ratio 1.88
	tail := make([]float64, 101) // 101/(101-j) - 1 (Pareto-like): range 100, Q(0.9)-Q(0.1) = 8.18-0.11, ratio 12.4
	for j := range ramp {
		ramp[j] = float64(j)
	}
	for j := range tail {
		tail[j] = 101/float64(101-j) - 1
		cube[j] = math.Pow(float64(j)/10, 6)
	}
	mostlyZero := make([]float64, 100) // 95 zeros and 1..5: Q(0.1) = Q(0.9) = 0
	for j := 95; j < 100; j++ {
		mostlyZero[j] = float64(j - 94)
	}
	// lloydFixed reports whether every interior point of ax is the mean of the values of s
	// nearer to it than to its neighbours.
	lloydFixed := func(ax, s []float64) bool {
		for j := 1; j < len(ax)-1; j++ {
			var sum float64
			var n int
			for _, v := range s {
				if v > (ax[j-1]+ax[j])/2 && v <= (ax[j]+ax[j+1])/2 {
					sum += v
					n++
				}
			}
			if n == 0 || math.Abs(sum/float64(n)-ax[j]) > 1e-12*math.Abs(ax[j])+1e-15 {
				return false
			}
		}
		return true
	}
	tests := []struct {
		name   string
		axis   []float64
		sample []float64
		level  bool
		ratio  float64
		want   []float64 // nil: unchanged
		moves  bool      // moved to a Lloyd fixed point (checked by lloydFixed when want is nil)
	}{
		{"uniform keeps even", even(0, 99, 10), ramp, false, GRIEFTailRatio, nil, false},
		{"uniform at ratio 0", even(0, 99, 4), ramp, false, 0, []float64{0, 33, 66, 99}, true},
		{"skewed below the ratio keeps even", even(0, 1e6, 10), cube, false, GRIEFTailRatio, nil, false},
		{"heavy tail moves", even(0, tail[100], 6), tail, false, GRIEFTailRatio, nil, true},
		{"levels stay", []float64{0, 1, 2, 1000}, tail, true, 0, nil, false},
		{"two points stay", []float64{0, 5}, mostlyZero, false, 0, nil, false},
		{"ties collapse", even(0, 5, 6), mostlyZero, false, GRIEFTailRatio, []float64{0, 5}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, moved, err := GRIEFKMeansAxes([][]float64{tc.axis, {0, 1}}, [][]float64{tc.sample, {0, 1}}, []bool{tc.level, true}, tc.ratio)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got[1], []float64{0, 1}) {
				t.Fatalf("level axis became %v", got[1])
			}
			if !tc.moves {
				if len(moved) != 0 || !slices.Equal(got[0], tc.axis) {
					t.Fatalf("moved %v to %v, want %v unchanged", moved, got[0], tc.axis)
				}
				return
			}
			if !slices.Equal(moved, []int{0}) {
				t.Errorf("moved %v, want [0]", moved)
			}
			ax := got[0]
			if tc.want != nil && !slices.Equal(ax, tc.want) {
				t.Fatalf("axis %v, want %v", ax, tc.want)
			}
			if ax[0] != tc.axis[0] || ax[len(ax)-1] != tc.axis[len(tc.axis)-1] || !slices.IsSorted(ax) {
				t.Fatalf("axis %v does not span %v..%v in order", ax, tc.axis[0], tc.axis[len(tc.axis)-1])
			}
			if !lloydFixed(ax, tc.sample) {
				t.Fatalf("axis %v is not a fixed point of Lloyd's step", ax)
			}
			inside := 0 // points among the central 80% of the rows; the even axis has none there
			for _, v := range ax {
				if v >= quantile(tc.sample, 0.1) && v <= quantile(tc.sample, 0.9) {
					inside++
				}
			}
			if tc.want == nil && inside < 2 {
				t.Errorf("axis %v has %d points among the central 80%% of the rows, want at least 2", ax, inside)
			}
		})
	}
	// Closed form of the type-7 quantile: on 0..99, Q(p) = 99 p; on j^2 at p = 0.5, between 49^2 and 50^2.
	sq := []float64{}
	for j := 0; j < 100; j++ {
		sq = append(sq, float64(j*j))
	}
	for _, c := range []struct {
		s       []float64
		p, want float64
	}{{ramp, 0.25, 24.75}, {ramp, 1, 99}, {sq, 0.5, 2450.5}, {ramp, 0, 0}} {
		if got := quantile(c.s, c.p); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("quantile(%v) = %v, want %v", c.p, got, c.want)
		}
	}
	bad := []struct {
		name          string
		grid, samples [][]float64
		levels        []bool
		ratio         float64
	}{
		{"lengths", [][]float64{{0, 1, 2}}, nil, []bool{false}, 5},
		{"empty sample", [][]float64{{0, 1, 2}}, [][]float64{{}}, []bool{false}, 5},
		{"unsorted sample", [][]float64{{0, 1, 2}}, [][]float64{{2, 1}}, []bool{false}, 5},
		{"nan sample", [][]float64{{0, 1, 2}}, [][]float64{{0, math.NaN()}}, []bool{false}, 5},
		{"negative ratio", [][]float64{{0, 1, 2}}, [][]float64{{0, 1}}, []bool{false}, -1},
	}
	for _, tc := range bad {
		if _, _, err := GRIEFKMeansAxes(tc.grid, tc.samples, tc.levels, tc.ratio); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
}

func TestGRIEFErrors(t *testing.T) {
	good := [][]float64{{0, 1}, {0, 0.5, 1}}
	tests := []struct {
		name string
		f    kernel.Family
		ls   []float64
		sf2  float64
		grid [][]float64
		p    int
		want string
	}{
		{"p zero", kernel.RBF, []float64{1, 1}, 1, good, 0, "p = 0"},
		{"empty grid axis", kernel.RBF, []float64{1, 1}, 1, [][]float64{{0, 1}, {}}, 3, "empty"},
		{"no grid", kernel.RBF, []float64{1, 1}, 1, nil, 3, "grid axes"},
		{"bad lengthscale", kernel.RBF, []float64{1, -1}, 1, good, 3, "lengthscale"},
		{"inf lengthscale", kernel.RBF, []float64{math.Inf(1), 1}, 1, good, 3, "lengthscale"},
		{"no lengthscales", kernel.RBF, nil, 1, nil, 3, "lengthscales"},
		{"bad signal variance", kernel.RBF, []float64{1, 1}, 0, good, 3, "signal variance"},
		{"bad family", kernel.Family(9), []float64{1, 1}, 1, good, 3, "family"},
		{"repeated point", kernel.RBF, []float64{1, 1}, 1, [][]float64{{0, 1, 0}, {0}}, 3, "repeats"},
		{"nan point", kernel.RBF, []float64{1, 1}, 1, [][]float64{{0, math.NaN()}, {0}}, 3, "finite"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewGRIEF(tc.f, tc.ls, tc.sf2, tc.grid, tc.p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	gridErrs := []struct {
		name     string
		min, max []float64
		distinct [][]float64
		mbar     int
	}{
		{"no columns", nil, nil, nil, 3},
		{"length mismatch", []float64{0}, []float64{1, 2}, [][]float64{{0}}, 3},
		{"mbar zero", []float64{0}, []float64{1}, [][]float64{{0, 1}}, 0},
		{"no values", []float64{0}, []float64{1}, [][]float64{{}}, 3},
		{"min above max", []float64{2}, []float64{1}, [][]float64{{1, 2}}, 3},
		{"unsorted", []float64{0}, []float64{1}, [][]float64{{1, 0}}, 3},
		{"infinite bound", []float64{math.Inf(-1)}, []float64{1}, [][]float64{{0, 1, 2, 3}}, 3},
	}
	for _, tc := range gridErrs {
		t.Run("grid "+tc.name, func(t *testing.T) {
			if _, err := GRIEFGrid(tc.min, tc.max, tc.distinct, tc.mbar); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestGRIEFValidate(t *testing.T) {
	mk := func() *GRIEF {
		g, err := NewGRIEF(kernel.Matern52, []float64{1, 2}, 1.5, [][]float64{{0, 1, 2}, {0, 1}}, 4)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	if err := mk().Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		spoil func(g *GRIEF)
	}{
		{"family", func(g *GRIEF) { g.Family = 17 }},
		{"lengthscale", func(g *GRIEF) { g.Lengthscales[0] = 0 }},
		{"signal variance", func(g *GRIEF) { g.SignalVariance = math.NaN() }},
		{"grid axes", func(g *GRIEF) { g.Grid = g.Grid[:1] }},
		{"q shape", func(g *GRIEF) { g.Q[0] = g.Q[0][:4] }},
		{"loglam shape", func(g *GRIEF) { g.LogLam[1] = nil }},
		{"q nan", func(g *GRIEF) { g.Q[1][0] = math.NaN() }},
		{"no features", func(g *GRIEF) { g.LogLamP, g.Idx = nil, nil }},
		{"idx shape", func(g *GRIEF) { g.Idx = g.Idx[:3] }},
		{"idx range", func(g *GRIEF) { g.Idx[1] = 2 }},
		{"idx negative", func(g *GRIEF) { g.Idx[0] = -1 }},
		{"order", func(g *GRIEF) { g.LogLamP[1] = g.LogLamP[0] + 1 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := mk()
			tc.spoil(g)
			if err := g.Validate(); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// BenchmarkGRIEFMapBlock times GRIEF's feature map and its lengthscale contraction
// (GRIEFGrad.Accumulate) on 256 rows of d = 18 inputs with 10 grid points per input (m_bar =
// 10, GP-GRIEF §4.3) and p = 1000 and 4000 features: the per-row work of GRIEF-II's Gram and
// gradient passes (elevators' shape).
func BenchmarkGRIEFMapBlock(b *testing.B) {
	const d, m, rows = 18, 10, 256
	rng := rand.New(rand.NewPCG(5, 5))
	grid := make([][]float64, d)
	ls := make([]float64, d)
	for i := range grid {
		grid[i] = make([]float64, m)
		for a := range m {
			grid[i][a] = -2 + 4*float64(a)/(m-1)
		}
		ls[i] = 0.5 + rng.Float64()*3
	}
	x := make([]float64, rows*d)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	for _, p := range []int{1000, 4000} {
		g, err := NewGRIEF(kernel.RBF, ls, 1, grid, p)
		if err != nil {
			b.Fatal(err)
		}
		phi, z := make([]float64, rows*p), make([]float64, rows*p)
		for i := range z {
			z[i] = rng.NormFloat64()
		}
		b.Run(fmt.Sprintf("map/p=%d", p), func(b *testing.B) {
			for b.Loop() {
				g.MapBlock(x, rows, phi)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows*p), "ns/feature")
		})
		gg, err := NewGRIEFGrad(g)
		if err != nil {
			b.Fatal(err)
		}
		acc := make([]float64, d)
		b.Run(fmt.Sprintf("grad/p=%d", p), func(b *testing.B) {
			for b.Loop() {
				gg.Accumulate(x, rows, phi, z, acc)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows*p), "ns/feature")
		})
	}
}
