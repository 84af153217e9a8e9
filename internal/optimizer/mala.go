package optimizer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
)

// MALASettings controls MALA. Zero values select the defaults given per field.
type MALASettings struct {
	// Step is the initial step size eps of the Langevin proposal; default 0.5. During burn-in it
	// is adapted (Robbins-Monro on log eps) towards TargetAccept; afterwards it is fixed, so
	// the retained chain is a proper Markov chain with the target as its invariant law.
	Step float64
	// Iters is the total number of MALA iterations, burn-in included; default 10000.
	Iters int
	// BurnIn is the number of leading iterations discarded; default 1000 (0 keeps the default;
	// a negative value means no burn-in).
	BurnIn int
	// Thin: after burn-in every Thin-th state is passed to onSample; default 50.
	Thin int
	// TargetAccept is the acceptance rate the burn-in adapts the step towards; default 0.574,
	// the optimal rate for MALA (Roberts & Rosenthal 1998).
	TargetAccept float64
	// Scale, when set, is a diagonal preconditioner: the proposal's standard deviation in
	// coordinate i is eps*Scale[i] and its drift is (eps^2/2) Scale[i]^2 dlogp/dx_i. It should
	// be about the posterior standard deviation of each coordinate. nil means all ones.
	Scale []float64
}

func (s MALASettings) resolve(n int) (MALASettings, error) {
	if s.Step == 0 {
		s.Step = 0.5
	}
	if s.Iters == 0 {
		s.Iters = 10000
	}
	if s.BurnIn == 0 {
		s.BurnIn = 1000
	}
	if s.BurnIn < 0 {
		s.BurnIn = 0
	}
	if s.Thin == 0 {
		s.Thin = 50
	}
	if s.TargetAccept == 0 {
		s.TargetAccept = 0.574
	}
	switch {
	case !(s.Step > 0) || math.IsInf(s.Step, 0):
		return s, fmt.Errorf("mala: step %v must be positive and finite", s.Step)
	case s.Iters < 0 || s.Thin < 0:
		return s, fmt.Errorf("mala: iterations %d and thinning %d must not be negative", s.Iters, s.Thin)
	case s.BurnIn >= s.Iters:
		return s, fmt.Errorf("mala: burn-in %d leaves no iterations of %d", s.BurnIn, s.Iters)
	case !(s.TargetAccept > 0 && s.TargetAccept < 1):
		return s, fmt.Errorf("mala: target acceptance %v must be in (0, 1)", s.TargetAccept)
	}
	if s.Scale != nil {
		if len(s.Scale) != n {
			return s, fmt.Errorf("mala: %d scales for %d variables", len(s.Scale), n)
		}
		for i, c := range s.Scale {
			if !(c > 0) || math.IsInf(c, 0) {
				return s, fmt.Errorf("mala: scale %d is %v; it must be positive and finite", i, c)
			}
		}
	}
	return s, nil
}

// MALA samples the density exp(logp) by the Metropolis-adjusted Langevin algorithm. From x
// the proposal is
//
//	x' = x + (eps^2/2) M g(x) + eps M^(1/2) z,   z ~ N(0, I),  g = grad logp,  M = diag(Scale^2)
//
// and it is accepted with probability min(1, exp(logp(x') - logp(x) + log q(x|x') - log q(x'|x)))
// where q(b|a) = N(b; a + (eps^2/2) M g(a), eps^2 M) is the asymmetric Langevin proposal
// density. During the first BurnIn iterations log eps moves by (accept - TargetAccept)/(t+1)^0.6
// after iteration t; then eps is frozen. After burn-in every Thin-th state (counting from the
// first post-burn-in iteration, the Thin-th being the first retained) is passed to onSample,
// which must copy it if it keeps it; so (Iters - BurnIn)/Thin samples are retained.
//
// logp writes the gradient into grad (zeroed before each call) and may return -Inf (or NaN)
// for a point outside the support, which is then rejected; an error aborts the run. x0 must
// have a finite logp. The run is deterministic given seed (a PCG stream), and it returns the
// acceptance rate after burn-in.
func MALA(ctx context.Context, logp func(x, grad []float64) (float64, error), x0 []float64, set MALASettings, seed uint64, onSample func(x []float64)) (acceptRate float64, err error) {
	n := len(x0)
	if n == 0 {
		return 0, errors.New("mala: empty start point")
	}
	if err := checkFinite("x0", x0); err != nil {
		return 0, fmt.Errorf("mala: %w", err)
	}
	set, err = set.resolve(n)
	if err != nil {
		return 0, err
	}
	scale := set.Scale
	if scale == nil {
		scale = make([]float64, n)
		for i := range scale {
			scale[i] = 1
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x6d616c61)) // "mala"
	eval := func(x, g []float64) (float64, error) {
		clear(g)
		f, err := logp(x, g)
		if err != nil {
			return 0, fmt.Errorf("mala: %w", err)
		}
		if math.IsNaN(f) || !allFinite(g) {
			f = math.Inf(-1)
		}
		return f, nil
	}
	x, g := cloneVec(x0), make([]float64, n)
	f, err := eval(x, g)
	if err != nil {
		return 0, err
	}
	if math.IsInf(f, 0) {
		return 0, fmt.Errorf("mala: log density at the start point is %v", f)
	}
	xp, gp := make([]float64, n), make([]float64, n)
	logEps := math.Log(set.Step)
	accepted, after := 0, 0
	// logq returns log q(b|a) up to a constant shared by both directions: the Gaussian of the
	// drift-corrected move b - a - (eps^2/2) M g(a) with covariance eps^2 M.
	logq := func(b, a, ga []float64, eps float64) float64 {
		var s float64
		h := eps * eps / 2
		for i := range b {
			c2 := scale[i] * scale[i]
			r := b[i] - a[i] - h*c2*ga[i]
			s += r * r / c2
		}
		return -s / (2 * eps * eps)
	}
	for it := 0; it < set.Iters; it++ {
		if it%64 == 0 {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
		}
		eps := math.Exp(logEps)
		h := eps * eps / 2
		for i := range xp {
			c := scale[i]
			xp[i] = x[i] + h*c*c*g[i] + eps*c*rng.NormFloat64()
		}
		u := rng.Float64()
		fp, err := eval(xp, gp)
		if err != nil {
			return 0, err
		}
		alpha := 0.0
		if !math.IsInf(fp, 0) {
			logA := fp - f + logq(x, xp, gp, eps) - logq(xp, x, g, eps)
			if math.IsNaN(logA) {
				alpha = 0
			} else {
				alpha = math.Min(1, math.Exp(logA))
			}
		}
		acc := u < alpha
		if acc {
			x, xp = xp, x
			g, gp = gp, g
			f = fp
		}
		if it < set.BurnIn {
			logEps += (alpha - set.TargetAccept) / math.Pow(float64(it+1), 0.6)
			continue
		}
		after++
		if acc {
			accepted++
		}
		if onSample != nil && set.Thin > 0 && after%set.Thin == 0 {
			onSample(x)
		}
	}
	return float64(accepted) / float64(after), nil
}
