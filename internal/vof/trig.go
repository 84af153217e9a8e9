package vof

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/gpreduce/gpreduce/internal/features"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/linalg"
	"github.com/gpreduce/gpreduce/internal/reduce"
)

// accBlock is the number of rows the statistics accumulate per matrix product. It is fixed:
// the bits of a shard's statistics depend on it.
const accBlock = 256

// MaxTrigPoints bounds the frequencies per grid: the statistics hold four T x T blocks
// (plus four per input with feature-parameter gradients); 2048^2 float64 are 32 MiB per block.
const MaxTrigPoints = 2048

// TrigGrid holds the two independent stratified frequency grids of one TrigVOF step, in unit
// coordinates (Appendix E.1): per input k a shift s_k ~ U[0, 1/T1] and the nodes
// u_i = i/T1 + s_k, i = 0..T1-1, mapped to w = a_k (2u - 1) in [-a_k, a_k]. Each node is
// uniformly distributed over [-a, a], so every Monte Carlo estimate below is unbiased, while
// the stratification removes most of the variance. For d > 1 the tensor layout uses the
// product grid (T = T1^d points, one shift per input), the additive layout one 1-D grid per
// component (T = d T1 points, point t in component t / T1, frequency zero in the other inputs).
type TrigGrid struct {
	Dim, T1  int
	Additive bool
	// U1 and U2 are T x Dim unit coordinates in [0, 1] of the two grids.
	U1, U2 []float64
}

// NewTrigGrid draws the two grids for mod with T1 nodes per input from rng.
func NewTrigGrid(mod Model, T1 int, rng *rand.Rand) (*TrigGrid, error) {
	if T1 < 1 {
		return nil, fmt.Errorf("TrigVOF grid: %d frequencies per input: use at least 1", T1)
	}
	d := mod.Dim
	T := d * T1
	if !mod.Additive {
		T = 1
		for k := 0; k < d; k++ {
			T *= T1
			if T > MaxTrigPoints {
				break
			}
		}
	}
	if T > MaxTrigPoints {
		return nil, fmt.Errorf("TrigVOF grid: %d frequencies per input in %d inputs give more than %d points: lower the frequencies per input or use the additive layout", T1, d, MaxTrigPoints)
	}
	g := &TrigGrid{Dim: d, T1: T1, Additive: mod.Additive, U1: make([]float64, T*d), U2: make([]float64, T*d)}
	for _, U := range [][]float64{g.U1, g.U2} {
		shift := make([]float64, d)
		for k := range shift {
			shift[k] = rng.Float64() / float64(T1)
		}
		for t := 0; t < T; t++ {
			if mod.Additive {
				c, i := t/T1, t%T1
				U[t*d+c] = float64(i)/float64(T1) + shift[c]
				continue
			}
			r := t
			for k := d - 1; k >= 0; k-- {
				U[t*d+k] = float64(r%T1)/float64(T1) + shift[k]
				r /= T1
			}
		}
	}
	return g, nil
}

// TrigGridForStep draws the grids of optimisation step `step` of a job with seed `seed` from
// the PCG stream (seed, step), so that any step's grids can be rebuilt on resume without
// stored generator state, on any number of workers.
func TrigGridForStep(mod Model, T1 int, seed, step uint64) (*TrigGrid, error) {
	return NewTrigGrid(mod, T1, rand.New(rand.NewPCG(seed, step)))
}

// NumPoints is T, the points per grid.
func (g *TrigGrid) NumPoints() int { return len(g.U1) / g.Dim }

// comp is the component of point t (additive layout), or -1.
func (g *TrigGrid) comp(t int) int {
	if g.Additive {
		return t / g.T1
	}
	return -1
}

// Frequencies returns the T x Dim frequencies of both grids for feature parameters a.
func (g *TrigGrid) Frequencies(a []float64) (W1, W2 []float64) {
	d := g.Dim
	T := g.NumPoints()
	W1, W2 = make([]float64, T*d), make([]float64, T*d)
	for t := 0; t < T; t++ {
		c := g.comp(t)
		for k := 0; k < d; k++ {
			if c >= 0 && k != c {
				continue
			}
			W1[t*d+k] = a[k] * (2*g.U1[t*d+k] - 1)
			W2[t*d+k] = a[k] * (2*g.U2[t*d+k] - 1)
		}
	}
	return W1, W2
}

