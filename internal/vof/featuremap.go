package vof

import (
	"fmt"
	"math"

	"github.com/gpreduce/gpreduce/internal/features"
	"github.com/gpreduce/gpreduce/internal/kernel"
)

// FeatureMap evaluates the cross-covariance k = Kuf[:, x] of a VOF model at fixed
// hyperparameters, in closed form (Hermite) or by a deterministic quadrature (TrigVOF).
type FeatureMap interface {
	// NumFeatures is M.
	NumFeatures() int
	// NumShape is the number of shape directions of the derivatives: 2d, the d log
	// lengthscales then the d log feature parameters (the kernel variances enter as sqrt(v_c)
	// factors and are differentiated in closed form).
	NumShape() int
	// Eval writes Kuf[:, x] into k (length M) and, if dk is not nil, dKuf[:, x]/dtheta_p
	// into dk[p*M : (p+1)*M] for the NumShape directions.
	Eval(x []float64, k, dk []float64)
}

// NewFeatureMap returns the feature map of the model at p: the closed-form Hermite features
// (Section 3.1.1), or the TrigVOF features computed by a Gauss-Legendre rule of quadNodes nodes
// per input on [-a, a] (Section 4.3's deterministic prediction rule; the paper names
// Gauss-Hermite, Gauss-Legendre fits the integrand's support). quadNodes <= 0 chooses
// TrigQuadNodes for inputs bounded by xmax in absolute value.
func NewFeatureMap(mod Model, p *Params, quadNodes int, xmax float64) (FeatureMap, error) {
	M, err := mod.Check(p)
	if err != nil {
		return nil, err
	}
	if mod.Basis == Hermite {
		for k := 0; k < mod.Dim; k++ {
			if err := features.HermiteVOFCheck(p.Lengthscales[k], p.Feature[k]); err != nil {
				return nil, fmt.Errorf("input %d: %w", k, err)
			}
		}
		return &hermiteMap{mod: mod, lay: mod.Layout(), p: p, M: M}, nil
	}
	if quadNodes <= 0 {
		quadNodes = TrigQuadNodes(mod.M1, p.Feature, xmax)
	}
	return newTrigQuadMap(mod, p, M, quadNodes)
}

// hermiteMap is the closed-form Hermite VOF cross-covariance, tensor or additive.
type hermiteMap struct {
	mod Model
	lay features.VOFLayout
	p   *Params
	M   int
}

func (h *hermiteMap) NumFeatures() int { return h.M }
func (h *hermiteMap) NumShape() int    { return 2 * h.mod.Dim }

func (h *hermiteMap) Eval(x []float64, k, dk []float64) {
	d, M1 := h.mod.Dim, h.mod.M1
	val := make([]float64, d*M1)
	var dl, ds []float64
	if dk != nil {
		dl = make([]float64, d*M1)
		ds = make([]float64, d*M1)
	}
	for i := 0; i < d; i++ {
		var a, b []float64
		if dk != nil {
			a, b = dl[i*M1:(i+1)*M1], ds[i*M1:(i+1)*M1]
		}
		features.HermiteVOF1D(h.p.Lengthscales[i], h.p.Feature[i], x[i], val[i*M1:(i+1)*M1], a, b)
	}
	M := h.M
	if h.mod.Additive {
		for c := 0; c < d; c++ {
			sv := math.Sqrt(h.p.Variances[c])
			for j := 0; j < M1; j++ {
				k[c*M1+j] = sv * val[c*M1+j]
			}
			if dk != nil {
				for p := 0; p < 2*d; p++ {
					clear(dk[p*M+c*M1 : p*M+(c+1)*M1])
				}
				for j := 0; j < M1; j++ {
					dk[c*M+c*M1+j] = sv * dl[c*M1+j]
					dk[(d+c)*M+c*M1+j] = sv * ds[c*M1+j]
				}
			}
		}
		return
	}
	sv := math.Sqrt(h.p.Variances[0])
	idx := make([]int, d)
	for j := 0; j < M; j++ {
		h.lay.Multi(j, idx)
		prod := sv
		for i := 0; i < d; i++ {
			prod *= val[i*M1+idx[i]]
		}
		k[j] = prod
		if dk == nil {
			continue
		}
		for q := 0; q < d; q++ {
			pl, ps := sv, sv
			for i := 0; i < d; i++ {
				if i == q {
					pl *= dl[i*M1+idx[i]]
					ps *= ds[i*M1+idx[i]]
				} else {
					pl *= val[i*M1+idx[i]]
					ps *= val[i*M1+idx[i]]
				}
			}
			dk[q*M+j] = pl
			dk[(d+q)*M+j] = ps
		}
	}
}

