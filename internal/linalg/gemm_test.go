package linalg

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

func randGeneral(rng *rand.Rand, r, c, pad int) blas64.General {
	g := blas64.General{Rows: r, Cols: c, Stride: c + pad, Data: make([]float64, max(1, r*(c+pad)))}
	for i := range g.Data {
		g.Data[i] = rng.NormFloat64()
	}
	return g
}

func cloneGeneral(g blas64.General) blas64.General {
	g.Data = append([]float64(nil), g.Data...)
	return g
}

func opAt(g blas64.General, t blas.Transpose, i, j int) float64 {
	if t != blas.NoTrans {
		i, j = j, i
	}
	return g.Data[i*g.Stride+j]
}

// naiveGemm is the textbook triple loop in compensated-free float64, the reference.
func naiveGemm(tA, tB blas.Transpose, alpha float64, a, b blas64.General, beta float64, c blas64.General) (want, bound []float64) {
	m, n := c.Rows, c.Cols
	k := a.Cols
	if tA != blas.NoTrans {
		k = a.Rows
	}
	want = make([]float64, m*n)
	bound = make([]float64, m*n)
	for i := range m {
		for j := range n {
			var s, sa float64
			for p := range k {
				x := opAt(a, tA, i, p) * opAt(b, tB, p, j)
				s += x
				sa += math.Abs(x)
			}
			cij := c.Data[i*c.Stride+j]
			want[i*n+j] = alpha*s + beta*cij
			bound[i*n+j] = math.Abs(alpha)*sa + math.Abs(beta*cij)
		}
	}
	return want, bound
}

// checkClose asserts |got - want| <= tol * bound elementwise: bound is the sum of the
// magnitudes of the terms, the scale of the rounding error of any summation order.
func checkClose(t *testing.T, name string, got, want, bound []float64, tol float64) {
	t.Helper()
	for i := range want {
		if d := math.Abs(got[i] - want[i]); !(d <= tol*bound[i]) {
			t.Fatalf("%s: element %d = %v, want %v (|diff| %g > %g x %g)", name, i, got[i], want[i], d, tol, bound[i])
		}
	}
}

func sameBits(t *testing.T, name string, a, b []float64) {
	t.Helper()
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			t.Fatalf("%s: element %d differs: %v (assembly) vs %v (Go)", name, i, a[i], b[i])
		}
	}
}

var transposes = []blas.Transpose{blas.NoTrans, blas.Trans}

func TestGemmAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, sz := range [][3]int{{1, 1, 1}, {5, 7, 3}, {6, 8, 256}, {13, 17, 300}, {97, 263, 513}, {200, 11, 1031}, {37, 16, 600}, {11, 300, 7}, {203, 12, 700}, {9, 9, 300}, {1, 10, 5}} {
		m, n, k := sz[0], sz[1], sz[2]
		for _, tA := range transposes {
			for _, tB := range transposes {
				for _, ab := range [][2]float64{{1, 0}, {-0.7, 1}, {2, 0.5}} {
					ar, ac := m, k
					if tA != blas.NoTrans {
						ar, ac = k, m
					}
					br, bc := k, n
					if tB != blas.NoTrans {
						br, bc = n, k
					}
					a, b := randGeneral(rng, ar, ac, 3), randGeneral(rng, br, bc, 0)
					c := randGeneral(rng, m, n, 2)
					want, bound := naiveGemm(tA, tB, ab[0], a, b, ab[1], c)
					c1, c2 := cloneGeneral(c), cloneGeneral(c)
					gemmWith(kernelAVX2Or(t), tA, tB, ab[0], a, b, ab[1], c1)
					gemmWith(goKernels, tA, tB, ab[0], a, b, ab[1], c2)
					got := make([]float64, m*n)
					for i := range m {
						copy(got[i*n:(i+1)*n], c1.Data[i*c1.Stride:])
					}
					checkClose(t, "Gemm", got, want, bound, 1e-13)
					sameBits(t, "Gemm", c1.Data, c2.Data)
				}
			}
		}
	}
}

