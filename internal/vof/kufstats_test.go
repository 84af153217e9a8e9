package vof

import (
	"fmt"
	"testing"

	"github.com/gpreduce/gpreduce/internal/kernel"
)

func TestELBOKufGradient(t *testing.T) {
	cases := []struct {
		mod  Model
		feat []float64
	}{
		{Model{Basis: Hermite, Family: kernel.RBF, Dim: 1, M1: 7}, []float64{1.5}},
		{Model{Basis: Hermite, Family: kernel.RBF, Dim: 1, M1: 7, Dense: true}, []float64{1.5}},
		{Model{Basis: Hermite, Family: kernel.RBF, Dim: 2, M1: 3, Dense: true}, []float64{1.5, 0.8}},
		{Model{Basis: Hermite, Family: kernel.RBF, Dim: 2, M1: 4, Additive: true, Dense: true}, []float64{1.5, 0.8}},
		{Model{Basis: Trig, Family: kernel.Matern32, Dim: 1, M1: 5, Dense: true}, []float64{4}},
		{Model{Basis: Trig, Family: kernel.RBF, Dim: 1, M1: 5}, []float64{4}},
		{Model{Basis: Trig, Family: kernel.Matern52, Dim: 2, M1: 3, Additive: true, Dense: true}, []float64{4, 3}},
		{Model{Basis: Trig, Family: kernel.Matern12, Dim: 2, M1: 3, Dense: true}, []float64{3, 2}},
	}
	for ci, c := range cases {
		t.Run(fmt.Sprintf("%d_%v_d%d_add%v_dense%v", ci, c.mod.Basis, c.mod.Dim, c.mod.Additive, c.mod.Dense), func(t *testing.T) {
			d := c.mod.Dim
			X, y := gpData(40, d, 2.5, 11)
			ls := []float64{0.9, 1.4}[:d]
			vs := []float64{1.3, 0.7}[:c.mod.NumVariances()]
			p := randomParams(t, c.mod, ls, vs, 0.3, c.feat, 5)
			M := len(p.Mean)
			eval := func(p *Params, grad bool) (float64, *Grad) {
				fm, err := NewFeatureMap(c.mod, p, 48, 0)
				if err != nil {
					t.Fatal(err)
				}
				st, err := AccumulateKuf(fm, p, X, y, d, grad)
				if err != nil {
					t.Fatal(err)
				}
				var g *Grad
				if grad {
					g = c.mod.NewGrad(M)
				}
				F, err := ELBOKuf(c.mod, p, st, 100, g)
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
			checkGrad(t, "ELBOKuf", x, c.mod.PackGrad(p, g), f, 1e-6)
		})
	}
}