// fingerprint identifies the frequencies a statistic was computed on.
func fingerprint(W1, W2 []float64) uint64 {
	h := fnv.New64a()
	var b [8]byte
	for _, W := range [][]float64{W1, W2} {
		for _, v := range W {
			u := math.Float64bits(v)
			for i := range b {
				b[i] = byte(u >> (8 * i))
			}
			h.Write(b[:])
		}
	}
	return h.Sum64()
}

// Trig statistic blocks: index p*2+q for P^{pq}, p, q in {cos = 0, sin = 1}; B holds
// cos and sin of grid 1 then of grid 2.
const (
	cc = iota
	cs
	sc
	ss
)

// TrigStats is the per-shard statistic of TrigVOF on one pair of grids (a distributed form of
// Section 3.3's estimators with the outer product of Appendix E.1): over the shard's rows,
// with w_t from grid 1 and w'_t' from grid 2,
//
//	N, YY = sum y_n^2,
//	B[0][t] = sum y_n cos(w_t.x_n),  B[1][t] = sum y_n sin(w_t.x_n),  B[2], B[3] the same for w',
//	P[pq][t*T+t'] = sum_n trig_p(w_t.x_n) trig_q(w'_t'.x_n),  p, q in {cos, sin}.
//
// They depend only on the data and the frequencies, not on m, S or the kernel. With feature
// gradients the moments XB[k] and XP[k] hold the same sums with an extra factor x_nk, from which
// the derivatives of B and P in log a_k follow (dw_t/dlog a_k = w_tk).
type TrigStats struct {
	T, Dim int
	// Grid is a fingerprint of the frequencies; statistics of other frequencies do not merge.
	Grid uint64
	N    int
	YY   float64
	B    [4][]float64
	P    [4][]float64
	XB   [][4][]float64
	XP   [][4][]float64
}

var _ reduce.Stats = (*TrigStats)(nil)

// HasFeatureGrad reports whether s carries the moments for the gradient in a.
func (s *TrigStats) HasFeatureGrad() bool { return s.XP != nil }

// AccumulateTrig computes the statistics of a block of rows (X row-major n x d) on the grids
// at feature parameters a; with featureGrad it also accumulates the moments for the gradient
// in a. Cost O(n T^2 (1 + d featureGrad)).
func AccumulateTrig(g *TrigGrid, a []float64, X, y []float64, featureGrad bool) (*TrigStats, error) {
	d := g.Dim
	n := len(y)
	if len(X) != n*d || len(a) != d {
		return nil, fmt.Errorf("TrigVOF statistics: X has %d values and a %d for %d rows of %d inputs", len(X), len(a), n, d)
	}
	T := g.NumPoints()
	W1, W2 := g.Frequencies(a)
	st := &TrigStats{T: T, Dim: d, Grid: fingerprint(W1, W2)}
	for i := range st.B {
		st.B[i] = make([]float64, T)
		st.P[i] = make([]float64, T*T)
	}
	if featureGrad {
		st.XB = make([][4][]float64, d)
		st.XP = make([][4][]float64, d)
		for k := 0; k < d; k++ {
			for i := 0; i < 4; i++ {
				st.XB[k][i] = make([]float64, T)
				st.XP[k][i] = make([]float64, T*T)
			}
		}
	}
	// Rows are processed in blocks of accBlock: the four trig matrices (rows x T) of a block
	// enter P by matrix products (linalg.Gemm, whose bits depend only on its fixed blocking,
	// so a shard's statistics do not depend on the machine or the worker count).
	nb := min(n, accBlock)
	tr := make([][]float64, 4) // cos1, sin1, cos2, sin2, each nb x T
	for i := range tr {
		tr[i] = make([]float64, nb*T)
	}
	var xtr [2][]float64 // x_k cos1, x_k sin1
	if featureGrad {
		xtr = [2][]float64{make([]float64, nb*T), make([]float64, nb*T)}
	}
	for r0 := 0; r0 < n; r0 += nb {
		rows := min(nb, n-r0)
		for r := 0; r < rows; r++ {
			x := X[(r0+r)*d : (r0+r+1)*d]
			for t := 0; t < T; t++ {
				var p1, p2 float64
				for k := 0; k < d; k++ {
					p1 += W1[t*d+k] * x[k]
					p2 += W2[t*d+k] * x[k]
				}
				tr[1][r*T+t], tr[0][r*T+t] = math.Sincos(p1)
				tr[3][r*T+t], tr[2][r*T+t] = math.Sincos(p2)
			}
			yr := y[r0+r]
			st.YY += yr * yr
			for i := 0; i < 4; i++ {
				addScaled(st.B[i], yr, tr[i][r*T:(r+1)*T])
			}
			for k := 0; k < d && featureGrad; k++ {
				for i := 0; i < 4; i++ {
					addScaled(st.XB[k][i], yr*x[k], tr[i][r*T:(r+1)*T])
				}
			}
		}
		gen := func(a []float64) blas64.General {
			return blas64.General{Rows: rows, Cols: T, Stride: T, Data: a[:rows*T]}
		}
		blocks := func(P [4][]float64, left [2][]float64) {
			for pp := 0; pp < 2; pp++ {
				for q := 0; q < 2; q++ {
					linalg.Gemm(blas.Trans, blas.NoTrans, 1, gen(left[pp]), gen(tr[2+q]), 1,
						blas64.General{Rows: T, Cols: T, Stride: T, Data: P[2*pp+q]})
				}
			}
		}
		blocks(st.P, [2][]float64{tr[0], tr[1]})
		for k := 0; k < d && featureGrad; k++ {
			for r := 0; r < rows; r++ {
				xk := X[(r0+r)*d+k]
				for t := 0; t < T; t++ {
					xtr[0][r*T+t] = xk * tr[0][r*T+t]
					xtr[1][r*T+t] = xk * tr[1][r*T+t]
				}
			}
			blocks(st.XP[k], xtr)
		}
	}
	st.N = n
	return st, nil
}

