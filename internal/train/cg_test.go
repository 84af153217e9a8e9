package train

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/model"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/solver"
	"github.com/gpreduce/gpreduce/internal/tasks"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// kernelFixture is a tasks.KernelOp over synthetic standardized rows split into shards.
func kernelFixture(t *testing.T, n, d, shards int, cache int64) (*tasks.KernelOp, []shard.Ref, []*shard.Table) {
	t.Helper()
	tab := synthTable(n, d, 11)
	refs, tabs := shard.PartitionCount(tab, shards)
	offsets := []int{0}
	for _, tb := range tabs {
		offsets = append(offsets, offsets[len(offsets)-1]+tb.N())
	}
	op := &tasks.KernelOp{Kernel: kernel.Kernel{Family: kernel.Matern52, Lengthscales: []float64{0.7, 1.3, 0.4}[:d], SignalVariance: 1.7}, X: tab.X, Offsets: offsets, CacheBytes: cache}
	if err := op.Validate(); err != nil {
		t.Fatal(err)
	}
	return op, refs, tabs
}

// runKernelTask runs a task on every shard and merges in shard order.
func runKernelTask(t *testing.T, task *tasks.KernelTask, refs []shard.Ref, tabs []*shard.Table) reduce.Stats {
	t.Helper()
	var acc reduce.Stats
	for i := range refs {
		st, err := task.Map(context.Background(), refs[i], tabs[i])
		if err != nil {
			t.Fatal(err)
		}
		if acc == nil {
			acc = st
		} else if err := acc.Merge(st); err != nil {
			t.Fatal(err)
		}
	}
	return acc
}

func TestKernelTaskMatchesDense(t *testing.T) {
	const n, d, k = 300, 3, 3
	rng := rand.New(rand.NewPCG(1, 2))
	V := make([]float64, n*k)
	W := make([]float64, n*k)
	for i := range V {
		V[i], W[i] = rng.NormFloat64(), rng.NormFloat64()
	}
	op, refs, tabs := kernelFixture(t, n, d, 4, 0)
	K := make([]float64, n*n)
	dK := make([][]float64, d+1)
	for j := range dK {
		dK[j] = make([]float64, n*n)
	}
	g := make([]float64, d+1)
	for i := 0; i < n; i++ {
		for m := 0; m < n; m++ {
			K[i*n+m] = op.Kernel.EvalGrad(op.X[i*d:(i+1)*d], op.X[m*d:(m+1)*d], g)
			for j := range g {
				dK[j][i*n+m] = g[j]
			}
		}
	}
	idx := []int{3, 17, 150, 299}
	cases := []struct {
		name  string
		cache int64
		task  *tasks.KernelTask
		want  []float64
	}{
		{"mvm cached", 0, &tasks.KernelTask{Kind: tasks.KernelMVM, K: k, V: V}, denseMul(K, n, n, V, k, nil)},
		{"mvm on the fly", -1, &tasks.KernelTask{Kind: tasks.KernelMVM, K: k, V: V}, denseMul(K, n, n, V, k, nil)},
		{"mvm columns", 0, &tasks.KernelTask{Kind: tasks.KernelMVM, K: 2, V: V[:len(idx)*2], Idx: idx}, denseMul(K, n, n, V[:len(idx)*2], 2, idx)},
		{"cols", 0, &tasks.KernelTask{Kind: tasks.KernelCols, Idx: idx}, func() []float64 {
			out := make([]float64, n*len(idx))
			for i := 0; i < n; i++ {
				for c, p := range idx {
					out[i*len(idx)+c] = K[i*n+p]
				}
			}
			return out
		}()},
		{"quad", 0, &tasks.KernelTask{Kind: tasks.KernelQuad, K: k, A: V, B: W}, func() []float64 {
			out := make([]float64, k*(d+1))
			for c := 0; c < k; c++ {
				for j := 0; j <= d; j++ {
					s := 0.0
					for i := 0; i < n; i++ {
						for m := 0; m < n; m++ {
							s += V[c*n+i] * dK[j][i*n+m] * W[c*n+m]
						}
					}
					out[c*(d+1)+j] = s
				}
			}
			return out
		}()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			op, refs, tabs := kernelFixture(t, n, d, 4, tc.cache)
			tc.task.Op = op
			st := runKernelTask(t, tc.task, refs, tabs)
			var got []float64
			switch s := st.(type) {
			case *reduce.Rows:
				got = s.X
			case *reduce.Sum:
				got = s.Parts[0]
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d values, want %d", len(got), len(tc.want))
			}
			for i := range got {
				if math.Abs(got[i]-tc.want[i]) > 1e-10*(1+math.Abs(tc.want[i])) {
					t.Fatalf("value %d: %v, want %v", i, got[i], tc.want[i])
				}
			}
		})
	}
	_ = refs
	_ = tabs

	// Cached and on-the-fly products are the same bits.
	a, refs, tabs := kernelFixture(t, n, d, 4, 0)
	b, _, _ := kernelFixture(t, n, d, 4, -1)
	x := runKernelTask(t, &tasks.KernelTask{Op: a, Kind: tasks.KernelMVM, K: k, V: V}, refs, tabs).(*reduce.Rows).X
	y := runKernelTask(t, &tasks.KernelTask{Op: b, Kind: tasks.KernelMVM, K: k, V: V}, refs, tabs).(*reduce.Rows).X
	for i := range x {
		if math.Float64bits(x[i]) != math.Float64bits(y[i]) {
			t.Fatalf("cached and uncached products differ at %d: %v vs %v", i, x[i], y[i])
		}
	}
	// And columns, whether or not the block was cached when they were asked for.
	x = runKernelTask(t, &tasks.KernelTask{Op: a, Kind: tasks.KernelCols, Idx: idx}, refs, tabs).(*reduce.Rows).X
	c, _, _ := kernelFixture(t, n, d, 4, 0)
	z := runKernelTask(t, &tasks.KernelTask{Op: c, Kind: tasks.KernelCols, Idx: idx}, refs, tabs).(*reduce.Rows).X
	y = runKernelTask(t, &tasks.KernelTask{Op: b, Kind: tasks.KernelCols, Idx: idx}, refs, tabs).(*reduce.Rows).X
	for i := range x {
		if math.Float64bits(x[i]) != math.Float64bits(y[i]) || math.Float64bits(z[i]) != math.Float64bits(y[i]) {
			t.Fatalf("columns from the cache and on the fly differ at %d: %v, %v vs %v", i, x[i], z[i], y[i])
		}
	}
}

