package features

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/linalg"
)

// GRIEFJitter is the relative diagonal jitter of the 1-D inducing kernel matrices: NewGRIEF
// factorises K_UU^(i) + GRIEFJitter * max_a [K_UU^(i)]_aa * I (the Kronecker
// eigendecomposition of Evans & Nair 2018, §4; the jitter is not in the paper: the authors' code
// adds 1e-12, because the smallest 1-D eigenvalues of an SE kernel round to zero or below).
// Since K_UU^(i) is positive semi-definite, every eigenvalue of
// the jittered matrix is at least the jitter in exact arithmetic, so its logarithm exists.
const GRIEFJitter = 1e-12

// GRIEFGrid places the Cartesian inducing grid of GP-GRIEF (Evans & Nair 2018, §4 and its
// footnote 1, which give no placement rule; this one follows the authors' code), one axis per
// input column i:
//
//	m_i = min(mbar, #distinct values of column i),
//	grid_i = the distinct values themselves                       if #distinct_i <= mbar,
//	grid_i = { min_i + j (max_i - min_i) / (mbar - 1) : j < mbar }  otherwise (linspace),
//
// so binary and categorical columns get exactly their levels. distinct[i] holds the sorted
// distinct values of column i, at most mbar+1 of them: more than mbar values means "many"
// (reduce.Distinct with Cap >= mbar provides it). With mbar = 1 and a continuous column the single
// point is the midpoint (min_i + max_i)/2. min and max are the column extremes (reduce.Moments).
//
// It fails if the lengths differ or are zero, if mbar < 1, if a column has no values, if a
// bound is not finite or min_i > max_i, or if a short distinct list is not strictly increasing.
// The result never aliases the arguments.
func GRIEFGrid(min, max []float64, distinct [][]float64, mbar int) ([][]float64, error) {
	d := len(min)
	if d == 0 {
		return nil, fmt.Errorf("grief grid: no columns")
	}
	if len(max) != d || len(distinct) != d {
		return nil, fmt.Errorf("grief grid: %d minima, %d maxima and %d distinct lists: need one of each per column", d, len(max), len(distinct))
	}
	if mbar < 1 {
		return nil, fmt.Errorf("grief grid: mbar = %d: need at least one grid point per dimension", mbar)
	}
	grid := make([][]float64, d)
	for i := 0; i < d; i++ {
		lo, hi := min[i], max[i]
		if math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) || lo > hi {
			return nil, fmt.Errorf("grief grid: column %d has range [%v, %v]: need finite bounds with min <= max", i, lo, hi)
		}
		dv := distinct[i]
		if len(dv) == 0 {
			return nil, fmt.Errorf("grief grid: column %d has no values", i)
		}
		if len(dv) <= mbar {
			for j, v := range dv {
				if math.IsNaN(v) || math.IsInf(v, 0) || (j > 0 && !(v > dv[j-1])) {
					return nil, fmt.Errorf("grief grid: distinct values of column %d are not finite and strictly increasing at %d", i, j)
				}
			}
			grid[i] = slices.Clone(dv)
			continue
		}
		g := make([]float64, mbar)
		if mbar == 1 {
			g[0] = lo + (hi-lo)/2
		} else {
			step := (hi - lo) / float64(mbar-1)
			for j := range g {
				g[j] = lo + float64(j)*step
			}
			g[mbar-1] = hi
		}
		grid[i] = g
	}
	return grid, nil
}

// GRIEFTailRatio is the heavy-tail test of GRIEFKMeansAxes: a continuous column is heavy-tailed
// when its range exceeds GRIEFTailRatio times the spread of its central 80% of rows,
//
//	max_i - min_i > GRIEFTailRatio (Q_i(0.9) - Q_i(0.1)).
//
// At 5 the evenly spaced 10-point axis of GRIEFGrid has fewer than two of its nine intervals
// where 80% of the rows lie. A uniform column has the ratio 1.25 and a normal one about 3.4 at
// 45,000 rows, so both keep the even axis; a log-normal exp(0.9 z) column has about 11 and
// count or degree columns far more.
const GRIEFTailRatio = 5.0

