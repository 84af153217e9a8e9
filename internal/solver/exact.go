package solver

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/linalg"
)

// Exact is the exact GP regression posterior for a zero-mean GP with kernel k and Gaussian
// noise: K = k(X, X) + Noise I, factorised once by Cholesky. X is row-major n x d.
type Exact struct {
	Kernel kernel.Kernel
	Noise  float64
	X      []float64
	Y      []float64
	D      int

	chol  *linalg.Cholesky
	alpha *mat.VecDense // K^-1 y
	// kbuf holds K while it is factorised and K^-1 in Gradient (n x n).
	kbuf []float64
}

// ExactWorkspace keeps the n x n buffers of exact GPs built one after another on the same
// rows (an optimizer's evaluations): the kernel matrix, reused for its inverse, the Cholesky
// factor and the factor's inverse, 3 n^2 float64 in all. Without it every evaluation
// allocates and zeroes four such buffers afresh (at n = 3000, 288 MB of page faults). An Exact built in
// a workspace shares its storage and is valid until the next NewExactIn with the same
// workspace; Predictor copies what prediction needs. The zero value is ready to use; a
// workspace is not safe for concurrent use.
type ExactWorkspace struct {
	k    []float64
	chol linalg.Cholesky
}

// NewExact factorises K = k(X, X) + noise I. It fails when K is not numerically positive
// definite (no jitter is added: the noise variance is the ridge).
func NewExact(k kernel.Kernel, noise float64, X []float64, d int, y []float64) (*Exact, error) {
	return NewExactIn(new(ExactWorkspace), k, noise, X, d, y)
}

// NewExactIn is NewExact with its buffers taken from ws (see ExactWorkspace); the result is
// the same bits.
func NewExactIn(ws *ExactWorkspace, k kernel.Kernel, noise float64, X []float64, d int, y []float64) (*Exact, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	if k.Dim() != d {
		return nil, fmt.Errorf("kernel has %d lengthscales for %d input columns", k.Dim(), d)
	}
	n := len(y)
	if len(X) != n*d || n == 0 {
		return nil, fmt.Errorf("exact GP: X has %d values for %d rows of %d columns", len(X), n, d)
	}
	if !(noise > 0) {
		return nil, fmt.Errorf("exact GP: noise variance %v must be positive", noise)
	}
	if cap(ws.k) < n*n {
		ws.k = make([]float64, n*n)
	}
	kd := ws.k[:n*n]
	xs := scaleColumns(X, k.Lengthscales)
	k.Family.ScaledBlock(kernel.BlockK, k.SignalVariance, xs, xs, d, kd, n)
	for i := 0; i < n; i++ {
		kd[i*n+i] += noise
	}
	e := &Exact{Kernel: k, Noise: noise, X: X, Y: y, D: d, chol: &ws.chol, kbuf: kd}
	if ok := e.chol.Factorize(mat.NewSymDense(n, kd)); !ok {
		return nil, fmt.Errorf("exact GP: K + noise I is not positive definite (n=%d, noise=%g)", n, noise)
	}
	e.alpha = mat.NewVecDense(n, nil)
	if err := e.chol.SolveVecTo(e.alpha, mat.NewVecDense(n, y)); err != nil {
		return nil, fmt.Errorf("exact GP: solve: %w", err)
	}
	return e, nil
}

// LogMarginalLikelihood is log p(y) = -1/2 y^T K^-1 y - 1/2 log det K - n/2 log 2 pi.
func (e *Exact) LogMarginalLikelihood() float64 {
	n := float64(len(e.Y))
	return -0.5*mat.Dot(mat.NewVecDense(len(e.Y), e.Y), e.alpha) - 0.5*e.chol.LogDet() - n/2*math.Log(2*math.Pi)
}

// Alpha returns K^-1 y.
func (e *Exact) Alpha() []float64 { return e.alpha.RawVector().Data }