// denseMul returns rows of K[:, idx] V (row-major n x k) for V column-major.
func denseMul(K []float64, n, m int, V []float64, k int, idx []int) []float64 {
	cols := idx
	if cols == nil {
		cols = make([]int, m)
		for i := range cols {
			cols[i] = i
		}
	}
	out := make([]float64, n*k)
	for i := 0; i < n; i++ {
		for c := 0; c < k; c++ {
			s := 0.0
			for j, p := range cols {
				s += K[i*n+p] * V[c*len(cols)+j]
			}
			out[i*k+c] = s
		}
	}
	return out
}

func TestKernelTaskRejectsBadShapes(t *testing.T) {
	op, refs, tabs := kernelFixture(t, 50, 2, 2, 0)
	bad := []*tasks.KernelTask{
		{Op: op, Kind: tasks.KernelMVM, K: 2, V: make([]float64, 99)},
		{Op: op, Kind: tasks.KernelMVM, K: 1, V: make([]float64, 2), Idx: []int{0, 50}},
		{Op: op, Kind: tasks.KernelQuad, K: 1, A: make([]float64, 50), B: make([]float64, 49)},
		{Op: op, Kind: tasks.KernelCols},
		{Op: op, Kind: 9},
		{Kind: tasks.KernelMVM},
	}
	for i, task := range bad {
		if _, err := task.Map(context.Background(), refs[0], tabs[0]); err == nil {
			t.Errorf("task %d: no error", i)
		}
	}
	// A shard whose row count disagrees with the offsets is refused.
	if _, err := (&tasks.KernelTask{Op: op, Kind: tasks.KernelCols, Idx: []int{0}}).Map(context.Background(), refs[0], tabs[1]); err == nil && tabs[0].N() != tabs[1].N() {
		t.Error("mismatched shard accepted")
	}
	if _, err := (&tasks.KernelTask{Op: op, Kind: tasks.KernelCols, Idx: []int{0}}).Map(context.Background(), shard.Ref{Index: 5}, tabs[0]); err == nil {
		t.Error("shard index out of range accepted")
	}
}

// cgFixture is a cgProblem over synthetic data on the local engine.
func cgFixture(t *testing.T, n, d, shards int, spec Spec) (*cgProblem, *reference) {
	t.Helper()
	eng := localEngine(t, synthTable(n, d, 5), shards, 2)
	ref := newReference(t, eng, kernel.RBF)
	c, err := newCGProblem(context.Background(), eng, ref.p, kernel.RBF, spec)
	if err != nil {
		t.Fatal(err)
	}
	return c, ref
}

// With all n basis probes and J = n, the CG objective and gradient are the exact ones.
func TestCGObjectiveAndGradientMatchExact(t *testing.T) {
	spec := DefaultSpec("cg")
	set(&spec, "cg_iters", 200)
	set(&spec, "precond_rank", -1)
	c, ref := cgFixture(t, 120, 2, 3, spec)
	c.basisProbes = true
	for _, theta := range [][]float64{
		{math.Log(0.5), math.Log(0.8), math.Log(1.2), math.Log(0.05)},
		{math.Log(1.1), math.Log(0.3), math.Log(0.7), math.Log(0.3)},
	} {
		e, err := c.eval(theta, rand.New(rand.NewPCG(1, 1)))
		if err != nil {
			t.Fatal(err)
		}
		lml, grad := ref.exact(t, theta)
		f, g := negate(e.value, e.grad)
		if relErr(f, lml) > 1e-6 {
			t.Errorf("theta %v: value %v, exact %v", theta, f, lml)
		}
		if ge := gradErr(g, grad); ge > 1e-6 {
			t.Errorf("theta %v: gradient %v, exact %v (error %g)", theta, g, grad, ge)
		}
	}
}

