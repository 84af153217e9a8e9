package features

import (
	"fmt"
	"math"

	"github.com/gpreduce/gpreduce/internal/kernel"
)

// MaxGLFeatures is the largest total feature count s = prod_k s_k that NewGL accepts (2^26; the
// s x s Gram matrix alone would need 32 PiB). Practical limits are set by SizeGL's MaxFeatures.
const MaxGLFeatures = 1 << 26

// GL is the Gauss-Legendre feature map of Fink Shustin & Avron 2022 (§4, eqs. 8-11), in a
// real-valued form derived here (the paper's features are complex). Bochner's theorem in the angular convention writes the kernel shape as
//
//	k0(x - x') = Int_{R^d} exp(i (x-x')^T eta) p(eta; l) d eta,
//
// with p the normalised spectral density (kernel.LogSpectralDensity; p is even, so the sign of the
// exponent does not matter). The integral is truncated to
// the box prod_k [-U_k, U_k] and discretised with the tensor product of s_k-point Gauss-Legendre rules
// (chi^(s_k), w^(s_k)):
//
//	eta_hat_{j_1..j_d} = (U_1 chi_{j_1}, ..., U_d chi_{j_d}),   W_{j_1..j_d} = prod_k U_k w_{j_k},
//
// with the s = prod_k s_k multi-indices flattened in row-major lexicographic order (the last
// dimension varies fastest). The GL rule is symmetric, so reversing every index of a multi-index
// (flat index t -> s-1-t) maps eta to -eta with the same weight, and p is even. Each pair
// {eta, -eta} therefore contributes W p(eta) 2 cos((x-x')^T eta), which splits into real features:
// the R = floor(s/2) representatives are the first R flat indices, and
//
//	z_{2r}(x) = cos(x^T eta_r),  z_{2r+1}(x) = sin(x^T eta_r),  with quadrature weight 2 W_r,   r < R,
//	z_{s-1}(x) = 1 (only if s is odd; its node is eta = 0, the middle of the grid), weight W_R.
//
// With h_j = quadrature weight_j * p(eta_j; l) (LogWeights) the approximate kernel is
//
//	k~(x, x') = sigma_f^2 sum_{j<s} h_j z_j(x) z_j(x'),
//
// which equals sigma_f^2 times the complex quadrature sum sum_t W_t p(eta_t) exp(i (x-x')^T eta_t)
// in exact arithmetic (and to rounding in practice). The features never depend on the lengthscales; only the weights h_j do.
//
// A GL is read-only after NewGL and safe for concurrent use. The exported fields are the
// description of the map and must not be modified.
type GL struct {
	// Family is the kernel family whose spectral density weights the features.
	Family kernel.Family
	// U holds the box half-widths U_k, in angular frequency units (radians per unit of the
	// standardized input).
	U []float64
	// NodesPerDim holds the per-dimension node counts s_k.
	NodesPerDim []int
	// Eta holds the representative frequencies eta_r, r < R = floor(s/2), row-major R x d.
	Eta []float64
	// LogQuad holds the log quadrature weight of each real feature (length s): log(2 W_r) for
	// features 2r and 2r+1, log W_R for the constant feature of an odd grid.
	LogQuad []float64

	d, s, r int
	axis    [][]float64 // axis[k][j] = U_k chi_j^(s_k), bitwise antisymmetric in j
	lastOut int         // number of outer (dims 0..d-2) multi-indices touched by the first R flat indices
}

