package features

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gpreduce/gpreduce/internal/kernel"
)

// glKernel returns sum_j h_j z_j(x) z_j(x') for lengthscales ls.
func glKernel(g *GL, ls, x, xp []float64) float64 {
	s := g.NumFeatures()
	z, zp := make([]float64, s), make([]float64, s)
	g.Map(x, z)
	g.Map(xp, zp)
	logh := make([]float64, s)
	g.LogWeights(ls, logh, nil)
	var sum float64
	for j := range z {
		sum += math.Exp(logh[j]) * z[j] * zp[j]
	}
	return sum
}

func randPoints(rng *rand.Rand, n, d int, half float64) [][]float64 {
	pts := make([][]float64, n)
	for i := range pts {
		pts[i] = make([]float64, d)
		for k := range pts[i] {
			pts[i][k] = half * (2*rng.Float64() - 1)
		}
	}
	return pts
}

// maxKernelErr is the largest |k~ - k0| over all pairs of pts.
func maxKernelErr(g *GL, ls []float64, pts [][]float64) float64 {
	k := kernel.Kernel{Family: g.Family, Lengthscales: ls, SignalVariance: 1}
	s := g.NumFeatures()
	logh := make([]float64, s)
	g.LogWeights(ls, logh, nil)
	z := make([][]float64, len(pts))
	for i, p := range pts {
		z[i] = make([]float64, s)
		g.Map(p, z[i])
	}
	var worst float64
	for i := range pts {
		for j := i; j < len(pts); j++ {
			var kt float64
			for q := 0; q < s; q++ {
				kt += math.Exp(logh[q]) * z[i][q] * z[j][q]
			}
			worst = math.Max(worst, math.Abs(kt-k.Eval(pts[i], pts[j])))
		}
	}
	return worst
}

func TestGLReproducesRBF(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		ls    []float64
		U     []float64
		nodes []int
	}{
		{[]float64{0.4}, []float64{22}, []int{64}},
		{[]float64{0.5, 0.8}, []float64{17, 11}, []int{56, 48}},
		{[]float64{0.7, 1.0, 1.3}, []float64{10.7, 7.5, 5.8}, []int{44, 40, 38}},
	}
	for _, c := range cases {
		g, err := NewGL(kernel.RBF, c.U, c.nodes)
		if err != nil {
			t.Fatal(err)
		}
		pts := randPoints(rng, 8, len(c.ls), 1) // |x - x'| up to 2 per dimension
		e := maxKernelErr(g, c.ls, pts)
		t.Logf("d=%d RBF s=%d: max |k~ - k| = %.3g", len(c.ls), g.NumFeatures(), e)
		if e > 1e-10 {
			t.Errorf("d=%d RBF: max |k~ - k| = %.3g", len(c.ls), e)
		}
	}
}

// TestGLMatern52Converges shows the error decreasing as the box and the grid grow: truncation of the
// polynomial spectral tail dominates for Matern.
func TestGLMatern52Converges(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	ls := []float64{0.5}
	pts := randPoints(rng, 8, 1, 1)
	prev := math.Inf(1)
	for _, Ul := range []float64{5, 20, 80} {
		U := Ul / ls[0]
		n := int(8*Ul) + 1
		g, err := NewGL(kernel.Matern52, []float64{U}, []int{n})
		if err != nil {
			t.Fatal(err)
		}
		e := maxKernelErr(g, ls, pts)
		t.Logf("Matern52 d=1 U*l=%g s=%d: max err %.3g", Ul, n, e)
		if !(e < prev/10) {
			t.Errorf("U*l=%g: error %.3g did not drop tenfold from %.3g", Ul, e, prev)
		}
		prev = e
	}
	if prev > 1e-5 {
		t.Errorf("Matern52 final error %.3g", prev)
	}
	// At a fixed box, more nodes help until the truncation floor (~6e-9 at U*l = 80).
	prev = math.Inf(1)
	for _, n := range []int{120, 240, 480} {
		g, err := NewGL(kernel.Matern52, []float64{80 / ls[0]}, []int{n})
		if err != nil {
			t.Fatal(err)
		}
		e := maxKernelErr(g, ls, pts)
		t.Logf("Matern52 d=1 U*l=80 s=%d: max err %.3g", n, e)
		if !(e < prev/3) {
			t.Errorf("s=%d: error %.3g did not drop threefold from %.3g", n, e, prev)
		}
		prev = e
	}
	// Two dimensions, one setting.
	ls2 := []float64{0.6, 0.9}
	g, err := NewGL(kernel.Matern52, []float64{40 / ls2[0], 40 / ls2[1]}, []int{200, 200})
	if err != nil {
		t.Fatal(err)
	}
	e := maxKernelErr(g, ls2, randPoints(rng, 4, 2, 1))
	t.Logf("Matern52 d=2 U*l=40 s=%d: max err %.3g", g.NumFeatures(), e)
	if e > 1e-4 {
		t.Errorf("Matern52 d=2: max err %.3g", e)
	}
}

