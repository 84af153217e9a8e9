package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

func TestScaledBlockAgainstProfile(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, fam := range []Family{RBF, Matern12, Matern32, Matern52} {
		for _, v := range []BlockValue{BlockK, BlockQ} {
			for _, sz := range [][3]int{{1, 1, 1}, {3, 5, 8}, {70, 301, 8}, {129, 67, 19}} {
				m, n, d := sz[0], sz[1], sz[2]
				name := fmt.Sprintf("%v value=%d m=%d n=%d d=%d", fam, v, m, n, d)
				a, b := make([]float64, m*d), make([]float64, n*d)
				for i := range a {
					a[i] = rng.NormFloat64()
				}
				for i := range b {
					b[i] = rng.NormFloat64() * 0.7
				}
				copy(b[:d], a[:d]) // one identical pair: exact zero distance
				const sf2, ld = 1.7, 3
				dst := make([]float64, m*(n+ld))
				fam.ScaledBlock(v, sf2, a, b, d, dst, n+ld)
				for i := range m {
					for j := range n {
						var r2 float64
						for k := range d {
							t := a[i*d+k] - b[j*d+k]
							r2 += t * t
						}
						k0, q := fam.ProfileGrad(r2)
						want := sf2 * k0
						if v == BlockQ {
							want = sf2 * q
						}
						got := dst[i*(n+ld)+j]
						if i == 0 && j == 0 {
							if got != want {
								t.Fatalf("%s: identical points give %v, want exactly %v", name, got, want)
							}
							continue
						}
						if math.Abs(got-want) > 1e-12*math.Abs(want) {
							t.Fatalf("%s: (%d, %d) = %v, want %v (relative %g)", name, i, j, got, want, math.Abs(got-want)/math.Abs(want))
						}
					}
				}
			}
		}
	}
}

// TestScaledBlockBitsIndependentOfSplit: an entry's bits depend only on its two rows, so the
// block formed at once (tiles shared by GOMAXPROCS goroutines), with GOMAXPROCS = 1, and row by
// row with columns in pieces (other tiles, other goroutine counts) are identical.
func TestScaledBlockBitsIndependentOfSplit(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, fam := range []Family{RBF, Matern12, Matern32, Matern52} {
		for _, v := range []BlockValue{BlockK, BlockQ} {
			const m, n, d = 150, 1300, 8
			a, b := make([]float64, m*d), make([]float64, n*d)
			for i := range a {
				a[i] = rng.NormFloat64()
			}
			for i := range b {
				b[i] = rng.NormFloat64()
			}
			whole := make([]float64, m*n)
			fam.ScaledBlock(v, 0.8, a, b, d, whole, n)
			prev := runtime.GOMAXPROCS(1)
			one := make([]float64, m*n)
			fam.ScaledBlock(v, 0.8, a, b, d, one, n)
			runtime.GOMAXPROCS(prev)
			pieces := make([]float64, m*n)
			for i := range m {
				for c0 := 0; c0 < n; c0 += 333 {
					c1 := min(c0+333, n)
					fam.ScaledBlock(v, 0.8, a[i*d:(i+1)*d], b[c0*d:c1*d], d, pieces[i*n+c0:], n)
				}
			}
			for k := range whole {
				if math.Float64bits(whole[k]) != math.Float64bits(one[k]) || math.Float64bits(whole[k]) != math.Float64bits(pieces[k]) {
					t.Fatalf("%v value=%d: entry (%d, %d) is %v at once, %v with GOMAXPROCS 1, %v in pieces", fam, v, k/n, k%n, whole[k], one[k], pieces[k])
				}
			}
		}
	}
}
