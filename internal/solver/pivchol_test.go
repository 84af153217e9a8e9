package solver

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

func TestPivotedCholeskyReproducesMatrix(t *testing.T) {
	for _, tc := range []struct {
		name     string
		n        int
		noise    float64 // added to K's diagonal before factorising
		rank     int
		tol      float64
		wantRank int // -1: any
		maxErr   float64
	}{
		{"full rank K + s2 I", 60, 0.1, 60, 0, 60, 1e-10},
		{"full rank K + s2 I n=120", 120, 0.1, 200, 0, 120, 1e-10},
		{"kernel K with trace tolerance", 80, 0, 80, 1e-13, -1, 1e-10},
		{"low rank keeps residual PSD", 80, 0, 5, 0, 5, math.Inf(1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.n), 9))
			p := newCGProblem(t, rng, tc.n, 0.1)
			M := mat.NewSymDense(tc.n, nil)
			M.CopySym(p.K)
			for i := 0; i < tc.n; i++ {
				M.SetSym(i, i, M.At(i, i)+tc.noise)
			}
			L, r, err := PivotedCholesky(func(i int) float64 { return M.At(i, i) },
				func(i int, dst []float64) { mat.Row(dst, i, M) }, tc.n, tc.rank, tc.tol, 0)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantRank >= 0 && r != tc.wantRank {
				t.Fatalf("rank %d, want %d", r, tc.wantRank)
			}
			if len(L) != tc.n*r {
				t.Fatalf("L has %d values for %d x %d", len(L), tc.n, r)
			}
			// R = M - L L^T; L column-major is L^T row-major.
			Lt := mat.NewDense(r, tc.n, L)
			var LLt mat.Dense
			LLt.Mul(Lt.T(), Lt)
			maxErr, minDiag := 0.0, math.Inf(1)
			for i := 0; i < tc.n; i++ {
				for j := 0; j < tc.n; j++ {
					maxErr = math.Max(maxErr, math.Abs(M.At(i, j)-LLt.At(i, j)))
				}
				minDiag = math.Min(minDiag, M.At(i, i)-LLt.At(i, i))
			}
			if maxErr > tc.maxErr {
				t.Errorf("max |K - L L^T| = %g at rank %d", maxErr, r)
			}
			if minDiag < -1e-12 {
				t.Errorf("residual diagonal %g is negative", minDiag)
			}
		})
	}
}

func TestWoodburyMatchesDense(t *testing.T) {
	for _, tc := range []struct {
		n, rank int
		sigma2  float64
	}{{60, 0, 0.1}, {60, 5, 0.1}, {120, 15, 0.1}, {80, 80, 0.5}} {
		rng := rand.New(rand.NewPCG(uint64(tc.n+tc.rank), 2))
		p := newCGProblem(t, rng, tc.n, tc.sigma2)
		L, r, err := PivotedCholesky(func(i int) float64 { return p.K.At(i, i) },
			func(i int, dst []float64) { mat.Row(dst, i, p.K) }, tc.n, tc.rank, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		w, err := NewWoodbury(L, tc.n, r, tc.sigma2)
		if err != nil {
			t.Fatal(err)
		}
		// Dense P = L L^T + sigma^2 I.
		P := mat.NewSymDense(tc.n, nil)
		if r > 0 {
			P.SymOuterK(1, mat.NewDense(r, tc.n, L).T())
		}
		for i := 0; i < tc.n; i++ {
			P.SetSym(i, i, P.At(i, i)+tc.sigma2)
		}
		var chol mat.Cholesky
		if !chol.Factorize(P) {
			t.Fatal("dense P not positive definite")
		}
		if got, want := w.LogDet(), chol.LogDet(); math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Errorf("n=%d r=%d: LogDet %v, want %v", tc.n, r, got, want)
		}
		const k = 3
		src := randVecs(rng, tc.n*k)
		dst := make([]float64, tc.n*k)
		w.Solve(dst, src, k)
		for c := 0; c < k; c++ {
			var x mat.VecDense
			if err := chol.SolveVecTo(&x, mat.NewVecDense(tc.n, src[c*tc.n:(c+1)*tc.n])); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < tc.n; i++ {
				if d := math.Abs(dst[c*tc.n+i] - x.AtVec(i)); d > 1e-8*math.Max(1, math.Abs(x.AtVec(i))) {
					t.Fatalf("n=%d r=%d column %d entry %d: %v, want %v", tc.n, r, c, i, dst[c*tc.n+i], x.AtVec(i))
				}
			}
		}
		// Samples z ~ N(0, P): z^T P^-1 z ~ chi^2_n, mean n, sd sqrt(2n).
		const draws = 2000
		z, pz := make([]float64, tc.n), make([]float64, tc.n)
		mean := 0.0
		for s := 0; s < draws; s++ {
			w.Sample(rng, z)
			w.Solve(pz, z, 1)
			mean += dot(z, pz) / draws
		}
		if se := math.Sqrt(2 * float64(tc.n) / draws); math.Abs(mean-float64(tc.n)) > 4*se {
			t.Errorf("n=%d r=%d: mean z^T P^-1 z = %v, want %d +- %v", tc.n, r, mean, tc.n, 4*se)
		}
	}
}