func addScaled(dst []float64, s float64, x []float64) {
	for i, v := range x {
		dst[i] += s * v
	}
}

// validate checks the shapes of the blocks.
func (s *TrigStats) validate() error {
	if s.XP != nil && (len(s.XP) != s.Dim || len(s.XB) != s.Dim) {
		return fmt.Errorf("%d and %d moment inputs for %d inputs", len(s.XB), len(s.XP), s.Dim)
	}
	for i := 0; i < 4; i++ {
		if len(s.B[i]) != s.T || len(s.P[i]) != s.T*s.T {
			return fmt.Errorf("block %d has %d and %d values for %d frequencies", i, len(s.B[i]), len(s.P[i]), s.T)
		}
		for k := range s.XP {
			if len(s.XB[k][i]) != s.T || len(s.XP[k][i]) != s.T*s.T {
				return fmt.Errorf("moment block %d of input %d has %d and %d values for %d frequencies", i, k, len(s.XB[k][i]), len(s.XP[k][i]), s.T)
			}
		}
	}
	return nil
}

// Merge adds next (the statistics of the shards after the receiver's, in shard order) into s.
func (s *TrigStats) Merge(next reduce.Stats) error {
	o, ok := next.(*TrigStats)
	if !ok {
		return fmt.Errorf("merge TrigStats with %T", next)
	}
	if o.T != s.T || o.Dim != s.Dim || len(o.XP) != len(s.XP) {
		return fmt.Errorf("merge TrigStats of %d frequencies in %d inputs (%d moment inputs) with %d in %d (%d)", s.T, s.Dim, len(s.XP), o.T, o.Dim, len(o.XP))
	}
	if o.Grid != s.Grid {
		return fmt.Errorf("merge TrigStats computed on different frequency grids (%x and %x)", s.Grid, o.Grid)
	}
	if err := s.validate(); err != nil {
		return fmt.Errorf("merge TrigStats: receiver: %w", err)
	}
	if err := o.validate(); err != nil {
		return fmt.Errorf("merge TrigStats: next: %w", err)
	}
	s.N += o.N
	s.YY += o.YY
	for i := 0; i < 4; i++ {
		addScaled(s.B[i], 1, o.B[i])
		addScaled(s.P[i], 1, o.P[i])
		for k := range s.XP {
			addScaled(s.XB[k][i], 1, o.XB[k][i])
			addScaled(s.XP[k][i], 1, o.XP[k][i])
		}
	}
	return nil
}

// trigSet holds, for one grid, Z[j, t] = psi_j(w_t) c_t (M x T) with the Monte Carlo weight
// c_t = vol sqrt(v p(w_t)) / T (vol = prod 2 a_k, Section 3.3: importance weight 1/q(w) = 2a per
// input under uniform sampling), and the derivatives of log c_t.
type trigSet struct {
	Z     []float64
	dlcL  []float64 // T x d: dlog c_t / dlog l_k
	dlcA  []float64 // T x d: dlog c_t / dlog a_k
	compT []int     // component of each point (additive) or -1
}

