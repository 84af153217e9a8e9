package solver

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/floats"
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

// BlockLanczos with a VarianceGap monitor, for blocks of 1, 3 and 8 columns: at every rank the
// monitor's cached variance k_ii - c_i^T T^-1 c_i is never below the exact variance
// k_ii - k_i^T A^-1 k_i, and the gap bounds its excess over the exact one (the monitor's lower
// estimate is below the exact variance); at the end the running form equals the dense
// Galerkin form from Q and the dense A (so T is block tridiagonal as the recurrence assumes,
// and Minus M gives Q T^-1 Q^T = M M^T), and at full rank the gap is 0 and the cache exact.
// Q stays orthonormal; a step function that stops ends the process at that block.
func TestBlockLanczosVarianceGap(t *testing.T) {
	const n, p = 150, 6
	for _, bs := range []int{1, 3, 8} {
		t.Run(fmt.Sprintf("block %d", bs), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(12, 1))
			prob := newCGProblem(t, rng, n, 1e-3)
			b := make([]float64, n)
			for i := range b {
				b[i] = rng.NormFloat64()
			}
			cols := make([]float64, n*p)
			prior := make([]float64, p)
			exact := make([]float64, p)
			for c := 0; c < p; c++ {
				i := c * 23
				for j := 0; j < n; j++ {
					cols[c*n+j] = prob.K.At(j, i)
				}
				prior[c] = prob.K.At(i, i)
				x := prob.solve(t, cols[c*n:(c+1)*n])
				exact[c] = prior[c] - floats.Dot(x, cols[c*n:(c+1)*n])
			}
			check := func(rank int, full bool) {
				mon, err := NewVarianceGap(cols, n, prior, prob.sigma2)
				if err != nil {
					t.Fatal(err)
				}
				var gaps []float64
				var ranks []int
				step := func(k *BlockKrylov) bool {
					mon.Step(k)
					gaps = append(gaps, mon.Gap())
					ranks = append(ranks, k.Rank())
					for c := 0; c < p; c++ {
						upper := prior[c] - mon.quad[c]
						lower := upper - math.Max(0, mon.norm[c]-mon.proj[c])/prob.sigma2
						if upper < exact[c]-1e-10*prior[c] {
							t.Errorf("rank %d probe %d: cached variance %v below exact %v", k.Rank(), c, upper, exact[c])
						}
						// The lower estimate ignores the coupling of the last block to the
						// unexplored directions, so it may sit above the exact variance by rounding-
						// sized amounts: 1e-5 relative.
						if lower > exact[c]*(1+1e-5) {
							t.Errorf("rank %d probe %d: lower estimate %v above exact %v", k.Rank(), c, lower, exact[c])
						}
					}
					return false
				}
				k, err := BlockLanczos(prob.op(), b, bs, rank, 1e-10, 3, step)
				if err != nil {
					t.Fatal(err)
				}
				r := k.Rank()
				if r != rank {
					t.Fatalf("rank %d, want %d", r, rank)
				}
				Qm := mat.NewDense(r, n, append([]float64(nil), k.Basis()...)) // rows q_j
				var QQ mat.Dense
				QQ.Mul(Qm, Qm.T())
				for i := 0; i < r; i++ {
					for j := 0; j < r; j++ {
						want := 0.0
						if i == j {
							want = 1
						}
						if math.Abs(QQ.At(i, j)-want) > 1e-10 {
							t.Fatalf("Q^T Q [%d,%d] = %v", i, j, QQ.At(i, j))
						}
					}
				}
				// The dense Galerkin form: T = Q^T A Q from the dense A.
				var AQ, T mat.Dense
				AQ.Mul(prob.A, Qm.T())
				T.Mul(Qm, &AQ)
				Ts := mat.NewSymDense(r, nil)
				for i := 0; i < r; i++ {
					for j := i; j < r; j++ {
						Ts.SetSym(i, j, 0.5*(T.At(i, j)+T.At(j, i)))
					}
				}
				var ch mat.Cholesky
				if !ch.Factorize(Ts) {
					t.Fatal("Q^T A Q not positive definite")
				}
				M := k.Minus() // n x r
				for c := 0; c < p; c++ {
					kc := cols[c*n : (c+1)*n]
					var qk, s mat.VecDense
					qk.MulVec(Qm, mat.NewVecDense(n, kc))
					if err := ch.SolveVecTo(&s, &qk); err != nil {
						t.Fatal(err)
					}
					want := prior[c] - mat.Dot(&qk, &s)
					if got := prior[c] - mon.quad[c]; math.Abs(got-want) > 1e-8*prior[c] {
						t.Errorf("probe %d: running variance %v, dense Galerkin %v", c, got, want)
					}
					mk := make([]float64, r)
					for i := 0; i < n; i++ {
						floats.AddScaled(mk, kc[i], M[i*r:(i+1)*r])
					}
					if got := prior[c] - floats.Dot(mk, mk); math.Abs(got-want) > 1e-8*prior[c] {
						t.Errorf("probe %d: variance from Minus %v, dense Galerkin %v", c, got, want)
					}
					if full && math.Abs(want-exact[c]) > 1e-6*exact[c] {
						t.Errorf("probe %d: full-rank cache variance %v, exact %v", c, want, exact[c])
					}
				}
				if full && gaps[len(gaps)-1] > 1e-6 {
					t.Errorf("full rank, final gap %v", gaps[len(gaps)-1])
				}
				if !full {
					for i, rk := range ranks {
						if rk <= 10 && gaps[i] < 1 {
							t.Errorf("gap at rank %d is %v; the test needs a problem where a small cache is far off", rk, gaps[i])
						}
					}
				}
			}
			check(n, true)
			check(40, false)
			// A step function that stops ends the process at that block.
			k, err := BlockLanczos(prob.op(), b, bs, n, 1e-10, 3, func(k *BlockKrylov) bool { return k.Blocks() == 3 })
			if err != nil {
				t.Fatal(err)
			}
			if k.Rank() != 3*bs {
				t.Fatalf("stopped at rank %d, want %d", k.Rank(), 3*bs)
			}
		})
	}
}

