package features

import (
	"fmt"
	"math"
)

// GRIEFGrad evaluates the derivatives of a GRIEF map's features in its log lengthscales with
// the selection S_p (GRIEF.Idx) held fixed: the gradient of the smooth piece of GRIEF-II's
// objective (Evans & Nair 2018, §6: theta learned with w = 1), whose selection changes only
// where two product eigenvalues cross.
//
// With F_{i,a}(x) = B_{i,a}(x) / sqrt(lambda^(i)_a), B_{i,a}(x) = k_i(x_i, grid_i) q^(i)_a
// (Theorem 2 of GP-GRIEF), a feature is phi_k(x) = prod_i F_{i,Idx[k,i]}(x), and only the
// factor of dimension i depends on l_i:
//
//	dphi_k/dlog l_i = phi_k(x) * rho_{i,a}(x),   a = Idx[k,i],
//	rho_{i,a}(x)    = dB_{i,a}/dlog l_i / B_{i,a} - 1/2 dlog lambda^(i)_a/dlog l_i,
//	dB_{i,a}        = (dk_i(x_i, grid_i)) q^(i)_a + k_i(x_i, grid_i) dq^(i)_a.
//
// The 1-D eigenpair derivatives are first-order perturbation theory of the symmetric
// K_UU^(i) (the jitter does not depend on l_i):
//
//	dlambda_a = q_a^T dK q_a,   dq_a = sum_{e != a} q_e (q_e^T dK q_a) / (lambda_a - lambda_e),
//
// with dK = dK_UU^(i)/dlog l_i. Pairs closer than griefGapTol times the factor variance (both
// eigenvalues then sit near the jitter floor, where the eigenvectors are not determined) are
// left out of the sum, and an eigenvalue raised to the jitter floor by NewGRIEF has derivative
// 0. A GRIEFGrad is not safe for concurrent use.
type GRIEFGrad struct {
	g       *GRIEF
	dQ      [][]float64 // per dimension, m_i x m_i row-major like GRIEF.Q
	dLogLam [][]float64 // per dimension, m_i
	w       *griefWork
	dkv     [][]float64 // per dimension: dk_i(x_i, grid_i[a]) / dlog l_i
	rho     [][]float64 // per dimension and used column: rho_{i,a}(x)
	dB      [][]float64 // per dimension and used column: dB_{i,a}(x)
	grad    []float64   // scratch for the 1-D kernel gradient
	wk      []float64   // scratch, length p: z_k phi_k of the current row
}

// griefGapTol: eigenvalue pairs of one dimension closer than this fraction of the factor
// variance are treated as degenerate in the eigenvector derivative (GRIEFGrad).
const griefGapTol = 1e-10

// NewGRIEFGrad prepares the lengthscale derivatives of g's features. It fails when g does not
// validate.
func NewGRIEFGrad(g *GRIEF) (*GRIEFGrad, error) {
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("grief gradient: %w", err)
	}
	d := g.Dim()
	c := math.Pow(g.SignalVariance, 1/float64(d))
	jit := GRIEFJitter * c
	gg := &GRIEFGrad{g: g, dQ: make([][]float64, d), dLogLam: make([][]float64, d), w: g.newWork(),
		dkv: make([][]float64, d), rho: make([][]float64, d), dB: make([][]float64, d), grad: make([]float64, 2), wk: make([]float64, g.NumFeatures())}
	for i := 0; i < d; i++ {
		ax, q := g.Grid[i], g.Q[i]
		m := len(ax)
		k1 := newKernel1(g.Family, g.Lengthscales[i], c)
		dK := make([]float64, m*m)
		for a := 0; a < m; a++ {
			for b := 0; b < m; b++ {
				dK[a*m+b] = k1.evalGrad(ax[a], ax[b], gg.grad)
			}
		}
		lam := make([]float64, m)
		for b := range lam {
			lam[b] = math.Exp(g.LogLam[i][b])
		}
		// H = Q^T dK Q, the perturbation in the eigenbasis.
		dKQ := make([]float64, m*m)
		for a := 0; a < m; a++ {
			for b := 0; b < m; b++ {
				var s float64
				for e := 0; e < m; e++ {
					s += dK[a*m+e] * q[e*m+b]
				}
				dKQ[a*m+b] = s
			}
		}
		H := make([]float64, m*m)
		for a := 0; a < m; a++ {
			for b := 0; b < m; b++ {
				var s float64
				for e := 0; e < m; e++ {
					s += q[e*m+a] * dKQ[e*m+b]
				}
				H[a*m+b] = s
			}
		}
		dll, dq := make([]float64, m), make([]float64, m*m)
		for a := 0; a < m; a++ {
			if lam[a] > jit*(1+1e-9) {
				dll[a] = H[a*m+a] / lam[a]
			}
			for e := 0; e < m; e++ {
				gap := lam[a] - lam[e]
				if e == a || math.Abs(gap) <= griefGapTol*c {
					continue
				}
				coef := H[e*m+a] / gap
				for r := 0; r < m; r++ {
					dq[r*m+a] += coef * q[r*m+e]
				}
			}
		}
		gg.dQ[i], gg.dLogLam[i] = dq, dll
		gg.dkv[i] = make([]float64, m)
		gg.rho[i] = make([]float64, len(gg.w.cols[i]))
		gg.dB[i] = make([]float64, len(gg.w.cols[i]))
	}
	return gg, nil
}

