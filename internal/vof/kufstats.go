package vof

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/gpreduce/gpreduce/internal/linalg"
	"github.com/gpreduce/gpreduce/internal/reduce"
)

// KufStats is the per-shard sufficient statistic of a VOF model with a computed Kuf (Hermite in
// closed form, or TrigVOF by quadrature) at fixed hyperparameters theta (a distributed reading
// of Section 3.1's closed-form case): over the rows of the shard, with k_n = Kuf[:, x_n],
//
//	YY = sum y_n^2,  KY = sum k_n y_n,  KK = sum k_n k_n^T,
//	DKY[p] = sum dk_n/dtheta_p y_n,  DKK[p] = sum dk_n/dtheta_p k_n^T   (not symmetric),
//
// for the FeatureMap's shape directions p (log lengthscales, log feature parameters). They
// depend on theta, which the statistic records (Theta, the values the FeatureMap was built
// with) so that merges and ELBO evaluations at another theta are refused. KK has all M^2
// entries: sum_n mu_n^2 = m^T KK m needs the off-diagonal ones even when S is diagonal.
type KufStats struct {
	M, NShape int
	N         int
	Theta     []float64
	YY        float64
	KY        []float64
	KK        []float64
	// DKY (NShape x M) and DKK (NShape x M x M) are nil when accumulated without gradients.
	DKY []float64
	DKK []float64
}

var _ reduce.Stats = (*KufStats)(nil)

// Hyper returns the hyperparameters that KufStats depend on, as recorded in them: the log
// lengthscales, log kernel variances and log feature parameters (not the noise, which the
// statistics do not depend on).
func Hyper(p *Params) []float64 {
	t := make([]float64, 0, len(p.Lengthscales)+len(p.Variances)+len(p.Feature))
	for _, v := range p.Lengthscales {
		t = append(t, math.Log(v))
	}
	for _, v := range p.Variances {
		t = append(t, math.Log(v))
	}
	for _, v := range p.Feature {
		t = append(t, math.Log(v))
	}
	return t
}

// AccumulateKuf computes the statistics of a block of rows (X row-major n x d, y of length n)
// with the feature map fm built at p; with grad it also accumulates DKY and DKK. The cost is
// O(n M^2 (1 + NShape)).
func AccumulateKuf(fm FeatureMap, p *Params, X, y []float64, d int, grad bool) (*KufStats, error) {
	n := len(y)
	if len(X) != n*d {
		return nil, fmt.Errorf("VOF statistics: X has %d values for %d rows of %d inputs", len(X), n, d)
	}
	M, P := fm.NumFeatures(), fm.NumShape()
	st := &KufStats{M: M, NShape: P, Theta: Hyper(p), KY: make([]float64, M), KK: make([]float64, M*M)}
	if grad {
		st.DKY = make([]float64, P*M)
		st.DKK = make([]float64, P*M*M)
	}
	// Rows are processed in blocks of accBlock, whose products go through linalg (fixed
	// blocking: the bits depend only on the shard's rows).
	nb := min(n, accBlock)
	K := make([]float64, nb*M)
	var DK, dk []float64
	if grad {
		DK = make([]float64, P*nb*M) // direction p: rows x M at p*nb*M
		dk = make([]float64, P*M)
	}
	for r0 := 0; r0 < n; r0 += nb {
		rows := min(nb, n-r0)
		for r := 0; r < rows; r++ {
			k := K[r*M : (r+1)*M]
			fm.Eval(X[(r0+r)*d:(r0+r+1)*d], k, dk)
			yr := y[r0+r]
			st.YY += yr * yr
			addScaled(st.KY, yr, k)
			for p := 0; p < P && grad; p++ {
				copy(DK[p*nb*M+r*M:p*nb*M+(r+1)*M], dk[p*M:(p+1)*M])
				addScaled(st.DKY[p*M:(p+1)*M], yr, dk[p*M:(p+1)*M])
			}
		}
		kb := blas64.General{Rows: rows, Cols: M, Stride: M, Data: K[:rows*M]}
		linalg.Syrk(blas.Trans, 1, kb, 1, blas64.Symmetric{Uplo: blas.Upper, N: M, Stride: M, Data: st.KK})
		for p := 0; p < P && grad; p++ {
			db := blas64.General{Rows: rows, Cols: M, Stride: M, Data: DK[p*nb*M : p*nb*M+rows*M]}
			linalg.Gemm(blas.Trans, blas.NoTrans, 1, db, kb, 1, blas64.General{Rows: M, Cols: M, Stride: M, Data: st.DKK[p*M*M : (p+1)*M*M]})
		}
	}
	for i := 0; i < M; i++ {
		for j := 0; j < i; j++ {
			st.KK[i*M+j] = st.KK[j*M+i]
		}
	}
	st.N = n
	return st, nil
}

