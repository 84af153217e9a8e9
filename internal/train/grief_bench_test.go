package train

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/gpreduce/gpreduce/internal/features"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/tasks"
)

// BenchmarkGRIEFIteration times one O(p) log-likelihood-and-gradient evaluation in the
// transformed basis (GP-GRIEF §5), after a real Gram pass over n rows (d = 3, m_bar = 10,
// so m = 1000 >= p). It must be flat in n and linear in p. The setup (Gram pass and the
// eigendecomposition of A) is outside the timer; at n = 1e5, p = 1000 it takes a while.
func BenchmarkGRIEFIteration(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		tab := synthTable(n, 3, 3)
		eng := localEngine(b, tab, 8, runtime.NumCPU())
		ref := newReference(b, eng, kernel.RBF)
		spec := DefaultSpec("grief")
		r, err := newRun(spec, Hooks{})
		if err != nil {
			b.Fatal(err)
		}
		grid, _, err := r.griefGrid(context.Background(), eng, ref.p)
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range []int{250, 500, 1000} {
			b.Run(fmt.Sprintf("n=%d/p=%d", n, p), func(b *testing.B) {
				g, err := features.NewGRIEF(kernel.RBF, []float64{0.7, 0.7, 0.7}, 1, grid, p)
				if err != nil {
					b.Fatal(err)
				}
				st, err := eng.Reduce(context.Background(), &tasks.GramTask{Features: g, Transform: ref.p.tf})
				if err != nil {
					b.Fatal(err)
				}
				basis, err := newGRIEFBasis(st.(*reduce.Gram))
				if err != nil {
					b.Fatal(err)
				}
				x := make([]float64, basis.pt+1)
				for i := 0; i < basis.pt; i++ {
					x[i] = 0.1 * float64(i%7)
				}
				x[basis.pt] = -2
				grad := make([]float64, len(x))
				b.ResetTimer()
				var sink float64
				for i := 0; i < b.N; i++ {
					sink += basis.lml(x, grad)
				}
				b.StopTimer()
				if sink == 0 {
					b.Log(sink)
				}
				b.ReportMetric(float64(basis.pt), "rank")
			})
		}
	}
}

// BenchmarkGRIEFPosterior is the posterior's map to the features at the end of a GRIEF fit,
// beta = T bv and C = T S T^T with T = V~ Sigma~^-1 (griefBasis.posterior), at p = p~ = 1000
// and 4000 (the ladder's top) with random eigenvectors. Not in CI:
//
//	go test -run XXX -bench GRIEFPosterior -benchtime 3x ./internal/train/
func BenchmarkGRIEFPosterior(b *testing.B) {
	for _, p := range []int{1000, 4000} {
		b.Run(fmt.Sprintf("p=%d", p), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(3, uint64(p)))
			g := &griefBasis{p: p, pt: p, n: 10 * p, v: make([]float64, p*p), sig2: make([]float64, p), rt: make([]float64, p)}
			for i := range g.v {
				g.v[i] = rng.NormFloat64() / math.Sqrt(float64(p))
			}
			w := make([]float64, p)
			for i := range g.sig2 {
				g.sig2[i], g.rt[i], w[i] = 1+rng.Float64(), rng.NormFloat64(), 1
			}
			for b.Loop() {
				g.posterior(w, 0.1)
			}
		})
	}
}
