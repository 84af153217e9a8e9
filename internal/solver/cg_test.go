package solver

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// denseOp is an Operator wrapping a dense symmetric matrix; it counts product calls.
type denseOp struct {
	A     *mat.SymDense
	calls int
}

func (o *denseOp) Dim() int { return o.A.SymmetricDim() }

func (o *denseOp) MulVecs(dst, src []float64, k int) error {
	n := o.Dim()
	o.calls++
	// Column-major n x k is row-major k x n: dst^T = src^T A.
	mat.NewDense(k, n, dst).Mul(mat.NewDense(k, n, src), o.A)
	return nil
}

// cgProblem is a dense reference: the RBF kernel matrix K on n random points in [0, 1]^2
// (lengthscale 0.3, unit outputscale), noise sigma^2 and A = K + sigma^2 I.
type cgProblem struct {
	n      int
	sigma2 float64
	K, A   *mat.SymDense
	chol   mat.Cholesky // of A
}

func newCGProblem(t *testing.T, rng *rand.Rand, n int, sigma2 float64) *cgProblem {
	t.Helper()
	x := make([]float64, 2*n)
	for i := range x {
		x[i] = rng.Float64()
	}
	K := mat.NewSymDense(n, nil)
	A := mat.NewSymDense(n, nil)
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			dx, dy := x[2*i]-x[2*j], x[2*i+1]-x[2*j+1]
			v := math.Exp(-(dx*dx + dy*dy) / (2 * 0.3 * 0.3))
			K.SetSym(i, j, v)
			A.SetSym(i, j, v)
		}
		A.SetSym(i, i, A.At(i, i)+sigma2)
	}
	p := &cgProblem{n: n, sigma2: sigma2, K: K, A: A}
	if !p.chol.Factorize(A) {
		t.Fatal("reference matrix is not positive definite")
	}
	return p
}

func (p *cgProblem) op() *denseOp { return &denseOp{A: p.A} }

// solve returns A^-1 b for one column by the dense Cholesky factor.
func (p *cgProblem) solve(t *testing.T, b []float64) []float64 {
	t.Helper()
	var x mat.VecDense
	if err := p.chol.SolveVecTo(&x, mat.NewVecDense(p.n, b)); err != nil {
		t.Fatal(err)
	}
	return x.RawVector().Data
}

// precond returns the rank-r pivoted-Cholesky Woodbury preconditioner of K + sigma^2 I.
func (p *cgProblem) precond(t *testing.T, rank int) *Woodbury {
	t.Helper()
	L, r, err := PivotedCholesky(func(i int) float64 { return p.K.At(i, i) },
		func(i int, dst []float64) { mat.Row(dst, i, p.K) }, p.n, rank, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWoodbury(L, p.n, r, p.sigma2)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func randVecs(rng *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	return v
}

func TestBatchPCGMatchesCholesky(t *testing.T) {
	const k = 4
	for _, tc := range []struct {
		name  string
		n     int
		rank  int // 0: no preconditioner
		seed  uint64
		zeroC int // a column set to zero, -1 for none
	}{
		{"plain n=80", 80, 0, 1, -1},
		{"pivchol rank 10 n=80", 80, 10, 2, -1},
		{"plain n=150 with zero column", 150, 0, 3, 2},
		{"pivchol rank 20 n=150", 150, 20, 4, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(tc.seed, 7))
			p := newCGProblem(t, rng, tc.n, 0.1)
			B := randVecs(rng, tc.n*k)
			if tc.zeroC >= 0 {
				clear(B[tc.zeroC*tc.n : (tc.zeroC+1)*tc.n])
			}
			var pre Preconditioner
			if tc.rank > 0 {
				pre = p.precond(t, tc.rank)
			}
			op := p.op()
			res, err := BatchPCG(op, B, k, pre, 2*tc.n, 1e-12)
			if err != nil {
				t.Fatal(err)
			}
			maxIt := 0
			for c := 0; c < k; c++ {
				if !res.Converged[c] {
					t.Errorf("column %d did not converge in %d iterations", c, res.Iters[c])
				}
				maxIt = max(maxIt, res.Iters[c])
				if got, want := len(res.Alpha[c]), res.Iters[c]; got != want {
					t.Errorf("column %d: %d alphas for %d iterations", c, got, want)
				}
				if res.Iters[c] > 0 && len(res.Beta[c]) != res.Iters[c]-1 {
					t.Errorf("column %d: %d betas for %d iterations", c, len(res.Beta[c]), res.Iters[c])
				}
				want := p.solve(t, B[c*tc.n:(c+1)*tc.n])
				for i, w := range want {
					if d := math.Abs(res.X[c*tc.n+i] - w); d > 1e-8*math.Max(1, math.Abs(w)) {
						t.Fatalf("column %d entry %d: %v, want %v", c, i, res.X[c*tc.n+i], w)
					}
				}
			}
			if tc.zeroC >= 0 && res.Iters[tc.zeroC] != 0 {
				t.Errorf("zero column ran %d iterations", res.Iters[tc.zeroC])
			}
			if op.calls != maxIt {
				t.Errorf("%d operator calls for %d iterations: want one call per iteration", op.calls, maxIt)
			}
		})
	}
}

