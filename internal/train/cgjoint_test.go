package train

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The posterior runs its mean solve and its variance cache side by side on shared products
// (jointOperator); its model must be the one the two give one after the other, bit for bit:
// grouping columns into one product never changes a column's bits. Fixed and adaptive
// variance ranks, so that the Lanczos process ends before and after the solve.
func TestCGPosteriorJointEqualsSequential(t *testing.T) {
	const n, d = 300, 2
	for _, tc := range []struct {
		name string
		rank int
	}{{"rank 3", 3}, {"adaptive rank", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			spec := DefaultSpec("cg")
			if tc.rank > 0 {
				set(&spec, "variance_rank", tc.rank)
			}
			c, _ := cgFixture(t, n, d, 3, spec)
			theta := []float64{math.Log(0.6), math.Log(0.7), math.Log(1.0), math.Log(0.02)}
			obs := func(Event) {}
			post, err := c.posterior(theta, rand.New(rand.NewPCG(7, 8)), obs)
			if err != nil {
				t.Fatal(err)
			}
			seq, alpha, kop, err := c.solveMean(theta, rand.New(rand.NewPCG(7, 8)), obs)
			if err != nil {
				t.Fatal(err)
			}
			vc, err := varianceCache(kop, c.y, c.spec.Seed, tc.rank, obs)
			if err != nil {
				t.Fatal(err)
			}
			if post.pred.RMinus != vc.rank || len(post.pred.Minus) != len(vc.minus) {
				t.Fatalf("joint cache rank %d (%d values), sequential %d (%d values)", post.pred.RMinus, len(post.pred.Minus), vc.rank, len(vc.minus))
			}
			if tc.rank > 0 && vc.rank != tc.rank {
				t.Fatalf("fixed rank %d gave %d", tc.rank, vc.rank)
			}
			same := func(what string, a, b []float64) {
				t.Helper()
				for i := range a {
					if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
						t.Fatalf("%s %d: joint %v, sequential %v", what, i, a[i], b[i])
					}
				}
			}
			same("alpha", post.pred.Alpha, alpha)
			same("variance factor", post.pred.Minus, vc.minus)
			same("log likelihood and se", []float64{post.lml, post.se}, []float64{seq.lml, seq.se})
		})
	}
}