// evalGrad returns dk(a, b)/dlog l of the 1-D factor.
func (k *kernel1) evalGrad(a, b float64, grad []float64) float64 {
	k.a[0], k.b[0] = a, b
	k.k.EvalGrad(k.a, k.b, grad)
	return grad[0]
}

// Accumulate adds to acc (length d) the contraction of the feature derivatives with z over a
// block of rows:
//
//	acc[i] += sum_j sum_k z[j*p+k] dphi_k(x_j)/dlog l_i,
//
// where x is rows x d row-major (standardized inputs), phi the block's features from MapBlock
// (rows x p) and z rows x p. Rows and features are summed in a fixed order, so the result
// depends only on the arguments. It panics if a slice is too short.
func (gg *GRIEFGrad) Accumulate(x []float64, rows int, phi, z, acc []float64) {
	g := gg.g
	d, p := g.Dim(), g.NumFeatures()
	if rows < 0 || len(x) < rows*d || len(phi) < rows*p || len(z) < rows*p || len(acc) < d {
		panic(fmt.Sprintf("grief gradient: Accumulate with %d rows, len(x) = %d, len(phi) = %d, len(z) = %d, len(acc) = %d", rows, len(x), len(phi), len(z), len(acc)))
	}
	for j := 0; j < rows; j++ {
		gg.row(x[j*d:(j+1)*d], phi[j*p:(j+1)*p], z[j*p:(j+1)*p], acc, false)
	}
}

// row adds one row's contraction to acc; termwise forces the term-by-term form that rows
// with a zero factor need (for tests).
func (gg *GRIEFGrad) row(x, phi, z, acc []float64, termwise bool) {
	g, w := gg.g, gg.w
	d, p := g.Dim(), g.NumFeatures()
	zero := termwise
	for i := 0; i < d; i++ {
		ax, kv, dkv := g.Grid[i], w.kv[i], gg.dkv[i]
		m := len(ax)
		for a, u := range ax {
			dkv[a] = w.k1[i].evalGrad(x[i], u, gg.grad)
			kv[a] = w.k1[i].eval(x[i], u)
		}
		q, dq := g.Q[i], gg.dQ[i]
		for c, col := range w.cols[i] {
			var b, db float64
			for a := 0; a < m; a++ {
				b += kv[a] * q[a*m+col]
				db += dkv[a]*q[a*m+col] + kv[a]*dq[a*m+col]
			}
			gg.dB[i][c] = db
			switch {
			case b > 0:
				w.sign[i][c], w.logAbs[i][c] = 1, math.Log(b)
			case b < 0:
				w.sign[i][c], w.logAbs[i][c] = -1, math.Log(-b)
			default:
				w.sign[i][c], w.logAbs[i][c] = 0, 0
				zero = true
			}
			if b != 0 {
				gg.rho[i][c] = db/b - 0.5*gg.dLogLam[i][col]
			}
		}
	}
	if !zero {
		// A dimension with one used column has the same rho for every feature: its sum is
		// rho times sum_k z_k phi_k.
		// Each acc[i] sums its features in order k = 0..p-1, skipping those with z_k phi_k =
		// 0 as the term-by-term form does; two dimensions at a time keep two independent sums
		// in flight.
		wk := gg.wk[:p]
		var sw float64
		for k := range p {
			wk[k] = z[k] * phi[k]
			sw += wk[k]
		}
		v := 0
		for ; v+1 < len(w.vary); v += 2 {
			i, j := w.vary[v], w.vary[v+1]
			ra, pa := gg.rho[i], w.posT[v][:p]
			rb, pb := gg.rho[j], w.posT[v+1][:p]
			sa, sb := acc[i], acc[j]
			for k, ca := range pa {
				if wv := wk[k]; wv != 0 { // an underflowed feature: its rho may not be finite
					sa += wv * ra[ca]
					sb += wv * rb[pb[k]]
				}
			}
			acc[i], acc[j] = sa, sb
		}
		if v < len(w.vary) {
			i := w.vary[v]
			ra, pa := gg.rho[i], w.posT[v][:p]
			sa := acc[i]
			for k, ca := range pa {
				if wv := wk[k]; wv != 0 {
					sa += wv * ra[ca]
				}
			}
			acc[i] = sa
		}
		for i := 0; i < d; i++ {
			if len(w.cols[i]) == 1 {
				acc[i] += sw * gg.rho[i][0]
			}
		}
		return
	}
	// A factor B_{i,a}(x) is exactly 0 (a measure-zero event, or an underflowed kernel row):
	// the features through it are 0 but their derivative in l_i is the product of the other
	// factors times dB_{i,a}, formed here term by term.
	for k := 0; k < p; k++ {
		if z[k] == 0 {
			continue
		}
		pos := w.pos[k*d : (k+1)*d]
		for i, c := range pos {
			var dphi float64
			if w.sign[i][c] != 0 {
				dphi = phi[k] * gg.rho[i][c]
			} else {
				s, l := 1.0, -0.5*g.LogLamP[k]
				for i2, c2 := range pos {
					if i2 == i {
						continue
					}
					s *= w.sign[i2][c2]
					l += w.logAbs[i2][c2]
				}
				if s != 0 {
					dphi = s * math.Exp(l) * gg.dB[i][c]
				}
			}
			acc[i] += z[k] * dphi
		}
	}
}
