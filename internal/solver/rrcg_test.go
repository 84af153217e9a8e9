package solver

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestTruncationDistribution(t *testing.T) {
	for _, tc := range []Truncation{
		{Lambda: 0.05, JMin: 80, JMax: 10000},
		{Lambda: 0.1, JMin: 1, JMax: 500},
		{Lambda: 0.3, JMin: 3, JMax: 40},
		{Lambda: 2, JMin: 5, JMax: 5},
		{Lambda: 1e-3, JMin: 2, JMax: 60},
	} {
		// Prob sums to 1; Survival is the tail sum of Prob (summed from the far tail up, so no
		// cancellation); Mean is the mean.
		tail, total, mean := 0.0, 0.0, 0.0
		for j := tc.JMax; j >= 1; j-- {
			tail += tc.Prob(j)
			if s := tc.Survival(j); math.Abs(s-tail) > 1e-12*tail {
				t.Fatalf("%+v: P(J >= %d) = %v, tail sum %v", tc, j, s, tail)
			}
			mean += float64(j) * tc.Prob(j)
		}
		total = tail
		if math.Abs(total-1) > 1e-12 {
			t.Errorf("%+v: probabilities sum to %v", tc, total)
		}
		if got := tc.Mean(); math.Abs(got-mean) > 1e-9*mean {
			t.Errorf("%+v: Mean %v, want %v", tc, got, mean)
		}
		if tc.Survival(tc.JMax+1) != 0 || tc.Survival(tc.JMin) != 1 || tc.Prob(tc.JMin-1) != 0 {
			t.Errorf("%+v: wrong support", tc)
		}
		// Sampling: the sample mean is within 4 standard errors of Mean, all draws in support.
		rng := rand.New(rand.NewPCG(uint64(tc.JMin), uint64(tc.JMax)))
		const draws = 20000
		s1, s2 := 0.0, 0.0
		for i := 0; i < draws; i++ {
			J := tc.Sample(rng)
			if J < tc.JMin || J > tc.JMax {
				t.Fatalf("%+v: draw %d outside support", tc, J)
			}
			s1 += float64(J)
			s2 += float64(J) * float64(J)
		}
		m := s1 / draws
		sd := math.Sqrt(math.Max(0, s2/draws-m*m))
		if math.Abs(m-tc.Mean()) > 4*sd/math.Sqrt(draws)+1e-12 {
			t.Errorf("%+v: sample mean %v, want %v (sd %v)", tc, m, tc.Mean(), sd)
		}
	}
	// lambda = 0.05 gives E[J] ~= JMin + 1/(e^0.05 - 1) = JMin + 19.5 (J - JMin is nearly
	// geometric when JMax >> JMin).
	if m := (Truncation{Lambda: 0.05, JMin: 80, JMax: 100000}).Mean(); math.Abs(m-99.50) > 0.01 {
		t.Errorf("lambda 0.05, JMin 80: E[J] = %v, want 99.50", m)
	}
}

func TestRRExpectationIsExact(t *testing.T) {
	// Enumerating J_1 = J_2 = J over the whole support with weights P(J = j) gives the expectation
	// of W exactly: it must equal the plain CG iterate x_JMax (tol = 0) or the converged solve.
	for _, tc := range []struct {
		name  string
		trunc Truncation
		rank  int
		tol   float64
	}{
		{"plain, stops at JMax", Truncation{Lambda: 0.2, JMin: 2, JMax: 25}, 0, 0},
		{"pivchol, converges before JMax", Truncation{Lambda: 0.1, JMin: 1, JMax: 100}, 5, 1e-11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(31, 4))
			p := newCGProblem(t, rng, 100, 0.1)
			y := randVecs(rng, 100)
			var pre Preconditioner
			if tc.rank > 0 {
				pre = p.precond(t, tc.rank)
			}
			plain, err := BatchPCG(p.op(), y, 1, pre, tc.trunc.JMax, tc.tol)
			if err != nil {
				t.Fatal(err)
			}
			EW := make([]float64, 100)
			EQ := 0.0
			for J := tc.trunc.JMin; J <= tc.trunc.JMax; J++ {
				res, err := rrSolve(p.op(), y, 1, pre, tc.trunc, [2]int{J, J}, tc.tol)
				if err != nil {
					t.Fatal(err)
				}
				pj := tc.trunc.Prob(J)
				EQ += pj * res.Quad[0]
				for i := range EW {
					EW[i] += pj * res.W1[i]
				}
			}
			if want := dot(y, plain.X); math.Abs(EQ-want) > 1e-9*math.Abs(want) {
				t.Errorf("E[quad] = %v, want %v", EQ, want)
			}
			for i, w := range plain.X {
				if math.Abs(EW[i]-w) > 1e-8*math.Max(1, math.Abs(w)) {
					t.Fatalf("E[W]_%d = %v, want %v", i, EW[i], w)
				}
			}
			if tc.tol > 0 {
				if want := dot(y, p.solve(t, y)); math.Abs(EQ-want) > 1e-8*math.Abs(want) {
					t.Errorf("E[quad] = %v, want Cholesky %v", EQ, want)
				}
			}
		})
	}
}

