package vof

import (
	"fmt"
	"math"
	"testing"

	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/solver"
)

// mergeInOrder merges per-shard statistics in shard order, as the coordinator does.
func mergeInOrder(t *testing.T, parts []reduce.Stats) reduce.Stats {
	t.Helper()
	acc := parts[0]
	for _, p := range parts[1:] {
		if err := acc.Merge(p); err != nil {
			t.Fatal(err)
		}
	}
	return acc
}

// TestStatsMerge: statistics of shards merged in shard order equal those of all rows in one
// block (to rounding), the same merge repeated gives the same bits, and mismatched
// statistics are refused.
func TestStatsMerge(t *testing.T) {
	X, y := gpData(90, 1, 3, 41)
	modH := Model{Basis: Hermite, Family: kernel.RBF, Dim: 1, M1: 9, Dense: true}
	pH := randomParams(t, modH, []float64{0.9}, []float64{1}, 0.1, []float64{1.5}, 1)
	fm, err := NewFeatureMap(modH, pH, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	modT := Model{Basis: Trig, Family: kernel.Matern32, Dim: 1, M1: 7}
	grid, err := TrigGridForStep(modT, 8, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	a := []float64{4}
	shards := [][2]int{{0, 20}, {20, 55}, {55, 90}}
	kuf := func(lo, hi int) reduce.Stats {
		s, err := AccumulateKuf(fm, pH, X[lo:hi], y[lo:hi], 1, true)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	trig := func(lo, hi int) reduce.Stats {
		s, err := AccumulateTrig(grid, a, X[lo:hi], y[lo:hi], true)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	flat := func(s reduce.Stats) []float64 {
		switch v := s.(type) {
		case *KufStats:
			out := append([]float64{float64(v.N), v.YY}, v.KY...)
			out = append(out, v.KK...)
			out = append(out, v.DKY...)
			return append(out, v.DKK...)
		case *TrigStats:
			out := []float64{float64(v.N), v.YY}
			for i := 0; i < 4; i++ {
				out = append(out, v.B[i]...)
				out = append(out, v.P[i]...)
				out = append(out, v.XB[0][i]...)
				out = append(out, v.XP[0][i]...)
			}
			return out
		}
		t.Fatalf("unexpected %T", s)
		return nil
	}
	for name, acc := range map[string]func(lo, hi int) reduce.Stats{"kuf": kuf, "trig": trig} {
		var parts, parts2 []reduce.Stats
		for _, s := range shards {
			parts = append(parts, acc(s[0], s[1]))
			parts2 = append(parts2, acc(s[0], s[1]))
		}
		m1 := flat(mergeInOrder(t, parts))
		m2 := flat(mergeInOrder(t, parts2))
		all := flat(acc(0, 90))
		for i := range m1 {
			if math.Float64bits(m1[i]) != math.Float64bits(m2[i]) {
				t.Fatalf("%s: entry %d differs between two identical merges: %v and %v", name, i, m1[i], m2[i])
			}
			if math.Abs(m1[i]-all[i]) > 1e-11*math.Max(1, math.Abs(all[i])) {
				t.Fatalf("%s: entry %d: merged %v, one block %v", name, i, m1[i], all[i])
			}
		}
	}
	// Refusals: another theta, another grid, other shapes.
	other := randomParams(t, modH, []float64{0.9}, []float64{1}, 0.1, []float64{1.6}, 1)
	fm2, _ := NewFeatureMap(modH, other, 0, 0)
	s2, _ := AccumulateKuf(fm2, other, X[:5], y[:5], 1, true)
	if err := kuf(0, 5).Merge(s2); err == nil {
		t.Error("KufStats at another sigma_in merged")
	}
	if err := kuf(0, 5).Merge(trig(0, 5)); err == nil {
		t.Error("KufStats merged TrigStats")
	}
	grid2, _ := TrigGridForStep(modT, 8, 1, 3)
	t2, _ := AccumulateTrig(grid2, a, X[:5], y[:5], true)
	if err := trig(0, 5).Merge(t2); err == nil {
		t.Error("TrigStats of another grid merged")
	}
	t3, _ := AccumulateTrig(grid, a, X[:5], y[:5], false)
	if err := trig(0, 5).Merge(t3); err == nil {
		t.Error("TrigStats with and without moments merged")
	}
	// ELBO refuses statistics at other hyperparameters or frequencies.
	if _, err := ELBOKuf(modH, other, kuf(0, 5).(*KufStats), 5, nil); err == nil {
		t.Error("ELBOKuf used statistics computed at another sigma_in")
	}
	pT := randomParams(t, modT, []float64{1}, []float64{1}, 0.1, []float64{4.5}, 2)
	if _, err := ELBOTrig(modT, pT, grid, trig(0, 5).(*TrigStats), 5, nil); err == nil {
		t.Error("ELBOTrig used statistics computed at another a")
	}
}

// TestOptimalQ: at OptimalQ the gradient in m and S vanishes (so ELBOKuf is the collapsed
// bound there), for diagonal and dense S, and the dense factor satisfies A L L^T = I with
// A = I + KK/sigma^2; at M = 10 and at M = 19^2 = 361, past the compute core's blocking (its
// factorisations, triangular inverse, Syrk and Gemm run their blocked paths).
func TestOptimalQ(t *testing.T) {
	cases := []struct {
		dim, m1          int
		meanTol, cholTol float64
	}{{1, 10, 1e-8, 1e-7}, {2, 19, 1e-6, 1e-6}}
	for _, c := range cases {
		X, y := gpData(120*c.dim, c.dim, 3, 43)
		for _, dense := range []bool{false, true} {
			mod := Model{Basis: Hermite, Family: kernel.RBF, Dim: c.dim, M1: c.m1, Dense: dense}
			p := randomParams(t, mod, []float64{0.8, 1.1}[:c.dim], []float64{1.2}, 0.05, []float64{1.7, 1.3}[:c.dim], 3)
			_, g, st := optimalELBOStats(t, mod, p, X, y, 0, true)
			M := len(p.Mean)
			name := fmt.Sprintf("M=%d dense=%v", M, dense)
			for i, v := range g.Mean {
				if !(math.Abs(v) <= c.meanTol) {
					t.Errorf("%s: dF/dm_%d = %g at the optimum", name, i, v)
				}
			}
			for i, v := range g.Chol {
				if !(math.Abs(v) <= c.cholTol) {
					t.Errorf("%s: dF/dL entry %d = %g at the optimum", name, i, v)
				}
			}
			if !dense {
				continue
			}
			// (A L) L^T - I, with L lower triangular.
			AL := make([]float64, M*M)
			for i := 0; i < M; i++ {
				for j := 0; j < M; j++ {
					var a float64
					for k := j; k < M; k++ {
						aik := st.KK[i*M+k] / p.Noise
						if i == k {
							aik++
						}
						a += aik * p.Chol[k*M+j]
					}
					AL[i*M+j] = a
				}
			}
			var worst float64
			for i := 0; i < M; i++ {
				for j := 0; j < M; j++ {
					var a float64
					for k := 0; k <= j; k++ {
						a += AL[i*M+k] * p.Chol[j*M+k]
					}
					if i == j {
						a--
					}
					worst = max(worst, math.Abs(a))
				}
			}
			if !(worst <= 1e-9) {
				t.Errorf("%s: max |A L L^T - I| = %g", name, worst)
			}
		}
	}
}

// TestDenseELBOLarge: the dense ELBO and its gradient in L (Syrk and Gemm through the compute
// core) equal the sums of coreELBO's definition evaluated entry by entry, at M = 361, past the
// core's blocking, for a random lower factor whose strict upper triangle holds values that
// must not be read.
func TestDenseELBOLarge(t *testing.T) {
	mod := Model{Basis: Hermite, Family: kernel.RBF, Dim: 2, M1: 19, Dense: true}
	X, y := gpData(300, 2, 3, 47)
	p := randomParams(t, mod, []float64{0.8, 1.1}, []float64{1.2}, 0.05, []float64{1.7, 1.3}, 9)
	M := len(p.Mean)
	for i := 0; i < M; i++ {
		for j := i + 1; j < M; j++ {
			p.Chol[i*M+j] = math.NaN()
		}
	}
	st := kufStats(t, mod, p, X, y, 0, 0, true)
	g := mod.NewGrad(M)
	got, err := ELBOKuf(mod, p, st, 600, g)
	if err != nil {
		t.Fatal(err)
	}
	// The reference: S = L L^T and dF/dL = 2 c KKs L - L + diag(1/L_jj), entry by entry.
	L, KK, m, s2 := p.Chol, st.KK, p.Mean, p.Noise
	scale := 600.0 / float64(st.N)
	c := -scale / (2 * s2)
	var mKm, mKY, trKK, sKK, KL, mm float64
	for i := 0; i < M; i++ {
		for j := 0; j < M; j++ {
			ks := 0.5 * (KK[i*M+j] + KK[j*M+i])
			mKm += m[i] * ks * m[j]
			var sij float64
			for k := 0; k <= min(i, j); k++ {
				sij += L[i*M+k] * L[j*M+k]
			}
			sKK += sij * ks
		}
		mKY += m[i] * st.KY[i]
		trKK += KK[i*M+i]
		mm += m[i] * m[i]
		for k := 0; k <= i; k++ {
			KL += L[i*M+k] * L[i*M+k]
		}
		KL -= 2 * math.Log(L[i*M+i])
	}
	KL = 0.5 * (KL + mm - float64(M))
	quad := st.YY - 2*mKY + mKm + sKK - trKK + float64(st.N)*priorVariance(p)
	want := scale*(-float64(st.N)/2*math.Log(2*math.Pi*s2)-quad/(2*s2)) - KL
	if !(math.Abs(got-want) <= 1e-10*math.Abs(want)) {
		t.Errorf("ELBO %.15g, entry by entry %.15g", got, want)
	}
	var worst, size float64
	for i := 0; i < M; i++ {
		for j := 0; j <= i; j++ {
			var a float64
			for k := j; k < M; k++ {
				a += 0.5 * (KK[i*M+k] + KK[k*M+i]) * L[k*M+j]
			}
			v := 2*c*a - L[i*M+j]
			if i == j {
				v += 1 / L[i*M+i]
			}
			worst = max(worst, math.Abs(g.Chol[i*M+j]-v))
			size = max(size, math.Abs(v))
		}
	}
	if !(worst <= 1e-10*size) {
		t.Errorf("dF/dL: max difference %g from the entry-by-entry sums (largest entry %g)", worst, size)
	}
}

// TestPredictMatchesExact: with the optimal dense q and enough features, the VOF posterior
// (Hermite closed form; TrigVOF by Gauss-Legendre quadrature) matches the exact GP posterior.
func TestPredictMatchesExact(t *testing.T) {
	const n, l, v, noise = 150, 0.8, 1.1, 0.01
	X, y := gpData(n, 1, 3, 47)
	ex, err := solver.NewExact(kernel.Kernel{Family: kernel.RBF, Lengthscales: []float64{l}, SignalVariance: v}, noise, X, 1, y)
	if err != nil {
		t.Fatal(err)
	}
	Xs := []float64{-3.2, -1, 0, 0.4, 2.9, 5}
	wm, wv := make([]float64, len(Xs)), make([]float64, len(Xs))
	ex.Predict(Xs, wm, wv)
	for _, c := range []struct {
		basis Basis
		M1    int
		feat  float64
	}{{Hermite, 61, 2.5}, {Trig, 81, 8}} {
		mod := Model{Basis: c.basis, Family: kernel.RBF, Dim: 1, M1: c.M1, Dense: true}
		p, err := mod.InitParams([]float64{l}, []float64{v}, noise, []float64{c.feat})
		if err != nil {
			t.Fatal(err)
		}
		optimalELBO(t, mod, p, X, y, 0, false)
		fm, err := NewFeatureMap(mod, p, 0, 6)
		if err != nil {
			t.Fatal(err)
		}
		gm, gv := make([]float64, len(Xs)), make([]float64, len(Xs))
		if err := Predict(mod, p, fm, Xs, gm, gv); err != nil {
			t.Fatal(err)
		}
		for i := range Xs {
			if math.Abs(gm[i]-wm[i]) > 1e-3 || math.Abs(gv[i]-wv[i]) > 1e-3 || gv[i] < 0 {
				t.Errorf("%v x=%v: mean %.6f var %.6f, exact %.6f %.6f", c.basis, Xs[i], gm[i], gv[i], wm[i], wv[i])
			}
		}
	}
}
