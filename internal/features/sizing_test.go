package features

import (
	"math"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mathext"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/gpreduce/gpreduce/internal/kernel"
)

func TestUpperTailQuantileNormal(t *testing.T) {
	for _, p := range []float64{0.25, 1e-3, 1e-10, 2.5e-11, 1e-20, 1e-100, 1e-300} {
		got, err := upperTailQuantile(kernel.RBF, math.Log(p))
		if err != nil {
			t.Fatal(err)
		}
		want := -distuv.UnitNormal.Quantile(p) // lower tail p: no 1-p rounding
		if relErr(got, want) > 1e-13 {
			t.Errorf("p=%g: %.17g, want %.17g", p, got, want)
		}
	}
	// Beyond float64: log p = -2000 needs the asymptotic tail; check by the leading-order inversion.
	lp := -2000.0
	got, _ := upperTailQuantile(kernel.RBF, lp)
	if back := logNormalUpperTail(got); math.Abs(back-lp) > 1e-9 {
		t.Errorf("log tail at the quantile = %v, want %v", back, lp)
	}
	if approx := math.Sqrt(-2 * lp); got > approx || got < approx-math.Log(-lp)/approx {
		t.Errorf("quantile %v not near sqrt(-2 log p) = %v", got, approx)
	}
	// Continuity of the two branches of the normal tail at t = 37.
	if d := logNormalUpperTail(math.Nextafter(37, 0)) - logNormalUpperTail(37); math.Abs(d) > 1e-12 {
		t.Errorf("normal tail jumps by %v at the branch point", d)
	}
}

func TestUpperTailQuantileStudent(t *testing.T) {
	// Matern 1/2: Cauchy, P(T > t) = atan(1/t)/pi, so t = 1/tan(pi p) exactly.
	for _, p := range []float64{0.25, 1e-3, 1e-20, 1e-200} {
		got, err := upperTailQuantile(kernel.Matern12, math.Log(p))
		if err != nil {
			t.Fatal(err)
		}
		if want := 1 / math.Tan(math.Pi*p); relErr(got, want) > 1e-12 {
			t.Errorf("Cauchy p=%g: %.17g, want %.17g", p, got, want)
		}
	}
	// Matern 3/2 and 5/2: Student t with 3 and 5 degrees of freedom, against gonum's lower-tail quantile.
	for _, f := range []kernel.Family{kernel.Matern32, kernel.Matern52} {
		st := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: 2 * f.Nu()}
		for _, p := range []float64{0.25, 1e-3, 1e-8} {
			got, err := upperTailQuantile(f, math.Log(p))
			if err != nil {
				t.Fatal(err)
			}
			if want := -st.Quantile(p); relErr(got, want) > 1e-9 {
				t.Errorf("%v p=%g: %.17g, want %.17g", f, p, got, want)
			}
		}
		// Extreme tail: P(T > t) ~ C t^-nu, so t ~ (C/p)^(1/nu); check the log tail round trip and the power law.
		lp := math.Log(1e-200)
		got, _ := upperTailQuantile(f, lp)
		if back := logStudentUpperTail(2*f.Nu(), got); math.Abs(back-lp) > 1e-9 {
			t.Errorf("%v: log tail at the quantile %v, want %v", f, back, lp)
		}
		// Branch point x = 1e-30 of the Student tail: both forms agree.
		df := 2 * f.Nu()
		tb := math.Sqrt(df * (1e30 - 1))
		series := logStudentUpperTail(df, tb*1.0001)
		direct := math.Log(0.5 * mathext.RegIncBeta(df/2, 0.5, df/(df+tb*tb*1.0001*1.0001)))
		if math.Abs(series-direct) > 1e-9 {
			t.Errorf("%v: tail branches disagree: %v vs %v", f, series, direct)
		}
	}
}