// NewGL builds the Gauss-Legendre feature map for family f on the box prod_k [-U_k, U_k] with
// nodesPerDim[k] = s_k nodes in dimension k. It fails if the lengths differ or are zero, if a U_k is
// not positive and finite, if an s_k is below 1 or above MaxGaussLegendrePoints, or if
// s = prod_k s_k exceeds MaxGLFeatures. The slices are copied.
func NewGL(f kernel.Family, U []float64, nodesPerDim []int) (*GL, error) {
	if err := checkFamily(f); err != nil {
		return nil, err
	}
	d := len(U)
	if d == 0 {
		return nil, fmt.Errorf("gl features: U is empty: need one box half-width per input dimension")
	}
	if len(nodesPerDim) != d {
		return nil, fmt.Errorf("gl features: %d box half-widths U but %d node counts: need one of each per input dimension", d, len(nodesPerDim))
	}
	s := 1
	for k := 0; k < d; k++ {
		if !(U[k] > 0) || math.IsInf(U[k], 0) {
			return nil, fmt.Errorf("gl features: U[%d] = %v: box half-widths must be positive and finite", k, U[k])
		}
		n := nodesPerDim[k]
		if n < 1 || n > MaxGaussLegendrePoints {
			return nil, fmt.Errorf("gl features: nodesPerDim[%d] = %d: node counts must be between 1 and %d", k, n, MaxGaussLegendrePoints)
		}
		if s > MaxGLFeatures/n {
			return nil, fmt.Errorf("gl features: nodes per dimension %v give more than %d features (the limit of NewGL)", nodesPerDim, MaxGLFeatures)
		}
		s *= n
	}
	g := &GL{
		Family:      f,
		U:           append([]float64(nil), U...),
		NodesPerDim: append([]int(nil), nodesPerDim...),
		d:           d,
		s:           s,
		r:           s / 2,
		axis:        make([][]float64, d),
	}
	logw := make([][]float64, d)
	rules := map[int][2][]float64{}
	for k, n := range nodesPerDim {
		rule, ok := rules[n]
		if !ok {
			x, w, err := GaussLegendre(n)
			if err != nil {
				return nil, err
			}
			rule = [2][]float64{x, w}
			rules[n] = rule
		}
		g.axis[k] = make([]float64, n)
		logw[k] = make([]float64, n)
		logU := math.Log(U[k])
		for j := 0; j < n; j++ {
			g.axis[k][j] = U[k] * rule[0][j] // exact negation commutes with rounding: stays antisymmetric
			logw[k][j] = logU + math.Log(rule[1][j])
		}
	}
	last := nodesPerDim[d-1]
	g.lastOut = (g.r + last - 1) / last
	g.Eta = make([]float64, g.r*d)
	g.LogQuad = make([]float64, s)
	idx := make([]int, d)          // odometer over multi-indices in row-major order
	for t := 0; t < g.r+s%2; t++ { // the representatives, then the middle node if s is odd
		var lw float64
		for k := 0; k < d; k++ {
			lw += logw[k][idx[k]]
		}
		if t < g.r {
			for k := 0; k < d; k++ {
				g.Eta[t*d+k] = g.axis[k][idx[k]]
			}
			g.LogQuad[2*t] = lw + math.Ln2
			g.LogQuad[2*t+1] = lw + math.Ln2
		} else { // t == R with s odd: the middle node eta = 0
			g.LogQuad[s-1] = lw
		}
		for k := d - 1; k >= 0; k-- {
			idx[k]++
			if idx[k] < nodesPerDim[k] {
				break
			}
			idx[k] = 0
		}
	}
	return g, nil
}

func checkFamily(f kernel.Family) error {
	switch f {
	case kernel.RBF, kernel.Matern12, kernel.Matern32, kernel.Matern52:
		return nil
	}
	return fmt.Errorf("features: unknown kernel family %v", f)
}

// NumFeatures is the number of real features s = prod_k s_k.
func (g *GL) NumFeatures() int { return g.s }

// Dim is the input dimension d.
func (g *GL) Dim() int { return g.d }

// glWork is the per-call scratch of the tensor-product evaluation.
type glWork struct {
	c, sn      [][]float64 // per dimension: cos and sin of x_k U_k chi_j
	ore, oim   []float64   // outer products over dimensions 0..d-2
	tre, tim   []float64   // double buffer for building them
	outerSizes []int
}

func (g *GL) newWork() *glWork {
	w := &glWork{c: make([][]float64, g.d), sn: make([][]float64, g.d)}
	outer := 1
	for k, n := range g.NodesPerDim {
		w.c[k] = make([]float64, n)
		w.sn[k] = make([]float64, n)
		if k < g.d-1 {
			outer *= n
		}
	}
	w.ore, w.oim = make([]float64, outer), make([]float64, outer)
	w.tre, w.tim = make([]float64, outer), make([]float64, outer)
	return w
}

// Map writes the s real features z(x) of one input x (length d) into dst (length >= s). It panics
// if a slice is too short.
func (g *GL) Map(x, dst []float64) {
	if len(x) != g.d || len(dst) < g.s {
		panic(fmt.Sprintf("gl features: Map with len(x) = %d, len(dst) = %d; need %d and >= %d", len(x), len(dst), g.d, g.s))
	}
	g.mapRow(x, dst, g.newWork())
}

// MapBlock writes the features of rows inputs: x is rows x d row-major, dst rows x s row-major,
// dst[i*s+j] = z_j(x_i). It panics if a slice is too short.
//
// The features are evaluated through the tensor structure: exp(i x^T eta) = prod_k exp(i x_k U_k chi_{j_k}),
// so a row costs sum_k ceil(s_k/2) sincos evaluations (the mirrored nodes give complex conjugates)
// plus about s/2 complex multiplications, instead of s/2 sincos of x^T eta_r. The results agree with
// cos/sin(x^T eta_r) to a few units of rounding in the phase.
func (g *GL) MapBlock(x []float64, rows int, dst []float64) {
	if rows < 0 || len(x) < rows*g.d || len(dst) < rows*g.s {
		panic(fmt.Sprintf("gl features: MapBlock with %d rows, len(x) = %d, len(dst) = %d; need >= %d and >= %d", rows, len(x), len(dst), rows*g.d, rows*g.s))
	}
	w := g.newWork()
	d, s := g.d, g.s
	for i := 0; i < rows; i++ {
		g.mapRow(x[i*d:(i+1)*d], dst[i*s:(i+1)*s], w)
	}
}