func buildTrigSet(mod Model, p *Params, g *TrigGrid, U, W []float64, M int) trigSet {
	d := mod.Dim
	T := g.NumPoints()
	s := trigSet{Z: make([]float64, M*T), dlcL: make([]float64, T*d), dlcA: make([]float64, T*d), compT: make([]int, T)}
	lay := mod.Layout()
	M1 := mod.M1
	u1 := make([]float64, d*M1)
	idx := make([]int, d)
	dlp := make([]float64, d)
	for t := 0; t < T; t++ {
		c := g.comp(t)
		s.compT[t] = c
		var logc float64
		if c >= 0 {
			lp := kernel.LogSpectralDensity(mod.Family, p.Lengthscales[c:c+1], W[t*d+c:t*d+c+1], dlp[:1])
			logc = math.Log(2*p.Feature[c]) + 0.5*(math.Log(p.Variances[c])+lp) - math.Log(float64(g.T1))
			s.dlcL[t*d+c] = 0.5 * dlp[0]
			s.dlcA[t*d+c] = 1 + 0.5*(dlp[0]-1)
			features.TrigVOFBasis1D(2*U[t*d+c]-1, u1[:M1])
			sa := 1 / math.Sqrt(p.Feature[c])
			ct := math.Exp(logc)
			for j := 0; j < M1; j++ {
				s.Z[(c*M1+j)*T+t] = sa * u1[j] * ct
			}
			continue
		}
		lp := kernel.LogSpectralDensity(mod.Family, p.Lengthscales, W[t*d:(t+1)*d], dlp)
		logc = 0.5*(math.Log(p.Variances[0])+lp) - math.Log(float64(T))
		sa := 1.0
		for k := 0; k < d; k++ {
			logc += math.Log(2 * p.Feature[k])
			s.dlcL[t*d+k] = 0.5 * dlp[k]
			s.dlcA[t*d+k] = 1 + 0.5*(dlp[k]-1)
			features.TrigVOFBasis1D(2*U[t*d+k]-1, u1[k*M1:(k+1)*M1])
			sa /= math.Sqrt(p.Feature[k])
		}
		ct := math.Exp(logc) * sa
		for j := 0; j < M; j++ {
			lay.Multi(j, idx)
			ps := ct
			for k := 0; k < d; k++ {
				ps *= u1[k*M1+idx[k]]
			}
			s.Z[j*T+t] = ps
		}
	}
	return s
}

