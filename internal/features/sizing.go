package features

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/gonum/mathext"

	"github.com/gpreduce/gpreduce/internal/kernel"
)

// DefaultMaxFeatures is the feature limit SizeGL uses when GLSizing.MaxFeatures is 0:
// 16384 features, for which the s x s Gram matrix G = Z^T Z takes 2 GiB in float64.
const DefaultMaxFeatures = 16384

// GLSizing holds what SizeGL needs to choose the Gauss-Legendre box and grid. All lengths and
// frequencies are in standardized input units (frequencies in radians per unit).
type GLSizing struct {
	// N is the number of training rows n (>= 1).
	N int
	// LengthscaleMin and LengthscaleMax bound the lengthscales the optimizer may visit, per
	// dimension (0 < min <= max, finite). The minimum sets the box, the maximum the node spacing.
	LengthscaleMin, LengthscaleMax []float64
	// SignalVarianceMax is the largest signal variance sigma_f^2 allowed; NoiseVarianceMin the noise
	// floor sigma_n^2 (both > 0).
	SignalVarianceMax, NoiseVarianceMin float64
	// Range holds the data extent R_k = max_i x_ik - min_i x_ik per dimension (>= 0).
	Range []float64
	// MaxFeatures refuses grids with more features than this: 0 means DefaultMaxFeatures, and values
	// above MaxGLFeatures are lowered to it.
	MaxFeatures int
	// U optionally overrides the box half-widths (nil = automatic).
	U []float64
	// NodesPerDim optionally overrides the node counts (nil = automatic).
	NodesPerDim []int
}

// AliasMargin multiplies the aliasing bound s_k >= U_k R_k / 2 in SizeGL.
const AliasMargin = 1.5

// ResolveFactor is c in the resolution bound s_k >= c l_max,k U_k in SizeGL.
const ResolveFactor = 5.0