// GRIEFKMeansAxes places the axes of heavy-tailed columns where the rows are. GP-GRIEF's
// inducing points are meant to follow the training inputs' distribution (Evans & Nair 2018, §4,
// footnote 1, which leaves the means open); GRIEFGrid's even axis is the authors' default, and
// on a column whose bulk lies in a small part of its range it leaves most points where no row is
// and too few to resolve the lengthscales the data need. The authors' code's other placement is
// 1-D k-means per column, and that is what this does. For each axis i of grid with m >= 3 points
// whose column is heavy-tailed,
//
//	max_i - min_i > ratio (Q_i(0.9) - Q_i(0.1))    (ratio = GRIEFTailRatio by default; 0 moves
//	                                                 every such axis),
//
// where sorted[i] holds the column's values in a sample of rows, ascending, in the grid's units,
// and Q_i is the sample's quantile function (linear interpolation between order statistics,
// Hyndman & Fan type 7), the axis becomes the 1-D k-means centres of the sample with its end
// points min_i, max_i (the column's extremes over all rows) held fixed, so that the axis still
// spans the data: Lloyd's algorithm (lloyd1D) from the quantiles
//
//	{ min_i } u { Q_i(j/(m-1)) : 0 < j < m-1 } u { max_i }.
//
// k-means centres have a density of about p(x)^(1/3) for an input density p (quantisation
// theory), between the even axis (p^0) and the quantiles (p^1): they follow the bulk and still
// reach into the tail. A point closer than GRIEFMinGap (max_i - min_i)/(m - 1) to the previous
// kept point, or to max_i, is dropped, so a column whose rows mostly share one value gets few
// points and the per-dimension kernel matrix keeps its rank. Axes of two points or fewer, level
// axes (GRIEFGrid's distinct values when the column has at most mbar of them: pass levels[i] =
// true) and axes of other columns are copied unchanged.
//
// It returns the new grid and the indices of the moved axes. It fails if the lengths differ,
// ratio is negative or not finite, or a sample column is empty, unsorted or not finite. The
// arguments are not modified.
func GRIEFKMeansAxes(grid, sorted [][]float64, levels []bool, ratio float64) ([][]float64, []int, error) {
	d := len(grid)
	if len(sorted) != d || len(levels) != d {
		return nil, nil, fmt.Errorf("grief k-means axes: %d axes, %d sample columns and %d level flags: need one of each per column", d, len(sorted), len(levels))
	}
	if !(ratio >= 0) || math.IsInf(ratio, 0) {
		return nil, nil, fmt.Errorf("grief k-means axes: tail ratio %v: need a finite ratio >= 0", ratio)
	}
	out := make([][]float64, d)
	var moved []int
	for i, ax := range grid {
		out[i] = slices.Clone(ax)
		s := sorted[i]
		if len(s) == 0 {
			return nil, nil, fmt.Errorf("grief k-means axes: the sample of column %d is empty", i)
		}
		for j, v := range s {
			if math.IsNaN(v) || math.IsInf(v, 0) || (j > 0 && v < s[j-1]) {
				return nil, nil, fmt.Errorf("grief k-means axes: the sample of column %d is not finite and ascending at %d", i, j)
			}
		}
		m := len(ax)
		if levels[i] || m < 3 {
			continue
		}
		lo, hi := ax[0], ax[m-1]
		if !(hi > lo) || !(hi-lo > ratio*(quantile(s, 0.9)-quantile(s, 0.1))) {
			continue
		}
		gap := GRIEFMinGap * (hi - lo) / float64(m-1)
		c := make([]float64, 0, m)
		for j := 1; j < m-1; j++ {
			c = append(c, quantile(s, float64(j)/float64(m-1)))
		}
		c = spaced(c, lo, hi, gap)
		lloyd1D(c, s, GRIEFLloydIters)
		out[i] = spaced(c[1:len(c)-1], lo, hi, gap)
		moved = append(moved, i)
	}
	return out, moved, nil
}