// ELBOTrig returns the unbiased TrigVOF ELBO estimate (Section 3.3 with Appendix E.1's outer
// product) at p from statistics merged over a batch of st.N rows of a data set of nTotal rows,
// on the grids g at p's feature parameters. With Kuf_hat and Kuf_hat' the independent Monte
// Carlo estimates of Kuf from the two grids,
//
//	KY_hat = 1/2 sum_n (Kuf_hat + Kuf_hat')[:, n] y_n,  KK_hat = sum_n Kuf_hat[:, n] Kuf_hat'[:, n]^T,
//
// are unbiased for sum k_n y_n and sum k_n k_n^T (the product of independent unbiased
// estimates), and the Gaussian ELBO is linear in them, so the estimate is unbiased; both are
// formed from st without touching the data. v = k(0) is the full prior variance. If g is not
// nil it receives the gradient of the estimate in every parameter; in a it needs statistics
// with moments (HasFeatureGrad), and without them (fixed-grid mode, a held fixed) g.Feature is
// set to zero.
func ELBOTrig(mod Model, p *Params, grid *TrigGrid, st *TrigStats, nTotal int, g *Grad) (float64, error) {
	M, err := mod.Check(p)
	if err != nil {
		return 0, err
	}
	if mod.Basis != Trig {
		return 0, fmt.Errorf("VOF ELBO: trig statistics for a %v model", mod.Basis)
	}
	d := mod.Dim
	T := grid.NumPoints()
	if grid.Dim != d || grid.Additive != mod.Additive || st.T != T || st.Dim != d || st.N <= 0 {
		return 0, fmt.Errorf("TrigVOF ELBO: statistics of %d frequencies over %d rows, grid of %d in %d inputs, model of %d inputs", st.T, st.N, T, grid.Dim, d)
	}
	if err := st.validate(); err != nil {
		return 0, fmt.Errorf("TrigVOF ELBO: %w", err)
	}
	W1, W2 := grid.Frequencies(p.Feature)
	if fingerprint(W1, W2) != st.Grid {
		return 0, fmt.Errorf("TrigVOF ELBO: statistics were computed on other frequencies (another grid or feature parameter a): recompute them")
	}
	e := trigEstimate(mod, p, grid, st, W1, W2, M)
	s1, s2, Y, par, KY, KK := e.s1, e.s2, e.Y, e.par, e.KY, e.KK
	in := coreIn{n: float64(st.N), nTotal: float64(nTotal), YY: st.YY, KY: KY, KK: KK, v: priorVariance(p)}
	F, out := coreELBO(mod, p, in, g)
	if g == nil {
		return F, nil
	}
	// E1[i,t] = dF/dZ1[i,t] Z1[i,t], E2 likewise.
	E1 := make([]float64, M*T)
	E2 := make([]float64, M*T)
	// dF/dZ2[j,t'] needs Y2[pq][t'*M+i] = (P[pq]^T Z1^T)[t', i] for parity(i) = p.
	var Y2 [4][]float64
	for b := 0; b < 4; b++ {
		Y2[b] = make([]float64, T*M)
		pp := b >> 1
		for i := 0; i < M; i++ {
			if par[i] != pp {
				continue
			}
			z := s1.Z[i*T : (i+1)*T]
			for t, zv := range z {
				if zv == 0 {
					continue
				}
				prow := st.P[b][t*T : (t+1)*T]
				for tp, v := range prow {
					Y2[b][tp*M+i] += zv * v
				}
			}
		}
	}
	for i := 0; i < M; i++ {
		pi := par[i]
		grow := out.gKK[i*M : (i+1)*M]
		for t := 0; t < T; t++ {
			a1 := 0.5 * out.gKY[i] * st.B[pi][t]
			a2 := 0.5 * out.gKY[i] * st.B[2+pi][t]
			for j := 0; j < M; j++ {
				a1 += grow[j] * Y[2*pi+par[j]][t*M+j]
				// gKK symmetric: sum_j gKK_ji Y2[p(j) p(i)][t, j].
				a2 += grow[j] * Y2[2*par[j]+pi][t*M+j]
			}
			E1[i*T+t] = a1 * s1.Z[i*T+t]
			E2[i*T+t] = a2 * s2.Z[i*T+t]
		}
	}
	clear(g.Lengthscales)
	clear(g.Feature)
	clear(g.Variances)
	usesDim := func(i, k int) bool { return !mod.Additive || i/mod.M1 == k }
	for _, set := range []struct {
		E []float64
		s trigSet
	}{{E1, s1}, {E2, s2}} {
		for i := 0; i < M; i++ {
			for t := 0; t < T; t++ {
				e := set.E[i*T+t]
				if e == 0 {
					continue
				}
				c := set.s.compT[t]
				if c >= 0 {
					g.Variances[c] += 0.5 * e
				} else {
					g.Variances[0] += 0.5 * e
				}
				for k := 0; k < d; k++ {
					g.Lengthscales[k] += e * set.s.dlcL[t*d+k]
					g.Feature[k] += e * set.s.dlcA[t*d+k]
					if usesDim(i, k) {
						g.Feature[k] -= 0.5 * e
					}
				}
			}
		}
	}
	for c := range g.Variances {
		g.Variances[c] += out.gV * p.Variances[c]
	}
	if !st.HasFeatureGrad() {
		clear(g.Feature)
		return F, nil
	}
	// Through the statistics: dF/dB and dF/dP contracted with their derivatives in log a_k.
	// dF/dB[p][t] = 1/2 sum_{i: p(i)=p} gKY_i Z1[i,t] (grid 2 likewise);
	// dF/dP[pq][t,t'] = sum_{p(i)=p, p(j)=q} Z1[i,t] gKK_ij Z2[j,t'].
	var GB [4][]float64
	for b := range GB {
		GB[b] = make([]float64, T)
	}
	for i := 0; i < M; i++ {
		for t := 0; t < T; t++ {
			GB[par[i]][t] += 0.5 * out.gKY[i] * s1.Z[i*T+t]
			GB[2+par[i]][t] += 0.5 * out.gKY[i] * s2.Z[i*T+t]
		}
	}
	// H[q][i*T+t'] = sum_{j: p(j)=q} gKK_ij Z2[j,t'].
	var H [2][]float64
	for q := range H {
		H[q] = make([]float64, M*T)
	}
	for i := 0; i < M; i++ {
		for j := 0; j < M; j++ {
			gij := out.gKK[i*M+j]
			if gij == 0 {
				continue
			}
			addScaled(H[par[j]][i*T:(i+1)*T], gij, s2.Z[j*T:(j+1)*T])
		}
	}
	GP := [4][]float64{}
	for b := 0; b < 4; b++ {
		GP[b] = make([]float64, T*T)
		pp, q := b>>1, b&1
		for i := 0; i < M; i++ {
			if par[i] != pp {
				continue
			}
			h := H[q][i*T : (i+1)*T]
			for t := 0; t < T; t++ {
				if z := s1.Z[i*T+t]; z != 0 {
					addScaled(GP[b][t*T:(t+1)*T], z, h)
				}
			}
		}
	}
	// trig_p' = sigma(p) trig_{1-p}: cos' = -sin, sin' = cos.
	sig := [2]float64{-1, 1}
	for k := 0; k < d; k++ {
		var a float64
		for pp := 0; pp < 2; pp++ {
			for t := 0; t < T; t++ {
				a += GB[pp][t] * W1[t*d+k] * sig[pp] * st.XB[k][1-pp][t]
				a += GB[2+pp][t] * W2[t*d+k] * sig[pp] * st.XB[k][2+1-pp][t]
			}
		}
		for b := 0; b < 4; b++ {
			pp, q := b>>1, b&1
			x1 := st.XP[k][2*(1-pp)+q] // d/dw_t of trig_p: sigma(p) trig_{1-p}
			x2 := st.XP[k][2*pp+1-q]   // d/dw'_t' of trig_q
			for t := 0; t < T; t++ {
				w1 := W1[t*d+k] * sig[pp]
				row := GP[b][t*T : (t+1)*T]
				for tp, gv := range row {
					a += gv * (w1*x1[t*T+tp] + W2[tp*d+k]*sig[q]*x2[t*T+tp])
				}
			}
		}
		g.Feature[k] += a
	}
	return F, nil
}

