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