// spaced returns lo, the ascending interior points that lie at least gap above the previous
// kept point and gap below hi, and hi.
func spaced(interior []float64, lo, hi, gap float64) []float64 {
	q := []float64{lo}
	for _, v := range interior {
		if v-q[len(q)-1] >= gap && hi-v >= gap {
			q = append(q, v)
		}
	}
	return append(q, hi)
}

// GRIEFLloydIters bounds the Lloyd iterations of GRIEFKMeansAxes; they stop earlier when no
// point moves.
const GRIEFLloydIters = 1000

// lloyd1D runs Lloyd's algorithm for 1-D k-means on the ascending sample s from the strictly
// ascending centres c, in place, with c's first and last entries held fixed: each iteration assigns
// every value to its nearest centre (ties to the lower one) and moves each free centre to the
// mean of its values (a centre without values stays). In one dimension the cells are the
// intervals between the midpoints of neighbouring centres, so the centres stay ascending. It
// stops after iters iterations or when an iteration moves no centre.
func lloyd1D(c, s []float64, iters int) {
	sum := make([]float64, len(c))
	cnt := make([]int, len(c))
	for it := 0; it < iters; it++ {
		clear(sum)
		clear(cnt)
		k := 0
		for _, v := range s {
			for k+1 < len(c) && math.Abs(c[k+1]-v) < math.Abs(c[k]-v) {
				k++
			}
			sum[k] += v
			cnt[k]++
		}
		moved := false
		for j := 1; j < len(c)-1; j++ {
			if cnt[j] > 0 {
				if v := sum[j] / float64(cnt[j]); v != c[j] {
					c[j], moved = v, true
				}
			}
		}
		if !moved {
			return
		}
	}
}

// GRIEFMinGap is the smallest spacing GRIEFKMeansAxes keeps between two points of a moved
// axis, as a fraction of the even axis's spacing: nearer points would make the per-dimension
// kernel matrix numerically singular without resolving anything more.
const GRIEFMinGap = 1e-3

// quantile is the type-7 sample quantile of the ascending, non-empty s at probability pr in
// [0, 1]: with h = (len(s) - 1) pr, s[floor h] + (h - floor h)(s[floor h + 1] - s[floor h]).
func quantile(s []float64, pr float64) float64 {
	h := float64(len(s)-1) * pr
	k := int(math.Floor(h))
	if k >= len(s)-1 {
		return s[len(s)-1]
	}
	return s[k] + (h-float64(k))*(s[k+1]-s[k])
}

