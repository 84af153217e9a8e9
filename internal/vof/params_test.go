package vof

import (
	"math"
	"strings"
	"testing"

	"github.com/gpreduce/gpreduce/internal/kernel"
)

func TestModelValidate(t *testing.T) {
	cases := []struct {
		mod     Model
		want    int
		errPart string
	}{
		{Model{Basis: Hermite, Family: kernel.RBF, Dim: 1, M1: 31}, 31, ""},
		{Model{Basis: Trig, Family: kernel.Matern32, Dim: 2, M1: 11}, 121, ""},
		{Model{Basis: Trig, Family: kernel.Matern32, Dim: 5, M1: 11, Additive: true}, 55, ""},
		{Model{Basis: Hermite, Family: kernel.Matern52, Dim: 1, M1: 31}, 0, "rbf"},
		{Model{Basis: Trig, Family: kernel.RBF, Dim: 1, M1: 30}, 0, "odd"},
		{Model{Basis: Trig, Family: kernel.RBF, Dim: 4, M1: 11}, 0, "budget"},
		{Model{Basis: Basis(7), Family: kernel.RBF, Dim: 1, M1: 3}, 0, "basis"},
	}
	for _, c := range cases {
		got, err := c.mod.Validate()
		if c.errPart != "" {
			if err == nil || !strings.Contains(err.Error(), c.errPart) {
				t.Errorf("%+v: error %v, want one mentioning %q", c.mod, err, c.errPart)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%+v: %d features, %v; want %d", c.mod, got, err, c.want)
		}
	}
	mod := Model{Basis: Hermite, Family: kernel.RBF, Dim: 1, M1: 3}
	for _, bad := range []struct {
		ls, vs []float64
		noise  float64
		feat   []float64
	}{
		{[]float64{-1}, []float64{1}, 0.1, []float64{1}},
		{[]float64{1}, []float64{1}, 0, []float64{1}},
		{[]float64{1}, []float64{1}, 0.1, []float64{math.Inf(1)}},
		{[]float64{1, 2}, []float64{1}, 0.1, []float64{1}},
	} {
		if _, err := mod.InitParams(bad.ls, bad.vs, bad.noise, bad.feat); err == nil {
			t.Errorf("InitParams accepted %+v", bad)
		}
	}
	if _, err := ParseBasis("legendre"); err == nil {
		t.Error("ParseBasis accepted legendre")
	}
	if b, err := ParseBasis("trig"); err != nil || b != Trig || b.String() != "trig" {
		t.Errorf("ParseBasis(trig) = %v, %v", b, err)
	}
}

// TestPackRoundTrip: Unpack(Pack(p)) = p for diagonal and dense S, additive layout.
func TestPackRoundTrip(t *testing.T) {
	for _, dense := range []bool{false, true} {
		mod := Model{Basis: Trig, Family: kernel.Matern32, Dim: 2, M1: 3, Additive: true, Dense: dense}
		p := randomParams(t, mod, []float64{0.5, 2}, []float64{1, 3}, 0.2, []float64{4, 5}, 3)
		M := len(p.Mean)
		x := mod.Pack(p)
		if len(x) != mod.NumParams(M) {
			t.Fatalf("dense=%v: packed %d values, NumParams %d", dense, len(x), mod.NumParams(M))
		}
		q, err := mod.Unpack(x, M)
		if err != nil {
			t.Fatal(err)
		}
		for _, pair := range [][2][]float64{{p.Lengthscales, q.Lengthscales}, {p.Variances, q.Variances}, {p.Feature, q.Feature},
			{p.Mean, q.Mean}, {p.Chol, q.Chol}, {{p.Noise}, {q.Noise}}} {
			for i := range pair[0] {
				if math.Abs(pair[0][i]-pair[1][i]) > 1e-14*math.Max(1, math.Abs(pair[0][i])) {
					t.Fatalf("dense=%v: round trip changed %v to %v", dense, pair[0], pair[1])
				}
			}
		}
		if _, err := mod.Unpack(x[1:], M); err == nil {
			t.Error("Unpack accepted a short vector")
		}
	}
}
