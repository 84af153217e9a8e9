package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestDistArgsBits: the vector distArgs (AVX on amd64) and distArgsGo give the same bits,
// including the zero-distance threshold, rounding below zero, NaN and infinities, for every
// length modulo four.
func TestDistArgsBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 3, 4, 5, 8, 17, 64, 515} {
		for _, root := range []bool{false, true} {
			na := 1 + rng.Float64()
			nb, x := make([]float64, n), make([]float64, n)
			for j := range nb {
				nb[j] = 2 * rng.Float64()
				switch j % 7 {
				case 0: // the same point up to rounding: r^2 tiny or slightly negative
					x[j] = -(na + nb[j]) * (1 + (rng.Float64()-0.5)*1e-15)
				case 1: // exactly at the threshold
					s := na + nb[j]
					x[j] = tinyDist2*s - s
				case 2:
					x[j] = math.NaN()
				case 3:
					nb[j] = math.Inf(1)
				default:
					x[j] = -2 * rng.Float64() * math.Sqrt(na*nb[j])
				}
			}
			r1, r2 := append([]float64(nil), x...), append([]float64(nil), x...)
			e1, e2 := make([]float64, n), make([]float64, n)
			distArgs(root, 1.7, na, nb, r1, e1)
			distArgsGo(root, 1.7, na, nb, r2, e2)
			name := fmt.Sprintf("n=%d root=%v", n, root)
			for j := range n {
				if math.Float64bits(e1[j]) != math.Float64bits(e2[j]) || math.Float64bits(r1[j]) != math.Float64bits(r2[j]) {
					t.Fatalf("%s: column %d: vector (%v, %v), Go (%v, %v)", name, j, r1[j], e1[j], r2[j], e2[j])
				}
				if j%7 == 0 && e2[j] != 0 && !(math.Abs(e2[j]) < 1e-13) {
					t.Fatalf("%s: column %d: a point's distance to itself gives the argument %v", name, j, e2[j])
				}
			}
		}
	}
	if !hasAVX {
		t.Log("CPU without AVX: compared the Go form with itself")
	}
}