// GRIEF is the GP-GRIEF feature map (Evans & Nair 2018, §§3-4): the top-p Nystrom
// eigenfunctions of a PRODUCT kernel with inducing points on a Cartesian grid U = grid_1 x ... x grid_d.
//
// The kernel is the product form
//
//	k(x, z) = sf2 prod_i k0_i(x_i, z_i),   k0_i(a, b) = k0(|a - b| / l_i),
//
// with k0 the 1-D shape of Family. For RBF this equals the ARD RBF kernel; for the Matern
// families it is the product of 1-D Materns, which is NOT the (isotropic-distance) ARD Matern of
// package kernel. The signal variance is split evenly, each factor carrying c = sf2^(1/d), so
// k_i(a, b) = c k0_i(a, b) (the paper does not say how it is split; any split gives the same
// product).
//
// With K_UU^(i) = Q^(i) diag(lambda^(i)) Q^(i)^T the 1-D eigendecompositions (after the jitter of
// GRIEFJitter), K_UU = kron_i K_UU^(i) has eigenvalues prod_i lambda^(i)_{j_i} and eigenvectors
// kron_i q^(i)_{j_i}. The features are the eigenvalue-scaled Nystrom eigenfunctions of the p
// largest product eigenvalues (GP-GRIEF §3, eqs. 3-4):
//
//	phi_k(x) = Lambda_k^{-1/2} K_{x,U} q_k = prod_i B_i(x, k) / sqrt(prod_i lambda^(i)_{Idx[k,i]}),
//	B_i(x, k) = sum_a k_i(x_i, grid_i[a]) Q^(i)[a, Idx[k,i]]                (Theorem 2),
//
// so the GRIEF kernel is k~(x, z) = sum_{k<p} phi_k(x) phi_k(z) = K_xU Q S_p^T Lambda_p^-1 S_p Q^T K_Uz,
// and m = prod_i m_i never appears in the cost.
//
// A GRIEF is read-only after NewGRIEF (or after a successful Validate of a decoded value) and safe
// for concurrent use. The exported fields are the description of the map; a GRIEF decoded from
// the wire carries them exactly, so every node computes the same features with the same S_p
// (ties among product eigenvalues, common with equal lengthscales, are broken once, where
// NewGRIEF runs).
type GRIEF struct {
	// Family is the 1-D kernel shape k0 of every factor.
	Family kernel.Family
	// Lengthscales holds l_i, one per input dimension.
	Lengthscales []float64
	// SignalVariance is sf2 = k(x, x); each factor carries sf2^(1/d).
	SignalVariance float64
	// Grid holds the per-dimension grid points grid_i (length m_i).
	Grid [][]float64
	// Q holds, per dimension, the m_i x m_i eigenvector matrix of K_UU^(i), row-major: column b,
	// Q[i][a*m_i+b] over a, is the eigenvector of the eigenvalue exp(LogLam[i][b]).
	Q [][]float64
	// LogLam holds, per dimension, log lambda^(i) in descending order.
	LogLam [][]float64
	// Idx is p x d row-major: Idx[k*d+i] is the eigen-index in dimension i of the k-th selected
	// product eigenvalue, i.e. the rows of the selection matrices S_p^(i).
	Idx []int
	// LogLamP holds log Lambda_k = sum_i LogLam[i][Idx[k*d+i]], k < p, descending.
	LogLamP []float64
}

