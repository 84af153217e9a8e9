package features

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gpreduce/gpreduce/internal/kernel"
)

func TestPlanGL(t *testing.T) {
	base := GLSizing{N: 1000, SignalVarianceMax: 20, NoiseVarianceMin: 1e-4, MaxFeatures: 8192}
	cases := []struct {
		name       string
		d          int
		lmin, lmax float64
		rng        float64
		maxF       int
		adjusted   bool
		tol        float64 // largest kernel error allowed at lags up to Width, over the window
	}{
		{"d1 fits", 1, 0.1, 2, 3.5, 8192, false, 2e-3},
		{"d1 wide upper bound", 1, 0.1, 300, 3.5, 8192, true, 5e-3},
		{"d2 defaults", 2, 0.1, 2, 3.5, 8192, true, 5e-3},
		{"d3 defaults", 3, 0.1, 2, 3.5, 8192, true, 5e-3},
		{"d3 large n, wide extent", 3, 0.1, 2, 4.4, 8192, true, 5e-3},
		{"d3 window closed", 3, 0.1, 2, 3.5, 3375, true, 0.1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := base
			cfg.MaxFeatures = c.maxF
			if c.rng > 4 {
				cfg.N = 41203
			}
			for k := 0; k < c.d; k++ {
				cfg.LengthscaleMin = append(cfg.LengthscaleMin, c.lmin)
				cfg.LengthscaleMax = append(cfg.LengthscaleMax, c.lmax)
				cfg.Range = append(cfg.Range, c.rng)
			}
			p, err := PlanGL(kernel.RBF, cfg)
			if err != nil {
				t.Fatal(err)
			}
			s := 1
			for _, n := range p.Nodes {
				s *= n
			}
			if s > c.maxF {
				t.Fatalf("%d features over the budget %d", s, c.maxF)
			}
			raised := false
			for k := range p.LengthscaleMin {
				raised = raised || p.LengthscaleMin[k] > c.lmin
			}
			if p.FloorRaised != raised || raised != (c.d > 1) {
				t.Fatalf("FloorRaised %v, window minimum %v", p.FloorRaised, p.LengthscaleMin)
			}
			if p.Adjusted != c.adjusted || (len(p.Notes) > 0) != c.adjusted {
				t.Fatalf("adjusted %v with notes %q, want adjusted %v", p.Adjusted, p.Notes, c.adjusted)
			}
			for k := 0; k < c.d; k++ {
				if p.LengthscaleMin[k] < c.lmin || p.LengthscaleMax[k] > c.lmax || p.LengthscaleMin[k] > p.LengthscaleMax[k] {
					t.Fatalf("window %g,%g outside the bounds %g,%g", p.LengthscaleMin[k], p.LengthscaleMax[k], c.lmin, c.lmax)
				}
				if p.Width[k] < c.rng {
					t.Errorf("dimension %d: accurate lags up to %g, below the data extent %g", k, p.Width[k], c.rng)
				}
			}
			if !c.adjusted {
				U, nodes, err := SizeGL(kernel.RBF, cfg)
				if err != nil || !slices.Equal(U, p.U) || !slices.Equal(nodes, p.Nodes) {
					t.Fatalf("a plan that fits differs from SizeGL: %v %v vs %v %v (%v)", p.U, p.Nodes, U, nodes, err)
				}
			}
			g, err := NewGL(kernel.RBF, p.U, p.Nodes)
			if err != nil {
				t.Fatal(err)
			}
			// The kernel along each axis and the diagonal, at both ends of the window and
			// lags up to Width: within tol of exp(-|tau/l|^2/2).
			worst := 0.0
			for _, end := range []int{0, 1} {
				ls := make([]float64, c.d)
				for k := range ls {
					ls[k] = []float64{p.LengthscaleMin[k], p.LengthscaleMax[k]}[end]
				}
				for _, frac := range []float64{0, 0.1, 0.25, 0.5, 0.75, 1} {
					for axis := -1; axis < c.d; axis++ {
						tau := make([]float64, c.d)
						var q float64
						for k := range tau {
							if axis < 0 || axis == k {
								tau[k] = frac * p.Width[k]
								q += tau[k] * tau[k] / (ls[k] * ls[k])
							}
						}
						worst = math.Max(worst, math.Abs(glKernel(g, ls, make([]float64, c.d), tau)-math.Exp(-q/2)))
					}
				}
			}
			if worst > c.tol {
				t.Errorf("kernel error %.3g over the window and lags up to Width, want <= %g (plan %+v)", worst, c.tol, p)
			}
			t.Logf("nodes %v, window %v..%v, width %v, kernel error %.2g, notes %q", p.Nodes, p.LengthscaleMin, p.LengthscaleMax, p.Width, worst, p.Notes)
		})
	}
}