func TestSizeGLRBF(t *testing.T) {
	c := GLSizing{
		N:                 10000,
		LengthscaleMin:    []float64{0.1},
		LengthscaleMax:    []float64{2},
		SignalVarianceMax: 1,
		NoiseVarianceMin:  0.01,
		Range:             []float64{3.5},
	}
	U, nodes, err := SizeGL(kernel.RBF, c)
	if err != nil {
		t.Fatal(err)
	}
	// delta = 0.01 / (2 * 1 * 1e8) = 5e-11; one-sided per-dimension tail delta/2.
	z := -distuv.UnitNormal.Quantile(2.5e-11)
	if relErr(U[0], z/0.1) > 1e-12 {
		t.Errorf("U = %v, want %v", U[0], z/0.1)
	}
	paper := math.Sqrt(2*math.Log(4*1*1*1e8/0.01)) / 0.1
	t.Logf("RBF d=1 n=1e4 sf2/sn2=100: U*l0 = %.4g (paper's closed form %.4g)", U[0]*0.1, paper*0.1)
	if !(paper > U[0] && paper < 1.1*U[0]) {
		t.Errorf("paper's closed form %v should be a little above the exact quantile %v", paper, U[0])
	}
	want := int(math.Max(math.Ceil(AliasMargin*U[0]*3.5/2)+1, math.Ceil(ResolveFactor*2*U[0])))
	if nodes[0] != want {
		t.Errorf("nodes = %v, want %d", nodes, want)
	}

	// Two dimensions: the union bound halves the per-dimension tail; the aliasing term can dominate.
	c2 := GLSizing{
		N:                 1000,
		LengthscaleMin:    []float64{0.2, 0.5},
		LengthscaleMax:    []float64{0.3, 5},
		SignalVarianceMax: 4,
		NoiseVarianceMin:  0.04,
		Range:             []float64{40, 1},
		MaxFeatures:       1 << 20,
	}
	U2, nodes2, err := SizeGL(kernel.RBF, c2)
	if err != nil {
		t.Fatal(err)
	}
	delta := 0.04 / (2 * 4 * 1e6)
	z2 := -distuv.UnitNormal.Quantile(delta / 4)
	for k, l := range c2.LengthscaleMin {
		if relErr(U2[k], z2/l) > 1e-12 {
			t.Errorf("U[%d] = %v, want %v", k, U2[k], z2/l)
		}
	}
	if alias := int(math.Ceil(AliasMargin*U2[0]*40/2)) + 1; nodes2[0] != alias {
		t.Errorf("nodes[0] = %d, want the aliasing bound %d", nodes2[0], alias)
	}
	if res := int(math.Ceil(ResolveFactor * 5 * U2[1])); nodes2[1] != res {
		t.Errorf("nodes[1] = %d, want the resolution bound %d", nodes2[1], res)
	}
	// The result is a valid grid.
	if _, err := NewGL(kernel.RBF, U2, nodes2); err != nil {
		t.Error(err)
	}
}