// NewGRIEF builds the GRIEF map of family f with lengthscales ls, signal variance sf2 and the
// Cartesian grid grid (one axis per dimension, e.g. from GRIEFGrid), keeping the
// p' = min(p, prod_i m_i) largest product eigenvalues.
//
// Per dimension it forms K_UU^(i)[a][b] = sf2^(1/d) k0(|u_a - u_b| / l_i) plus the jitter
// GRIEFJitter * max diag = GRIEFJitter * sf2^(1/d) on the diagonal, eigendecomposes it
// (gonum EigenSym), orders the eigenpairs by descending eigenvalue and takes logs (eigenvalues
// that rounding pushes below the jitter, their exact lower bound, are raised to it). It then runs
// Algorithm 1 of GP-GRIEF (§4) in log space: starting from the top min(p, m_1) of log lambda^(1),
// for each further dimension i it forms the candidates loglam_a + log lambda^(i)_b of the current
// list and keeps the top p, recording the index tuples. Because every factor is positive and the
// order of prefixes is kept under a common suffix, this finds exactly the top p products. Ties
// are broken by the candidate index a*m_i + b (deterministically).
//
// It fails on an unknown family, d = 0, mismatched lengths, a lengthscale or sf2 that is not
// positive and finite, an empty grid axis, grid points that are not finite or repeat, or p < 1.
// The arguments are copied.
func NewGRIEF(f kernel.Family, ls []float64, sf2 float64, grid [][]float64, p int) (*GRIEF, error) {
	if err := checkFamily(f); err != nil {
		return nil, err
	}
	d := len(ls)
	if d == 0 {
		return nil, fmt.Errorf("grief features: no lengthscales: need one per input dimension")
	}
	if len(grid) != d {
		return nil, fmt.Errorf("grief features: %d lengthscales but %d grid axes: need one of each per input dimension", d, len(grid))
	}
	for i, l := range ls {
		if !(l > 0) || math.IsInf(l, 0) {
			return nil, fmt.Errorf("grief features: lengthscale %d is %v: it must be positive and finite", i, l)
		}
	}
	if !(sf2 > 0) || math.IsInf(sf2, 0) {
		return nil, fmt.Errorf("grief features: signal variance %v: it must be positive and finite", sf2)
	}
	if p < 1 {
		return nil, fmt.Errorf("grief features: p = %d eigenfunctions: need at least 1", p)
	}
	for i, ax := range grid {
		if len(ax) == 0 {
			return nil, fmt.Errorf("grief features: grid axis %d is empty", i)
		}
		s := slices.Clone(ax)
		slices.Sort(s)
		for j, v := range s {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("grief features: grid axis %d has a point %v: grid points must be finite", i, v)
			}
			if j > 0 && v == s[j-1] {
				return nil, fmt.Errorf("grief features: grid axis %d repeats the point %v", i, v)
			}
		}
	}
	c := math.Pow(sf2, 1/float64(d))
	g := &GRIEF{
		Family:         f,
		Lengthscales:   slices.Clone(ls),
		SignalVariance: sf2,
		Grid:           make([][]float64, d),
		Q:              make([][]float64, d),
		LogLam:         make([][]float64, d),
	}
	for i := 0; i < d; i++ {
		ax := slices.Clone(grid[i])
		g.Grid[i] = ax
		m := len(ax)
		k1 := newKernel1(f, ls[i], c)
		jit := GRIEFJitter * c // max diag of K_UU^(i) is c k0(0) = c
		K := mat.NewSymDense(m, nil)
		for a := 0; a < m; a++ {
			for b := a; b < m; b++ {
				v := k1.eval(ax[a], ax[b])
				if a == b {
					v += jit
				}
				K.SetSym(a, b, v)
			}
		}
		var es mat.EigenSym
		if !es.Factorize(K, true) {
			return nil, fmt.Errorf("grief features: eigendecomposition of the %d-point kernel matrix of dimension %d failed", m, i)
		}
		vals := es.Values(nil) // ascending
		var vecs mat.Dense
		es.VectorsTo(&vecs)
		q := make([]float64, m*m)
		ll := make([]float64, m)
		for b := 0; b < m; b++ {
			src := m - 1 - b // descending order
			ll[b] = math.Log(math.Max(vals[src], jit))
			for a := 0; a < m; a++ {
				q[a*m+b] = vecs.At(a, src)
			}
		}
		g.Q[i], g.LogLam[i] = q, ll
	}
	g.Idx, g.LogLamP = topProducts(g.LogLam, p)
	return g, nil
}

// topProducts is Algorithm 1 of GP-GRIEF (§4) in log space (the paper's ones vector
// 1_{ceil(log lambda_p)} is corrected here to one of the current list's length): it returns
// the index tuples (p' x d row-major) and the sums of the p' = min(p, prod_i len(logLam[i])) largest sums
// sum_i logLam[i][j_i], in descending order, ties broken by the candidate index a*m_i + b of
// each stage. Every logLam[i] must be sorted descending and non-empty.
func topProducts(logLam [][]float64, p int) ([]int, []float64) {
	d := len(logLam)
	m0 := len(logLam[0])
	n := min(p, m0)
	cur := slices.Clone(logLam[0][:n])
	idx := make([]int, n) // n x 1
	for b := range idx {
		idx[b] = b
	}
	for i := 1; i < d; i++ {
		li := logLam[i]
		mi := len(li)
		L := len(cur)
		cand := make([]int, L*mi)
		for o := range cand {
			cand[o] = o
		}
		val := func(o int) float64 { return cur[o/mi] + li[o%mi] }
		slices.SortFunc(cand, func(x, y int) int {
			if c := cmp.Compare(val(y), val(x)); c != 0 {
				return c
			}
			return cmp.Compare(x, y)
		})
		n = min(p, len(cand))
		next := make([]float64, n)
		nidx := make([]int, n*(i+1))
		for k := 0; k < n; k++ {
			o := cand[k]
			a, b := o/mi, o%mi
			next[k] = cur[a] + li[b]
			copy(nidx[k*(i+1):k*(i+1)+i], idx[a*i:(a+1)*i])
			nidx[k*(i+1)+i] = b
		}
		cur, idx = next, nidx
	}
	return idx, cur
}