// TestGLRealEqualsComplex checks the real layout against the complex quadrature sum over the whole
// tensor grid, sum_t W_t p(eta_t) exp(i (x-x')^T eta_t), built here independently.
func TestGLRealEqualsComplex(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct {
		f     kernel.Family
		U     []float64
		nodes []int
		ls    []float64
	}{
		{kernel.RBF, []float64{6}, []int{9}, []float64{0.8}},
		{kernel.RBF, []float64{6}, []int{10}, []float64{0.8}},
		{kernel.Matern32, []float64{5, 7}, []int{5, 7}, []float64{0.7, 1.2}},
		{kernel.Matern12, []float64{5, 7}, []int{4, 7}, []float64{0.7, 1.2}},
		{kernel.RBF, []float64{3, 4, 5}, []int{3, 4, 5}, []float64{0.5, 1, 2}},
		{kernel.Matern52, []float64{3, 4, 5}, []int{3, 5, 3}, []float64{0.5, 1, 2}},
	} {
		g, err := NewGL(c.f, c.U, c.nodes)
		if err != nil {
			t.Fatal(err)
		}
		d := len(c.U)
		// Full tensor grid in row-major order.
		rules := make([][2][]float64, d)
		s := 1
		for k, n := range c.nodes {
			x, w, _ := GaussLegendre(n)
			rules[k] = [2][]float64{x, w}
			s *= n
		}
		if g.NumFeatures() != s || g.Dim() != d {
			t.Fatalf("NumFeatures %d Dim %d, want %d %d", g.NumFeatures(), g.Dim(), s, d)
		}
		etas := make([][]float64, s)
		W := make([]float64, s)
		for tt := 0; tt < s; tt++ {
			rem := tt
			eta := make([]float64, d)
			wt := 1.0
			for k := d - 1; k >= 0; k-- {
				j := rem % c.nodes[k]
				rem /= c.nodes[k]
				eta[k] = c.U[k] * rules[k][0][j]
				wt *= c.U[k] * rules[k][1][j]
			}
			etas[tt], W[tt] = eta, wt
		}
		// Representatives and the layout.
		for r := 0; r < s/2; r++ {
			for k := 0; k < d; k++ {
				if g.Eta[r*d+k] != etas[r][k] || etas[s-1-r][k] != -etas[r][k] {
					t.Fatalf("%v: representative %d is not grid node %d or its mirror is not -eta", c.nodes, r, r)
				}
			}
			if relErr(math.Exp(g.LogQuad[2*r]), 2*W[r]) > 1e-13 || g.LogQuad[2*r+1] != g.LogQuad[2*r] {
				t.Fatalf("%v: LogQuad of representative %d: %v %v vs 2W = %v", c.nodes, r, math.Exp(g.LogQuad[2*r]), math.Exp(g.LogQuad[2*r+1]), 2*W[r])
			}
		}
		if s%2 == 1 {
			for k := 0; k < d; k++ {
				if etas[s/2][k] != 0 {
					t.Fatalf("%v: middle node is not 0", c.nodes)
				}
			}
			if relErr(math.Exp(g.LogQuad[s-1]), W[s/2]) > 1e-13 {
				t.Fatalf("%v: LogQuad of the constant feature", c.nodes)
			}
		}
		pts := randPoints(rng, 5, d, 1.5)
		for i := range pts {
			for j := range pts {
				var re, im float64
				for tt := 0; tt < s; tt++ {
					var a float64
					for k := 0; k < d; k++ {
						a += (pts[i][k] - pts[j][k]) * etas[tt][k]
					}
					h := W[tt] * math.Exp(kernel.LogSpectralDensity(c.f, c.ls, etas[tt], nil))
					re += h * math.Cos(a)
					im += h * math.Sin(a)
				}
				got := glKernel(g, c.ls, pts[i], pts[j])
				if math.Abs(got-re) > 1e-13 || math.Abs(im) > 1e-13 {
					t.Errorf("%v %v: real features %.17g, complex sum %.17g%+.3gi", c.f, c.nodes, got, re, im)
				}
			}
		}
	}
}

