package solver

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/gpreduce/gpreduce/internal/linalg"
	"github.com/gpreduce/gpreduce/internal/reduce"
)

// FeatureFit is the posterior of the feature model whose kernel matrix is
//
//	K~ = sigma_f^2 Z W Z^T + sigma_n^2 I,  W = diag(h),
//
// computed from the reduced statistics G = Z^T Z, b = Z^T y, y^T y and n alone, in the stable
// W^(1/2)-scaled form of digest 000 §2.3 (no W^-1, no n-vector):
//
//	D = W^(1/2), c = sigma_f^2/sigma_n^2, M~ = I + c D G D = R^T R,  u = sigma_n^-2 M~^-1 D b
//	y^T K~^-1 y = sigma_n^-2 (y^T y - sigma_f^2 (D b)^T u)
//	log det K~  = n log sigma_n^2 + log det M~
//
// Every quantity costs O(s^3) at most; nothing scales with n.
type FeatureFit struct {
	S, N     int
	SF2, SN2 float64
	SqrtH    []float64 // D = W^(1/2)
	U        []float64 // u = sigma_n^-2 M~^-1 D b
	LML      float64   // log marginal likelihood of the n training targets

	// Gradients, filled when FitFeatures is called with grad = true.
	GradLogSF2 float64   // dL / dlog sigma_f^2
	GradLogSN2 float64   // dL / dlog sigma_n^2
	GradLogH   []float64 // dL / dlog h_j; a parameter theta enters as sum_j (dlog h_j/dtheta) GradLogH[j]
	DiagInv    []float64 // diag(M~^-1)

	gram *reduce.Gram
	chol linalg.Cholesky
	ainv *mat.SymDense // D M~^-1 D, formed on demand by GramDerivative
}

// FitFeatures factorises M~ and evaluates the log marginal likelihood and, if grad is set,
// its gradient (digest 000 §2.3):
//
//	dL/dlog sigma_f^2 = 1/2 sigma_f^2 ||u||^2 - 1/2 (s - T),            T = tr M~^-1
//	dL/dlog sigma_n^2 = 1/2 sigma_n^2 ||alpha||^2 - 1/2 (n - s + T)
//	dL/dlog h_j       = 1/2 (sigma_f^2 u_j^2 - (1 - (M~^-1)_jj))
//
// with ||alpha||^2 = sigma_n^-4 (y^T y - 2 sigma_f^2 (D b)^T u + sigma_f^4 u^T D G D u).
// logh may hold -Inf (an underflowed weight): that feature then drops out exactly.
func FitFeatures(g *reduce.Gram, logh []float64, sf2, sn2 float64, grad bool) (*FeatureFit, error) {
	s := g.S
	if len(logh) != s {
		return nil, fmt.Errorf("feature fit: %d log-weights for %d features", len(logh), s)
	}
	if !(sf2 > 0) || !(sn2 > 0) || math.IsInf(sf2, 0) || math.IsInf(sn2, 0) {
		return nil, fmt.Errorf("feature fit: signal variance %g and noise variance %g must be positive and finite", sf2, sn2)
	}
	f := &FeatureFit{S: s, N: g.N, SF2: sf2, SN2: sn2, SqrtH: make([]float64, s), U: make([]float64, s), gram: g}
	for j, lh := range logh {
		if math.IsNaN(lh) || math.IsInf(lh, 1) {
			return nil, fmt.Errorf("feature fit: log-weight %d is %v", j, lh)
		}
		f.SqrtH[j] = math.Exp(lh / 2)
	}
	c := sf2 / sn2
	D := f.SqrtH
	// M~ = I + c D G D from the upper triangle of G.
	m := make([]float64, s*s)
	for i := 0; i < s; i++ {
		gi := g.G[i*s : (i+1)*s]
		mi := m[i*s : (i+1)*s]
		ci := c * D[i]
		for j := i; j < s; j++ {
			mi[j] = ci * gi[j] * D[j]
		}
		mi[i]++
	}
	M := mat.NewSymDense(s, m)
	if ok := f.chol.Factorize(M); !ok {
		return nil, fmt.Errorf("feature fit: I + c D G D is not positive definite; the Gram statistic is corrupt (s=%d, n=%d)", s, g.N)
	}
	bt := make([]float64, s)
	for j := range bt {
		bt[j] = D[j] * g.B[j]
	}
	uv := mat.NewVecDense(s, f.U)
	if err := f.chol.SolveVecTo(uv, mat.NewVecDense(s, bt)); err != nil {
		return nil, fmt.Errorf("feature fit: solve: %w", err)
	}
	for j := range f.U {
		f.U[j] /= sn2
	}
	btu := dot(bt, f.U)
	n := float64(g.N)
	yAlpha := (g.YY - sf2*btu) / sn2
	logDet := n*math.Log(sn2) + f.chol.LogDet()
	f.LML = -0.5*yAlpha - 0.5*logDet - n/2*math.Log(2*math.Pi)
	if !grad {
		return f, nil
	}

	// diag(M~^-1) = squared row norms of R^-1, M~ = R^T R (linalg's triangular inverse:
	// gonum's InverseTri took 14.5 s at s = 4096, linalg 2.3 s).
	f.DiagInv = make([]float64, s)
	if err := f.chol.InverseDiag(f.DiagInv); err != nil {
		return nil, fmt.Errorf("feature fit: diagonal of the inverse: %w", err)
	}
	var T float64
	for _, v := range f.DiagInv {
		T += v
	}
	// u^T D G D u with G symmetric (upper triangle stored).
	du := make([]float64, s)
	for j := range du {
		du[j] = D[j] * f.U[j]
	}
	gdu := make([]float64, s)
	blas64.Symv(1, blas64.Symmetric{Uplo: blas.Upper, N: s, Stride: s, Data: g.G}, blas64.Vector{N: s, Inc: 1, Data: du}, 0, blas64.Vector{N: s, Inc: 1, Data: gdu})
	uGu := dot(du, gdu)
	alpha2 := (g.YY - 2*sf2*btu + sf2*sf2*uGu) / (sn2 * sn2)
	uu := dot(f.U, f.U)
	fs := float64(s)
	f.GradLogSF2 = 0.5*sf2*uu - 0.5*(fs-T)
	f.GradLogSN2 = 0.5*sn2*alpha2 - 0.5*(n-fs+T)
	f.GradLogH = make([]float64, s)
	for j := range f.GradLogH {
		f.GradLogH[j] = 0.5 * (sf2*f.U[j]*f.U[j] - (1 - f.DiagInv[j]))
	}
	return f, nil
}

