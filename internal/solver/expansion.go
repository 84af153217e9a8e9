package solver

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/linalg"
)

// ExpansionPredictor is a GP posterior written as a kernel expansion over m stored inputs X
// (standardized, m x D row-major) with low-rank variance terms. With k_x = k(X, x) (an
// m-vector),
//
//	mean(x)      = k_x^T Alpha,
//	latentVar(x) = max(0, k(x,x) - ||Minus^T k_x||^2 + PlusScale ||Plus^T k_x||^2),
//
// Minus m x RMinus and Plus m x RPlus, both row-major (RPlus may be 0, and then Plus is
// empty). The matrix Minus Minus^T - PlusScale Plus Plus^T takes the place of K^-1, K =
// k(X, X) + sigma_n^2 I, in the exact latent variance k(x,x) - k_x^T K^-1 k_x, so a row costs
// O(m (D + RMinus + RPlus)) and no solve with K:
//
//   - cg and kmcg (the Lanczos cache of LOVE, Pleiss et al. 2018, as in Potapczynski et al.
//     2021, App. E): J Lanczos steps on K give
//     K ~= Q T Q^T with Q m x J orthonormal and T = L L^T, so K^-1 ~= Q T^-1 Q^T and
//     Minus = Q L^-T (RMinus = J, RPlus = 0); J grows until the variances converge.
//   - KMCG's own DTC-style variance (Bartels & Hennig 2020, §3.2, the variance between eqs.
//     15 and 16), which the methods no longer
//     store: Minus = S L1^-T and Plus = S L2^-T from the search directions S and the Cholesky
//     factors L1, L2 of its two projected systems, PlusScale = sigma_n^2.
//
// The noisy variance is the latent variance plus sigma_n^2, which the predictor does not hold.
type ExpansionPredictor struct {
	Kernel    kernel.Kernel
	X         []float64
	D         int
	Alpha     []float64
	Minus     []float64
	RMinus    int
	Plus      []float64
	RPlus     int
	PlusScale float64
}

// expansionBlock is the fewest test rows Predict evaluates against X at a time
// (expansionRows): the kernel block k(xs_block, X) is then expansionBlock x m, 25 MB for m =
// 50000.
const expansionBlock = 64

// Validate checks that the predictor is complete and consistent, so Predict cannot panic on
// it: a valid kernel of D lengthscales, m = len(Alpha) >= 1 stored inputs, X of m x D values,
// Minus of m x RMinus with RMinus >= 1, Plus of m x RPlus with RPlus >= 0, every value finite
// and PlusScale non-negative. It never panics, whatever the fields hold.
func (p *ExpansionPredictor) Validate() error {
	k := p.Kernel
	if _, err := kernel.ParseFamily(k.Family.String()); err != nil {
		return fmt.Errorf("expansion posterior: %w", err)
	}
	if err := k.Validate(); err != nil {
		return fmt.Errorf("expansion posterior: %w", err)
	}
	d, m := p.D, len(p.Alpha)
	if d < 1 || k.Dim() != d {
		return fmt.Errorf("expansion posterior: kernel of %d lengthscales for D = %d", k.Dim(), d)
	}
	if m < 1 {
		return fmt.Errorf("expansion posterior: no stored inputs")
	}
	// Shapes are checked by division so that no product of untrusted counts can overflow.
	if len(p.X)%d != 0 || len(p.X)/d != m {
		return fmt.Errorf("expansion posterior: X has %d values for %d rows of %d columns", len(p.X), m, d)
	}
	if p.RMinus < 1 || len(p.Minus)%p.RMinus != 0 || len(p.Minus)/p.RMinus != m {
		return fmt.Errorf("expansion posterior: Minus has %d values for %d rows of rank %d", len(p.Minus), m, p.RMinus)
	}
	switch {
	case p.RPlus < 0:
		return fmt.Errorf("expansion posterior: Plus rank %d", p.RPlus)
	case p.RPlus == 0 && len(p.Plus) != 0:
		return fmt.Errorf("expansion posterior: Plus has %d values for rank 0", len(p.Plus))
	case p.RPlus > 0 && (len(p.Plus)%p.RPlus != 0 || len(p.Plus)/p.RPlus != m):
		return fmt.Errorf("expansion posterior: Plus has %d values for %d rows of rank %d", len(p.Plus), m, p.RPlus)
	}
	if !(p.PlusScale >= 0) || math.IsInf(p.PlusScale, 0) {
		return fmt.Errorf("expansion posterior: Plus scale %v must be non-negative and finite", p.PlusScale)
	}
	for _, s := range []struct {
		name string
		v    []float64
	}{{"X", p.X}, {"Alpha", p.Alpha}, {"Minus", p.Minus}, {"Plus", p.Plus}} {
		for i, v := range s.v {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("expansion posterior: %s[%d] is %v", s.name, i, v)
			}
		}
	}
	return nil
}