func TestSizeGLMatern(t *testing.T) {
	c := GLSizing{
		N:                 1000,
		LengthscaleMin:    []float64{1},
		LengthscaleMax:    []float64{1},
		SignalVarianceMax: 1,
		NoiseVarianceMin:  0.01,
		Range:             []float64{1},
		MaxFeatures:       1 << 20,
	}
	delta := 0.01 / (2 * 1e6)
	for _, f := range []kernel.Family{kernel.Matern12, kernel.Matern32, kernel.Matern52} {
		U, nodes, err := SizeGL(f, c)
		if f == kernel.Matern12 {
			// Cauchy tail: U = cot(pi delta/2) ~ 1.3e8, hopeless; the error must say so, not overflow.
			if err == nil || !strings.Contains(err.Error(), "features") {
				t.Errorf("Matern12: expected a too-many-features error, got %v %v", U, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		df := 2 * f.Nu()
		if lt := logStudentUpperTail(df, U[0]); math.Abs(lt-math.Log(delta/2)) > 1e-9 {
			t.Errorf("%v: tail at U = %v is exp(%v), want %v", f, U[0], lt, delta/2)
		}
		t.Logf("%v d=1 n=1e3 sf2/sn2=100: U*l0 = %.4g, nodes %v", f, U[0], nodes)
	}
	// Matern 5/2 grows like n^(1/nu) = n^0.4 (an independent numerical solution of the same
	// tail-mass rule, not from the paper, gives U = 82, 207, 519 for n = 1e3, 1e4, 1e5 at this
	// noise ratio); check the value and the scaling.
	var prev float64
	for i, n := range []int{1000, 10000, 100000} {
		c.N = n
		U, _, err := SizeGL(kernel.Matern52, c)
		if err != nil {
			t.Fatal(err)
		}
		if want := []float64{82, 207, 519}[i]; math.Abs(U[0]-want) > 1 {
			t.Errorf("Matern52 n=%d: U = %v, want %v (independent reference value)", n, U[0], want)
		}
		if i > 0 {
			if r := U[0] / prev; r < 2.3 || r > 2.7 {
				t.Errorf("Matern52: U grows by %v per decade of n, want ~10^0.4 = 2.51", r)
			}
		}
		prev = U[0]
	}
}

func TestSizeGLOverrides(t *testing.T) {
	base := GLSizing{
		N:                 500,
		LengthscaleMin:    []float64{0.5, 0.5},
		LengthscaleMax:    []float64{1, 1},
		SignalVarianceMax: 1,
		NoiseVarianceMin:  0.1,
		Range:             []float64{2, 2},
	}
	c := base
	c.U = []float64{3, 4}
	U, nodes, err := SizeGL(kernel.RBF, c)
	if err != nil {
		t.Fatal(err)
	}
	if U[0] != 3 || U[1] != 4 || nodes[0] != 15 || nodes[1] != 20 { // ceil(5*1*U) > ceil(1.5*U)+1
		t.Errorf("U override: U %v nodes %v", U, nodes)
	}
	c = base
	c.NodesPerDim = []int{7, 9}
	U, nodes, err = SizeGL(kernel.RBF, c)
	if err != nil {
		t.Fatal(err)
	}
	if nodes[0] != 7 || nodes[1] != 9 || !(U[0] > 0) {
		t.Errorf("nodes override: U %v nodes %v", U, nodes)
	}
	// With both overrides the statistical fields are not needed.
	c = GLSizing{LengthscaleMin: []float64{1}, LengthscaleMax: []float64{1}, U: []float64{5}, NodesPerDim: []int{33}}
	U, nodes, err = SizeGL(kernel.Matern32, c)
	if err != nil || U[0] != 5 || nodes[0] != 33 {
		t.Errorf("full override: %v %v %v", U, nodes, err)
	}
	// The caller's slices are not aliased.
	c.U[0] = 6
	if U[0] != 5 {
		t.Error("SizeGL returned the caller's U slice")
	}
}

func TestSizeGLErrors(t *testing.T) {
	ok := GLSizing{
		N:                 100,
		LengthscaleMin:    []float64{0.5},
		LengthscaleMax:    []float64{1},
		SignalVarianceMax: 1,
		NoiseVarianceMin:  0.1,
		Range:             []float64{2},
	}
	if _, _, err := SizeGL(kernel.RBF, ok); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		edit func(c *GLSizing)
		want string
	}{
		{"no lengthscales", func(c *GLSizing) { c.LengthscaleMin = nil }, "LengthscaleMin"},
		{"max length", func(c *GLSizing) { c.LengthscaleMax = []float64{1, 2} }, "LengthscaleMax"},
		{"min zero", func(c *GLSizing) { c.LengthscaleMin = []float64{0} }, "LengthscaleMin[0]"},
		{"max NaN", func(c *GLSizing) { c.LengthscaleMax = []float64{math.NaN()} }, "LengthscaleMax[0]"},
		{"inverted", func(c *GLSizing) { c.LengthscaleMin = []float64{2} }, "inverted"},
		{"N", func(c *GLSizing) { c.N = 0 }, "N = 0"},
		{"signal", func(c *GLSizing) { c.SignalVarianceMax = 0 }, "SignalVarianceMax"},
		{"noise", func(c *GLSizing) { c.NoiseVarianceMin = -1 }, "NoiseVarianceMin"},
		{"range len", func(c *GLSizing) { c.Range = nil }, "Range"},
		{"range neg", func(c *GLSizing) { c.Range = []float64{-1} }, "Range[0]"},
		{"max features", func(c *GLSizing) { c.MaxFeatures = -5 }, "MaxFeatures"},
		{"U len", func(c *GLSizing) { c.U = []float64{1, 2} }, "U has"},
		{"U neg", func(c *GLSizing) { c.U = []float64{-1} }, "U[0]"},
		{"nodes len", func(c *GLSizing) { c.NodesPerDim = []int{1, 2} }, "NodesPerDim has"},
		{"nodes zero", func(c *GLSizing) { c.NodesPerDim = []int{0} }, "NodesPerDim[0]"},
	}
	for _, tc := range cases {
		c := ok
		tc.edit(&c)
		_, _, err := SizeGL(kernel.RBF, c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one mentioning %q", tc.name, err, tc.want)
		}
	}
	if _, _, err := SizeGL(kernel.Family(9), ok); err == nil {
		t.Error("unknown family accepted")
	}
}

func TestSizeGLTooManyFeatures(t *testing.T) {
	c := GLSizing{
		N:                 100000,
		LengthscaleMin:    []float64{0.05, 0.05},
		LengthscaleMax:    []float64{10, 10},
		SignalVarianceMax: 10,
		NoiseVarianceMin:  1e-4,
		Range:             []float64{4, 4},
	}
	_, _, err := SizeGL(kernel.RBF, c)
	if err == nil {
		t.Fatal("expected an error")
	}
	msg := err.Error()
	for _, want := range []string{"s = ", "nodes per dimension", "PiB", "MaxFeatures = 16384",
		"--lengthscale-bounds", "raise the minimum or lower the maximum", "noise floor",
		"--nodes-per-dim", "--features", "--method rff", "--method grief"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	t.Log(msg)
	// A user override is held to the same limit, and MaxFeatures raises it.
	c2 := GLSizing{LengthscaleMin: []float64{1, 1}, LengthscaleMax: []float64{1, 1}, U: []float64{5, 5}, NodesPerDim: []int{200, 100}}
	if _, _, err := SizeGL(kernel.RBF, c2); err == nil || !strings.Contains(err.Error(), "s = 20000") {
		t.Errorf("override over the default limit: %v", err)
	}
	c2.MaxFeatures = 20000
	if _, nodes, err := SizeGL(kernel.RBF, c2); err != nil || nodes[0] != 200 {
		t.Errorf("raised limit: %v %v", nodes, err)
	}
	// A Cauchy tail with a tiny noise floor: astronomically many nodes, reported, not overflowed.
	c3 := GLSizing{N: 1 << 30, LengthscaleMin: []float64{1e-3, 1e-3, 1e-3}, LengthscaleMax: []float64{1e3, 1e3, 1e3},
		SignalVarianceMax: 1e6, NoiseVarianceMin: 1e-12, Range: []float64{10, 10, 10}}
	if _, _, err := SizeGL(kernel.Matern12, c3); err == nil || !strings.Contains(err.Error(), "features") {
		t.Errorf("Matern12 extreme: %v", err)
	}
}

func TestFormatBytes(t *testing.T) {
	if got := formatBytes(8 * 16384 * 16384); got != "2 GiB" {
		t.Errorf("formatBytes = %q", got)
	}
}
