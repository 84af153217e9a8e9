package features

import (
	"math"
	"strings"
	"testing"
)

func TestVOFLayout(t *testing.T) {
	cases := []struct {
		l       VOFLayout
		want    int
		errPart string
	}{
		{VOFLayout{Dim: 1, M1: 31}, 31, ""},
		{VOFLayout{Dim: 2, M1: 11}, 121, ""},
		{VOFLayout{Dim: 3, M1: 11, Additive: true}, 33, ""},
		{VOFLayout{Dim: 4, M1: 11}, 0, "additive layout"},
		{VOFLayout{Dim: 2, M1: 11, MaxFeatures: 100}, 0, "budget of 100"},
		{VOFLayout{Dim: 0, M1: 11}, 0, "dimension"},
		{VOFLayout{Dim: 2, M1: 0}, 0, "at least 1"},
	}
	for _, c := range cases {
		got, err := c.l.NumFeatures()
		if c.errPart != "" {
			if err == nil || !strings.Contains(err.Error(), c.errPart) {
				t.Errorf("%+v: error %v, want one mentioning %q", c.l, err, c.errPart)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%+v: %d, %v; want %d", c.l, got, err, c.want)
		}
	}
	l := VOFLayout{Dim: 3, M1: 4}
	idx := make([]int, 3)
	l.Multi(4*4*2+4*3+1, idx)
	if idx[0] != 2 || idx[1] != 3 || idx[2] != 1 {
		t.Errorf("Multi: %v, want [2 3 1]", idx)
	}
	if p := l.Parity(4*4*2 + 4*3 + 1); p != 0 {
		t.Errorf("Parity of (2,3,1) = %d, want 0", p)
	}
	a := VOFLayout{Dim: 2, M1: 5, Additive: true}
	if c := a.Multi(7, idx); c != 1 || idx[0] != 2 {
		t.Errorf("additive Multi(7) = component %d index %d, want 1 and 2", c, idx[0])
	}
}

// TestHermiteVOF1DDerivatives compares the derivatives in log l and log sigma_in with
// central differences, at large m too (the normalised recursion).
func TestHermiteVOF1DDerivatives(t *testing.T) {
	const M = 60
	k, dl, ds := make([]float64, M), make([]float64, M), make([]float64, M)
	kp, km := make([]float64, M), make([]float64, M)
	for _, c := range [][3]float64{{0.5, 3, 1.7}, {1.2, 0.4, -0.9}, {0.3, 0.05, 0.02}} {
		l, s, x := c[0], c[1], c[2]
		HermiteVOF1D(l, s, x, k, dl, ds)
		const h = 1e-6
		for dir, want := range [][]float64{dl, ds} {
			if dir == 0 {
				HermiteVOF1D(l*math.Exp(h), s, x, kp, nil, nil)
				HermiteVOF1D(l*math.Exp(-h), s, x, km, nil, nil)
			} else {
				HermiteVOF1D(l, s*math.Exp(h), x, kp, nil, nil)
				HermiteVOF1D(l, s*math.Exp(-h), x, km, nil, nil)
			}
			for m := 0; m < M; m++ {
				fd := (kp[m] - km[m]) / (2 * h)
				if math.Abs(fd-want[m]) > 1e-6*math.Max(1e-3, math.Abs(fd)) {
					t.Errorf("l=%v s=%v x=%v m=%d dir %d: analytic %.10g, difference %.10g", l, s, x, m, dir, want[m], fd)
				}
			}
		}
		for m, v := range k {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Errorf("l=%v s=%v: Kuf[%d] = %v", l, s, m, v)
			}
		}
	}
}
