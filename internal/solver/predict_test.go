package solver

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/gpreduce/gpreduce/internal/kernel"
)

// relTo is |got - want| relative to scale.
func relTo(got, want, scale float64) float64 { return math.Abs(got-want) / scale }

// TestExactPredictorMatchesPerRowSolve checks the blocked predictor (kernel blocks by
// ScaledBlock, one Trsm per block of rows) against the per-row reference: k(x, X_i) by
// Kernel.Eval, mean = k^T alpha, latent variance k(x, x) - ||R^-T k||^2 by a gonum Trsv per
// row. Means agree to 1e-12 relative (or, where the sum k^T alpha cancels to a small value,
// to 1e-14 of sum |k_i alpha_i|), variances to 1e-12 of the prior variance (the variance is
// a difference of two numbers of that size). Row counts cross the block size; a few test
// rows are training rows (zero distance).
func TestExactPredictorMatchesPerRowSolve(t *testing.T) {
	for _, fam := range []kernel.Family{kernel.RBF, kernel.Matern12, kernel.Matern32, kernel.Matern52} {
		for _, rows := range []int{1, 7, predictBlock, predictBlock + 1, 2*predictBlock + 37} {
			t.Run(fmt.Sprintf("%v/rows=%d", fam, rows), func(t *testing.T) {
				const n, d = 300, 3
				rng := rand.New(rand.NewPCG(7, uint64(rows)))
				X, y := randData(rng, n, d)
				k := kernel.Kernel{Family: fam, Lengthscales: []float64{0.7, 1.3, 0.9}, SignalVariance: 1.6}
				e, err := NewExact(k, 0.05, X, d, y)
				if err != nil {
					t.Fatal(err)
				}
				xs := make([]float64, rows*d)
				for i := range xs {
					xs[i] = 1.5 * rng.NormFloat64()
				}
				copy(xs, X[:min(len(xs), 5*d)]) // training rows
				p := e.Predictor()
				mean, lv := make([]float64, rows), make([]float64, rows)
				p.Predict(xs, mean, lv)
				only := make([]float64, rows)
				p.Predict(xs, only, nil)
				r := blas64.Triangular{Uplo: blas.Upper, Diag: blas.NonUnit, N: n, Stride: n, Data: p.R}
				ks := make([]float64, n)
				for i := range rows {
					x := xs[i*d : (i+1)*d]
					var wm, scale float64
					for j := range n {
						ks[j] = k.Eval(x, X[j*d:(j+1)*d])
						wm += ks[j] * p.Alpha[j]
						scale += math.Abs(ks[j] * p.Alpha[j])
					}
					blas64.Trsv(blas.Trans, r, blas64.Vector{N: n, Inc: 1, Data: ks})
					wv := math.Max(0, k.Eval(x, x)-dot(ks, ks))
					if e := relTo(mean[i], wm, math.Max(math.Abs(wm), 1e-300)); e > 1e-12 && relTo(mean[i], wm, scale) > 1e-14 {
						t.Fatalf("row %d: mean %v, per-row %v (relative %g)", i, mean[i], wm, e)
					}
					if e := relTo(lv[i], wv, k.SignalVariance); e > 1e-12 {
						t.Fatalf("row %d: latent variance %v, per-row %v (relative to the prior %g)", i, lv[i], wv, e)
					}
					if only[i] != mean[i] {
						t.Fatalf("row %d: mean without variance %v, with %v", i, only[i], mean[i])
					}
				}
			})
		}
	}
}

// TestFeaturePredictorMatchesPerRowSolve is the same for the feature predictor: the blocked
// Trsm against a gonum Trsv per row, to 1e-12 relative.
func TestFeaturePredictorMatchesPerRowSolve(t *testing.T) {
	for _, rows := range []int{1, predictBlock - 1, predictBlock + 1, 3 * predictBlock} {
		t.Run(fmt.Sprintf("rows=%d", rows), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(8, uint64(rows)))
			p := newFeatureProblem(rng, 200, 60)
			f, err := FitFeatures(p.gram(), p.logh, 1.4, 0.15, false)
			if err != nil {
				t.Fatal(err)
			}
			pr := f.Predictor()
			zs := make([]float64, rows*p.s)
			for i := range zs {
				zs[i] = rng.NormFloat64()
			}
			mean, lv := make([]float64, rows), make([]float64, rows)
			pr.Predict(zs, rows, mean, lv)
			r := blas64.Triangular{Uplo: blas.Upper, Diag: blas.NonUnit, N: p.s, Stride: p.s, Data: pr.R}
			w := make([]float64, p.s)
			for i := range rows {
				zt := zs[i*p.s : (i+1)*p.s]
				wm := pr.SF2 * dot(zt, pr.Beta)
				for j := range w {
					w[j] = pr.SqrtH[j] * zt[j]
				}
				blas64.Trsv(blas.Trans, r, blas64.Vector{N: p.s, Inc: 1, Data: w})
				wv := pr.SF2 * dot(w, w)
				if mean[i] != wm {
					t.Fatalf("row %d: mean %v, per-row %v", i, mean[i], wm)
				}
				if e := relTo(lv[i], wv, wv); e > 1e-12 {
					t.Fatalf("row %d: latent variance %v, per-row %v (relative %g)", i, lv[i], wv, e)
				}
			}
		})
	}
}