// GramDerivative returns dL/dtheta for a parameter theta that moves the statistics rather
// than the weights, as a lengthscale does for random Fourier features: dG/dtheta = E + E^T
// (E = (dZ/dtheta)^T Z, s x s row-major) and db/dtheta = e = (dZ/dtheta)^T y. With W fixed,
//
//	dL = c (Du)^T e - c^2 sigma_n^2 (Du)^T E (Du) - c tr(D M~^-1 D E),  c = sigma_f^2/sigma_n^2.
//
// The trace needs every entry of M~^-1, so D M~^-1 D is formed once from the Cholesky factor
// and reused for every parameter.
func (f *FeatureFit) GramDerivative(E, e []float64) (float64, error) {
	s := f.S
	if len(E) != s*s || len(e) != s {
		return 0, fmt.Errorf("gram derivative: E has %d values and e %d for %d features", len(E), len(e), s)
	}
	if f.ainv == nil {
		var inv mat.SymDense
		if err := f.chol.InverseTo(&inv); err != nil {
			return 0, fmt.Errorf("gram derivative: inverse: %w", err)
		}
		for i := 0; i < s; i++ {
			for j := i; j < s; j++ {
				inv.SetSym(i, j, f.SqrtH[i]*inv.At(i, j)*f.SqrtH[j])
			}
		}
		f.ainv = &inv
	}
	c := f.SF2 / f.SN2
	du := make([]float64, s)
	for j := range du {
		du[j] = f.SqrtH[j] * f.U[j]
	}
	var quad, tr float64
	for i := 0; i < s; i++ {
		row := E[i*s : (i+1)*s]
		quad += du[i] * dot(row, du)
		for j, v := range row {
			tr += f.ainv.At(i, j) * v
		}
	}
	return c*dot(du, e) - c*c*f.SN2*quad - c*tr, nil
}

// Predictor returns what prediction needs: the mean weights beta = D u (mean = sigma_f^2 z^T beta)
// and the upper Cholesky factor R of M~ (latent variance = sigma_f^2 ||R^-T D z||^2).
func (f *FeatureFit) Predictor() *FeaturePredictor {
	s := f.S
	p := &FeaturePredictor{SF2: f.SF2, SN2: f.SN2, SqrtH: append([]float64(nil), f.SqrtH...), Beta: make([]float64, s), R: make([]float64, s*s)}
	for j := range p.Beta {
		p.Beta[j] = f.SqrtH[j] * f.U[j]
	}
	var r mat.TriDense
	f.chol.UTo(&r)
	raw := r.RawTriangular()
	for i := 0; i < s; i++ {
		copy(p.R[i*s+i:(i+1)*s], raw.Data[i*raw.Stride+i:i*raw.Stride+s])
	}
	return p
}

// FeaturePredictor predicts from a fitted feature model in the feature space:
// mean(x) = sigma_f^2 z(x)^T Beta, latent variance(x) = sigma_f^2 ||R^-T (D z(x))||^2,
// noisy variance = latent + sigma_n^2. R is upper triangular, s x s row-major.
type FeaturePredictor struct {
	SF2, SN2 float64
	SqrtH    []float64
	Beta     []float64
	R        []float64
}

// Predict writes the mean and, when latentVar is not nil, the latent variance for the
// feature rows z (rows x s, row-major). Rows are taken in blocks of b <= 256: the block's
// scaled rows D z_i are one blocked triangular solve W R = (D Z_b) (linalg.Trsm), and
// latentVar_i = sigma_f^2 ||W_i||^2. Each row's result depends only on that row.
func (p *FeaturePredictor) Predict(z []float64, rows int, mean, latentVar []float64) {
	s := len(p.Beta)
	for t := 0; t < rows; t++ {
		mean[t] = p.SF2 * dot(z[t*s:(t+1)*s], p.Beta)
	}
	if latentVar == nil || rows == 0 || s == 0 {
		return
	}
	work := make([]float64, min(rows, predictBlock)*s)
	r := blas64.Triangular{Uplo: blas.Upper, Diag: blas.NonUnit, N: s, Stride: s, Data: p.R}
	for lo := 0; lo < rows; lo += predictBlock {
		b := min(predictBlock, rows-lo)
		for i := range b {
			zt, wt := z[(lo+i)*s:(lo+i+1)*s], work[i*s:(i+1)*s]
			for j := range wt {
				wt[j] = p.SqrtH[j] * zt[j]
			}
		}
		linalg.Trsm(blas.Right, blas.NoTrans, 1, r, blas64.General{Rows: b, Cols: s, Stride: s, Data: work[:b*s]})
		for i := range b {
			w := work[i*s : (i+1)*s]
			latentVar[lo+i] = p.SF2 * dot(w, w)
		}
	}
}

func dot(a, b []float64) float64 {
	return blas64.Dot(blas64.Vector{N: len(a), Inc: 1, Data: a}, blas64.Vector{N: len(b), Inc: 1, Data: b})
}
