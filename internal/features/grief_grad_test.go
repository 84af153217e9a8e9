package features

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gpreduce/gpreduce/internal/kernel"
)

// griefAt is the GRIEF map at lengthscales ls, with each eigenvector's sign aligned to ref's
// (eigenvectors are determined up to sign, which central differences must not see).
func griefAt(t *testing.T, f kernel.Family, ls []float64, sf2 float64, grid [][]float64, p int, ref *GRIEF) *GRIEF {
	t.Helper()
	g, err := NewGRIEF(f, ls, sf2, grid, p)
	if err != nil {
		t.Fatal(err)
	}
	if ref == nil {
		return g
	}
	for i := range g.Q {
		m := len(grid[i])
		for b := 0; b < m; b++ {
			var dot float64
			for a := 0; a < m; a++ {
				dot += g.Q[i][a*m+b] * ref.Q[i][a*m+b]
			}
			if dot < 0 {
				for a := 0; a < m; a++ {
					g.Q[i][a*m+b] = -g.Q[i][a*m+b]
				}
			}
		}
	}
	return g
}

// TestGRIEFGradMatchesCentralDifferences: the lengthscale derivatives of the features,
// contracted with random weights, equal central differences of MapBlock in log l_i (the
// selection held fixed: the cases have distinct lengthscales, and the test checks that the
// selection is the same at both ends), for every kernel family; and the term-by-term form
// for zero factors equals the fast form.
func TestGRIEFGradMatchesCentralDifferences(t *testing.T) {
	const h = 1e-5
	for _, fam := range []kernel.Family{kernel.RBF, kernel.Matern12, kernel.Matern32, kernel.Matern52} {
		for _, tc := range []struct {
			name string
			ls   []float64
			ms   []int
			p    int
		}{
			{"d1", []float64{0.7}, []int{8}, 6},
			{"d3", []float64{0.6, 1.3, 2.9}, []int{6, 5, 4}, 25},
			{"d5 irrelevant inputs", []float64{0.8, 1.1, 40, 75, 0.5}, []int{10, 10, 10, 10, 10}, 60},
		} {
			t.Run(fam.String()+"/"+tc.name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(len(tc.ls)), uint64(fam)+7))
				d := len(tc.ls)
				grid := make([][]float64, d)
				for i, m := range tc.ms {
					grid[i] = make([]float64, m)
					for a := range grid[i] {
						grid[i][a] = -2 + 4*float64(a)/float64(m-1)
					}
				}
				const sf2, rows = 1.7, 7
				g := griefAt(t, fam, tc.ls, sf2, grid, tc.p, nil)
				p := g.NumFeatures()
				x := make([]float64, rows*d)
				for k := range x {
					x[k] = 2.2 * (2*rng.Float64() - 1)
				}
				z := make([]float64, rows*p)
				for k := range z {
					z[k] = rng.NormFloat64()
				}
				phi := make([]float64, rows*p)
				g.MapBlock(x, rows, phi)
				gg, err := NewGRIEFGrad(g)
				if err != nil {
					t.Fatal(err)
				}
				acc := make([]float64, d)
				gg.Accumulate(x, rows, phi, z, acc)
				slow := make([]float64, d)
				for j := 0; j < rows; j++ {
					gg.row(x[j*d:(j+1)*d], phi[j*p:(j+1)*p], z[j*p:(j+1)*p], slow, true)
				}
				plus, minus := make([]float64, rows*p), make([]float64, rows*p)
				for i := 0; i < d; i++ {
					ls := append([]float64(nil), tc.ls...)
					ls[i] = tc.ls[i] * math.Exp(h)
					gp := griefAt(t, fam, ls, sf2, grid, tc.p, g)
					ls[i] = tc.ls[i] * math.Exp(-h)
					gm := griefAt(t, fam, ls, sf2, grid, tc.p, g)
					for k := range g.Idx {
						if gp.Idx[k] != g.Idx[k] || gm.Idx[k] != g.Idx[k] {
							t.Fatalf("dimension %d: the selection changes within +-%g of log l; choose another case", i, h)
						}
					}
					gp.MapBlock(x, rows, plus)
					gm.MapBlock(x, rows, minus)
					var fd, scale float64
					for k := range z {
						fd += z[k] * (plus[k] - minus[k]) / (2 * h)
						scale += math.Abs(z[k] * phi[k])
					}
					if err := math.Abs(acc[i] - fd); err > 1e-6*scale+1e-9 {
						t.Errorf("dimension %d: analytic %.10g, central difference %.10g (scale %.3g)", i, acc[i], fd, scale)
					}
					if err := math.Abs(slow[i] - acc[i]); err > 1e-12*scale {
						t.Errorf("dimension %d: term-by-term form %.15g, fast form %.15g", i, slow[i], acc[i])
					}
				}
			})
		}
	}
}