func TestRRSolveQuadIsUnbiasedAndFixedJIsNot(t *testing.T) {
	for _, tc := range []struct {
		name  string
		trunc Truncation
		rank  int
		draws int
	}{
		{"plain", Truncation{Lambda: 0.2, JMin: 3, JMax: 100}, 0, 3000},
		{"pivchol rank 5", Truncation{Lambda: 0.3, JMin: 2, JMax: 100}, 5, 3000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(41, uint64(tc.rank)))
			p := newCGProblem(t, rng, 100, 0.1)
			y := randVecs(rng, 100)
			exact := dot(y, p.solve(t, y))
			var pre Preconditioner
			if tc.rank > 0 {
				pre = p.precond(t, tc.rank)
			}
			// Two right-hand sides share the truncations; both estimates must be unbiased.
			B := append(append([]float64(nil), y...), y...)
			draw := rand.New(rand.NewPCG(99, 1))
			s1, s2, iters := 0.0, 0.0, 0
			for d := 0; d < tc.draws; d++ {
				res, err := RRSolveQuad(p.op(), B, 2, pre, tc.trunc, 1e-10, draw)
				if err != nil {
					t.Fatal(err)
				}
				if res.Quad[0] != res.Quad[1] {
					t.Fatalf("identical columns gave %v and %v", res.Quad[0], res.Quad[1])
				}
				s1 += res.Quad[0]
				s2 += res.Quad[0] * res.Quad[0]
				iters += res.CG.Iters[0]
			}
			n := float64(tc.draws)
			mean := s1 / n
			se := math.Sqrt((s2/n - mean*mean) / (n - 1))
			if math.Abs(mean-exact) > 3*se {
				t.Errorf("RR mean %v +- %v, exact %v (%.2f standard errors)", mean, se, exact, (mean-exact)/se)
			}
			// Fixed-J CG underestimates y^T A^-1 y (Potapczynski et al. 2021, Theorem 1), both at
			// the mean cost of a draw and at JMin, where the bias is many standard errors of the RR mean.
			Jmean := int(math.Round(float64(iters) / n))
			for _, J := range []int{Jmean, tc.trunc.JMin} {
				fixed, err := BatchPCG(p.op(), y, 1, pre, J, 0)
				if err != nil {
					t.Fatal(err)
				}
				u := dot(y, fixed.X)
				if !(u < exact) {
					t.Errorf("fixed J=%d: %v not below exact %v", J, u, exact)
				}
				if J == tc.trunc.JMin && !(exact-u > 3*se) {
					t.Errorf("fixed J=%d: %v, exact %v: bias not beyond 3 standard errors (%v)", J, u, exact, se)
				}
				t.Logf("fixed J=%d: %v", J, u)
			}
			t.Logf("RR %v +- %v; exact %v", mean, se, exact)
		})
	}
}

func TestRRConvergedBeforeJMinIsPlainSolve(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 5))
	p := newCGProblem(t, rng, 60, 0.1)
	y := randVecs(rng, 60)
	res, err := RRSolveQuad(p.op(), y, 1, nil, Truncation{Lambda: 0.1, JMin: 200, JMax: 300}, 1e-10, rng)
	if err != nil {
		t.Fatal(err)
	}
	if !res.CG.Converged[0] {
		t.Fatal("CG did not converge before JMin")
	}
	for i, x := range res.CG.X {
		if res.W1[i] != x || res.W2[i] != x {
			t.Fatalf("entry %d: W = %v, %v, plain %v", i, res.W1[i], res.W2[i], x)
		}
	}
	if want := dot(y, p.solve(t, y)); math.Abs(res.Quad[0]-want) > 1e-8*math.Abs(want) {
		t.Errorf("quad %v, want %v", res.Quad[0], want)
	}
}

func TestRRSolveQuadRejectsBadTruncation(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	p := newCGProblem(t, rng, 20, 0.1)
	for _, tr := range []Truncation{{Lambda: 0, JMin: 1, JMax: 5}, {Lambda: 0.1, JMin: 0, JMax: 5}, {Lambda: 0.1, JMin: 6, JMax: 5}, {Lambda: math.Inf(1), JMin: 1, JMax: 5}} {
		if _, err := RRSolveQuad(p.op(), make([]float64, 20), 1, nil, tr, 1e-8, rng); err == nil {
			t.Errorf("%+v: no error", tr)
		}
	}
}