// The stochastic gradient (random probes, preconditioner) is unbiased: its mean over seeds
// is within 3 standard errors of the exact gradient, for J = n and for RR-CG.
func TestCGGradientIsUnbiased(t *testing.T) {
	theta := []float64{math.Log(0.6), math.Log(0.9), math.Log(1.1), math.Log(0.1)}
	for _, trunc := range []string{"fixed", "rr"} {
		t.Run(trunc, func(t *testing.T) {
			spec := DefaultSpec("cg")
			set(&spec, "truncation", trunc)
			set(&spec, "probes", 4)
			if trunc == "fixed" {
				set(&spec, "cg_iters", 200)
			} else {
				set(&spec, "rr_min", 2)
				set(&spec, "rr_rate", 0.3)
			}
			c, ref := cgFixture(t, 150, 2, 3, spec)
			_, want := ref.exact(t, theta)
			const draws = 200
			sum := make([]float64, len(theta))
			sum2 := make([]float64, len(theta))
			for s := 0; s < draws; s++ {
				e, err := c.eval(theta, rand.New(rand.NewPCG(uint64(s), 3)))
				if err != nil {
					t.Fatal(err)
				}
				for j, g := range e.grad {
					sum[j] += -g
					sum2[j] += g * g
				}
			}
			for j := range theta {
				mean := sum[j] / draws
				se := math.Sqrt((sum2[j]/draws - mean*mean) / draws)
				if math.Abs(mean-want[j]) > 3*se+1e-9 {
					t.Errorf("coordinate %d: mean %v, exact %v, standard error %v", j, mean, want[j], se)
				}
			}
		})
	}
}

func cgTrainData(n int) (tr, te *shard.Table) {
	all := synthTable(n+200, 2, 21)
	tr = &shard.Table{Source: "train", D: 2, X: all.X[:n*2], Y: all.Y[:n]}
	te = &shard.Table{Source: "test", D: 2, X: all.X[n*2:], Y: all.Y[n:]}
	return tr, te
}

// With J = n, Adam on the stochastic CG gradient reaches the exact method's optimum, and the
// posterior matches the exact one's; the Lanczos cache gives variances no smaller than exact.
func TestCGTrainingReachesExactOptimum(t *testing.T) {
	tr, te := cgTrainData(200)
	exactSpec := exactSE()
	ex := trainOn(t, tr, exactSpec, 3, 2)
	spec := DefaultSpec("cg")
	spec.Kernel = KernelDefault // the SE reference's family
	set(&spec, "cg_iters", 200)
	spec.MaxIter = 150
	set(&spec, "cg_tol", 1e-10)
	set(&spec, "variance_rank", 200)
	cg := trainOn(t, tr, spec, 3, 2)
	thEx, thCG := thetaOf(ex), thetaOf(cg)
	// The likelihood is flat along the signal variance, so the optimum is judged by the exact
	// log likelihood at the CG hyperparameters, and the lengthscales and noise individually.
	ref := newReference(t, localEngine(t, tr, 3, 1), kernel.RBF)
	atCG, _ := ref.exact(t, thCG)
	if ex.LogLik-atCG > 0.05 {
		t.Errorf("exact log likelihood at the CG hyperparameters %.4f, at the exact optimum %.4f", atCG, ex.LogLik)
	}
	for _, j := range []int{0, 1, 3} {
		if math.Abs(thEx[j]-thCG[j]) > 0.05 {
			t.Errorf("log-hyperparameter %d: cg %.4f, exact %.4f", j, thCG[j], thEx[j])
		}
	}
	// The model's log likelihood is an SLQ estimate with 10 probes (sd of a few nats here).
	if math.Abs(cg.LogLik-ex.LogLik) > 15 {
		t.Errorf("log likelihood: cg %.4f (SLQ estimate), exact %.4f", cg.LogLik, ex.LogLik)
	}
	if r1, r2 := testRMSE(t, ex, te), testRMSE(t, cg, te); math.Abs(r1-r2) > 0.01*r1 {
		t.Errorf("test RMSE: cg %.5f, exact %.5f", r2, r1)
	}
	t.Logf("theta exact %v, cg %v; lml exact %.4f cg %.4f", thEx, thCG, ex.LogLik, cg.LogLik)
}

func thetaOf(m *model.Model) []float64 {
	var th []float64
	for _, l := range m.Hyper.Lengthscales {
		th = append(th, math.Log(l))
	}
	return append(th, math.Log(m.Hyper.SignalVariance), math.Log(m.Hyper.NoiseVariance))
}