// TrigQuadNodes is the default Gauss-Legendre node count per input for TrigVOF features of
// M1 = 2K+1 functions on [-a_k, a_k] at inputs |x| <= xmax: the integrand oscillates with
// frequency up to pi K / a in w (the basis) plus xmax (the feature), so it holds at most
// K + a xmax / pi periods over [-a, a]; the rule resolves 2 nodes per period beyond a floor of 32,
// which a Gauss rule integrates to rounding level for such band-limited integrands.
func TrigQuadNodes(M1 int, a []float64, xmax float64) int {
	K := (M1 - 1) / 2
	amax := 0.0
	for _, v := range a {
		amax = math.Max(amax, v)
	}
	periods := float64(K) + amax*math.Abs(xmax)/math.Pi
	return 32 + int(math.Ceil(2*periods))
}

// trigQuadMap is the TrigVOF cross-covariance by a Gauss-Legendre rule on [-a, a]^d (tensor)
// or one rule per component (additive):
//
//	Kuf[j, x] = (2 pi)^(-d/4) Int_{[-a,a]^d} psi_j(w) sqrt(s(w)) trig_j(w.x) dw
//	          = Int psi_j(w) sqrt(v p(w)) trig_j(w.x) dw,
//
// (Section 2.3, eq. 8 rescaled by (2 pi)^(-d/4) so that Kuu = I, eq. 17), where
// s(w) = v (2 pi)^(d/2) p(w) with p the normalised spectral density of internal/kernel, and
// trig_j is cos for even features and sin for odd ones. With w = a xi and psi_j(w) =
// prod a_k^(-1/2) psihat_j(xi), the integral is over xi in [-1, 1]^d.
type trigQuadMap struct {
	mod Model
	lay features.VOFLayout
	p   *Params
	M   int
	// Per component (one for the tensor layout): nodes xi (Q x dd), base weights
	// prod a^(1/2) omega sqrt(v p(a xi)), dlogp/dlog l (Q x dd), and psihat (Mc x Q).
	comps []trigQuadComp
}

type trigQuadComp struct {
	dd, Q, Mc int
	dims      []int // the inputs this component covers
	off       int   // first feature
	xi, base  []float64
	dlp       []float64
	psi       []float64
	parity    []int
}

func newTrigQuadMap(mod Model, p *Params, M, Q int) (*trigQuadMap, error) {
	nodes, weights, err := features.GaussLegendre(Q)
	if err != nil {
		return nil, fmt.Errorf("TrigVOF quadrature: %w", err)
	}
	t := &trigQuadMap{mod: mod, lay: mod.Layout(), p: p, M: M}
	if mod.Additive {
		for c := 0; c < mod.Dim; c++ {
			sub := Model{Basis: Trig, Family: mod.Family, Dim: 1, M1: mod.M1}
			comp, err := buildTrigQuadComp(sub, []float64{p.Lengthscales[c]}, p.Variances[c], []float64{p.Feature[c]}, nodes, weights)
			if err != nil {
				return nil, err
			}
			comp.dims = []int{c}
			comp.off = c * mod.M1
			t.comps = append(t.comps, comp)
		}
		return t, nil
	}
	comp, err := buildTrigQuadComp(mod, p.Lengthscales, p.Variances[0], p.Feature, nodes, weights)
	if err != nil {
		return nil, err
	}
	comp.dims = make([]int, mod.Dim)
	for i := range comp.dims {
		comp.dims[i] = i
	}
	t.comps = []trigQuadComp{comp}
	return t, nil
}

// maxQuadPoints bounds the tensor quadrature grid Q^d.
const maxQuadPoints = 1 << 20