// trigEst holds the Monte Carlo estimates KY_hat, KK_hat and what their gradients reuse.
type trigEst struct {
	s1, s2 trigSet
	Y      [4][]float64
	par    []int
	KY, KK []float64
}

// trigEstimate forms KY_hat and KK_hat (see ELBOTrig) from the statistics.
func trigEstimate(mod Model, p *Params, grid *TrigGrid, st *TrigStats, W1, W2 []float64, M int) trigEst {
	T := grid.NumPoints()
	lay := mod.Layout()
	par := make([]int, M)
	for j := range par {
		par[j] = lay.Parity(j)
	}
	s1 := buildTrigSet(mod, p, grid, grid.U1, W1, M)
	s2 := buildTrigSet(mod, p, grid, grid.U2, W2, M)
	// Y[pq] = P[pq] Z2^T restricted to the features of parity q: Y[pq][t*M+j].
	var Y [4][]float64
	for b := 0; b < 4; b++ {
		Y[b] = make([]float64, T*M)
		q := b & 1
		for t := 0; t < T; t++ {
			prow := st.P[b][t*T : (t+1)*T]
			yrow := Y[b][t*M : (t+1)*M]
			for j := 0; j < M; j++ {
				if par[j] != q {
					continue
				}
				z := s2.Z[j*T : (j+1)*T]
				var a float64
				for tp, v := range prow {
					a += v * z[tp]
				}
				yrow[j] = a
			}
		}
	}
	KY := make([]float64, M)
	KK := make([]float64, M*M)
	for i := 0; i < M; i++ {
		pi := par[i]
		z1 := s1.Z[i*T : (i+1)*T]
		z2 := s2.Z[i*T : (i+1)*T]
		var a float64
		for t := 0; t < T; t++ {
			a += z1[t]*st.B[pi][t] + z2[t]*st.B[2+pi][t]
		}
		KY[i] = 0.5 * a
		for j := 0; j < M; j++ {
			yb := Y[2*pi+par[j]]
			var b float64
			for t := 0; t < T; t++ {
				b += z1[t] * yb[t*M+j]
			}
			KK[i*M+j] = b
		}
	}
	return trigEst{s1: s1, s2: s2, Y: Y, par: par, KY: KY, KK: KK}
}
