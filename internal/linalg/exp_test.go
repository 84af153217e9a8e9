package linalg

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestExp(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	x := []float64{0, math.Copysign(0, -1), 1, -1, 0.5, -0.5, 1e-300, -1e-300, 700, 709.7, 709.79, 710, -700, -708, -740, -745.1, -745.3, -1e6, 1e6,
		math.Inf(1), math.Inf(-1), math.NaN(), math.Ln2 / 2, -math.Ln2 / 2}
	for range 20000 {
		x = append(x, -rng.ExpFloat64()*30, rng.NormFloat64()*3, (rng.Float64()-0.5)*1500)
	}
	for n := len(x); n > len(x)-4; n-- { // every tail length of the 4-lane loop
		got := make([]float64, n)
		ExpTo(got, x)
		for i, v := range x[:n] {
			g := expGo(v)
			if math.Float64bits(g) != math.Float64bits(got[i]) && !(math.IsNaN(g) && math.IsNaN(got[i])) {
				t.Fatalf("exp(%v): assembly %v, Go %v", v, got[i], g)
			}
			want := math.Exp(v)
			switch {
			case v > 709 && v <= expHi: // math.Exp on amd64 overflows from about 709.1 on
				if !(g > 8e307) || math.IsInf(g, 1) {
					t.Fatalf("exp(%v) = %v, want about %v", v, g, math.Exp(v-1)*math.E)
				}
			case math.IsNaN(want) || math.IsInf(want, 0) || want == 0:
				if !(math.IsNaN(want) && math.IsNaN(g)) && g != want && !(v > 709.78 && math.IsInf(g, 1)) && !(v < -745.2 && g == 0) {
					t.Fatalf("exp(%v) = %v, want %v", v, g, want)
				}
			case want < 0x1p-1022: // subnormal: absolute error
				if math.Abs(g-want) > 0x1p-1073 {
					t.Fatalf("exp(%v) = %v, want %v", v, g, want)
				}
			default:
				if math.Abs(g-want) > 2*(math.Nextafter(want, math.Inf(1))-want) {
					t.Fatalf("exp(%v) = %v, want %v (more than 2 ulp)", v, g, want)
				}
			}
		}
	}
}