// Predict writes the mean and, when latentVar is not nil, the latent variance for each row
// of xs (row-major, D columns); the number of rows is len(mean). Rows are taken in blocks of
// b rows (expansionRows): the block's kernel rows Kb = k(xs_b, X) (b x m) are formed once,
// then
//
//	mean_b = Kb Alpha,   U = Kb Minus (b x RMinus),   V = Kb Plus (b x RPlus),
//	latentVar_i = max(0, k(x_i, x_i) - ||U_i||^2 + PlusScale ||V_i||^2),
//
// so the O(b m (RMinus + RPlus)) products run as matrix-matrix multiplications (linalg.Gemm,
// which shares them among GOMAXPROCS goroutines; a block of many rows amortises its packing
// of Minus). A block's kernel rows are shared among up to GOMAXPROCS goroutines. Each row's
// result depends on its own inputs alone, not on the block it falls in or the goroutines.
// The predictor must be valid (see Validate).
func (p *ExpansionPredictor) Predict(xs []float64, mean, latentVar []float64) {
	m := len(p.Alpha)
	rows := len(mean)
	if rows == 0 {
		return
	}
	block := expansionRows(m)
	bmax := min(rows, block)
	kb := make([]float64, bmax*m)
	var u, v []float64
	if latentVar != nil {
		u = make([]float64, bmax*p.RMinus)
		v = make([]float64, bmax*p.RPlus)
	}
	sx := p.scaled(p.X)
	procs := runtime.GOMAXPROCS(0)
	for lo := 0; lo < rows; lo += block {
		b := min(rows-lo, block)
		// Below about 16k kernel entries a block is too little work to share.
		workers := max(1, min(procs, b, b*m/(1<<14)))
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			i0, i1 := w*b/workers, (w+1)*b/workers
			wg.Go(func() { p.kernelRows(sx, xs[(lo+i0)*p.D:(lo+i1)*p.D], kb[i0*m:i1*m]) })
		}
		wg.Wait()
		var lv []float64
		if latentVar != nil {
			lv = latentVar[lo : lo+b]
		}
		p.predictBlock(xs[lo*p.D:(lo+b)*p.D], kb[:b*m], u, v, mean[lo:lo+b], lv)
	}
}

// expansionRows is the rows of a block of Predict for m stored inputs: about 4M kernel
// entries (32 MB), at least expansionBlock and at most 1024 rows.
func expansionRows(m int) int {
	return max(expansionBlock, min(1024, (1<<22)/m))
}

// kernelRows writes the kernel rows sigma_f^2 k0(||x~ - sx_j||^2) of the rows x of xs (D
// columns, unscaled) against the scaled stored inputs sx into kb (row-major, len(x)/D x m).
func (p *ExpansionPredictor) kernelRows(sx, xs, kb []float64) {
	m, d := len(p.Alpha), p.D
	sf2, fam := p.Kernel.SignalVariance, p.Kernel.Family
	x := make([]float64, d)
	for i := 0; i < len(xs)/d; i++ {
		for k := range x {
			x[k] = xs[i*d+k] / p.Kernel.Lengthscales[k]
		}
		row := kb[i*m : (i+1)*m]
		for j := range row {
			xj := sx[j*d : (j+1)*d]
			r2 := 0.0
			for k, v := range x {
				t := v - xj[k]
				r2 += t * t
			}
			row[j] = sf2 * fam.Profile(r2)
		}
	}
}

// predictBlock writes the means (and, when latentVar is not nil, the latent variances) of
// the b = len(mean) rows xs from their kernel rows kb (b x m), with the
// work space u (b x RMinus) and v (b x RPlus). The products run on linalg's Gemm (fixed
// blocking in the inner dimension: an entry's bits depend on its row of Kb and the column it
// multiplies, never on b or the CPU).
func (p *ExpansionPredictor) predictBlock(xs, kb, u, v, mean, latentVar []float64) {
	m, d, rm, rp := len(p.Alpha), p.D, p.RMinus, p.RPlus
	b := len(mean)
	K := blas64.General{Rows: b, Cols: m, Stride: m, Data: kb[:b*m]}
	linalg.Gemm(blas.NoTrans, blas.NoTrans, 1, K, blas64.General{Rows: m, Cols: 1, Stride: 1, Data: p.Alpha}, 0, blas64.General{Rows: b, Cols: 1, Stride: 1, Data: mean})
	if latentVar == nil {
		return
	}
	U := blas64.General{Rows: b, Cols: rm, Stride: rm, Data: u[:b*rm]}
	linalg.Gemm(blas.NoTrans, blas.NoTrans, 1, K, blas64.General{Rows: m, Cols: rm, Stride: rm, Data: p.Minus}, 0, U)
	if rp > 0 {
		V := blas64.General{Rows: b, Cols: rp, Stride: rp, Data: v[:b*rp]}
		linalg.Gemm(blas.NoTrans, blas.NoTrans, 1, K, blas64.General{Rows: m, Cols: rp, Stride: rp, Data: p.Plus}, 0, V)
	}
	for i := 0; i < b; i++ {
		x := xs[i*d : (i+1)*d]
		ui := u[i*rm : (i+1)*rm]
		s := p.Kernel.Eval(x, x) - dot(ui, ui)
		if rp > 0 {
			vi := v[i*rp : (i+1)*rp]
			s += p.PlusScale * dot(vi, vi)
		}
		latentVar[i] = math.Max(0, s)
	}
}

// scaled returns the rows of x (D columns) divided by the kernel's lengthscales, column by
// column, so that a kernel value is sigma_f^2 k0(||x~ - x~'||^2) with no divisions per entry.
func (p *ExpansionPredictor) scaled(x []float64) []float64 {
	d := p.D
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v / p.Kernel.Lengthscales[i%d]
	}
	return out
}
