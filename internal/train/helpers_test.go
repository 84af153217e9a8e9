package train

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/solver"
	"github.com/gpreduce/gpreduce/internal/tasks"
)

// synthTable draws n rows uniformly on [-1, 1]^d with y = sum_k sin(3 x_k) + 0.1 eps.
func synthTable(n, d int, seed uint64) *shard.Table {
	rng := rand.New(rand.NewPCG(seed, 7))
	t := &shard.Table{Source: "synthetic", D: d, X: make([]float64, n*d), Y: make([]float64, n)}
	for i := 0; i < n; i++ {
		for k := 0; k < d; k++ {
			v := 2*rng.Float64() - 1
			t.X[i*d+k] = v
			t.Y[i] += math.Sin(3 * v)
		}
		t.Y[i] += 0.1 * rng.NormFloat64()
	}
	return t
}

func localEngine(t testing.TB, tab *shard.Table, shards, workers int) *engine.Local {
	t.Helper()
	refs, tabs := shard.PartitionCount(tab, shards)
	eng, err := engine.NewLocal(refs, tabs, workers)
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// reference holds the standardized data and the exact GP at any theta.
type reference struct {
	p    *prepared
	rows *reduce.Rows
	fam  kernel.Family
}

func newReference(t testing.TB, eng engine.Engine, fam kernel.Family) *reference {
	t.Helper()
	ctx := context.Background()
	p, err := prepare(ctx, eng, Spec{}, func(Event) {})
	if err != nil {
		t.Fatal(err)
	}
	st, err := eng.Reduce(ctx, &tasks.RowsTask{Transform: p.tf})
	if err != nil {
		t.Fatal(err)
	}
	return &reference{p: p, rows: st.(*reduce.Rows), fam: fam}
}

// exact returns the exact log marginal likelihood and its gradient at theta.
func (r *reference) exact(t testing.TB, theta []float64) (float64, []float64) {
	t.Helper()
	h := hyperOf(theta, r.p.d)
	e, err := solver.NewExact(kernel.Kernel{Family: r.fam, Lengthscales: h.Lengthscales, SignalVariance: h.SignalVariance}, h.NoiseVariance, r.rows.X, r.p.d, r.rows.Y)
	if err != nil {
		t.Fatal(err)
	}
	return e.LogMarginalLikelihood(), e.Gradient()
}

// negate flips an objective's value and gradient back to the log likelihood's.
func negate(f float64, g []float64) (float64, []float64) {
	out := make([]float64, len(g))
	for i, v := range g {
		out[i] = -v
	}
	return -f, out
}

// gradErr is max_i |a_i - b_i| / max(1, ||b||_inf).
func gradErr(a, b []float64) float64 {
	var num, den float64
	for i := range a {
		num = math.Max(num, math.Abs(a[i]-b[i]))
		den = math.Max(den, math.Abs(b[i]))
	}
	return num / math.Max(1, den)
}

func relErr(a, b float64) float64 { return math.Abs(a-b) / math.Max(1, math.Abs(b)) }

// exactSE is the exact method's default spec with the SE kernel named: the reference for the
// approximations, which all use the SE kernel by default, where exact's own default would
// choose the family by the evidence (chooseKernel).
func exactSE() Spec {
	s := DefaultSpec("exact")
	s.Kernel = KernelDefault
	return s
}