// TestGemmNarrowKeepsBits checks that the narrow tile (nr < n <= nw columns, A read in place)
// gives the same bits as the mr x nr tiles it replaced, with the assembly and the portable
// kernels: the tile shape never changes a model's bits.
func TestGemmNarrowKeepsBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, kern := range []kernelFunc{kernelAVX2Or(t), goKernels} {
		wide := &kernels{tile: kern.tile, direct: kern.direct}
		for _, sz := range [][3]int{{4, 9, 1}, {7, 11, 255}, {96, 12, 257}, {1000, 11, 3000}, {97, 10, 513}} {
			m, n, k := sz[0], sz[1], sz[2]
			for _, tB := range transposes {
				br, bc := k, n
				if tB != blas.NoTrans {
					br, bc = n, k
				}
				a, b, c := randGeneral(rng, m, k, 5), randGeneral(rng, br, bc, 1), randGeneral(rng, m, n, 3)
				c1, c2 := cloneGeneral(c), cloneGeneral(c)
				gemmWith(kern, blas.NoTrans, tB, 0.3, a, b, 1, c1)
				gemmWith(wide, blas.NoTrans, tB, 0.3, a, b, 1, c2)
				sameBits(t, fmt.Sprintf("narrow %dx%dx%d", m, n, k), c1.Data, c2.Data)
			}
		}
	}
}

// kernelAVX2Or returns the assembly kernels, or the portable ones (and logs) on a CPU without AVX2/FMA.
func kernelAVX2Or(t *testing.T) kernelFunc {
	if !hasAVX2FMA {
		t.Log("CPU without AVX2/FMA: comparing the portable kernel with itself")
		return goKernels
	}
	return asmKernels
}

func TestSyrkAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, sz := range [][2]int{{1, 1}, {7, 5}, {13, 300}, {100, 257}, {257, 31}} {
		n, k := sz[0], sz[1]
		for _, tr := range transposes {
			for _, uplo := range []blas.Uplo{blas.Upper, blas.Lower} {
				ar, ac := n, k
				if tr != blas.NoTrans {
					ar, ac = k, n
				}
				a := randGeneral(rng, ar, ac, 1)
				cg := randGeneral(rng, n, n, 1)
				alpha, beta := -1.3, 0.6
				tB := blas.Trans
				if tr != blas.NoTrans {
					tB = blas.NoTrans
				}
				want, bound := naiveGemm(tr, tB, alpha, a, a, beta, cg)
				c1 := blas64.Symmetric{Uplo: uplo, N: n, Stride: cg.Stride, Data: append([]float64(nil), cg.Data...)}
				c2 := blas64.Symmetric{Uplo: uplo, N: n, Stride: cg.Stride, Data: append([]float64(nil), cg.Data...)}
				syrkWith(kernelAVX2Or(t), tr, alpha, a, beta, c1)
				syrkWith(goKernels, tr, alpha, a, beta, c2)
				sameBits(t, "Syrk", c1.Data, c2.Data)
				for i := range n {
					for j := range n {
						got := c1.Data[i*c1.Stride+j]
						if (uplo == blas.Upper) != (j >= i) && i != j {
							if got != cg.Data[i*cg.Stride+j] {
								t.Fatalf("Syrk %v: wrote outside the triangle at (%d, %d)", uplo, i, j)
							}
							continue
						}
						if d := math.Abs(got - want[i*n+j]); !(d <= 1e-13*bound[i*n+j]) {
							t.Fatalf("Syrk n=%d k=%d %v %v: (%d,%d) = %v, want %v", n, k, tr, uplo, i, j, got, want[i*n+j])
						}
					}
				}
			}
		}
	}
}

func TestAxpyNegBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, n := range []int{0, 1, 3, 4, 5, 15, 16, 17, 35, 100} {
		x := randGeneral(rng, 1, n, 0).Data[:n]
		y := randGeneral(rng, 1, n, 0).Data[:n]
		y1, y2 := append([]float64(nil), y...), append([]float64(nil), y...)
		tt := rng.NormFloat64()
		axpyNeg(tt, x, y1)
		axpyNegGo(tt, x, y2)
		sameBits(t, fmt.Sprintf("axpyNeg n=%d", n), y1, y2)
		for i := range y {
			if want := y[i] - tt*x[i]; math.Abs(y2[i]-want) > 1e-15*(math.Abs(y[i])+math.Abs(tt*x[i])) {
				t.Fatalf("axpyNeg n=%d: y[%d] = %v, want %v", n, i, y2[i], want)
			}
		}
	}
}
