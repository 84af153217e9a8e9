package linalg

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack/lapack64"
	"gonum.org/v1/gonum/mat"
)

// relMaxDiff is max |a - b| / max |b|, the normwise relative difference.
func relMaxDiff(a, b []float64) float64 {
	var d, s float64
	for i := range b {
		d = max(d, math.Abs(a[i]-b[i]))
		s = max(s, math.Abs(b[i]))
	}
	return d / s
}

func randTriangular(rng *rand.Rand, n int, uplo blas.Uplo, diag blas.Diag) blas64.Triangular {
	t := blas64.Triangular{Uplo: uplo, Diag: diag, N: n, Stride: n + 1, Data: make([]float64, n*(n+1))}
	for i := range n {
		for j := range n {
			v := rng.NormFloat64() / math.Sqrt(float64(n))
			if i == j {
				v = 2 + math.Abs(rng.NormFloat64())
			}
			if (uplo == blas.Upper) == (j >= i) || i == j {
				t.Data[i*t.Stride+j] = v
			} else {
				t.Data[i*t.Stride+j] = math.NaN() // the other triangle must never be read
			}
		}
	}
	return t
}

func TestTrsmAgainstGonum(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, sz := range [][2]int{{1, 1}, {7, 3}, {33, 70}, {100, 5}, {129, 131}, {300, 37}, {29, 600}, {520, 260}} { // above trsmSplit (256): the recursive split
		for _, side := range []blas.Side{blas.Left, blas.Right} {
			for _, uplo := range []blas.Uplo{blas.Upper, blas.Lower} {
				for _, tA := range transposes {
					for _, diag := range []blas.Diag{blas.NonUnit, blas.Unit} {
						name := fmt.Sprintf("m=%d n=%d side=%c uplo=%c t=%c diag=%c", sz[0], sz[1], side, uplo, tA, diag)
						m, n := sz[0], sz[1]
						na := m
						if side == blas.Right {
							na = n
						}
						a := randTriangular(rng, na, uplo, diag)
						b := randGeneral(rng, m, n, 2)
						want, b1, b2 := cloneGeneral(b), cloneGeneral(b), cloneGeneral(b)
						blas64.Trsm(side, tA, 0.75, a, want)
						trsmWith(kernelAVX2Or(t), side, tA, 0.75, a, b1)
						trsmWith(goKernels, side, tA, 0.75, a, b2)
						sameBits(t, name, b1.Data, b2.Data)
						if d := relMaxDiff(b1.Data, want.Data); !(d <= 1e-12) {
							t.Fatalf("%s: relative difference from gonum %g", name, d)
						}
					}
				}
			}
		}
	}
}

func randSPD(rng *rand.Rand, n int) []float64 {
	m := randGeneral(rng, n, n, 0)
	a := make([]float64, n*n)
	Gemm(blas.NoTrans, blas.Trans, 1.0/float64(n), m, m, 0, blas64.General{Rows: n, Cols: n, Stride: n, Data: a})
	for i := range n {
		a[i*n+i] += 0.1
	}
	return a
}

func TestPotrfAgainstGonum(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{1, 5, 17, 100, 300, 600} {
		a := randSPD(rng, n)
		for _, uplo := range []blas.Uplo{blas.Upper, blas.Lower} {
			name := fmt.Sprintf("n=%d uplo=%c", n, uplo)
			want := append([]float64(nil), a...)
			if _, ok := lapack64.Potrf(blas64.Symmetric{Uplo: uplo, N: n, Stride: n, Data: want}); !ok {
				t.Fatalf("%s: gonum says not positive definite", name)
			}
			got1, got2 := append([]float64(nil), a...), append([]float64(nil), a...)
			if !potrfWith(kernelAVX2Or(t), uplo == blas.Lower, n, got1, n, potrfBlock) || !potrfWith(goKernels, uplo == blas.Lower, n, got2, n, potrfBlock) {
				t.Fatalf("%s: not positive definite", name)
			}
			sameBits(t, name, got1, got2)
			// Compare the factor's triangle only (the other holds A).
			var gw, ww []float64
			for i := range n {
				for j := range n {
					if (uplo == blas.Upper) == (j >= i) || i == j {
						gw, ww = append(gw, got1[i*n+j]), append(ww, want[i*n+j])
					}
				}
			}
			if d := relMaxDiff(gw, ww); !(d <= 1e-12) {
				t.Fatalf("%s: relative difference from gonum %g", name, d)
			}
		}
	}
}

func TestPotrfNotPositiveDefinite(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		bad  int // the diagonal entry made negative
	}{{"first pivot", 40, 0}, {"leaf", 40, 9}, {"trailing block", 300, 290}} {
		rng := rand.New(rand.NewPCG(9, 10))
		a := randSPD(rng, tc.n)
		a[tc.bad*tc.n+tc.bad] = -1
		for _, uplo := range []blas.Uplo{blas.Upper, blas.Lower} {
			if _, ok := Potrf(blas64.Symmetric{Uplo: uplo, N: tc.n, Stride: tc.n, Data: append([]float64(nil), a...)}); ok {
				t.Errorf("%s %c: Potrf reported an indefinite matrix positive definite", tc.name, uplo)
			}
		}
	}
}