// kernel1 evaluates the 1-D factor k_i(a, b) = c k0(|a - b| / l) through package kernel (a 1-D
// kernel.Kernel is exactly one factor of the product form). It is not safe for concurrent use.
type kernel1 struct {
	k    kernel.Kernel
	a, b []float64
}

func newKernel1(f kernel.Family, l, c float64) *kernel1 {
	return &kernel1{k: kernel.Kernel{Family: f, Lengthscales: []float64{l}, SignalVariance: c}, a: make([]float64, 1), b: make([]float64, 1)}
}

func (k *kernel1) eval(a, b float64) float64 {
	k.a[0], k.b[0] = a, b
	return k.k.Eval(k.a, k.b)
}

// NumFeatures is the number of eigenfunctions p (after capping at prod_i m_i).
func (g *GRIEF) NumFeatures() int { return len(g.LogLamP) }

// Dim is the input dimension d.
func (g *GRIEF) Dim() int { return len(g.Lengthscales) }

// Validate checks that the description is consistent, as needed for a map decoded from the
// wire: a known family; d >= 1 positive finite lengthscales; a positive finite signal variance;
// d grid axes of m_i >= 1 finite points; Q[i] of m_i^2 finite values and LogLam[i] of m_i finite
// values; p >= 1 finite LogLamP in non-increasing order; Idx of p*d entries with
// 0 <= Idx[k*d+i] < m_i.
func (g *GRIEF) Validate() error {
	if err := checkFamily(g.Family); err != nil {
		return err
	}
	d := len(g.Lengthscales)
	if d == 0 {
		return fmt.Errorf("grief features: no lengthscales")
	}
	for i, l := range g.Lengthscales {
		if !(l > 0) || math.IsInf(l, 0) {
			return fmt.Errorf("grief features: lengthscale %d is %v: it must be positive and finite", i, l)
		}
	}
	if !(g.SignalVariance > 0) || math.IsInf(g.SignalVariance, 0) {
		return fmt.Errorf("grief features: signal variance %v: it must be positive and finite", g.SignalVariance)
	}
	if len(g.Grid) != d || len(g.Q) != d || len(g.LogLam) != d {
		return fmt.Errorf("grief features: %d lengthscales but %d grid axes, %d eigenvector matrices and %d eigenvalue lists", d, len(g.Grid), len(g.Q), len(g.LogLam))
	}
	finite := func(v []float64) bool {
		for _, x := range v {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return false
			}
		}
		return true
	}
	for i := 0; i < d; i++ {
		m := len(g.Grid[i])
		if m == 0 || len(g.Q[i]) != m*m || len(g.LogLam[i]) != m {
			return fmt.Errorf("grief features: dimension %d has %d grid points, %d eigenvector values and %d eigenvalues", i, m, len(g.Q[i]), len(g.LogLam[i]))
		}
		if !finite(g.Grid[i]) || !finite(g.Q[i]) || !finite(g.LogLam[i]) {
			return fmt.Errorf("grief features: dimension %d has values that are not finite", i)
		}
	}
	p := len(g.LogLamP)
	if p == 0 || len(g.Idx) != p*d {
		return fmt.Errorf("grief features: %d selected eigenvalues with %d indices for %d dimensions", p, len(g.Idx), d)
	}
	if !finite(g.LogLamP) {
		return fmt.Errorf("grief features: selected log eigenvalues are not finite")
	}
	for k := 1; k < p; k++ {
		if g.LogLamP[k] > g.LogLamP[k-1] {
			return fmt.Errorf("grief features: selected log eigenvalues are not in descending order at %d", k)
		}
	}
	for k := 0; k < p; k++ {
		for i := 0; i < d; i++ {
			if j := g.Idx[k*d+i]; j < 0 || j >= len(g.Grid[i]) {
				return fmt.Errorf("grief features: index %d of eigenfunction %d in dimension %d is outside [0, %d)", j, k, i, len(g.Grid[i]))
			}
		}
	}
	return nil
}