// testRMSE is m's root mean squared error on the test table te, in te's units.
func testRMSE(t *testing.T, m *model.Model, te *shard.Table) float64 {
	t.Helper()
	p, err := m.Predict(te.X, te.N())
	if err != nil {
		t.Fatal(err)
	}
	return rmseOf(p.Mean, te.Y)
}

func rmseOf(mean, y []float64) float64 {
	s := 0.0
	for i := range y {
		s += (mean[i] - y[i]) * (mean[i] - y[i])
	}
	return math.Sqrt(s / float64(len(y)))
}

// At fixed hyperparameters with J = n and a tight tolerance, the CG posterior (mean and, with
// a full-rank Lanczos cache, variance) equals the exact one.
func TestCGPosteriorMatchesExact(t *testing.T) {
	spec := DefaultSpec("cg")
	set(&spec, "cg_tol", 1e-12)
	set(&spec, "variance_rank", 100)
	c, ref := cgFixture(t, 100, 2, 3, spec)
	theta := []float64{math.Log(0.7), math.Log(0.5), math.Log(1.3), math.Log(0.02)}
	c.basisProbes = true // exact SLQ: the log likelihood must match to the CG tolerance
	post, err := c.posterior(theta, rand.New(rand.NewPCG(3, 3)), func(Event) {})
	if err != nil {
		t.Fatal(err)
	}
	lml := post.lml
	c.basisProbes = false
	post, err = c.posterior(theta, rand.New(rand.NewPCG(3, 3)), func(Event) {})
	if err != nil {
		t.Fatal(err)
	}
	pred := post.pred
	h := hyperOf(theta, 2)
	ex, err := solver.NewExact(kernel.Kernel{Family: kernel.RBF, Lengthscales: h.Lengthscales, SignalVariance: h.SignalVariance}, h.NoiseVariance, ref.rows.X, 2, ref.rows.Y)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(lml-ex.LogMarginalLikelihood()) > 1e-8*math.Max(1, math.Abs(lml)) {
		t.Errorf("SLQ log likelihood %v, exact %v", lml, ex.LogMarginalLikelihood())
	}
	xs := synthTable(30, 2, 99).X
	m1, v1 := make([]float64, 30), make([]float64, 30)
	m2, v2 := make([]float64, 30), make([]float64, 30)
	pred.Predict(xs, m1, v1)
	ex.Predictor().Predict(xs, m2, v2)
	for i := range m1 {
		if math.Abs(m1[i]-m2[i]) > 1e-8 || math.Abs(v1[i]-v2[i]) > 1e-8 {
			t.Fatalf("row %d: mean %v var %v, exact %v %v", i, m1[i], v1[i], m2[i], v2[i])
		}
	}
	// A low-rank cache overestimates the variance (Q T^-1 Q^T <= K_hat^-1).
	c.cg.VarianceRank = 5
	post, err = c.posterior(theta, rand.New(rand.NewPCG(3, 3)), func(Event) {})
	if err != nil {
		t.Fatal(err)
	}
	post.pred.Predict(xs, m1, v1)
	for i := range v1 {
		if v1[i] < v2[i]-1e-12 {
			t.Fatalf("row %d: rank-5 variance %v below exact %v", i, v1[i], v2[i])
		}
	}
}

// TestCGKernelChoice: with its default kernel (KernelAuto) cg chooses the family exactly as
// the exact method does (the same sampled rows, the same likelihoods, the same sentence) and
// trains that family: on a draw from a Matern 3/2 GP both choose matern32, and cg's test
// RMSE is within 2% of the exact fit's.
func TestCGKernelChoice(t *testing.T) {
	rough := kernel.Kernel{Family: kernel.Matern32, Lengthscales: []float64{0.7, 1.5}, SignalVariance: 1}
	all := gpDrawTable(t, 400, 2, rough, 0.01, 5)
	tr := &shard.Table{Source: "train", D: 2, X: all.X[:300*2], Y: all.Y[:300]}
	te := &shard.Table{Source: "test", D: 2, X: all.X[300*2:], Y: all.Y[300:]}
	ex := trainOn(t, tr, DefaultSpec("exact"), 3, 2)
	spec := DefaultSpec("cg")
	if spec.Kernel != KernelAuto {
		t.Fatalf("cg's default kernel %q, want %q", spec.Kernel, KernelAuto)
	}
	cg := trainOn(t, tr, spec, 3, 2)
	if ex.Kernel != "matern32" || cg.Kernel != ex.Kernel {
		t.Fatalf("kernels: exact %s, cg %s; want matern32 for both (exact: %s)", ex.Kernel, cg.Kernel, ex.KernelReason)
	}
	if cg.KernelReason != ex.KernelReason {
		t.Errorf("cg's reason %q, exact's %q", cg.KernelReason, ex.KernelReason)
	}
	if r1, r2 := testRMSE(t, ex, te), testRMSE(t, cg, te); math.Abs(r1-r2) > 0.02*r1 {
		t.Errorf("test RMSE: cg %.5f, exact %.5f", r2, r1)
	}
	named := DefaultSpec("cg")
	named.Kernel = "rbf"
	if m := trainOn(t, tr, named, 3, 2); m.Kernel != "rbf" || m.KernelReason != "" {
		t.Errorf("cg with kernel rbf named: model kernel %s, reason %q", m.Kernel, m.KernelReason)
	}
}