func TestPreconditionerReducesIterations(t *testing.T) {
	for _, tc := range []struct {
		n, rank int
	}{{100, 10}, {200, 25}} {
		rng := rand.New(rand.NewPCG(uint64(tc.n), 1))
		p := newCGProblem(t, rng, tc.n, 0.1)
		b := randVecs(rng, tc.n)
		plain, err := BatchPCG(p.op(), b, 1, nil, 3*tc.n, 1e-10)
		if err != nil {
			t.Fatal(err)
		}
		pre, err := BatchPCG(p.op(), b, 1, p.precond(t, tc.rank), 3*tc.n, 1e-10)
		if err != nil {
			t.Fatal(err)
		}
		if !plain.Converged[0] || !pre.Converged[0] || pre.Iters[0] >= plain.Iters[0] {
			t.Errorf("n=%d rank=%d: %d iterations preconditioned vs %d plain (converged %v, %v)",
				tc.n, tc.rank, pre.Iters[0], plain.Iters[0], pre.Converged[0], plain.Converged[0])
		}
	}
}

func TestBatchPCGFixedJUnderestimatesQuadraticForm(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 3))
	p := newCGProblem(t, rng, 100, 0.1)
	y := randVecs(rng, 100)
	exact := dot(y, p.solve(t, y))
	prev := 0.0
	for _, J := range []int{1, 2, 5, 10, 20} {
		res, err := BatchPCG(p.op(), y, 1, nil, J, 0)
		if err != nil {
			t.Fatal(err)
		}
		u := dot(y, res.X)
		if !(u < exact) || u < prev {
			t.Errorf("J=%d: y^T x_J = %v, want increasing and below %v (previous %v)", J, u, exact, prev)
		}
		prev = u
	}
}

func TestBatchPCGRejectsBadInput(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	p := newCGProblem(t, rng, 20, 0.1)
	indef := mat.NewSymDense(3, []float64{1, 0, 0, 0, -1, 0, 0, 0, 1})
	for _, tc := range []struct {
		name    string
		op      Operator
		b       []float64
		k       int
		maxIter int
		tol     float64
	}{
		{"wrong length", p.op(), make([]float64, 19), 1, 10, 1e-8},
		{"no columns", p.op(), nil, 0, 10, 1e-8},
		{"zero iterations", p.op(), make([]float64, 20), 1, 0, 1e-8},
		{"negative tol", p.op(), make([]float64, 20), 1, 10, -1},
		{"indefinite", &denseOp{A: indef}, []float64{0, 1, 0}, 1, 10, 1e-8},
	} {
		if _, err := BatchPCG(tc.op, tc.b, tc.k, nil, tc.maxIter, tc.tol); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}
