package solver

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// denseQuadForm returns b^T f(A) b by a dense eigendecomposition of A.
func denseQuadForm(t *testing.T, A *mat.SymDense, b []float64, f func(float64) float64) float64 {
	t.Helper()
	var eig mat.EigenSym
	if !eig.Factorize(A, true) {
		t.Fatal("eigendecomposition failed")
	}
	var V mat.Dense
	eig.VectorsTo(&V)
	var c mat.VecDense
	c.MulVec(V.T(), mat.NewVecDense(len(b), b))
	q := 0.0
	for k, l := range eig.Values(nil) {
		q += c.AtVec(k) * c.AtVec(k) * f(l)
	}
	return q
}

func TestLanczosQuadratureMatchesDense(t *testing.T) {
	inv := func(x float64) float64 { return 1 / x }
	for _, tc := range []struct {
		name string
		rank int // 0: no preconditioner
		f    func(float64) float64
		tol  float64
	}{
		{"inverse plain", 0, inv, 1e-9},
		{"inverse preconditioned", 10, inv, 1e-9},
		{"log plain", 0, math.Log, 1e-7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(21, uint64(tc.rank)))
			p := newCGProblem(t, rng, 100, 0.1)
			b := randVecs(rng, 100)
			var pre Preconditioner
			scale := dot(b, b)
			if tc.rank > 0 {
				w := p.precond(t, tc.rank)
				pb := make([]float64, 100)
				w.Solve(pb, b, 1)
				scale = dot(b, pb) // ||P^-1/2 b||^2
				pre = w
			}
			res, err := BatchPCG(p.op(), b, 1, pre, 300, 1e-13)
			if err != nil {
				t.Fatal(err)
			}
			q, err := LanczosQuadrature(res.Alpha[0], res.Beta[0], tc.f)
			if err != nil {
				t.Fatal(err)
			}
			// With a preconditioner only f = 1/t is checked: ||P^-1/2 b||^2 e1^T T^-1 e1 = b^T A^-1 b.
			got, want := scale*q, denseQuadForm(t, p.A, b, tc.f)
			if math.Abs(got-want) > tc.tol*math.Abs(want) {
				t.Errorf("quadrature %v, want %v (J = %d)", got, want, res.Iters[0])
			}
		})
	}
}

func TestLanczosTridiagonalRejectsBadCoefficients(t *testing.T) {
	for _, tc := range []struct {
		alpha, beta []float64
	}{{nil, nil}, {[]float64{1, 2}, nil}, {[]float64{1, -2}, []float64{0.5}}, {[]float64{1, 2}, []float64{-0.5}}} {
		if _, err := LanczosTridiagonal(tc.alpha, tc.beta); err == nil {
			t.Errorf("alpha %v beta %v: no error", tc.alpha, tc.beta)
		}
	}
}

func TestSLQLogDetIsUnbiased(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n      int
		rank   int
		probes int
	}{
		{"plain n=100", 100, 0, 300},
		{"pivchol rank 5 n=100", 100, 5, 200},
		{"pivchol rank 15 n=150", 150, 15, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.n), uint64(tc.rank)+100))
			p := newCGProblem(t, rng, tc.n, 0.1)
			want := p.chol.LogDet()
			var pre Preconditioner
			if tc.rank > 0 {
				pre = p.precond(t, tc.rank)
			}
			est, se, err := SLQLogDet(p.op(), pre, tc.probes, tc.n, rng)
			if err != nil {
				t.Fatal(err)
			}
			// The test only means something if the standard error is small against log det.
			if !(se > 0) || se > 0.02*math.Abs(want) || math.Abs(est-want) > 3*se {
				t.Errorf("SLQ log det %v +- %v, want %v (%.2f standard errors)", est, se, want, (est-want)/se)
			}
			t.Logf("SLQ %v +- %v, Cholesky %v", est, se, want)
		})
	}
}

func TestSLQTruncationOverestimatesLogDet(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	p := newCGProblem(t, rng, 100, 0.1)
	full, _, err := SLQLogDet(p.op(), nil, 20, 100, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	for _, J := range []int{2, 5, 10} {
		// Same probes: the J-point Gauss quadrature of log overestimates for every probe.
		short, _, err := SLQLogDet(p.op(), nil, 20, J, rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			t.Fatal(err)
		}
		if !(short > full) {
			t.Errorf("J=%d: truncated SLQ %v not above full %v", J, short, full)
		}
	}
}