func TestCholeskyMatchesMat(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{3, 64, 301, 700} {
		a := mat.NewSymDense(n, randSPD(rng, n))
		var want mat.Cholesky
		var got Cholesky
		if !want.Factorize(a) || !got.Factorize(a) {
			t.Fatalf("n=%d: factorisation failed", n)
		}
		if d := math.Abs(got.LogDet()-want.LogDet()) / math.Abs(want.LogDet()); !(d <= 1e-12) {
			t.Errorf("n=%d: LogDet %v, want %v", n, got.LogDet(), want.LogDet())
		}
		b := randGeneral(rng, n, 1, 0).Data
		wx, gx := mat.NewVecDense(n, nil), mat.NewVecDense(n, nil)
		if err := want.SolveVecTo(wx, mat.NewVecDense(n, b)); err != nil {
			t.Fatal(err)
		}
		if err := got.SolveVecTo(gx, mat.NewVecDense(n, b)); err != nil {
			t.Fatal(err)
		}
		if d := relMaxDiff(gx.RawVector().Data, wx.RawVector().Data); !(d <= 1e-12) {
			t.Errorf("n=%d: SolveVecTo relative difference %g", n, d)
		}
		B := mat.NewDense(n, 3, randGeneral(rng, n, 3, 0).Data)
		var wX, gX mat.Dense
		if err := want.SolveTo(&wX, B); err != nil {
			t.Fatal(err)
		}
		if err := got.SolveTo(&gX, B); err != nil {
			t.Fatal(err)
		}
		if d := relMaxDiff(gX.RawMatrix().Data, wX.RawMatrix().Data); !(d <= 1e-12) {
			t.Errorf("n=%d: SolveTo relative difference %g", n, d)
		}
		var wi, gi mat.SymDense
		if err := want.InverseTo(&wi); err != nil {
			t.Fatal(err)
		}
		if err := got.InverseTo(&gi); err != nil {
			t.Fatal(err)
		}
		if !mat.EqualApprox(&gi, &wi, 1e-12*mat.Norm(&wi, math.Inf(1))) {
			t.Errorf("n=%d: InverseTo differs from mat.Cholesky's", n)
		}
		gd := make([]float64, n)
		if err := got.InverseDiag(gd); err != nil {
			t.Fatal(err)
		}
		for i, v := range gd {
			if w := wi.At(i, i); !(math.Abs(v-w) <= 1e-12*math.Abs(w)) {
				t.Errorf("n=%d: InverseDiag[%d] = %v, mat.Cholesky's inverse has %v", n, i, v, w)
				break
			}
		}
		var wu, gu mat.TriDense
		want.UTo(&wu)
		got.UTo(&gu)
		if !mat.EqualApprox(&gu, &wu, 1e-12*mat.Norm(&wu, math.Inf(1))) {
			t.Errorf("n=%d: UTo differs from mat.Cholesky's", n)
		}
	}
	var c Cholesky
	if c.Factorize(mat.NewSymDense(2, []float64{1, 2, 2, 1})) {
		t.Error("an indefinite matrix factorised")
	}
	if err := c.SolveVecTo(mat.NewVecDense(2, nil), mat.NewVecDense(2, nil)); err == nil {
		t.Error("SolveVecTo after a failed factorisation returned no error")
	}
}

// TestInverseNorm2 checks ||T^-1||_F^2 against gonum's triangular solve with the identity,
// for both triangles and sizes on both sides of the blocking.
func TestInverseNorm2(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	for _, n := range []int{1, 5, 33, 70, 300} {
		for _, uplo := range []blas.Uplo{blas.Upper, blas.Lower} {
			a := randTriangular(rng, n, uplo, blas.NonUnit)
			x := blas64.General{Rows: n, Cols: n, Stride: n, Data: make([]float64, n*n)}
			for i := range n {
				x.Data[i*n+i] = 1
			}
			blas64.Trsm(blas.Left, blas.NoTrans, 1, a, x)
			var want float64
			for _, v := range x.Data {
				want += v * v
			}
			if got := InverseNorm2(a); !(math.Abs(got-want) <= 1e-12*want) {
				t.Errorf("n=%d uplo=%c: %v, want %v", n, uplo, got, want)
			}
		}
	}
}

// TestInverseUTo checks W = U^-1 from a factorisation: U W = I, to the rounding of the
// triangular solve, W zero below the diagonal, for sizes on both sides of the blocking; and
// the error without a factorisation or with a destination of the wrong length.
func TestInverseUTo(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 11))
	for _, n := range []int{1, 5, 33, 70, 300} {
		var c Cholesky
		if !c.Factorize(mat.NewSymDense(n, randSPD(rng, n))) {
			t.Fatalf("n=%d: not positive definite", n)
		}
		w := make([]float64, n*n)
		if err := c.InverseUTo(w); err != nil {
			t.Fatal(err)
		}
		u := c.RawU()
		var worst float64
		for i := range n {
			for j := range n {
				if j < i && w[i*n+j] != 0 {
					t.Fatalf("n=%d: W[%d][%d] = %v below the diagonal", n, i, j, w[i*n+j])
				}
				var s float64 // (U W)_ij
				for k := i; k < n; k++ {
					s += u.Data[i*u.Stride+k] * w[k*n+j]
				}
				if i == j {
					s--
				}
				worst = max(worst, math.Abs(s))
			}
		}
		if !(worst <= 1e-12) {
			t.Errorf("n=%d: max |U W - I| = %v", n, worst)
		}
	}
	var c Cholesky
	if err := c.InverseUTo(nil); err == nil {
		t.Error("InverseUTo without a factorisation returned no error")
	}
	c.Factorize(mat.NewSymDense(2, []float64{2, 0, 0, 2}))
	if err := c.InverseUTo(make([]float64, 3)); err == nil {
		t.Error("InverseUTo into 3 values for n = 2 returned no error")
	}
}