// SizeGL chooses the box half-widths U_k and node counts s_k of the Gauss-Legendre features for
// family f (Fink Shustin & Avron 2022, §§5-6), for the worst case over the hyperparameter box: smallest
// lengthscale, largest signal variance, smallest noise.
//
// Box. Truncating the spectral integral to the box changes every kernel value by at most the
// spectral mass outside it. n-spectral equivalence tolerates a truncation error of
// 1/(2 sigma_f^2 n) in the Rayleigh quotient, whose spectral integrand is bounded by
// n/sigma_n^2 (Fink Shustin & Avron 2022, §5.1, eqs. 17 and 21); hence the tail mass must be at most
//
//	delta = sigma_n0^2 / (2 sigma_f0^2 n^2).
//
// By a union bound over dimensions it suffices that P(|eta_k| > U_k) <= delta/d for each k, i.e. a
// one-sided tail of delta/(2d). The marginal of p(.; l) in dimension k is eta_k = T/l_k with T
// standard normal (RBF) or Student t with 2 nu degrees of freedom (Matern: the spectral density is a
// multivariate t, whose marginals are t with the same degrees of freedom). So
//
//	U_k = Q(1 - delta/(2d)) / LengthscaleMin_k,
//
// with Q the quantile of T. It is computed from the upper tail in log space (delta is often far below
// float64 resolution near 1): for the normal log(erfc(t/sqrt2)/2), with its asymptotic series beyond
// t = 37; for Student t with nu = 2 nu_M degrees of freedom log((1/2) I_{nu/(nu+t^2)}(nu/2, 1/2)) via
// mathext.RegIncBeta, with its leading term once the argument is below 1e-30; then bisection.
// For RBF the paper's closed form U = sqrt(2 ln(4 d sigma_f0^2 n^2 / sigma_n0^2)) / l0 is the same
// recipe with the Chernoff bound P(T > t) <= exp(-t^2/2) in place of the exact tail, so it is a few
// percent larger than this U (e.g. 7.0 against 6.6 for d = 1, n = 1e4, sigma_f^2/sigma_n^2 = 100).
// For Matern the tail is polynomial, U ~ (n^2 sigma_f^2/sigma_n^2)^(1/(2 nu)) / l0: large for
// nu = 1/2. In degenerate settings (noise above signal, tiny n) the one-sided tail is capped at 1/4
// so U stays positive.
//
// Nodes. With the data extent R_k and the largest lengthscale l_max,k (empirical rules, not
// the paper's Theorem 13 bound, which takes the worst case at the smallest lengthscale only):
//
//	s_k = max( ceil(AliasMargin U_k R_k / 2) + 1, ceil(ResolveFactor l_max,k U_k) ).
//
// The first term keeps the GL node spacing near the centre (~ pi U_k / s_k) below the aliasing
// limit 2 pi / R_k; the second resolves the spectral density at the largest lengthscale, where it
// is a spike of width ~ 1/l_max,k. Numerical tests (not in the paper) give both as lower bounds
// (s_k >= U_k R_k / 2 and about 4 l_max U_k); at exactly those counts we measured likelihood errors of a few percent
// (RBF, d = 1), and the margins AliasMargin = 1.5 and ResolveFactor = 5 bring them below 1e-6.
// s_k need not be odd.
//
// Overrides in c.U or c.NodesPerDim are used as given (validated). SizeGL fails, naming the field,
// on missing, inverted or nonpositive bounds, N < 1, or inconsistent lengths, and when the grid
// would need s = prod_k s_k > MaxFeatures features: that error states s, the per-dimension nodes,
// the memory of G, and how to reduce s.
func SizeGL(f kernel.Family, c GLSizing) (U []float64, nodes []int, err error) {
	if err := checkFamily(f); err != nil {
		return nil, nil, err
	}
	d := len(c.LengthscaleMin)
	if d == 0 {
		return nil, nil, fmt.Errorf("gl sizing: LengthscaleMin is empty: need a lower lengthscale bound per input dimension")
	}
	if len(c.LengthscaleMax) != d {
		return nil, nil, fmt.Errorf("gl sizing: LengthscaleMax has %d entries but LengthscaleMin has %d: need one per input dimension", len(c.LengthscaleMax), d)
	}
	for k := 0; k < d; k++ {
		lo, hi := c.LengthscaleMin[k], c.LengthscaleMax[k]
		if !(lo > 0) || math.IsInf(lo, 0) {
			return nil, nil, fmt.Errorf("gl sizing: LengthscaleMin[%d] = %v: lengthscale bounds must be positive and finite", k, lo)
		}
		if !(hi > 0) || math.IsInf(hi, 0) {
			return nil, nil, fmt.Errorf("gl sizing: LengthscaleMax[%d] = %v: lengthscale bounds must be positive and finite", k, hi)
		}
		if lo > hi {
			return nil, nil, fmt.Errorf("gl sizing: LengthscaleMin[%d] = %v exceeds LengthscaleMax[%d] = %v: the lengthscale bounds are inverted", k, lo, k, hi)
		}
	}
	maxF := c.MaxFeatures
	switch {
	case maxF < 0:
		return nil, nil, fmt.Errorf("gl sizing: MaxFeatures = %d: it must be positive (or 0 for the default %d)", maxF, DefaultMaxFeatures)
	case maxF == 0:
		maxF = DefaultMaxFeatures
	case maxF > MaxGLFeatures:
		maxF = MaxGLFeatures
	}

	// Box half-widths.
	U = make([]float64, d)
	if c.U != nil {
		if len(c.U) != d {
			return nil, nil, fmt.Errorf("gl sizing: U has %d entries for %d input dimensions", len(c.U), d)
		}
		for k, u := range c.U {
			if !(u > 0) || math.IsInf(u, 0) {
				return nil, nil, fmt.Errorf("gl sizing: U[%d] = %v: box half-widths must be positive and finite", k, u)
			}
		}
		copy(U, c.U)
	} else {
		if c.N < 1 {
			return nil, nil, fmt.Errorf("gl sizing: N = %d: need at least one training row", c.N)
		}
		if !(c.SignalVarianceMax > 0) || math.IsInf(c.SignalVarianceMax, 0) {
			return nil, nil, fmt.Errorf("gl sizing: SignalVarianceMax = %v: it must be positive and finite", c.SignalVarianceMax)
		}
		if !(c.NoiseVarianceMin > 0) || math.IsInf(c.NoiseVarianceMin, 0) {
			return nil, nil, fmt.Errorf("gl sizing: NoiseVarianceMin = %v: the noise floor must be positive and finite (GL features need a noise floor)", c.NoiseVarianceMin)
		}
		t, err := boxQuantile(f, c, d)
		if err != nil {
			return nil, nil, err
		}
		for k := range U {
			U[k] = t / c.LengthscaleMin[k]
			if math.IsInf(U[k], 0) {
				return nil, nil, fmt.Errorf("gl sizing: the box half-width U[%d] overflows (tail quantile %g, LengthscaleMin %g): raise the noise floor or use --method rff", k, t, c.LengthscaleMin[k])
			}
		}
	}

	// Node counts, as floats until they are known to fit.
	sk := make([]float64, d)
	if c.NodesPerDim != nil {
		if len(c.NodesPerDim) != d {
			return nil, nil, fmt.Errorf("gl sizing: NodesPerDim has %d entries for %d input dimensions", len(c.NodesPerDim), d)
		}
		for k, n := range c.NodesPerDim {
			if n < 1 {
				return nil, nil, fmt.Errorf("gl sizing: NodesPerDim[%d] = %d: node counts must be at least 1", k, n)
			}
			sk[k] = float64(n)
		}
	} else {
		if len(c.Range) != d {
			return nil, nil, fmt.Errorf("gl sizing: Range has %d entries for %d input dimensions: need the data extent per dimension", len(c.Range), d)
		}
		for k := 0; k < d; k++ {
			r := c.Range[k]
			if !(r >= 0) || math.IsInf(r, 0) {
				return nil, nil, fmt.Errorf("gl sizing: Range[%d] = %v: the data extent must be nonnegative and finite", k, r)
			}
			alias := math.Ceil(AliasMargin*U[k]*r/2) + 1
			resolve := math.Ceil(ResolveFactor * c.LengthscaleMax[k] * U[k])
			sk[k] = math.Max(alias, resolve)
		}
	}
	total := 1.0
	for _, v := range sk {
		total *= v
	}
	perDimOK := true
	for _, v := range sk {
		if v > MaxGaussLegendrePoints {
			perDimOK = false
		}
	}
	if total > float64(maxF) || !perDimOK {
		return nil, nil, sizeError(total, sk, U, maxF)
	}
	nodes = make([]int, d)
	for k, v := range sk {
		nodes[k] = int(v)
	}
	return U, nodes, nil
}

