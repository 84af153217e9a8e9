package vof

import (
	"fmt"
	"math"
)

// Predict writes the posterior mean and latent variance at the rows of Xs (row-major, d
// inputs) under q(u) = N(m, S) with Kuu = I (Section 2, eq. 2):
//
//	mean(x) = k_x^T m,   var(x) = max(0, k(x, x) + k_x^T (S - I) k_x),
//
// with k_x = Kuf[:, x] from fm (closed form for Hermite, Gauss-Legendre quadrature for
// TrigVOF: deterministic, unlike the training estimator, Section 4.3). The clamp at zero
// guards against rounding and quadrature error; add p.Noise for the variance of a noisy y.
func Predict(mod Model, p *Params, fm FeatureMap, Xs []float64, mean, latentVar []float64) error {
	M, err := mod.Check(p)
	if err != nil {
		return err
	}
	d := mod.Dim
	n := len(mean)
	if len(Xs) != n*d || len(latentVar) != n || fm.NumFeatures() != M {
		return fmt.Errorf("VOF predict: %d inputs, %d means and %d variances for %d rows of %d inputs and %d features", len(Xs), len(mean), len(latentVar), n, d, M)
	}
	v := priorVariance(p)
	k := make([]float64, M)
	Lk := make([]float64, M)
	for r := 0; r < n; r++ {
		fm.Eval(Xs[r*d:(r+1)*d], k, nil)
		var mu, kk, q float64
		for i, ki := range k {
			mu += ki * p.Mean[i]
			kk += ki * ki
		}
		// k^T S k = ||L^T k||^2.
		if mod.Dense {
			clear(Lk)
			for i := 0; i < M; i++ {
				row := p.Chol[i*M : i*M+i+1]
				for j, l := range row {
					Lk[j] += l * k[i]
				}
			}
			for _, x := range Lk {
				q += x * x
			}
		} else {
			for i, ki := range k {
				x := p.Chol[i] * ki
				q += x * x
			}
		}
		mean[r] = mu
		latentVar[r] = math.Max(0, v+q-kk)
	}
	return nil
}