// TestGLMapMatchesDirect compares the tensor-product evaluation with cos/sin(x^T eta_r), and
// MapBlock with Map.
func TestGLMapMatchesDirect(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, nodes := range [][]int{{1}, {2}, {7}, {64}, {1, 5}, {5, 1}, {8, 9}, {3, 1, 4}, {4, 5, 3}, {3, 3, 3, 3}} {
		d := len(nodes)
		U := make([]float64, d)
		for k := range U {
			U[k] = 5 + 10*rng.Float64()
		}
		g, err := NewGL(kernel.RBF, U, nodes)
		if err != nil {
			t.Fatal(err)
		}
		s := g.NumFeatures()
		rows := 6
		pts := randPoints(rng, rows, d, 3)
		x := make([]float64, 0, rows*d)
		for _, p := range pts {
			x = append(x, p...)
		}
		block := make([]float64, rows*s)
		g.MapBlock(x, rows, block)
		z := make([]float64, s)
		for i, p := range pts {
			g.Map(p, z)
			for j := range z {
				if z[j] != block[i*s+j] {
					t.Fatalf("%v: MapBlock row %d feature %d differs from Map", nodes, i, j)
				}
			}
			for r := 0; r < s/2; r++ {
				var a float64
				for k := 0; k < d; k++ {
					a += p[k] * g.Eta[r*d+k]
				}
				if math.Abs(z[2*r]-math.Cos(a)) > 1e-13 || math.Abs(z[2*r+1]-math.Sin(a)) > 1e-13 {
					t.Fatalf("%v: feature pair %d = (%v, %v), want cos/sin(%v)", nodes, r, z[2*r], z[2*r+1], a)
				}
			}
			if s%2 == 1 && z[s-1] != 1 {
				t.Fatalf("%v: constant feature %v", nodes, z[s-1])
			}
		}
	}
}

func TestGLLogWeightsGradient(t *testing.T) {
	for _, f := range []kernel.Family{kernel.RBF, kernel.Matern12, kernel.Matern32, kernel.Matern52} {
		g, err := NewGL(f, []float64{9, 6}, []int{7, 8})
		if err != nil {
			t.Fatal(err)
		}
		s, d := g.NumFeatures(), g.Dim()
		ls := []float64{0.6, 1.4}
		logh := make([]float64, s)
		dlogh := make([]float64, s*d)
		g.LogWeights(ls, logh, dlogh)
		const step = 1e-5
		hp, hm := make([]float64, s), make([]float64, s)
		for k := 0; k < d; k++ {
			lp := append([]float64(nil), ls...)
			lm := append([]float64(nil), ls...)
			lp[k] *= math.Exp(step)
			lm[k] *= math.Exp(-step)
			g.LogWeights(lp, hp, nil)
			g.LogWeights(lm, hm, nil)
			for j := 0; j < s; j++ {
				fd := (hp[j] - hm[j]) / (2 * step)
				if math.Abs(fd-dlogh[j*d+k]) > 1e-6*math.Max(1, math.Abs(fd)) {
					t.Errorf("%v: dlogh[%d,%d] = %v, finite difference %v", f, j, k, dlogh[j*d+k], fd)
				}
			}
		}
	}
}