// LOO returns, for every training row i, the leave-one-out predictive residual and variance
// at the same hyperparameters (Rasmussen & Williams 2006, §5.4.2, eq. 5.12):
//
//	resid_i    = y_i - mu_{-i} = alpha_i / [K^-1]_ii,
//	variance_i = sigma^2_{-i} = 1 / [K^-1]_ii   (noise included),
//
// from the factorisation: diag(K^-1) by linalg.Cholesky.InverseDiag (n^3/3 multiply-adds),
// instead of n refits.
func (e *Exact) LOO() (resid, variance []float64, err error) {
	n := len(e.Y)
	diag := make([]float64, n)
	if err := e.chol.InverseDiag(diag); err != nil {
		return nil, nil, fmt.Errorf("exact GP: leave-one-out: %w", err)
	}
	a := e.alpha.RawVector().Data
	resid, variance = make([]float64, n), make([]float64, n)
	for i, v := range diag {
		resid[i] = a[i] / v
		variance[i] = 1 / v
	}
	return resid, variance, nil
}

// Gradient returns dL/d theta for theta = (log l_1..log l_d, log sigma_f^2, log sigma_n^2):
// dL/d theta = 1/2 tr((alpha alpha^T - K^-1) dK/d theta).
// K^-1 is formed from the Cholesky factor because every entry of it enters the traces of all
// d + 2 derivatives; one O(n^3) inverse is cheaper than d + 2 solves with n right-hand sides.
func (e *Exact) Gradient() []float64 {
	n, d := len(e.Y), e.D
	// K is no longer needed once factorised: its buffer takes the inverse.
	Kinv := mat.NewSymDense(n, e.kbuf)
	if err := e.chol.InverseTo(Kinv); err != nil {
		panic(fmt.Sprintf("exact GP: inverse of a factorised matrix failed: %v", err)) // unreachable after Factorize
	}
	inv := Kinv.RawSymmetric()
	a := e.alpha.RawVector().Data
	k := e.Kernel
	xs := scaleColumns(e.X, k.Lengthscales)
	// Rows in blocks of 64: Q_ij = sigma_f^2 q(r_ij) and K_ij for j >= i by
	// kernel.Family.ScaledBlock, dK_ij/dlog l_p = Q_ij t_p^2 with t = xs_i - xs_j and
	// dK/dlog sigma_f^2 = K. Each block sums into its own partial gradient and the partials are
	// added in block order, so the bits do not depend on the number of goroutines.
	const rowsPer = 64
	nb := (n + rowsPer - 1) / rowsPer
	parts := make([][]float64, nb)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), nb) {
		wg.Go(func() {
			q, kv := make([]float64, rowsPer*n), make([]float64, rowsPer*n)
			for {
				b := int(next.Add(1)) - 1
				if b >= nb {
					return
				}
				r0 := b * rowsPer
				nr := min(rowsPer, n-r0)
				cols := n - r0
				g := make([]float64, d+2)
				k.Family.ScaledBlock(kernel.BlockQ, k.SignalVariance, xs[r0*d:(r0+nr)*d], xs[r0*d:], d, q, cols)
				k.Family.ScaledBlock(kernel.BlockK, k.SignalVariance, xs[r0*d:(r0+nr)*d], xs[r0*d:], d, kv, cols)
				for i := r0; i < r0+nr; i++ {
					xi := xs[i*d : (i+1)*d]
					qi, ki := q[(i-r0)*cols:(i-r0+1)*cols], kv[(i-r0)*cols:(i-r0+1)*cols]
					for j := i; j < n; j++ {
						w := a[i]*a[j] - inv.Data[i*inv.Stride+j]
						if j != i {
							w *= 2 // (i, j) and (j, i)
						}
						wq := 0.5 * w * qi[j-r0]
						xj := xs[j*d : (j+1)*d]
						for p, v := range xi {
							t := v - xj[p]
							g[p] += wq * t * t
						}
						g[d] += 0.5 * w * ki[j-r0]
					}
					// dK/dlog sigma_n^2 = sigma_n^2 I.
					g[d+1] += 0.5 * (a[i]*a[i] - inv.Data[i*inv.Stride+i]) * e.Noise
				}
				parts[b] = g
			}
		})
	}
	wg.Wait()
	grad := make([]float64, d+2)
	for _, g := range parts {
		for p, v := range g {
			grad[p] += v
		}
	}
	return grad
}

