package vof

import (
	"fmt"
	"testing"

	"github.com/gpreduce/gpreduce/internal/kernel"
)

func TestELBOTrigGradient(t *testing.T) {
	cases := []struct {
		mod  Model
		feat []float64
		T1   int
	}{
		{Model{Basis: Trig, Family: kernel.Matern32, Dim: 1, M1: 5}, []float64{4}, 9},
		{Model{Basis: Trig, Family: kernel.RBF, Dim: 1, M1: 7, Dense: true}, []float64{3}, 8},
		{Model{Basis: Trig, Family: kernel.Matern52, Dim: 2, M1: 3, Dense: true}, []float64{3, 2}, 4},
		{Model{Basis: Trig, Family: kernel.Matern12, Dim: 2, M1: 3, Additive: true, Dense: true}, []float64{3, 2}, 5},
	}
	for ci, c := range cases {
		t.Run(fmt.Sprintf("%d_%v_d%d_add%v_dense%v", ci, c.mod.Family, c.mod.Dim, c.mod.Additive, c.mod.Dense), func(t *testing.T) {
			d := c.mod.Dim
			X, y := gpData(30, d, 2, 13)
			ls := []float64{0.9, 1.4}[:d]
			vs := []float64{1.3, 0.7}[:c.mod.NumVariances()]
			p := randomParams(t, c.mod, ls, vs, 0.3, c.feat, 9)
			M := len(p.Mean)
			grid, err := TrigGridForStep(c.mod, c.T1, 42, 3)
			if err != nil {
				t.Fatal(err)
			}
			eval := func(p *Params, grad bool) (float64, *Grad) {
				st, err := AccumulateTrig(grid, p.Feature, X, y, grad)
				if err != nil {
					t.Fatal(err)
				}
				var g *Grad
				if grad {
					g = c.mod.NewGrad(M)
				}
				F, err := ELBOTrig(c.mod, p, grid, st, 70, g)
				if err != nil {
					t.Fatal(err)
				}
				return F, g
			}
			_, g := eval(p, true)
			x := c.mod.Pack(p)
			f := func(x []float64) float64 {
				q, err := c.mod.Unpack(x, M)
				if err != nil {
					t.Fatal(err)
				}
				F, _ := eval(q, false)
				return F
			}
			checkGrad(t, "ELBOTrig", x, c.mod.PackGrad(p, g), f, 1e-6)
		})
	}
}

// TestTrigFixedGrid: in fixed-grid mode (Section 3.3's estimator on one grid with a held
// fixed) the statistics do not depend on the kernel hyperparameters, m or S, so one
// accumulation serves every step; the gradient in the other parameters still matches central
// differences, and the a-gradient is reported as zero.
func TestTrigFixedGrid(t *testing.T) {
	mod := Model{Basis: Trig, Family: kernel.Matern52, Dim: 1, M1: 9, Dense: true}
	X, y := gpData(50, 1, 3, 53)
	grid, err := TrigGridForStep(mod, 12, 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	a := []float64{5}
	st, err := AccumulateTrig(grid, a, X, y, false)
	if err != nil {
		t.Fatal(err)
	}
	p := randomParams(t, mod, []float64{0.7}, []float64{1.2}, 0.1, a, 61)
	M := len(p.Mean)
	g := mod.NewGrad(M)
	if _, err := ELBOTrig(mod, p, grid, st, 50, g); err != nil {
		t.Fatal(err)
	}
	if g.Feature[0] != 0 {
		t.Errorf("fixed-grid mode: a-gradient %v, want 0", g.Feature[0])
	}
	x := mod.Pack(p)
	packed := mod.PackGrad(p, g)
	// The a-entry is fixed: compare the others only.
	fa := mod.Dim + mod.NumVariances() + 1 // log a in the packed vector
	f := func(x []float64) float64 {
		q, err := mod.Unpack(x, M)
		if err != nil {
			t.Fatal(err)
		}
		q.Feature = a // held fixed
		F, err := ELBOTrig(mod, q, grid, st, 50, nil)
		if err != nil {
			t.Fatal(err)
		}
		return F
	}
	packed[fa] = 0
	checkGrad(t, "fixed grid", x, packed, f, 1e-6)
	// The same statistics, re-accumulated, are bitwise the same whatever the hyperparameters.
	st2, _ := AccumulateTrig(grid, a, X, y, false)
	for i := 0; i < 4; i++ {
		for j := range st.P[i] {
			if st.P[i][j] != st2.P[i][j] {
				t.Fatalf("re-accumulated statistics differ")
			}
		}
	}
}

// TestTrigGridStream: the grids of a step are a function of (seed, step) only.
func TestTrigGridStream(t *testing.T) {
	mod := Model{Basis: Trig, Family: kernel.RBF, Dim: 2, M1: 3}
	g1, _ := TrigGridForStep(mod, 5, 9, 4)
	g2, _ := TrigGridForStep(mod, 5, 9, 4)
	g3, _ := TrigGridForStep(mod, 5, 9, 5)
	same, diff := true, false
	for i := range g1.U1 {
		same = same && g1.U1[i] == g2.U1[i] && g1.U2[i] == g2.U2[i]
		diff = diff || g1.U1[i] != g3.U1[i]
		if g1.U1[i] < 0 || g1.U1[i] > 1 {
			t.Fatalf("unit coordinate %v outside [0, 1]", g1.U1[i])
		}
	}
	if !same || !diff {
		t.Errorf("grid stream: same step equal %v, other step different %v", same, diff)
	}
	if g1.NumPoints() != 25 {
		t.Errorf("tensor grid of 5 per input in 2 inputs has %d points, want 25", g1.NumPoints())
	}
	if _, err := TrigGridForStep(mod, 100, 1, 1); err == nil {
		t.Error("a 100^2-point grid was accepted")
	}
}