// TestGLLogWeightsTail: at the box edge the weights underflow float64 but the logs stay finite.
func TestGLLogWeightsTail(t *testing.T) {
	g, err := NewGL(kernel.RBF, []float64{400}, []int{101})
	if err != nil {
		t.Fatal(err)
	}
	logh := make([]float64, g.NumFeatures())
	dlogh := make([]float64, g.NumFeatures())
	g.LogWeights([]float64{1}, logh, dlogh)
	if !(logh[0] < -50000) {
		t.Errorf("edge log weight %v: expected far below the float64 range", logh[0])
	}
	for j, v := range logh {
		if math.IsNaN(v) || math.IsInf(v, 0) || math.IsNaN(dlogh[j]) || math.IsInf(dlogh[j], 0) {
			t.Fatalf("log weight %d = %v, gradient %v", j, v, dlogh[j])
		}
	}
	// Constant feature of the odd grid: eta = 0, so d log p / d log l = 1.
	if dlogh[len(dlogh)-1] != 1 {
		t.Errorf("constant feature gradient %v, want 1", dlogh[len(dlogh)-1])
	}
}

func TestNewGLErrors(t *testing.T) {
	cases := []struct {
		name  string
		f     kernel.Family
		U     []float64
		nodes []int
		want  string
	}{
		{"empty", kernel.RBF, nil, nil, "empty"},
		{"len mismatch", kernel.RBF, []float64{1, 2}, []int{3}, "node counts"},
		{"zero U", kernel.RBF, []float64{0}, []int{3}, "U[0]"},
		{"negative U", kernel.RBF, []float64{1, -2}, []int{3, 3}, "U[1]"},
		{"NaN U", kernel.RBF, []float64{math.NaN()}, []int{3}, "U[0]"},
		{"Inf U", kernel.RBF, []float64{math.Inf(1)}, []int{3}, "U[0]"},
		{"zero nodes", kernel.RBF, []float64{1, 1}, []int{3, 0}, "nodesPerDim[1]"},
		{"too many nodes", kernel.RBF, []float64{1}, []int{MaxGaussLegendrePoints + 1}, "nodesPerDim[0]"},
		{"over limit", kernel.RBF, []float64{1, 1, 1}, []int{1024, 1024, 128}, "more than"},
		{"overflow", kernel.RBF, []float64{1, 1, 1, 1, 1, 1, 1}, []int{60000, 60000, 60000, 60000, 60000, 60000, 60000}, "more than"},
		{"family", kernel.Family(42), []float64{1}, []int{3}, "family"},
	}
	for _, c := range cases {
		_, err := NewGL(c.f, c.U, c.nodes)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.want)
		}
	}
}

func benchGLMapBlock(b *testing.B, U []float64, nodes []int) {
	g, err := NewGL(kernel.RBF, U, nodes)
	if err != nil {
		b.Fatal(err)
	}
	const rows = 1024
	d, s := g.Dim(), g.NumFeatures()
	rng := rand.New(rand.NewPCG(9, 10))
	x := make([]float64, rows*d)
	for i := range x {
		x[i] = 2*rng.Float64() - 1
	}
	dst := make([]float64, rows*s)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		g.MapBlock(x, rows, dst)
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkGLMapBlockD1S256(b *testing.B) { benchGLMapBlock(b, []float64{30}, []int{256}) }

func BenchmarkGLMapBlockD2S1024(b *testing.B) { benchGLMapBlock(b, []float64{30, 30}, []int{32, 32}) }

// TestGLConcurrent: one GL shared by goroutines (run with -race).
func TestGLConcurrent(t *testing.T) {
	g, err := NewGL(kernel.Matern32, []float64{8, 8}, []int{9, 10})
	if err != nil {
		t.Fatal(err)
	}
	s := g.NumFeatures()
	x := []float64{0.1, 0.2, -0.3, 0.4, 0.5, -0.6}
	want := make([]float64, 3*s)
	g.MapBlock(x, 3, want)
	done := make(chan []float64)
	for i := 0; i < 4; i++ {
		go func() {
			dst := make([]float64, 3*s)
			g.MapBlock(x, 3, dst)
			logh := make([]float64, s)
			g.LogWeights([]float64{1, 2}, logh, nil)
			done <- dst
		}()
	}
	for i := 0; i < 4; i++ {
		got := <-done
		for j := range got {
			if got[j] != want[j] {
				t.Fatal("concurrent MapBlock differs")
			}
		}
	}
}