func TestPivotedCholeskyAndWoodburyRejectBadInput(t *testing.T) {
	row := func(i int, dst []float64) {}
	if _, _, err := PivotedCholesky(func(int) float64 { return -1 }, row, 3, 2, 0, 0); err == nil {
		t.Error("negative diagonal: no error")
	}
	if _, _, err := PivotedCholesky(func(int) float64 { return 1 }, row, 0, 2, 0, 0); err == nil {
		t.Error("n = 0: no error")
	}
	for _, tc := range []struct {
		L      []float64
		n, r   int
		sigma2 float64
	}{{make([]float64, 5), 3, 2, 0.1}, {make([]float64, 6), 3, 2, 0}, {nil, 3, 0, math.NaN()}} {
		if _, err := NewWoodbury(tc.L, tc.n, tc.r, tc.sigma2); err == nil {
			t.Errorf("NewWoodbury(%d values, %d, %d, %v): no error", len(tc.L), tc.n, tc.r, tc.sigma2)
		}
	}
}

// residualDiag returns diag(K - L L^T) for L n x r column-major.
func residualDiag(K *mat.SymDense, L []float64, n, r int) []float64 {
	e := make([]float64, n)
	for i := range e {
		e[i] = K.At(i, i)
		for l := 0; l < r; l++ {
			e[i] -= L[l*n+i] * L[l*n+i]
		}
	}
	return e
}

// TestPivotedCholeskyFloor: with a floor, the factor stops at the first rank whose largest
// residual diagonal entry is at most the floor: every entry is then at most the floor, and
// one column fewer leaves an entry above it (the rank is the smallest that meets it).
func TestPivotedCholeskyFloor(t *testing.T) {
	const n = 300
	rng := rand.New(rand.NewPCG(11, 3))
	p := newCGProblem(t, rng, n, 0.1)
	diag := func(i int) float64 { return p.K.At(i, i) }
	row := func(i int, dst []float64) { mat.Row(dst, i, p.K) }
	for _, floor := range []float64{0.5, 0.1, 0.01, 1e-4} {
		L, r, err := PivotedCholesky(diag, row, n, n, 0, floor)
		if err != nil {
			t.Fatal(err)
		}
		if r == 0 || r == n {
			t.Fatalf("floor %g: rank %d, want a partial factor", floor, r)
		}
		if e := residualDiag(p.K, L, n, r); floats.Max(e) > floor*(1+1e-12) {
			t.Errorf("floor %g: rank %d leaves a residual %g above the floor", floor, r, floats.Max(e))
		}
		if e := residualDiag(p.K, L[:n*(r-1)], n, r-1); floats.Max(e) <= floor {
			t.Errorf("floor %g: rank %d, but rank %d already meets it (max residual %g)", floor, r, r-1, floats.Max(e))
		}
		// The floor's factor is the leading columns of the unlimited one (same pivots, same bits).
		full, rf, err := PivotedCholesky(diag, row, n, n, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if rf < r || !slices.Equal(full[:n*r], L) {
			t.Errorf("floor %g: the factor is not the leading %d columns of the full one", floor, r)
		}
	}
}

// TestPivotedCholeskyBitsIndependentOfGOMAXPROCS: the column updates run on GOMAXPROCS
// goroutines over row ranges (above about a million multiply-adds per column); the factor's
// bits must not depend on how many.
func TestPivotedCholeskyBitsIndependentOfGOMAXPROCS(t *testing.T) {
	const n, rank = 2500, 600 // n * m passes 1 << 20 from m = 420 on
	rng := rand.New(rand.NewPCG(5, 8))
	x := make([]float64, 3*n)
	for i := range x {
		x[i] = rng.Float64()
	}
	row := func(i int, dst []float64) {
		for j := range dst {
			s := 0.0
			for k := 0; k < 3; k++ {
				d := x[3*i+k] - x[3*j+k]
				s += d * d
			}
			dst[j] = math.Exp(-s / (2 * 0.05 * 0.05))
		}
	}
	diag := func(int) float64 { return 1 }
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	var want []float64
	for _, procs := range []int{1, 2, 3} {
		runtime.GOMAXPROCS(procs)
		L, r, err := PivotedCholesky(diag, row, n, rank, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if r != rank {
			t.Fatalf("rank %d, want %d", r, rank)
		}
		if want == nil {
			want = L
			continue
		}
		if !slices.Equal(L, want) {
			t.Errorf("GOMAXPROCS %d: the factor's bits differ from GOMAXPROCS 1", procs)
		}
	}
}