func (g *GL) mapRow(x, dst []float64, w *glWork) {
	d := g.d
	// Per-dimension factors exp(i x_k U_k chi_j); nodes are mirrored, so the upper half is the conjugate.
	for k := 0; k < d; k++ {
		ax, c, sn := g.axis[k], w.c[k], w.sn[k]
		n := len(ax)
		xk := x[k]
		h := (n + 1) / 2
		for j := 0; j < h; j++ {
			sj, cj := math.Sincos(xk * ax[j])
			c[j], sn[j] = cj, sj
		}
		for j := h; j < n; j++ {
			c[j], sn[j] = c[n-1-j], -sn[n-1-j]
		}
	}
	// Outer products over dimensions 0..d-2, in row-major order.
	ore, oim := w.ore[:1], w.oim[:1]
	ore[0], oim[0] = 1, 0
	for k := 0; k < d-1; k++ {
		c, sn := w.c[k], w.sn[k]
		n := len(c)
		m := len(ore)
		tre, tim := w.tre[:m*n], w.tim[:m*n]
		for o := 0; o < m; o++ {
			a, b := ore[o], oim[o]
			base := o * n
			for j := 0; j < n; j++ {
				tre[base+j] = a*c[j] - b*sn[j]
				tim[base+j] = a*sn[j] + b*c[j]
			}
		}
		// swap buffers
		w.ore, w.tre = w.tre, w.ore
		w.oim, w.tim = w.tim, w.oim
		ore, oim = tre, tim
	}
	// Last dimension: only the first R flat indices are needed.
	c, sn := w.c[d-1], w.sn[d-1]
	n := len(c)
	R := g.r
	if d == 1 {
		copyInterleaved(dst, c[:R], sn[:R])
	} else {
		for o := 0; o < g.lastOut; o++ {
			a, b := ore[o], oim[o]
			base := o * n
			cnt := n
			if base+cnt > R {
				cnt = R - base
			}
			out := dst[2*base : 2*(base+cnt)]
			cc, ss := c[:cnt], sn[:cnt]
			for j, cv := range cc {
				sv := ss[j]
				o := out[2*j : 2*j+2]
				o[0] = a*cv - b*sv
				o[1] = a*sv + b*cv
			}
		}
	}
	if g.s%2 == 1 {
		dst[g.s-1] = 1
	}
}

func copyInterleaved(dst, re, im []float64) {
	out := dst[:2*len(re)]
	im = im[:len(re)]
	for j, v := range re {
		o := out[2*j : 2*j+2]
		o[0], o[1] = v, im[j]
	}
}

// LogWeights writes the log feature weights for lengthscales ls (length d, positive):
//
//	log h_j = LogQuad_j + log p(eta_j; ls),
//
// where eta_j is the representative eta_{floor(j/2)} (eta = 0 for the constant feature of an odd
// grid) and p is kernel.LogSpectralDensity. logh must have length >= s. If dlogh is not nil
// (length >= s*d) it receives dlogh[j*d+k] = d log h_j / d log l_k = d log p(eta_j; ls) / d log l_k,
// e.g. 1 - l_k^2 eta_{jk}^2 for RBF. Everything is in log space: tail weights that would underflow
// are merely very negative, never -Inf or NaN. It panics on wrong lengths or a lengthscale that is not
// positive and finite.
func (g *GL) LogWeights(ls []float64, logh []float64, dlogh []float64) {
	d, s := g.d, g.s
	if len(ls) != d || len(logh) < s || (dlogh != nil && len(dlogh) < s*d) {
		panic(fmt.Sprintf("gl features: LogWeights with len(ls) = %d, len(logh) = %d, len(dlogh) = %d; need %d, >= %d, >= %d", len(ls), len(logh), len(dlogh), d, s, s*d))
	}
	for k, l := range ls {
		if !(l > 0) || math.IsInf(l, 0) {
			panic(fmt.Sprintf("gl features: LogWeights with lengthscale %d = %v: it must be positive and finite", k, l))
		}
	}
	for r := 0; r < g.r; r++ {
		var gr []float64
		if dlogh != nil {
			gr = dlogh[2*r*d : (2*r+1)*d]
		}
		lp := kernel.LogSpectralDensity(g.Family, ls, g.Eta[r*d:(r+1)*d], gr)
		logh[2*r] = g.LogQuad[2*r] + lp
		logh[2*r+1] = g.LogQuad[2*r+1] + lp
		if dlogh != nil {
			copy(dlogh[(2*r+1)*d:(2*r+2)*d], gr)
		}
	}
	if s%2 == 1 {
		var gr []float64
		if dlogh != nil {
			gr = dlogh[(s-1)*d : s*d]
		}
		lp := kernel.LogSpectralDensity(g.Family, ls, make([]float64, d), gr)
		logh[s-1] = g.LogQuad[s-1] + lp
	}
}