// griefWork is the per-call scratch of the feature evaluation.
type griefWork struct {
	k1     []*kernel1
	cols   [][]int     // per dimension: the distinct eigen-indices used by the selection
	pos    []int       // p x d: position of Idx[k*d+i] in cols[i]
	kv     [][]float64 // per dimension: k_i(x_i, grid_i[a])
	logAbs [][]float64 // per dimension and used column: log |B_i|
	sign   [][]float64 // per dimension and used column: sign(B_i) in {-1, 0, 1}
	// vary lists the dimensions whose selection uses more than one column; the others (an
	// input switched off by a long lengthscale uses only its first eigenfunction) give every
	// feature the same factor, which is formed once per row.
	vary []int
	// posT[v] is pos's column of dimension vary[v], contiguous over the p features, so that
	// the per-feature sums run feature by feature within one dimension.
	posT [][]int32
	// lsum and sgn (length p) are mapRow's log |phi_k| and sign(phi_k) before the exp.
	lsum, sgn []float64
}

func (g *GRIEF) newWork() *griefWork {
	d, p := g.Dim(), g.NumFeatures()
	c := math.Pow(g.SignalVariance, 1/float64(d))
	w := &griefWork{k1: make([]*kernel1, d), cols: make([][]int, d), pos: make([]int, p*d),
		kv: make([][]float64, d), logAbs: make([][]float64, d), sign: make([][]float64, d)}
	for i := 0; i < d; i++ {
		m := len(g.Grid[i])
		w.k1[i] = newKernel1(g.Family, g.Lengthscales[i], c)
		w.kv[i] = make([]float64, m)
		at := make([]int, m)
		for j := range at {
			at[j] = -1
		}
		for k := 0; k < p; k++ {
			at[g.Idx[k*d+i]] = 0
		}
		for j := range at {
			if at[j] == 0 {
				at[j] = len(w.cols[i])
				w.cols[i] = append(w.cols[i], j)
			}
		}
		for k := 0; k < p; k++ {
			w.pos[k*d+i] = at[g.Idx[k*d+i]]
		}
		w.logAbs[i] = make([]float64, len(w.cols[i]))
		w.sign[i] = make([]float64, len(w.cols[i]))
		if len(w.cols[i]) > 1 {
			w.vary = append(w.vary, i)
		}
	}
	w.posT = make([][]int32, len(w.vary))
	for v, i := range w.vary {
		w.posT[v] = make([]int32, p)
		for k := range p {
			w.posT[v][k] = int32(w.pos[k*d+i])
		}
	}
	w.lsum, w.sgn = make([]float64, p), make([]float64, p)
	return w
}

// Map writes the p features phi(x) of one input x (length d) into dst (length >= p). It panics
// if a slice is too short.
func (g *GRIEF) Map(x, dst []float64) {
	if len(x) != g.Dim() || len(dst) < g.NumFeatures() {
		panic(fmt.Sprintf("grief features: Map with len(x) = %d, len(dst) = %d; need %d and >= %d", len(x), len(dst), g.Dim(), g.NumFeatures()))
	}
	g.mapRow(x, dst, g.newWork())
}