// Merge adds next (the statistics of the shards after the receiver's, in shard order) into s.
// Statistics at another theta, of another shape, or with and without gradients do not merge.
func (s *KufStats) Merge(next reduce.Stats) error {
	o, ok := next.(*KufStats)
	if !ok {
		return fmt.Errorf("merge KufStats with %T", next)
	}
	if o.M != s.M || o.NShape != s.NShape || len(o.KY) != len(s.KY) || len(o.KK) != len(s.KK) ||
		len(o.DKY) != len(s.DKY) || len(o.DKK) != len(s.DKK) || len(o.Theta) != len(s.Theta) {
		return fmt.Errorf("merge KufStats of %d features (%d gradient values) with one of %d (%d)", s.M, len(s.DKK), o.M, len(o.DKK))
	}
	for i := range s.Theta {
		if math.Float64bits(s.Theta[i]) != math.Float64bits(o.Theta[i]) {
			return fmt.Errorf("merge KufStats computed at different hyperparameters (entry %d: %v and %v)", i, s.Theta[i], o.Theta[i])
		}
	}
	add := func(a, b []float64) {
		for i, v := range b {
			a[i] += v
		}
	}
	s.N += o.N
	s.YY += o.YY
	add(s.KY, o.KY)
	add(s.KK, o.KK)
	add(s.DKY, o.DKY)
	add(s.DKK, o.DKK)
	return nil
}

// ELBOKuf returns the ELBO (Section 3, eq. 3 with Kuu = I; the data term scaled by nTotal/N
// for a minibatch) at p from statistics accumulated at p's hyperparameters, and fills g (if
// not nil) with its gradient in every parameter; the kernel-variance, lengthscale and
// feature-parameter gradients need statistics with gradients.
func ELBOKuf(mod Model, p *Params, st *KufStats, nTotal int, g *Grad) (float64, error) {
	M, err := mod.Check(p)
	if err != nil {
		return 0, err
	}
	if st.M != M || st.N <= 0 || len(st.KY) != M || len(st.KK) != M*M {
		return 0, fmt.Errorf("VOF ELBO: statistics of %d features over %d rows for a model of %d features", st.M, st.N, M)
	}
	if st.DKK != nil && (st.NShape != 2*mod.Dim || len(st.DKY) != st.NShape*M || len(st.DKK) != st.NShape*M*M) {
		return 0, fmt.Errorf("VOF ELBO: statistics gradients of %d directions (%d and %d values) for %d features in %d inputs", st.NShape, len(st.DKY), len(st.DKK), M, mod.Dim)
	}
	th := Hyper(p)
	if len(th) != len(st.Theta) {
		return 0, fmt.Errorf("VOF ELBO: statistics record %d hyperparameters, the model has %d", len(st.Theta), len(th))
	}
	for i := range th {
		if math.Float64bits(th[i]) != math.Float64bits(st.Theta[i]) {
			return 0, fmt.Errorf("VOF ELBO: statistics were computed at other hyperparameters (entry %d: %v, now %v): recompute them", i, st.Theta[i], th[i])
		}
	}
	if g != nil && st.DKK == nil {
		return 0, fmt.Errorf("VOF ELBO: gradient requested from statistics accumulated without gradients")
	}
	in := coreIn{n: float64(st.N), nTotal: float64(nTotal), YY: st.YY, KY: st.KY, KK: st.KK, v: priorVariance(p)}
	F, out := coreELBO(mod, p, in, g)
	if g == nil {
		return F, nil
	}
	d := mod.Dim
	for q := 0; q < st.NShape; q++ {
		var a float64
		for i := 0; i < M; i++ {
			a += out.gKY[i] * st.DKY[q*M+i]
			row := st.DKK[(q*M+i)*M : (q*M+i+1)*M]
			grow := out.gKK[i*M : (i+1)*M]
			var b float64
			for j, v := range row {
				b += grow[j] * v
			}
			a += 2 * b
		}
		if q < d {
			g.Lengthscales[q] = a
		} else {
			g.Feature[q-d] = a
		}
	}
	// k_j is proportional to sqrt(v_c) for the features of component c.
	per := M / len(p.Variances)
	for c := range p.Variances {
		var a float64
		for i := c * per; i < (c+1)*per; i++ {
			a += 0.5 * out.gKY[i] * st.KY[i]
			grow := out.gKK[i*M : (i+1)*M]
			krow := st.KK[i*M : (i+1)*M]
			for j, v := range krow {
				a += grow[j] * v
			}
		}
		g.Variances[c] = a + out.gV*p.Variances[c]
	}
	return F, nil
}
