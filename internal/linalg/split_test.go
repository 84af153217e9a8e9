package linalg

import (
	"math/rand/v2"
	"runtime"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// TestBitsIndependentOfGOMAXPROCS runs the products, the triangular solve and the Cholesky
// factorisation at sizes where the tiles and the packing are shared among goroutines, with
// GOMAXPROCS 1, 2 and 5, and requires identical bits.
func TestBitsIndependentOfGOMAXPROCS(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	a, b := randGeneral(rng, 700, 300, 1), randGeneral(rng, 300, 900, 0)
	z := randGeneral(rng, 256, 600, 0)
	tri := randTriangular(rng, 300, blas.Upper, blas.NonUnit)
	rhs := randGeneral(rng, 400, 300, 0)
	spd := randSPD(rng, 600)
	cases := []struct {
		name string
		run  func() []float64
	}{
		{"Gemm", func() []float64 {
			c := blas64.General{Rows: 700, Cols: 900, Stride: 900, Data: make([]float64, 700*900)}
			Gemm(blas.NoTrans, blas.NoTrans, 1.5, a, b, 0, c)
			return c.Data
		}},
		{"Syrk", func() []float64 {
			c := blas64.Symmetric{Uplo: blas.Upper, N: 600, Stride: 600, Data: make([]float64, 600*600)}
			Syrk(blas.Trans, 1, z, 0, c)
			Syrk(blas.Trans, 1, z, 1, c)
			return c.Data
		}},
		{"Trsm", func() []float64 {
			x := cloneGeneral(rhs)
			Trsm(blas.Right, blas.NoTrans, 1, tri, x)
			return x.Data
		}},
		{"Potrf", func() []float64 {
			w := append([]float64(nil), spd...)
			if _, ok := Potrf(blas64.Symmetric{Uplo: blas.Upper, N: 600, Stride: 600, Data: w}); !ok {
				t.Fatal("Potrf: not positive definite")
			}
			return w
		}},
	}
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	for _, tc := range cases {
		runtime.GOMAXPROCS(1)
		want := tc.run()
		for _, p := range []int{2, 5} {
			runtime.GOMAXPROCS(p)
			sameBits(t, tc.name, tc.run(), want)
		}
	}
}