// MapBlock writes the features of rows inputs: x is rows x d row-major, dst rows x p row-major,
// dst[j*p+k] = phi_k(x_j). It panics if a slice is too short.
//
// It uses Theorem 2 of GP-GRIEF (§4, eq. 10) in the paper's log-stable sign/log form:
//
//	phi_k(x) = prod_i sign(B_i) * exp( sum_i log|B_i| - 0.5 LogLamP[k] ),
//	B_i = (k_i(x_i, grid_i) Q^(i))[Idx[k,i]],
//
// forming per row and dimension only the columns of k_i(x_i, grid_i) Q^(i) that the selection
// uses (O(m_i c_i) for c_i used columns), then O(d') per feature, d' the dimensions whose
// selection uses more than one column (the others' factors are common to all features),
// summed one dimension at a time over all p features (gathers from contiguous index columns)
// and exponentiated together by linalg.ExpTo (within 2 ulp of math.Exp). A zero sign gives
// phi_k = 0. The scaling by Lambda_k^{-1/2} is applied inside the exp, so phi_k overflows or
// underflows only when its value does.
func (g *GRIEF) MapBlock(x []float64, rows int, dst []float64) {
	d, p := g.Dim(), g.NumFeatures()
	if rows < 0 || len(x) < rows*d || len(dst) < rows*p {
		panic(fmt.Sprintf("grief features: MapBlock with %d rows, len(x) = %d, len(dst) = %d; need >= %d and >= %d", rows, len(x), len(dst), rows*d, rows*p))
	}
	w := g.newWork()
	for j := 0; j < rows; j++ {
		g.mapRow(x[j*d:(j+1)*d], dst[j*p:(j+1)*p], w)
	}
}

func (g *GRIEF) mapRow(x, dst []float64, w *griefWork) {
	d, p := g.Dim(), g.NumFeatures()
	for i := 0; i < d; i++ {
		ax, kv := g.Grid[i], w.kv[i]
		m := len(ax)
		for a, u := range ax {
			kv[a] = w.k1[i].eval(x[i], u)
		}
		q := g.Q[i]
		for c, col := range w.cols[i] {
			var b float64
			for a := 0; a < m; a++ {
				b += kv[a] * q[a*m+col]
			}
			switch {
			case b > 0:
				w.sign[i][c], w.logAbs[i][c] = 1, math.Log(b)
			case b < 0:
				w.sign[i][c], w.logAbs[i][c] = -1, math.Log(-b)
			default:
				w.sign[i][c], w.logAbs[i][c] = 0, 0
			}
		}
	}
	// The factors of the dimensions with one used column, common to every feature.
	s0, l0 := 1.0, 0.0
	for i := 0; i < d; i++ {
		if len(w.cols[i]) == 1 {
			s0 *= w.sign[i][0]
			l0 += w.logAbs[i][0]
		}
	}
	if s0 == 0 {
		clear(dst[:p])
		return
	}
	// log |phi_k| and sign(phi_k), one dimension (or two) at a time over all features; each
	// feature's log terms are added in the order of w.vary. A zero factor makes the sign 0.
	l, sg := w.lsum[:p], w.sgn[:p]
	for k := range p {
		l[k] = l0 - 0.5*g.LogLamP[k]
		sg[k] = s0
	}
	v := 0
	for ; v+1 < len(w.vary); v += 2 {
		i, j := w.vary[v], w.vary[v+1]
		la, sa, pa := w.logAbs[i], w.sign[i], w.posT[v][:p]
		lb, sb, pb := w.logAbs[j], w.sign[j], w.posT[v+1][:p]
		for k, ca := range pa {
			cb := pb[k]
			l[k] = l[k] + la[ca] + lb[cb]
			sg[k] = sg[k] * sa[ca] * sb[cb]
		}
	}
	if v < len(w.vary) {
		i := w.vary[v]
		la, sa, pa := w.logAbs[i], w.sign[i], w.posT[v][:p]
		for k, ca := range pa {
			l[k] += la[ca]
			sg[k] *= sa[ca]
		}
	}
	linalg.ExpTo(dst[:p], l)
	for k, s := range sg {
		switch {
		case s == 0:
			dst[k] = 0
		case s < 0:
			dst[k] = -dst[k]
		}
	}
}