func buildTrigQuadComp(mod Model, ls []float64, v float64, a []float64, nodes, weights []float64) (trigQuadComp, error) {
	d, Q1 := mod.Dim, len(nodes)
	Q := 1
	for i := 0; i < d; i++ {
		Q *= Q1
		if Q > maxQuadPoints {
			return trigQuadComp{}, fmt.Errorf("TrigVOF quadrature: %d nodes per input in %d inputs exceed %d points: use fewer features, a smaller a, or the additive layout", Q1, d, maxQuadPoints)
		}
	}
	lay := mod.Layout()
	Mc, err := lay.NumFeatures()
	if err != nil {
		return trigQuadComp{}, err
	}
	c := trigQuadComp{dd: d, Q: Q, Mc: Mc, xi: make([]float64, Q*d), base: make([]float64, Q), dlp: make([]float64, Q*d),
		psi: make([]float64, Mc*Q), parity: make([]int, Mc)}
	sa := 1.0
	for _, ak := range a {
		sa *= math.Sqrt(ak)
	}
	w := make([]float64, d)
	u1 := make([]float64, d*mod.M1)
	idx := make([]int, d)
	for q := 0; q < Q; q++ {
		r := q
		om := sa
		for k := d - 1; k >= 0; k-- {
			i := r % Q1
			r /= Q1
			c.xi[q*d+k] = nodes[i]
			om *= weights[i]
			w[k] = a[k] * nodes[i]
			features.TrigVOFBasis1D(nodes[i], u1[k*mod.M1:(k+1)*mod.M1])
		}
		lp := kernel.LogSpectralDensity(mod.Family, ls, w, c.dlp[q*d:(q+1)*d])
		c.base[q] = om * math.Sqrt(v*math.Exp(lp))
		for j := 0; j < Mc; j++ {
			lay.Multi(j, idx)
			ps := 1.0
			for k := 0; k < d; k++ {
				ps *= u1[k*mod.M1+idx[k]]
			}
			c.psi[j*Q+q] = ps
		}
	}
	for j := 0; j < Mc; j++ {
		c.parity[j] = lay.Parity(j)
	}
	return c, nil
}

func (t *trigQuadMap) NumFeatures() int { return t.M }
func (t *trigQuadMap) NumShape() int    { return 2 * t.mod.Dim }

func (t *trigQuadMap) Eval(x []float64, k, dk []float64) {
	M, d := t.M, t.mod.Dim
	if dk != nil {
		clear(dk[:2*d*M])
	}
	for ci := range t.comps {
		c := &t.comps[ci]
		Q, dd := c.Q, c.dd
		// vec[p][q]: base * trig_p(phase); for derivatives also per local dim.
		nv := 2
		if dk != nil {
			nv = 2 + 4*dd
		}
		vec := make([]float64, nv*Q)
		for q := 0; q < Q; q++ {
			var ph float64
			for kk := 0; kk < dd; kk++ {
				ph += t.p.Feature[c.dims[kk]] * c.xi[q*dd+kk] * x[c.dims[kk]]
			}
			s, co := math.Sincos(ph)
			b := c.base[q]
			vec[q] = b * co
			vec[Q+q] = b * s
			if dk == nil {
				continue
			}
			for kk := 0; kk < dd; kk++ {
				dl := 0.5 * c.dlp[q*dd+kk]
				wx := t.p.Feature[c.dims[kk]] * c.xi[q*dd+kk] * x[c.dims[kk]]
				// lengthscale direction, cos and sin
				vec[(2+4*kk)*Q+q] = b * co * dl
				vec[(3+4*kk)*Q+q] = b * s * dl
				// feature direction (besides the overall 1/2 from sqrt(a)): d/dlog a of
				// sqrt(p(a xi)) and of trig(a xi x); cos' = -sin, sin' = cos.
				vec[(4+4*kk)*Q+q] = b * (co*(dl-0.5) - s*wx)
				vec[(5+4*kk)*Q+q] = b * (s*(dl-0.5) + co*wx)
			}
		}
		for j := 0; j < c.Mc; j++ {
			par := c.parity[j]
			row := c.psi[j*Q : (j+1)*Q]
			var acc float64
			v0 := vec[par*Q : (par+1)*Q]
			for q, ps := range row {
				acc += ps * v0[q]
			}
			jj := c.off + j
			k[jj] = acc
			if dk == nil {
				continue
			}
			for kk := 0; kk < dd; kk++ {
				vl := vec[(2+4*kk+par)*Q : (3+4*kk+par)*Q]
				va := vec[(4+4*kk+par)*Q : (5+4*kk+par)*Q]
				var al, aa float64
				for q, ps := range row {
					al += ps * vl[q]
					aa += ps * va[q]
				}
				dim := c.dims[kk]
				dk[dim*M+jj] = al
				dk[(d+dim)*M+jj] = aa + 0.5*acc
			}
		}
	}
}