// GolubWelsch gives the eigenvalues of a symmetric tridiagonal matrix and the squared first
// components of its eigenvectors, as a full dense eigendecomposition does, for random,
// graded, repeated-eigenvalue and 1 x 1 matrices.
func TestGolubWelschMatchesEigenSym(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 2))
	for _, tc := range []struct {
		name string
		n    int
		make func(j int) (d, e float64)
	}{
		{"random", 60, func(int) (float64, float64) { return rng.NormFloat64(), rng.NormFloat64() }},
		{"graded", 40, func(j int) (float64, float64) { return math.Pow(10, -float64(j)/4), 0.3 * math.Pow(10, -float64(j)/4) }},
		{"repeated", 30, func(j int) (float64, float64) { return 2, 1e-9 * float64(j%3) }},
		{"lanczos-like", 100, func(j int) (float64, float64) { return 1 + rng.Float64(), 0.5 * rng.Float64() }},
		{"one", 1, func(int) (float64, float64) { return 3.5, 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.n
			d, e := make([]float64, n), make([]float64, n)
			T := mat.NewSymDense(n, nil)
			for j := 0; j < n; j++ {
				d[j], e[j] = tc.make(j)
				T.SetSym(j, j, d[j])
				if j+1 < n {
					T.SetSym(j+1, j, e[j])
				}
			}
			scale := mat.Norm(T, 2)
			var eig mat.EigenSym
			if !eig.Factorize(T, true) {
				t.Fatal("EigenSym failed")
			}
			var V mat.Dense
			eig.VectorsTo(&V)
			w, err := GolubWelsch(d, e)
			if err != nil {
				t.Fatal(err)
			}
			// Compare the rules through moments e_1^T T^p e_1 = sum_k w_k theta_k^p and the
			// sorted eigenvalues (the rules' orders differ).
			vals := eig.Values(nil)
			got := append([]float64(nil), d...)
			slices.Sort(got)
			for k := range vals {
				if math.Abs(got[k]-vals[k]) > 1e-12*scale {
					t.Fatalf("eigenvalue %d: %v, EigenSym %v", k, got[k], vals[k])
				}
			}
			for p := 0; p <= 4; p++ {
				var a, b float64
				for k := range vals {
					a += w[k] * math.Pow(d[k]/scale, float64(p))
					b += V.At(0, k) * V.At(0, k) * math.Pow(vals[k]/scale, float64(p))
				}
				if math.Abs(a-b) > 1e-12 {
					t.Errorf("moment %d: Golub-Welsch %v, EigenSym %v", p, a, b)
				}
			}
		})
	}
}

func BenchmarkLanczosQuadrature(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, J := range []int{100, 400} {
		alpha, beta := make([]float64, J), make([]float64, J)
		for j := range alpha {
			alpha[j], beta[j] = 0.5+rng.Float64(), 0.5*rng.Float64()
		}
		b.Run(fmt.Sprintf("J=%d", J), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := LanczosQuadrature(alpha, beta, math.Log); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BlockLanczos rejects a start of the wrong length, a zero or non-finite start, and a block or
// rank below 1, with an error rather than a panic; a block wider than n gives the full basis.
func TestBlockLanczosBadInput(t *testing.T) {
	prob := newCGProblem(t, rand.New(rand.NewPCG(4, 4)), 20, 1e-2)
	ones := make([]float64, 20)
	for i := range ones {
		ones[i] = 1
	}
	for _, tc := range []struct {
		name        string
		start       []float64
		block, rank int
	}{
		{"short start", ones[:19], 4, 10},
		{"zero start", make([]float64, 20), 4, 10},
		{"NaN start", append([]float64{math.NaN()}, ones[1:]...), 4, 10},
		{"block 0", ones, 0, 10},
		{"rank 0", ones, 4, 0},
	} {
		if _, err := BlockLanczos(prob.op(), tc.start, tc.block, tc.rank, 1e-10, 1, nil); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	k, err := BlockLanczos(prob.op(), ones, 32, 100, 1e-10, 1, nil)
	if err != nil || k.Rank() != 20 {
		t.Fatalf("block 32 on n = 20: %v", err)
	}
}