// boxQuantile is the spectral tail quantile t of SizeGL's box, U_k = t / l_min,k: the
// one-sided per-dimension tail delta/(2d), delta = sn2 / (2 sf2 n^2), capped at 1/4.
func boxQuantile(f kernel.Family, c GLSizing, d int) (float64, error) {
	lp := math.Log(c.NoiseVarianceMin) - math.Ln2 - math.Log(c.SignalVarianceMax) - 2*math.Log(float64(c.N)) - math.Log(2*float64(d))
	lp = math.Min(lp, -2*math.Ln2)
	return upperTailQuantile(f, lp)
}

func sizeError(total float64, sk, U []float64, maxF int) error {
	parts := make([]string, len(sk))
	for k, v := range sk {
		parts[k] = fmt.Sprintf("%.6g", v)
	}
	us := make([]string, len(U))
	for k, v := range U {
		us[k] = fmt.Sprintf("%.4g", v)
	}
	limit := fmt.Sprintf("MaxFeatures = %d", maxF)
	if total <= float64(maxF) {
		limit = fmt.Sprintf("a single dimension may have at most %d nodes", MaxGaussLegendrePoints)
	}
	return fmt.Errorf("gl sizing: %w: the Gauss-Legendre grid needs s = %.6g features (nodes per dimension [%s], box half-widths U = [%s]), "+
		"but %s; the Gram matrix G = Z^T Z alone would need %s. "+
		"Narrow --lengthscale-bounds (raise the minimum or lower the maximum), raise the noise floor, "+
		"set --nodes-per-dim / --features, or use --method rff or --method grief for higher d",
		ErrOverBudget, total, strings.Join(parts, " "), strings.Join(us, " "), limit, formatBytes(8*total*total))
}

func formatBytes(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	return fmt.Sprintf("%.3g %s", b, units[i])
}

