package train

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/gpreduce/gpreduce/internal/kernel"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// The check of a sampled kernel choice on all rows (kernelOnAllRows), with cg's estimates,
// exact's values and kmcg's (either, by its exact-max-rows): each family's value is within
// three standard errors (and 1%) of its exact log marginal likelihood at the same theta on
// all rows (a Cholesky value to 1e-6), and only an estimate has a standard error; a family
// whose fit is far better on all rows replaces the sample's choice and starts the fit from
// its own theta, while the sample's choice stays when the other family is worse; a run
// resumed from the checkpoint gets the same outcome without evaluating anything.
func TestKernelOnAllRows(t *testing.T) {
	const n, sample = 400, 100 // the choice made on 100 of the 400 rows
	c, ref := cgFixture(t, n, 2, 3, DefaultSpec("cg"))
	good := []float64{math.Log(0.8), math.Log(0.8), math.Log(1.0), math.Log(0.01)}
	poor := []float64{math.Log(0.08), math.Log(0.08), math.Log(1.0), math.Log(0.01)}
	exactLML := func(fam kernel.Family, theta []float64) float64 {
		r := *ref
		r.fam = fam
		l, _ := r.exact(t, theta)
		return l
	}
	if g, p := exactLML(kernel.Matern32, good), exactLML(kernel.RBF, poor); !(g-p > 100) {
		t.Fatalf("the test needs fits far apart: exact log p(y) %v (matern32, good) and %v (rbf, poor)", g, p)
	}
	ex := &exactProblem{d: 2, x: ref.rows.X, y: ref.rows.Y}
	// kmcg's values come from the log likelihood it reports (kmcgLogLik): Cholesky up to
	// exact-max-rows, cg's estimate above.
	kmcg := func(exactMaxRows int32) func(kernel.Family, []float64) (float64, float64, error) {
		spec := DefaultSpec("kmcg")
		ll := newKMCGLogLik(context.Background(), c.eng, spec, &pb.CGSettings{Truncation: "fixed"},
			&pb.KMCGSettings{ExactMaxRows: exactMaxRows}, 2, c.x, c.y, c.offsets)
		return ll.allRowsLML(spec.Seed)
	}
	estimators := map[string]func(kernel.Family, []float64) (float64, float64, error){
		"cg": c.allRowsLML, "exact": ex.allRowsLML, "kmcg (Cholesky)": kmcg(0), "kmcg (estimate)": kmcg(n / 4),
	}
	for _, tc := range []struct {
		name           string
		rbf, matern32  []float64
		want           kernel.Family
		wantStartIsRBF bool
	}{
		{"the sample's choice is worse on all rows", poor, good, kernel.Matern32, false},
		{"the sample's choice is better on all rows", good, poor, kernel.RBF, true},
	} {
		for _, method := range []string{"cg", "exact", "kmcg (Cholesky)", "kmcg (estimate)"} {
			t.Run(method+": "+tc.name, func(t *testing.T) {
				var saved []byte
				hooks := Hooks{Save: func(_ context.Context, _ int, _ float64, b []byte) error { saved = b; return nil }}
				r, err := newRun(DefaultSpec("cg"), hooks)
				if err != nil {
					t.Fatal(err)
				}
				r.ck.KernelFits = []KernelFit{
					{Family: "rbf", Theta: tc.rbf},
					{Family: "matern32", Theta: tc.matern32},
				}
				lml := estimators[method]
				fam, start, why, err := r.kernelOnAllRows(context.Background(), &r.spec, n, sample, kernel.RBF, tc.rbf, "rbf: the sample's reason", lml)
				if err != nil {
					t.Fatal(err)
				}
				if fam != tc.want {
					t.Fatalf("chose %s, want %s: %s", fam, tc.want, why)
				}
				if wantStart := map[bool][]float64{true: tc.rbf, false: tc.matern32}[tc.wantStartIsRBF]; !equalFloats(start, wantStart) {
					t.Errorf("start %v, want %v", start, wantStart)
				}
				if !strings.Contains(why, "all 400 training rows") || !strings.Contains(why, "sample's reason") {
					t.Errorf("reason %q", why)
				}
				// The estimates printed against the exact values at the same theta.
				for _, f := range r.ck.KernelFits {
					fk, _ := kernel.ParseFamily(f.Family)
					v, se, err := lml(fk, f.Theta)
					if err != nil {
						t.Fatal(err)
					}
					if estimated := method == "cg" || method == "kmcg (estimate)"; estimated != (se > 0) {
						t.Errorf("%s: standard error %v: an estimate has one, a Cholesky value none", f.Family, se)
					}
					want := exactLML(fk, f.Theta)
					if d := math.Abs(v - want); d > 3*se && d > 1e-6*math.Abs(want) && (se == 0 || d > 0.01*math.Abs(want)) {
						t.Errorf("%s: value %v ± %v, exact %v", f.Family, v, se, want)
					}
				}
				// Resumed: the checkpoint's outcome, with no solve.
				ck, err := DecodeCheckpoint(saved)
				if err != nil {
					t.Fatal(err)
				}
				if !ck.KernelAllRows || ck.Kernel != tc.want.String() {
					t.Fatalf("checkpoint kernel %q, checked %v", ck.Kernel, ck.KernelAllRows)
				}
				r2, err := newRun(DefaultSpec("cg"), Hooks{Resume: saved})
				if err != nil {
					t.Fatal(err)
				}
				fail := func(kernel.Family, []float64) (float64, float64, error) {
					t.Fatal("the resumed check evaluated a likelihood")
					return 0, 0, nil
				}
				fam2, start2, why2, err := r2.kernelOnAllRows(context.Background(), &r2.spec, n, sample, kernel.RBF, nil, "", fail)
				if err != nil || fam2 != fam || !equalFloats(start2, start) || why2 != why {
					t.Errorf("resumed: %s %v %q (%v), want %s %v %q", fam2, start2, why2, err, fam, start, why)
				}
			})
		}
	}
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