func TestPlanGLBeyondAliasing(t *testing.T) {
	// Past the accurate width the features alias: the error near 1.4 W is of order 1, which is
	// why predictions outside the model's domain are refused.
	cfg := GLSizing{N: 200, SignalVarianceMax: 20, NoiseVarianceMin: 1e-4, LengthscaleMin: []float64{0.05}, LengthscaleMax: []float64{0.3}, Range: []float64{3.5}}
	p, err := PlanGL(kernel.RBF, cfg)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := NewGL(kernel.RBF, p.U, p.Nodes)
	l := 0.3
	worst := 0.0
	for f := 1.3; f <= 1.5; f += 0.02 {
		tau := f * p.Width[0]
		worst = math.Max(worst, math.Abs(glKernel(g, []float64{l}, []float64{0}, []float64{tau})-math.Exp(-tau*tau/(2*l*l))))
	}
	if worst < 0.3 {
		t.Errorf("kernel error beyond 1.3 W is %g; expected aliasing of order 1", worst)
	}
}

func TestPlanGLErrors(t *testing.T) {
	cfg := GLSizing{N: 40000, SignalVarianceMax: 20, NoiseVarianceMin: 1e-4, MaxFeatures: 1000,
		LengthscaleMin: []float64{0.1, 0.1, 0.1}, LengthscaleMax: []float64{2, 2, 2}, Range: []float64{3.5, 3.5, 3.5}}
	_, err := PlanGL(kernel.RBF, cfg)
	if !errors.Is(err, ErrOverBudget) {
		t.Fatalf("a budget of 10 nodes per dimension: err = %v, want ErrOverBudget", err)
	}
	// Overrides are never adjusted.
	cfg.MaxFeatures = 100
	cfg.LengthscaleMin, cfg.LengthscaleMax, cfg.Range = []float64{0.1}, []float64{2}, []float64{3.5}
	cfg.NodesPerDim = []int{500}
	if _, err := PlanGL(kernel.RBF, cfg); !errors.Is(err, ErrOverBudget) {
		t.Fatalf("explicit nodes over the budget: err = %v, want ErrOverBudget", err)
	}
}

// TestPlanGLHandNodes: node counts given without a box are each dimension's share: the plan
// keeps exactly those counts, fits the box and raises the lower lengthscale bound so that the
// domain covers the inputs (a box sized for the bound 0.05 with 32 nodes covered 0.24 of a
// 3.5-wide extent), and says so; counts that already resolve the bounds keep them; counts too
// few for any lengthscale are used as given, with a note; more than max-features fail.
func TestPlanGLHandNodes(t *testing.T) {
	wide := GLSizing{N: 900000, SignalVarianceMax: 20, NoiseVarianceMin: 1e-4, MaxFeatures: 8192,
		LengthscaleMin: []float64{0.05, 0.05}, LengthscaleMax: []float64{100, 100}, Range: []float64{3.5, 3.5}, NodesPerDim: []int{32, 32}}
	p, err := PlanGL(kernel.RBF, wide)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("nodes %v, box %v, window %v..%v, width %v, notes %q", p.Nodes, p.U, p.LengthscaleMin, p.LengthscaleMax, p.Width, p.Notes)
	for k := range p.Nodes {
		if p.Nodes[k] != 32 || !p.Adjusted || !p.FloorRaised || !(p.Width[k] >= wide.Range[k]) || !(p.LengthscaleMin[k] > 0.05) {
			t.Errorf("dimension %d: nodes %d, adjusted %v, floor raised %v, width %.3g (extent %g), floor %.3g", k, p.Nodes[k], p.Adjusted, p.FloorRaised, p.Width[k], wide.Range[k], p.LengthscaleMin[k])
		}
	}
	narrow := wide
	narrow.LengthscaleMin, narrow.LengthscaleMax = []float64{1.5, 1.5}, []float64{1.6, 1.6}
	narrow.NodesPerDim = []int{60, 60}
	q, err := PlanGL(kernel.RBF, narrow)
	if err != nil {
		t.Fatal(err)
	}
	if q.Adjusted || q.Nodes[0] != 60 || q.LengthscaleMin[0] != 1.5 || q.LengthscaleMax[1] != 1.6 {
		t.Errorf("resolving counts: adjusted %v, nodes %v, window %v..%v", q.Adjusted, q.Nodes, q.LengthscaleMin, q.LengthscaleMax)
	}
	few := wide
	few.LengthscaleMin, few.LengthscaleMax = []float64{0.3, 0.3}, []float64{2, 2}
	few.NodesPerDim = []int{10, 10} // step 4 needs about 19
	f, err := PlanGL(kernel.RBF, few)
	if err != nil {
		t.Fatal(err)
	}
	if f.Nodes[0] != 10 || !f.Adjusted || len(f.Notes) != 1 || !strings.Contains(f.Notes[0], "too few") || !(f.Width[0] < few.Range[0]) {
		t.Errorf("too few counts: nodes %v, adjusted %v, width %v, notes %q", f.Nodes, f.Adjusted, f.Width, f.Notes)
	}
	over := wide
	over.NodesPerDim = []int{100, 100} // 10^4 > max-features 8192
	if _, err := PlanGL(kernel.RBF, over); err == nil {
		t.Error("10^4 given nodes passed max-features 8192")
	}
}