// upperTailQuantile returns the t >= 0 with log P(T > t) = lp (lp <= log 1/2) for the unit-lengthscale
// one-dimensional marginal T of family f's spectral density: standard normal for RBF, Student t with
// 2 nu degrees of freedom for Matern. It brackets by doubling and bisects to full precision, returning
// the upper end of the final bracket, so P(T > t) <= exp(lp).
func upperTailQuantile(f kernel.Family, lp float64) (float64, error) {
	tail := func(t float64) float64 { return logNormalUpperTail(t) }
	if f != kernel.RBF {
		df := 2 * f.Nu()
		tail = func(t float64) float64 { return logStudentUpperTail(df, t) }
	}
	lo, hi := 0.0, 1.0
	for tail(hi) > lp {
		lo = hi
		hi *= 2
		if hi > 1e300 {
			return 0, fmt.Errorf("gl sizing: the spectral tail of %v needs a box wider than 1e300/l (log tail target %g): raise the noise floor or use --method rff", f, lp)
		}
	}
	for i := 0; i < 200; i++ {
		mid := lo + (hi-lo)/2
		if mid <= lo || mid >= hi {
			break
		}
		if tail(mid) > lp {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi, nil
}

// logNormalUpperTail returns log P(Z > t) for a standard normal Z and t >= 0:
// log(erfc(t/sqrt2)/2) while erfc is representable, then the asymptotic series
// P(Z > t) = phi(t)/t (1 - t^-2 + 3 t^-4 - 15 t^-6 + 105 t^-8 - 945 t^-10 + ...), whose
// truncation error at t >= 37 is below 2e-15 relative.
func logNormalUpperTail(t float64) float64 {
	if t < 37 {
		return math.Log(0.5 * math.Erfc(t/math.Sqrt2))
	}
	t2 := t * t
	u := 1 / t2
	series := 1 - u*(1-3*u*(1-5*u*(1-7*u*(1-9*u))))
	return -t2/2 - math.Log(t) - 0.5*math.Log(2*math.Pi) + math.Log(series)
}

// logStudentUpperTail returns log P(T > t) for a Student t variable with df degrees of freedom and
// t >= 0: log((1/2) I_x(df/2, 1/2)), x = df/(df+t^2). For x < 1e-30 it uses the leading term
// I_x(a, b) ~ x^a / (a B(a, b)) (relative error O(x)), which also avoids overflow of t^2.
func logStudentUpperTail(df, t float64) float64 {
	a, b := df/2, 0.5
	var lx float64
	if t < 1e100 {
		lx = math.Log(df) - math.Log(df+t*t)
	} else {
		lx = math.Log(df) - 2*math.Log(t)
	}
	if lx > -69 { // x > 1e-30
		return math.Log(0.5 * mathext.RegIncBeta(a, b, df/(df+t*t)))
	}
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	return -math.Ln2 + a*lx - math.Log(a) - (la + lb - lab)
}

// ErrOverBudget marks a sizing error caused only by the feature budget (MaxFeatures or the
// per-dimension rule limit); PlanGL handles it by narrowing the lengthscale window.
var ErrOverBudget = errors.New("the Gauss-Legendre grid exceeds the feature budget")

// Sizing constants of PlanGL.
const (
	// BudgetResolveFactor is the resolution factor c of s_k >= c l_max,k U_k that PlanGL uses
	// once the default ResolveFactor exceeds the budget. Measured on the RBF kernel (d = 1, lags
	// up to 2 l_max, lengthscales at both ends of the window): the largest kernel error is
	// about 1e-11 at c = 5, 1e-8 at c = 4, 3e-4 at c = 3, 1e-2 at c = 2.5 and 0.1 at c = 2.
	BudgetResolveFactor = 3.0
	// MinResolveFactor is the least resolution factor PlanGL accepts when even a single
	// lengthscale per dimension does not fit the budget at BudgetResolveFactor (kernel error
	// about 1e-2); below it PlanGL fails.
	MinResolveFactor = 2.5
	// LagFactor is kappa in the lag rule of PlanGL. The features reproduce the kernel at
	// lengthscale l to about 1e-3 for lags |tau_k| <= 2 (s_k - 1) / U_k - kappa l with kappa ~ 3.7
	// (measured, RBF, s_k = 200 to 2000, l up to s_k / (3 U_k)): resolving the spectral spike
	// of width 1/l and the oscillation of frequency tau share the nodes.
	LagFactor = 4.0
	// MinLagFactor is kappa when the window has closed to a single lengthscale at a resolution
	// factor below BudgetResolveFactor (kernel error up to about 0.1).
	MinLagFactor = 2.0
	// BudgetTail is the spectral mass PlanGL lets the box truncate once the budget is
	// exceeded, instead of SizeGL's sigma_n0^2 / (2 sigma_f0^2 n^2) (n-spectral equivalence,
	// about 1e-15 for n = 4e4): every kernel value then changes by at most BudgetTail
	// sigma_f^2, a hundredth of the default noise floor, and the box (hence every node
	// count) shrinks by a quarter to a third.
	BudgetTail = 1e-6
	// FlatLengthscale caps the upper lengthscale bound at FlatLengthscale R_k when the budget
	// is exceeded: at l = 10 R_k the RBF kernel varies by less than 0.5% of sigma_f^2 across the
	// data, so the input is effectively switched off and a longer lengthscale adds nothing the
	// data can tell apart, while the node count grows linearly with it.
	FlatLengthscale = 10.0
)

// GLPlan is a Gauss-Legendre grid chosen within a feature budget, with the lengthscale
// window over which its features are accurate and the input lags they cover.
type GLPlan struct {
	// U and Nodes are the box half-widths and node counts per dimension.
	U     []float64
	Nodes []int
	// LengthscaleMin and LengthscaleMax are the lengthscale bounds, per dimension, over which
	// the grid is accurate: the requested bounds unless Adjusted. The optimizer must stay in them.
	LengthscaleMin, LengthscaleMax []float64
	// Width is, per dimension, the largest input lag |x_k - x'_k| (standardized units) at which
	// the features are accurate over the whole window:
	//
	//	W_k = min( 2 (s_k - 1) / (AliasMargin U_k),  2 (s_k - 1) / U_k - kappa_k l_max,k ),
	//
	// the aliasing bound of SizeGL and the lag rule (LagFactor, MinLagFactor); for a grid
	// given by overrides, the aliasing bound alone. Beyond about 1.2 W_k the
	// features alias: the approximate kernel repeats itself instead of decaying.
	Width []float64
	// Adjusted reports that the bounds or the resolution were changed to fit the budget;
	// Notes then say what was done, one sentence per change. FloorRaised reports that a
	// lower lengthscale bound was raised (short lengthscales can no longer be learned), as
	// opposed to only a lower resolution or an upper bound capped where the kernel is flat.
	Adjusted    bool
	FloorRaised bool
	Notes       []string
}

// PlanGL chooses the Gauss-Legendre grid for family f within the budget c.MaxFeatures, for
// inputs whose extent per dimension is c.Range (training and, where known, prediction inputs).
// Nodes per dimension satisfy SizeGL's two bounds and the lag rule
// s_k >= U_k (R_k + kappa l_max,k) / 2 + 1 (LagFactor), so that Width_k >= R_k. When that fits the
// budget the plan uses the requested bounds. Otherwise it fits the grid to the budget and
// records what it changed (by SizeGL's node rules the count grows as U_k R_k for aliasing and as
// l_max,k U_k for resolution, with U_k ~ 1 / l_min,k):
//
//  1. the resolution factor drops from ResolveFactor to BudgetResolveFactor and the box
//     truncates the spectral mass BudgetTail instead of SizeGL's n-dependent tail;
//  2. the budget is shared among dimensions: those that need fewer nodes keep their need, the
//     others share the rest equally (in the product sense);
//  3. in each dimension over its share b_k, the upper lengthscale bound is capped at
//     FlatLengthscale R_k and the lower bound is raised to the smallest value the share can
//     represent, l_lo = max(l_min, c t l_hi / b_k, t (AliasMargin R_k, R_k + kappa l_hi) / (2 (b_k - 1))),
//     where t is the spectral tail quantile of SizeGL (U_k = t / l_lo);
//  4. if the window closes (l_lo > l_hi), the lengthscale is fixed and the resolution factor
//     drops to b_k / t, down to MinResolveFactor.
//
// A box c.U is used as given (with c.NodesPerDim or SizeGL's nodes). Node counts c.NodesPerDim
// without a box are each dimension's share of step 2: the box and the lengthscale window are
// fitted to them as above (a box sized for the lower bound with too few nodes aliases on the
// training inputs themselves: 32 x 32 nodes for bounds 0.05,100 gave a 0.24-wide domain on
// inputs 3.5 wide and the all-noise fit), and the plan keeps exactly those counts; counts too
// few for even step 4 are used as given, with the box for the lower bound, and a note that
// says so. Otherwise PlanGL fails, wrapping ErrOverBudget, when even step 4 cannot fit,
// saying what to change.
func PlanGL(f kernel.Family, c GLSizing) (*GLPlan, error) {
	U, nodes, err := SizeGL(f, c)
	asGiven := func(notes []string) *GLPlan {
		p := newPlan(U, nodes, c.LengthscaleMin, c.LengthscaleMax, ResolveFactor, notes)
		for k := range p.Width { // a grid given by hand: the aliasing bound alone
			p.Width[k] = 2 * float64(nodes[k]-1) / (AliasMargin * U[k])
		}
		return p
	}
	if c.NodesPerDim != nil || c.U != nil {
		if err != nil { // bad counts or box, or more than max-features
			return nil, err
		}
		if c.U != nil {
			return asGiven(nil), nil
		}
		p, err := planBudget(f, c, c.NodesPerDim)
		if errors.Is(err, ErrOverBudget) {
			return asGiven([]string{fmt.Sprintf("nodes-per-dim %v are too few to cover the inputs' extent %.4g at any lengthscale in the bounds (%v); the grid is used as given with the box for the lower bound, so the model's domain is narrower than the inputs and the features alias beyond it",
				c.NodesPerDim, c.Range, err)}), nil
		}
		return p, err
	}
	if err != nil && !errors.Is(err, ErrOverBudget) {
		return nil, err
	}
	return planBudget(f, c, nil)
}

// planBudget is PlanGL's budget path, steps 1-4; hand, when not nil, gives each dimension's
// share of step 2 and the plan's node counts.
func planBudget(f kernel.Family, c GLSizing, hand []int) (*GLPlan, error) {
	d := len(c.LengthscaleMin)
	maxF := c.MaxFeatures
	if maxF == 0 {
		maxF = DefaultMaxFeatures
	}
	maxF = min(maxF, MaxGLFeatures)
	t, err := boxQuantile(f, c, d)
	if err != nil {
		return nil, err
	}
	nodesFor := func(k int, lo, hi, res float64) float64 {
		alias := math.Ceil(AliasMargin*t*c.Range[k]/(2*lo)) + 1
		lag := math.Ceil(t*(c.Range[k]+lagFactor(res)*hi)/(2*lo)) + 1
		return math.Max(math.Max(alias, lag), math.Ceil(res*t*hi/lo))
	}
	fits := func(need []float64) bool {
		if hand != nil {
			for k, v := range need {
				if v > float64(hand[k]) {
					return false
				}
			}
			return true
		}
		total := 1.0
		for _, v := range need {
			total *= v
		}
		return total <= float64(maxF) && slices.Max(need) <= MaxGaussLegendrePoints
	}
	lo, hi := append([]float64(nil), c.LengthscaleMin...), append([]float64(nil), c.LengthscaleMax...)
	need := make([]float64, d)
	for k := range need {
		need[k] = nodesFor(k, lo[k], hi[k], ResolveFactor)
	}
	// withHand gives a plan the given node counts (more nodes than needed only add accuracy).
	var handF []float64
	for _, v := range hand {
		handF = append(handF, float64(v))
	}
	withHand := func(need []float64) []float64 {
		if hand == nil {
			return need
		}
		return handF
	}
	if fits(need) {
		return planOf(t, withHand(need), lo, hi, ResolveFactor, nil), nil
	}

	// Step 1: the budget truncation and resolution factor.
	notes := []string{fmt.Sprintf("resolution factor lowered from %g to %g (s_k >= c l_max U_k; kernel error about 3e-4 instead of 1e-11)", ResolveFactor, BudgetResolveFactor)}
	if tb, err := upperTailQuantile(f, math.Log(BudgetTail/(2*float64(d)))); err == nil && tb < t {
		notes = append(notes, fmt.Sprintf("spectral box truncated at tail mass %g (U_k = %.3g / l_min instead of %.3g / l_min; kernel error at most %g sigma_f^2)", BudgetTail, tb, t, BudgetTail))
		t = tb
	}
	for k := range need {
		need[k] = nodesFor(k, lo[k], hi[k], BudgetResolveFactor)
	}
	if fits(need) {
		return planOf(t, withHand(need), lo, hi, BudgetResolveFactor, notes), nil
	}

	// Step 2: share the budget (given node counts are the shares).
	share := make([]float64, d)
	order := make([]int, d)
	for k := range order {
		order[k] = k
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(need[a], need[b]) })
	left := float64(maxF)
	for i, k := range order {
		fair := math.Floor(math.Pow(left, 1/float64(d-i)) * (1 + 1e-12))
		share[k] = math.Min(math.Min(need[k], fair), MaxGaussLegendrePoints)
		if hand != nil {
			share[k] = float64(hand[k])
		}
		left /= share[k]
	}

	// Steps 3 and 4, per dimension over its share.
	res := make([]float64, d)
	for k := range res {
		res[k] = BudgetResolveFactor
		if share[k] >= need[k] {
			continue
		}
		b := share[k]
		if b < 2 {
			return nil, fmt.Errorf("gl sizing: %w: max-features %d leaves %g node(s) for input dimension %d of %d; raise --max-features or use --method grief or rff", ErrOverBudget, maxF, b, k, d)
		}
		oldLo, oldHi := lo[k], hi[k]
		hi[k] = math.Max(lo[k], math.Min(hi[k], FlatLengthscale*c.Range[k]))
		r := c.Range[k]
		lo[k] = math.Max(lo[k], math.Max(res[k]*t*hi[k]/b, t*math.Max(AliasMargin*r, r+LagFactor*hi[k])/(2*(b-1))))
		if lo[k] > hi[k] {
			// The window closed: one lengthscale l, at the lowest resolution the share allows:
			// res = b / t, and the lag rule t (R + kappa l) / (2 l) + 1 <= b.
			res[k] = b / t
			den := 2*(b-1) - MinLagFactor*t
			if res[k] < MinResolveFactor || den <= 0 {
				need1 := math.Ceil(MinResolveFactor * t * 1.5)
				return nil, fmt.Errorf("gl sizing: %w: max-features %d leaves %g nodes for input dimension %d of %d, too few for even a single lengthscale (about %g); raise --max-features to at least %.0f or use --method grief or rff",
					ErrOverBudget, maxF, b, k, d, need1, math.Pow(need1, float64(d)))
			}
			l := math.Max(hi[k], t*math.Max(AliasMargin*r/(2*(b-1)), r/den))
			if l > c.LengthscaleMax[k] {
				return nil, fmt.Errorf("gl sizing: %w: with %g nodes for input dimension %d the data extent %.4g needs lengthscales of at least %.4g, above the upper bound %g; raise --max-features or the upper lengthscale bound, or use --method grief or rff",
					ErrOverBudget, b, k, r, l, c.LengthscaleMax[k])
			}
			lo[k], hi[k] = l, l
		}
		if lo[k] != oldLo || hi[k] != oldHi {
			notes = append(notes, fmt.Sprintf("dimension %d: lengthscale bounds %.4g,%.4g narrowed to %.4g,%.4g to fit %g nodes", k, oldLo, oldHi, lo[k], hi[k], b))
		}
		if res[k] < BudgetResolveFactor {
			notes = append(notes, fmt.Sprintf("dimension %d: resolution factor %.3g (kernel error up to about 0.1)", k, res[k]))
		}
		need[k] = math.Min(nodesFor(k, lo[k], hi[k], res[k]), b)
	}
	if !fits(need) {
		return nil, fmt.Errorf("gl sizing: %w: planned %v nodes for max-features %d", ErrOverBudget, need, maxF)
	}
	p := planOf(t, withHand(need), lo, hi, slices.Min(res), notes)
	for k := range lo {
		p.FloorRaised = p.FloorRaised || lo[k] > c.LengthscaleMin[k]
	}
	return p, nil
}

// lagFactor is kappa of the lag rule at resolution factor res.
func lagFactor(res float64) float64 {
	if res < BudgetResolveFactor {
		return MinLagFactor
	}
	return LagFactor
}

// planOf builds a plan from the tail quantile t (U_k = t / lo_k) and node counts.
func planOf(t float64, need, lo, hi []float64, res float64, notes []string) *GLPlan {
	U := make([]float64, len(lo))
	nodes := make([]int, len(lo))
	for k := range U {
		U[k] = t / lo[k]
		nodes[k] = int(need[k])
	}
	return newPlan(U, nodes, lo, hi, res, notes)
}

func newPlan(U []float64, nodes []int, lo, hi []float64, res float64, notes []string) *GLPlan {
	p := &GLPlan{U: U, Nodes: nodes, LengthscaleMin: append([]float64(nil), lo...), LengthscaleMax: append([]float64(nil), hi...),
		Width: make([]float64, len(U)), Adjusted: len(notes) > 0, Notes: notes}
	for k := range U {
		s1 := float64(nodes[k] - 1)
		p.Width[k] = math.Max(0, math.Min(2*s1/(AliasMargin*U[k]), 2*s1/U[k]-lagFactor(res)*hi[k]))
	}
	return p
}