// scaleColumns returns X (row-major, len(l) columns) with column j divided by l_j.
func scaleColumns(X, l []float64) []float64 {
	out := make([]float64, len(X))
	for i, v := range X {
		out[i] = v / l[i%len(l)]
	}
	return out
}

// Predict writes the predictive mean k_*^T alpha and, when latentVar is not nil, the latent
// variance k(x,x) - k_*^T K^-1 k_* for each row of xs (row-major, d columns). The noisy
// variance is the latent variance plus Noise.
func (e *Exact) Predict(xs []float64, mean, latentVar []float64) {
	e.Predictor().Predict(xs, mean, latentVar)
}

// Predictor returns the parts of the posterior that prediction needs, detached from the
// factorisation: the training inputs, alpha = K^-1 y and the upper Cholesky factor R of K.
func (e *Exact) Predictor() *ExactPredictor {
	n := len(e.Y)
	var u mat.TriDense
	e.chol.UTo(&u)
	raw := u.RawTriangular()
	R := make([]float64, n*n)
	for i := 0; i < n; i++ {
		copy(R[i*n+i:(i+1)*n], raw.Data[i*raw.Stride+i:i*raw.Stride+n])
	}
	return &ExactPredictor{Kernel: e.Kernel, Noise: e.Noise, X: e.X, D: e.D, Alpha: append([]float64(nil), e.Alpha()...), R: R}
}

// ExactPredictor predicts from a factorised exact GP: mean(x) = k(x, X) Alpha and latent
// variance k(x, x) - ||R^-T k(X, x)||^2 with K = R^T R (R upper triangular, n x n row-major).
type ExactPredictor struct {
	Kernel kernel.Kernel
	Noise  float64
	X      []float64
	D      int
	Alpha  []float64
	R      []float64
}

// predictBlock is the number of rows ExactPredictor.Predict and FeaturePredictor.Predict take
// at a time: a block's kernel (or feature) rows, b x n, are one triangular solve with b
// right-hand sides.
const predictBlock = 256

// Predict writes the mean and, when latentVar is not nil, the latent variance for each row of
// xs (row-major, D columns); the number of rows is len(mean). Rows are taken in blocks of
// b <= 256: the block's kernel rows Kb = k(xs_b, X) (b x n, kernel.Family.ScaledBlock) give
// mean_b = Kb Alpha, and one blocked triangular solve W R = Kb (linalg.Trsm) gives
// latentVar_i = max(0, k(x_i, x_i) - ||W_i||^2), W_i = (R^-T k(X, x_i))^T. Each row's result
// depends only on that row, never on the block split or the number of goroutines.
func (p *ExactPredictor) Predict(xs []float64, mean, latentVar []float64) {
	n, d := len(p.Alpha), p.D
	rows := len(mean)
	if rows == 0 || n == 0 {
		return
	}
	k := p.Kernel
	sx := scaleColumns(p.X, k.Lengthscales)
	kb := make([]float64, min(rows, predictBlock)*n)
	r := blas64.Triangular{Uplo: blas.Upper, Diag: blas.NonUnit, N: n, Stride: n, Data: p.R}
	for lo := 0; lo < rows; lo += predictBlock {
		b := min(predictBlock, rows-lo)
		xb := scaleColumns(xs[lo*d:(lo+b)*d], k.Lengthscales)
		k.Family.ScaledBlock(kernel.BlockK, k.SignalVariance, xb, sx, d, kb, n)
		for i := range b {
			mean[lo+i] = dot(kb[i*n:(i+1)*n], p.Alpha)
		}
		if latentVar == nil {
			continue
		}
		linalg.Trsm(blas.Right, blas.NoTrans, 1, r, blas64.General{Rows: b, Cols: n, Stride: n, Data: kb[:b*n]})
		for i := range b {
			x := xs[(lo+i)*d : (lo+i+1)*d]
			w := kb[i*n : (i+1)*n]
			latentVar[lo+i] = math.Max(0, k.Eval(x, x)-dot(w, w))
		}
	}
}