// A run resumed from any checkpoint gives the same model bits, for both truncations.
func TestCGResume(t *testing.T) {
	tr, _ := cgTrainData(120)
	for _, trunc := range []string{"fixed", "rr"} {
		t.Run(trunc, func(t *testing.T) {
			spec := DefaultSpec("cg")
			set(&spec, "truncation", trunc)
			spec.MaxIter = 6
			if trunc == "fixed" {
				set(&spec, "cg_iters", 20)
			} else {
				set(&spec, "rr_min", 10)
			}
			var cks [][]byte
			full, err := Run(context.Background(), localEngine(t, tr, 3, 2), spec, Hooks{Save: func(_ context.Context, _ int, _ float64, ck []byte) error {
				cks = append(cks, append([]byte(nil), ck...))
				return nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			want, _ := full.Bytes()
			for _, k := range []int{1, len(cks) / 2, len(cks) - 1} {
				m, err := Run(context.Background(), localEngine(t, tr, 3, 1), spec, Hooks{Resume: cks[k]})
				if err != nil {
					t.Fatal(err)
				}
				got, _ := m.Bytes()
				if !bytes.Equal(got, want) {
					t.Fatalf("resumed from checkpoint %d of %d: model differs", k, len(cks))
				}
			}
		})
	}
}

// KMCG with P = N directions on all rows is the exact GP (P = M gives SoR, Bartels & Hennig
// 2020, §3.3, and SoR on all rows is exact).
func TestKMCGFullRankEqualsExact(t *testing.T) {
	const n, d = 60, 2
	tab := synthTable(n, d, 8)
	kern := kernel.Kernel{Family: kernel.Matern32, Lengthscales: []float64{0.4, 0.6}, SignalVariance: 1.3}
	s2 := 0.05
	op := &tasks.KernelOp{Kernel: kern, X: tab.X, Offsets: []int{0, n}}
	S, Z, P, err := solver.ReorthCG(&localKernel{ctx: context.Background(), op: op}, tab.Y, n, 0)
	if err != nil {
		t.Fatal(err)
	}
	if P != n {
		t.Fatalf("%d directions, want %d", P, n)
	}
	post, err := newKMCGPost(S, Z, Z, tab.Y, n, P)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := solver.NewExact(kern, s2, tab.X, d, tab.Y)
	if err != nil {
		t.Fatal(err)
	}
	lz, err := post.evidence(s2)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(lz-ex.LogMarginalLikelihood()) > 1e-8*math.Max(1, math.Abs(lz)) {
		t.Errorf("evidence %v, exact %v", lz, ex.LogMarginalLikelihood())
	}
	a, err := post.weights(s2)
	if err != nil {
		t.Fatal(err)
	}
	xs := synthTable(25, d, 77).X
	m2, v2 := make([]float64, 25), make([]float64, 25)
	ex.Predictor().Predict(xs, m2, v2)
	for i := range m2 {
		m1 := 0.0
		for j := 0; j < n; j++ {
			m1 += kern.Eval(xs[i*d:(i+1)*d], tab.X[j*d:(j+1)*d]) * a[j]
		}
		if math.Abs(m1-m2[i]) > 1e-8 {
			t.Fatalf("row %d: mean %v, exact %v", i, m1, m2[i])
		}
	}
}

// KMCG on a subset with P = M directions is SoR/DTC on X_M (Bartels & Hennig 2020, §3.3): the mean
// weights and the evidence (eq. 16) against the dense formulas, at several noise variances.
func TestKMCGSubsetEqualsDTC(t *testing.T) {
	const n, d, M = 150, 2, 30
	tr, _ := cgTrainData(n)
	eng := localEngine(t, tr, 3, 1)
	ref := newReference(t, eng, kernel.Matern52)
	X, y := ref.rows.X, ref.rows.Y
	kern := kernel.Kernel{Family: kernel.Matern52, Lengthscales: []float64{0.5, 0.8}, SignalVariance: 1.1}
	idx := kmcgSubset(n, M, 7)
	xm, ym := make([]float64, M*d), make([]float64, M)
	for i, j := range idx {
		copy(xm[i*d:(i+1)*d], X[j*d:(j+1)*d])
		ym[i] = y[j]
	}
	local := &localKernel{ctx: context.Background(), op: &tasks.KernelOp{Kernel: kern, X: xm, Offsets: []int{0, M}}}
	S, Z, P, err := solver.ReorthCG(local, ym, M, 1e-14)
	if err != nil {
		t.Fatal(err)
	}
	if P != M {
		t.Fatalf("CG stopped at %d < %d directions (breakdown); the identity needs P = M", P, M)
	}
	Kmm := mat.NewSymDense(M, nil)
	for i := 0; i < M; i++ {
		for j := 0; j <= i; j++ {
			Kmm.SetSym(i, j, kern.Eval(xm[i*d:(i+1)*d], xm[j*d:(j+1)*d]))
		}
	}
	Knm := mat.NewDense(n, M, nil)
	for i := 0; i < n; i++ {
		for j := 0; j < M; j++ {
			Knm.Set(i, j, kern.Eval(X[i*d:(i+1)*d], xm[j*d:(j+1)*d]))
		}
	}
	R := make([]float64, n*P) // K_nm S, column-major
	for c := 0; c < P; c++ {
		for i := 0; i < n; i++ {
			for j := 0; j < M; j++ {
				R[c*n+i] += Knm.At(i, j) * S[c*M+j]
			}
		}
	}
	post, err := newKMCGPost(S, Z, R, y, M, P)
	if err != nil {
		t.Fatal(err)
	}
	for _, s2 := range []float64{0.01, 0.1} {
		var A mat.Dense // s2 Kmm + Kmn Knm
		A.Mul(Knm.T(), Knm)
		for i := 0; i < M; i++ {
			for j := 0; j < M; j++ {
				A.Set(i, j, A.At(i, j)+s2*Kmm.At(i, j))
			}
		}
		var rhs mat.VecDense
		rhs.MulVec(Knm.T(), mat.NewVecDense(n, y))
		var w mat.VecDense
		if err := w.SolveVec(&A, &rhs); err != nil {
			t.Fatal(err)
		}
		a, err := post.weights(s2)
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < M; j++ {
			if math.Abs(a[j]-w.AtVec(j)) > 1e-6*(1+math.Abs(w.AtVec(j))) {
				t.Fatalf("s2 %g: weight %d = %v, DTC %v", s2, j, a[j], w.AtVec(j))
			}
		}
		// Evidence: log N(y | 0, Knm Kmm^-1 Kmn + s2 I).
		var ch mat.Cholesky
		if !ch.Factorize(Kmm) {
			t.Fatal("Kmm not positive definite")
		}
		var Ki mat.Dense
		if err := ch.SolveTo(&Ki, Knm.T()); err != nil {
			t.Fatal(err)
		}
		var Q mat.Dense
		Q.Mul(Knm, &Ki)
		C := mat.NewSymDense(n, nil)
		for i := 0; i < n; i++ {
			for j := 0; j <= i; j++ {
				v := 0.5 * (Q.At(i, j) + Q.At(j, i))
				if i == j {
					v += s2
				}
				C.SetSym(i, j, v)
			}
		}
		var cc mat.Cholesky
		if !cc.Factorize(C) {
			t.Fatal("DTC covariance not positive definite")
		}
		var al mat.VecDense
		if err := cc.SolveVecTo(&al, mat.NewVecDense(n, y)); err != nil {
			t.Fatal(err)
		}
		want := -0.5*mat.Dot(mat.NewVecDense(n, y), &al) - 0.5*cc.LogDet() - 0.5*float64(n)*math.Log(2*math.Pi)
		got, err := post.evidence(s2)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) {
			t.Errorf("s2 %g: evidence %v, DTC %v", s2, got, want)
		}
	}
}

// KMCG with its defaults (M = n, P <= 100, noise refitted) predicts about as well as exact.
func TestKMCGPredictsLikeExact(t *testing.T) {
	tr, te := cgTrainData(250)
	spec := DefaultSpec("kmcg")
	m := trainOn(t, tr, spec, 3, 2)
	x, ok := m.Posterior.(*model.ExpansionPosterior)
	if !ok {
		t.Fatal("no expansion")
	}
	ex := trainOn(t, tr, exactSE(), 3, 2)
	pe, _ := ex.Predict(te.X, te.N())
	pk, _ := m.Predict(te.X, te.N())
	re, rk := rmseOf(pe.Mean, te.Y), rmseOf(pk.Mean, te.Y)
	if rk > 1.2*re {
		t.Errorf("KMCG test RMSE %.4f, exact %.4f", rk, re)
	}
	t.Logf("KMCG RMSE %.4f (rank %d), exact %.4f", rk, x.Expansion.RPlus, re)
}

// The derivative forms match kernel.EvalGrad for every family (RBF takes K b from Q b).
func TestKernelQuadAllFamilies(t *testing.T) {
	const n, d, k = 120, 2, 2
	rng := rand.New(rand.NewPCG(4, 4))
	A, B := make([]float64, n*k), make([]float64, n*k)
	for i := range A {
		A[i], B[i] = rng.NormFloat64(), rng.NormFloat64()
	}
	for _, fam := range []kernel.Family{kernel.RBF, kernel.Matern12, kernel.Matern32, kernel.Matern52} {
		op, refs, tabs := kernelFixture(t, n, d, 3, 0)
		op.Kernel.Family = fam
		got := runKernelTask(t, &tasks.KernelTask{Op: op, Kind: tasks.KernelQuad, K: k, A: A, B: B}, refs, tabs).(*reduce.Sum).Parts[0]
		g := make([]float64, d+1)
		for c := 0; c < k; c++ {
			want := make([]float64, d+1)
			for i := 0; i < n; i++ {
				for m := 0; m < n; m++ {
					op.Kernel.EvalGrad(op.X[i*d:(i+1)*d], op.X[m*d:(m+1)*d], g)
					for j := range g {
						want[j] += A[c*n+i] * g[j] * B[c*n+m]
					}
				}
			}
			for j := range want {
				if math.Abs(got[c*(d+1)+j]-want[j]) > 1e-10*(1+math.Abs(want[j])) {
					t.Errorf("%v pair %d parameter %d: %v, want %v", fam, c, j, got[c*(d+1)+j], want[j])
				}
			}
		}
	}
}

// On up to kmcgStartRows rows kmcg's hyperparameters come from the exact GP's fit on all the
// rows (the paper fits them on the exact GP), so they agree with the exact method's optimum
// (reached from a 1000-row start by L-BFGS on all rows) to the optimizers' tolerance.
func TestKMCGHyperparametersAreTheExactFit(t *testing.T) {
	tr := synthTable(1300, 2, 41)
	km := trainOn(t, tr, DefaultSpec("kmcg"), 4, 2)
	es := DefaultSpec("exact")
	es.Kernel = km.Kernel // the family kmcg chose by the evidence (on the sampled rows)
	ex := trainOn(t, tr, es, 4, 2)
	he, hk := ex.Hyper, km.Hyper
	want := append(append([]float64(nil), he.Lengthscales...), he.SignalVariance, he.NoiseVariance)
	got := append(append([]float64(nil), hk.Lengthscales...), hk.SignalVariance, hk.NoiseVariance)
	for i := range want {
		if math.Abs(math.Log(got[i]/want[i])) > 0.02 {
			t.Errorf("hyperparameter %d: kmcg %.6g, exact %.6g", i, got[i], want[i])
		}
	}
}

// cg's training truncation: Russian roulette by default, fixed when asked or when a J is
// given alone.
func TestCGDefaultTruncation(t *testing.T) {
	for _, c := range []struct {
		s  *pb.CGSettings
		rr bool
	}{
		{&pb.CGSettings{}, true},
		{&pb.CGSettings{Truncation: "rr"}, true},
		{&pb.CGSettings{RrMin: 40}, true},
		{&pb.CGSettings{Truncation: "fixed"}, false},
		{&pb.CGSettings{CgIters: 50}, false},
		{&pb.CGSettings{Truncation: "fixed", CgIters: 50}, false},
	} {
		if got := cgRR(c.s); got != c.rr {
			t.Errorf("%v: rr %v, want %v", c.s, got, c.rr)
		}
	}
}

// TestCGAdaptivePreconditioner: the default preconditioner grows its pivoted-Cholesky factor
// until no row's left-out prior variance exceeds precondFloor sigma_n^2 (on 900 rows the cap,
// precondCap, is the full factor), and with it the training solve converges in fewer
// iterations than with the rank-5 factor of the paper's experiments; a rank given in the
// settings is kept. With the small noise the factor passes sqrt(n (t+1)) = 99, the cap before
// precondBudget.
func TestCGAdaptivePreconditioner(t *testing.T) {
	for _, tc := range []struct {
		name  string
		theta []float64
		above int // the adaptive rank must exceed this
	}{
		{"small noise", []float64{math.Log(0.4), math.Log(0.5), math.Log(1.5), math.Log(0.01)}, 99},
		{"larger noise", []float64{math.Log(0.8), math.Log(1.0), math.Log(1.5), math.Log(0.1)}, 5},
	} {
		iters := map[int]int{}
		for _, rank := range []int{0, 5} {
			spec := DefaultSpec("cg")
			if rank != 0 {
				set(&spec, "precond_rank", rank)
			}
			c, _ := cgFixture(t, 900, 2, 3, spec)
			bt, err := c.batch(tc.theta, rand.New(rand.NewPCG(1, 1)))
			if err != nil {
				t.Fatal(err)
			}
			w, ok := bt.pre.(*solver.Woodbury)
			if !ok {
				t.Fatalf("%s, rank %d: preconditioner %T", tc.name, rank, bt.pre)
			}
			r := len(w.L) / c.n
			capRank, _ := precondRank(c.cg, c.n, c.numProbes())
			left := 0.0 // the largest left-out prior variance
			for i := 0; i < c.n; i++ {
				e := bt.h.SignalVariance
				for l := 0; l < r; l++ {
					e -= w.L[l*c.n+i] * w.L[l*c.n+i]
				}
				left = math.Max(left, e)
			}
			floor := precondFloor * bt.h.NoiseVariance
			switch {
			case rank != 0 && r != rank:
				t.Errorf("%s: rank %d given, factor of rank %d", tc.name, rank, r)
			case rank == 0 && capRank != c.n:
				t.Errorf("%s: cap %d on %d rows, want the full factor", tc.name, capRank, c.n)
			case rank == 0 && (r <= tc.above || r >= capRank || left > floor*(1+1e-9)):
				t.Errorf("%s: adaptive rank %d (cap %d) leaves a prior variance %g; want a rank above %d that reaches the floor %g sigma_n^2 = %g before the cap",
					tc.name, r, capRank, left, tc.above, precondFloor, floor)
			}
			res, err := solver.BatchPCG(bt.kop, bt.B, bt.t+1, bt.pre, 2000, cgTrainTol)
			if err != nil {
				t.Fatal(err)
			}
			iters[rank] = res.Iters[bt.t]
			t.Logf("%s: precond_rank %d: factor of rank %d (cap %d), left-out variance %.3g sigma_n^2, %d iterations", tc.name, rank, r, capRank, left/bt.h.NoiseVariance, iters[rank])
		}
		if iters[0] >= iters[5] {
			t.Errorf("%s: the data solve took %d iterations with the adaptive preconditioner, %d with rank 5", tc.name, iters[0], iters[5])
		}
	}
}

// TestCGHoldsTheExactOptimum: on a set no larger than the search's sample the search's start
// is the exact optimum, and Adam on cg's stochastic gradient must stay there. On this draw
// (an SE-ARD GP in 6-D, lengthscales 0.6-4 against inputs in [-2, 2], almost no noise) the
// rank-sqrt(n (t+1)) preconditioner left K_hat's training solves cut short at the
// Russian-roulette J, and the gradient's variance took Adam 7.9 nats below the optimum (test
// RMSE 0.270 against 0.257); the default preconditioner may take the full factor on a small set
// (precondCap), the solves converge, and cg ends within 0.04 nats of it.
func TestCGHoldsTheExactOptimum(t *testing.T) {
	se := kernel.Kernel{Family: kernel.RBF, Lengthscales: []float64{0.6, 0.9, 1.5, 2, 3, 4}, SignalVariance: 1}
	all := gpDrawTable(t, 600, 6, se, 1e-8, 13)
	tr := &shard.Table{Source: "train", D: 6, X: all.X[:500*6], Y: all.Y[:500]}
	te := &shard.Table{Source: "test", D: 6, X: all.X[500*6:], Y: all.Y[500:]}
	ex := trainOn(t, tr, exactSE(), 3, 2)
	spec := DefaultSpec("cg")
	spec.Kernel = KernelDefault // the SE reference's family; the choice is tested elsewhere
	cg := trainOn(t, tr, spec, 3, 2)
	ref := newReference(t, localEngine(t, tr, 3, 1), kernel.RBF)
	atCG, _ := ref.exact(t, thetaOf(cg))
	t.Logf("exact log likelihood: at the exact optimum %.3f, at cg's hyperparameters %.3f (cg's estimate %.3f +- %.2g); noise %.3g, %.3g",
		ex.LogLik, atCG, cg.LogLik, cg.LogLikSE, ex.Hyper.NoiseVariance, cg.Hyper.NoiseVariance)
	if ex.LogLik-atCG > 1 {
		t.Errorf("exact log likelihood at the cg hyperparameters %.3f, %.3f below the exact optimum %.3f", atCG, ex.LogLik-atCG, ex.LogLik)
	}
	if r1, r2 := testRMSE(t, ex, te), testRMSE(t, cg, te); math.Abs(r1-r2) > 0.02*r1 {
		t.Errorf("test RMSE: cg %.5g, exact %.5g", r2, r1)
	}
}

// TestPrecondCap: the adaptive preconditioner's largest rank is the full factor on small sets
// (the update's budget), sqrt(n (t+1)) on large ones.
func TestPrecondCap(t *testing.T) {
	for _, c := range []struct{ n, t, want int }{
		{100, 10, 100},
		{567, 10, 567},
		{1000, 10, 1000},
		{2000, 10, 707},     // sqrt(1e9 / 2000)
		{9000, 10, 333},     // sqrt(1e9 / 9000) = 333.3 > sqrt(99000) = 314.6
		{14940, 10, 405},    // sqrt(14940 * 11) = 405.4
		{1000000, 10, 3316}, // sqrt(1e6 * 11)
	} {
		if got := precondCap(c.n, c.t); got != c.want {
			t.Errorf("precondCap(%d, %d) = %d, want %d", c.n, c.t, got, c.want)
		}
	}
}
