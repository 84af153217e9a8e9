package optimizer

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// FuncTolIters is the number of consecutive iterations whose relative decrease must be at or
// below LBFGSSettings.FuncTol before MinimizeLBFGSB stops with ReasonFuncTol.
const FuncTolIters = 3

const (
	// armijoC is the sufficient-decrease constant of the projected Armijo condition.
	armijoC = 1e-4
	// maxLineSearch bounds the trial steps of one line search.
	maxLineSearch = 40
	// curvEps: a curvature pair is used only if s^T y > curvEps * y^T y.
	curvEps = 2.220446049250313e-16
	// maxFirstStep caps the initial step 1/||p|| of steepest descent for tiny gradients.
	maxFirstStep = 1e10
	// activeFrac caps the width of the epsilon-active set at this fraction of a variable's
	// box width.
	activeFrac = 1e-3
)

// LBFGSSettings controls MinimizeLBFGSB. Zero values select the defaults given per field.
type LBFGSSettings struct {
	// Memory is the number of curvature pairs kept; default 10.
	Memory int
	// MaxIter is the number of accepted iterations after which the run stops; default 200.
	MaxIter int
	// MaxEvals is the number of objective evaluations, the start point included, after which
	// the run stops; default 1000.
	MaxEvals int
	// GradTol: stop when max_i |P(x - g)_i - x_i| <= GradTol, with P the projection onto the
	// box (the projected gradient used by L-BFGS-B); default 1e-6. A negative value disables
	// the test except for an exactly zero projected gradient.
	GradTol float64
	// FuncTol: stop when (f_old - f_new) / max(|f_old|, |f_new|, 1) <= FuncTol for
	// FuncTolIters consecutive iterations; default 1e-10. A negative value disables the test.
	FuncTol float64
}

// resolve fills in defaults and rejects settings that cannot be meant.
func (s LBFGSSettings) resolve() (LBFGSSettings, error) {
	if s.Memory < 0 || s.MaxIter < 0 || s.MaxEvals < 0 {
		return s, fmt.Errorf("settings Memory %d, MaxIter %d, MaxEvals %d: none may be negative (0 selects the default)", s.Memory, s.MaxIter, s.MaxEvals)
	}
	if math.IsNaN(s.GradTol) || math.IsNaN(s.FuncTol) {
		return s, errors.New("settings GradTol and FuncTol must not be NaN")
	}
	if s.Memory == 0 {
		s.Memory = 10
	}
	if s.MaxIter == 0 {
		s.MaxIter = 200
	}
	if s.MaxEvals == 0 {
		s.MaxEvals = 1000
	}
	if s.GradTol == 0 {
		s.GradTol = 1e-6
	}
	if s.FuncTol == 0 {
		s.FuncTol = 1e-10
	}
	return s, nil
}

// LBFGSState is the complete state of a MinimizeLBFGSB run. It holds only exported plain
// fields, so gob or JSON encoding saves it exactly (JSON prints float64 in shortest
// round-trip form) and a run resumed from a decoded copy continues bit for bit like the
// original. Create it with NewLBFGSState; MinimizeLBFGSB updates it in place. Decode a saved
// state into a zero LBFGSState: gob leaves fields it does not send (zero values) untouched.
type LBFGSState struct {
	// X is the current point; it always lies inside the box.
	X []float64
	// F and Grad are the objective value and gradient at X; valid when Evaluated is set.
	// F = -0 is stored as +0, which gob could not tell apart.
	F    float64
	Grad []float64
	// Evaluated reports whether F and Grad belong to X. A fresh state is not evaluated.
	Evaluated bool
	// Iter counts accepted iterations.
	Iter int
	// Evals counts objective evaluations, the start point and rejected trial points included.
	Evals int
	// S and Y are the stored curvature pairs s_k = x_{k+1} - x_k and y_k = g_{k+1} - g_k,
	// oldest first, at most Memory of them, each with s^T y > eps y^T y.
	S, Y [][]float64
	// SmallDecreases counts the latest consecutive iterations whose relative decrease was at
	// or below FuncTol.
	SmallDecreases int
	// Done is set when the run has stopped for one of the Reason* reasons; MinimizeLBFGSB
	// returns at once on a Done state (clear Done to continue, e.g. with larger limits).
	Done bool
	// Reason says why the run stopped; empty while not Done.
	Reason string
}

// NewLBFGSState starts a run at x0 in the box [lower, upper]. The box must have one finite
// bound pair per variable with lower <= upper (lower == upper fixes a variable); x0 must be
// finite. x0 is copied and clipped into the box, so a start point outside it is moved to the
// nearest point of the box rather than rejected.
func NewLBFGSState(x0, lower, upper []float64) (*LBFGSState, error) {
	if len(x0) == 0 {
		return nil, errors.New("lbfgsb: empty start point")
	}
	if err := checkBox(lower, upper, len(x0)); err != nil {
		return nil, fmt.Errorf("lbfgsb: %w", err)
	}
	if err := checkFinite("x0", x0); err != nil {
		return nil, fmt.Errorf("lbfgsb: %w", err)
	}
	x := cloneVec(x0)
	clipInto(x, lower, upper)
	return &LBFGSState{X: x}, nil
}

// check validates the shape of a (possibly decoded) state for n variables.
func (st *LBFGSState) check() error {
	n := len(st.X)
	if n == 0 {
		return errors.New("state has no variables")
	}
	if err := checkFinite("X", st.X); err != nil {
		return err
	}
	if st.Evaluated {
		if len(st.Grad) != n {
			return fmt.Errorf("state has %d gradient entries for %d variables", len(st.Grad), n)
		}
		if !finite(st.F) || !allFinite(st.Grad) {
			return errors.New("state has a non-finite value or gradient")
		}
	}
	if len(st.S) != len(st.Y) {
		return fmt.Errorf("state has %d s and %d y vectors", len(st.S), len(st.Y))
	}
	for j := range st.S {
		if len(st.S[j]) != n || len(st.Y[j]) != n {
			return fmt.Errorf("curvature pair %d has lengths %d and %d for %d variables", j, len(st.S[j]), len(st.Y[j]), n)
		}
	}
	if st.Iter < 0 || st.Evals < 0 || st.SmallDecreases < 0 {
		return errors.New("state has negative counters")
	}
	return nil
}

// MinimizeLBFGSB minimises obj over the box [lower, upper] with a projected L-BFGS method,
// continuing from st, which may be fresh from NewLBFGSState or decoded from a checkpoint.
//
// The objective is only ever evaluated at points inside the box. Each iteration splits the
// variables into an epsilon-active set (within eps = min(||P(x-g)-x||_inf, 1e-3 (u-l)) of a
// bound with the gradient pushing outward) and the free rest. Free variables get the L-BFGS
// two-loop direction built from the stored pairs restricted to the free variables (pairs
// with s^T y <= eps y^T y there are skipped); active variables get the gradient step scaled
// like the two-loop's initial matrix, so those on their bound stay there and those near it
// move onto it. If that is not a descent direction, the memory is cleared and projected
// steepest descent is used. The step is found by backtracking along the projected path
// x(a) = P(x + a p) until f(x(a)) <= f(x) + 1e-4 g^T (x(a) - x). It starts from a = 1, or
// from a = min(1/||p||, 1e10) when no curvature pair is used (||p|| over the free
// variables), and shrinks a by quadratic interpolation kept within [0.1a, 0.5a], for at most
// 40 trials. A trial point whose value or gradient is NaN or infinite counts as a failed
// step and halves a. If the quasi-Newton line search fails, it is retried once with
// steepest descent and cleared memory.
//
// The run stops, setting st.Done and st.Reason, on the tests of LBFGSSettings; it also stops
// with ReasonLineSearch when no acceptable step exists. st is updated only when an iteration
// completes (or the run stops), never half way: if ctx is cancelled, the objective fails or a
// start-point value is not finite, the error is returned and st still holds the last
// completed iteration, so resuming from it repeats exactly what an uninterrupted run does.
// ctx is checked at the start of every iteration and before every evaluation. If st.X is outside the box (the box differs from
// the one the state was created with), it is clipped and the run restarts there with empty
// memory.
//
// onIter, if non-nil, is called after every update of st: once after the start point has
// been evaluated (Iter 0) and after every iteration, including a last update that only marks
// the state Done. It may save st (it must not modify it); if it returns an error, the run
// stops and returns that error unchanged.
func MinimizeLBFGSB(ctx context.Context, obj Objective, st *LBFGSState, lower, upper []float64, set LBFGSSettings, onIter func(st *LBFGSState) error) error {
	if obj == nil {
		return errors.New("lbfgsb: nil objective")
	}
	if st == nil {
		return errors.New("lbfgsb: nil state: create one with NewLBFGSState")
	}
	set, err := set.resolve()
	if err != nil {
		return fmt.Errorf("lbfgsb: %w", err)
	}
	if err := st.check(); err != nil {
		return fmt.Errorf("lbfgsb: %w", err)
	}
	if err := checkBox(lower, upper, len(st.X)); err != nil {
		return fmt.Errorf("lbfgsb: %w", err)
	}
	if st.Done {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}

	changed := false
	x := cloneVec(st.X)
	if clipInto(x, lower, upper) {
		st.X, st.F, st.Grad, st.Evaluated = x, 0, nil, false
		st.S, st.Y, st.SmallDecreases = nil, nil, 0
		changed = true
	}
	if k := len(st.S) - set.Memory; k > 0 {
		st.S, st.Y = append([][]float64(nil), st.S[k:]...), append([][]float64(nil), st.Y[k:]...)
		changed = true
	}
	if !st.Evaluated && st.Evals < set.MaxEvals {
		f, g, err := evaluate(obj, st.X)
		if err != nil {
			return fmt.Errorf("lbfgsb: objective at the start point: %w", err)
		}
		if !finite(f) || !allFinite(g) {
			return fmt.Errorf("lbfgsb: objective at the start point gave value %v and a gradient that is finite: %v; the start point must give finite values", f, allFinite(g))
		}
		st.F, st.Grad, st.Evaluated = canon(f), g, true
		st.Evals++
		changed = true
	}
	if st.stop(set, lower, upper) {
		changed = true
	}
	if changed && onIter != nil {
		if err := onIter(st); err != nil {
			return err
		}
	}
	for !st.Done {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := st.iterate(ctx, obj, lower, upper, set); err != nil {
			return err
		}
		st.stop(set, lower, upper)
		if onIter != nil {
			if err := onIter(st); err != nil {
				return err
			}
		}
	}
	return nil
}

// stop applies the stopping tests to an evaluated state; it reports whether it marked the
// state Done.
func (st *LBFGSState) stop(set LBFGSSettings, lower, upper []float64) bool {
	if st.Done {
		return false
	}
	reason := ""
	switch {
	case !st.Evaluated:
		// Only reachable when MaxEvals is already used up.
		reason = ReasonMaxEvals
	case projGradInf(st.X, st.Grad, lower, upper) <= max(set.GradTol, 0):
		reason = ReasonGradTol
	case st.SmallDecreases >= FuncTolIters:
		reason = ReasonFuncTol
	case st.Iter >= set.MaxIter:
		reason = ReasonMaxIter
	case st.Evals >= set.MaxEvals:
		reason = ReasonMaxEvals
	default:
		return false
	}
	st.Done, st.Reason = true, reason
	return true
}

// projGradInf is max_i |P(x - g)_i - x_i|.
func projGradInf(x, g, lower, upper []float64) float64 {
	m := 0.0
	for i, xi := range x {
		d := math.Abs(clip(xi-g[i], lower[i], upper[i]) - xi)
		if d > m || math.IsNaN(d) {
			m = d
		}
	}
	return m
}

// iterate performs one iteration from the evaluated state st. On success it commits the new
// point (or marks the state Done when no step can be taken); on error st is unchanged.
func (st *LBFGSState) iterate(ctx context.Context, obj Objective, lower, upper []float64, set LBFGSSettings) error {
	n := len(st.X)
	x, f, g := st.X, st.F, st.Grad

	pg := projGradInf(x, g, lower, upper)
	free := make([]bool, n)
	for i := range n {
		eps := min(pg, float64(activeFrac*(upper[i]-lower[i])))
		atLower := x[i]-lower[i] <= eps && g[i] > 0
		atUpper := upper[i]-x[i] <= eps && g[i] < 0
		free[i] = !atLower && !atUpper
	}

	S, Y := st.S, st.Y
	p, used := direction(g, S, Y, free)
	steepest := used == 0
	if gp := dot(g, p); !(gp < 0) || !allFinite(p) {
		p, S, Y, steepest = negate(g), nil, nil, true
	}

	evals := st.Evals
	for {
		a0 := 1.0
		if steepest {
			nf := math.Sqrt(dotMasked(p, p, free))
			if nf == 0 {
				nf = norm2(p)
			}
			a0 = min(1/nf, maxFirstStep)
		}
		xa, fa, ga, status, err := lineSearch(ctx, obj, x, f, g, p, a0, lower, upper, &evals, set.MaxEvals)
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return err
			}
			return fmt.Errorf("lbfgsb: objective in iteration %d: %w", st.Iter+1, err)
		}
		switch status {
		case lsAccepted:
			st.commit(xa, fa, ga, S, Y, evals, set)
			return nil
		case lsExhausted:
			st.Evals, st.Done, st.Reason = evals, true, ReasonMaxEvals
			return nil
		}
		if steepest {
			st.Evals, st.Done, st.Reason = evals, true, ReasonLineSearch
			return nil
		}
		p, S, Y, steepest = negate(g), nil, nil, true
	}
}

// commit stores an accepted step and its curvature pair.
func (st *LBFGSState) commit(xa []float64, fa float64, ga []float64, S, Y [][]float64, evals int, set LBFGSSettings) {
	n := len(xa)
	s, y := make([]float64, n), make([]float64, n)
	for i := range n {
		s[i] = xa[i] - st.X[i]
		y[i] = ga[i] - st.Grad[i]
	}
	keep := len(S)
	if dot(s, y) > float64(curvEps*dot(y, y)) {
		keep = min(keep, set.Memory-1)
		S = append(append([][]float64(nil), S[len(S)-keep:]...), s)
		Y = append(append([][]float64(nil), Y[len(Y)-keep:]...), y)
	} else {
		S, Y = append([][]float64(nil), S...), append([][]float64(nil), Y...)
	}
	if len(S) == 0 {
		S, Y = nil, nil
	}

	f := st.F
	rel := (f - fa) / max(math.Abs(f), math.Abs(fa), 1)
	if rel <= set.FuncTol {
		st.SmallDecreases++
	} else {
		st.SmallDecreases = 0
	}
	st.X, st.F, st.Grad = xa, canon(fa), ga
	st.S, st.Y = S, Y
	st.Iter++
	st.Evals = evals
}

// direction returns the search direction: minus the two-loop L-BFGS product on the free
// variables and the scaled negative gradient on the others, and the number of pairs used.
func direction(g []float64, S, Y [][]float64, free []bool) ([]float64, int) {
	n, m := len(g), len(S)
	q := make([]float64, n)
	for i := range n {
		if free[i] {
			q[i] = g[i]
		}
	}
	alpha, rho, use := make([]float64, m), make([]float64, m), make([]bool, m)
	gamma, used := 1.0, 0
	for j := m - 1; j >= 0; j-- {
		sy := dotMasked(S[j], Y[j], free)
		yy := dotMasked(Y[j], Y[j], free)
		if !(sy > float64(curvEps*yy)) || yy == 0 {
			continue
		}
		if used == 0 {
			gamma = sy / yy
		}
		use[j], rho[j] = true, 1/sy
		used++
		alpha[j] = rho[j] * dotMasked(S[j], q, free)
		for i := range n {
			if free[i] {
				q[i] -= float64(alpha[j] * Y[j][i])
			}
		}
	}
	for i := range n {
		q[i] *= gamma
	}
	for j := range m {
		if !use[j] {
			continue
		}
		beta := float64(rho[j] * dotMasked(Y[j], q, free))
		c := alpha[j] - beta
		for i := range n {
			if free[i] {
				q[i] += float64(c * S[j][i])
			}
		}
	}
	p := make([]float64, n)
	for i := range n {
		if free[i] {
			p[i] = -q[i]
		} else {
			p[i] = -float64(gamma * g[i])
		}
	}
	return p, used
}

func negate(g []float64) []float64 {
	p := make([]float64, len(g))
	for i, v := range g {
		p[i] = -v
	}
	return p
}

type lsStatus int

const (
	lsAccepted  lsStatus = iota
	lsFailed             // no acceptable step (or the step underflowed to no movement)
	lsExhausted          // the evaluation budget ran out
)

// lineSearch backtracks along the projected path P(x + a p) from a = a0. It counts
// evaluations in *evals and never evaluates a point outside the box.
func lineSearch(ctx context.Context, obj Objective, x []float64, f float64, g, p []float64, a0 float64,
	lower, upper []float64, evals *int, maxEvals int) ([]float64, float64, []float64, lsStatus, error) {
	n := len(x)
	a := a0
	for range maxLineSearch {
		xa := make([]float64, n)
		moved := false
		dd := 0.0 // g^T (x(a) - x)
		for i := range n {
			v := x[i]
			if p[i] != 0 {
				v = clip(x[i]+float64(a*p[i]), lower[i], upper[i])
			}
			xa[i] = v
			if v != x[i] {
				moved = true
			}
			dd += float64(g[i] * (v - x[i]))
		}
		if !moved {
			return nil, 0, nil, lsFailed, nil
		}
		if !(dd < 0) {
			// The projection turned the step uphill; shorter steps bend less.
			a *= 0.5
			continue
		}
		if *evals >= maxEvals {
			return nil, 0, nil, lsExhausted, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, 0, nil, lsFailed, err
		}
		fa, ga, err := evaluate(obj, xa)
		*evals++
		if err != nil {
			return nil, 0, nil, lsFailed, err
		}
		ok := finite(fa) && allFinite(ga)
		if ok && fa <= f+float64(armijoC*dd) {
			return xa, fa, ga, lsAccepted, nil
		}
		if !ok {
			a *= 0.5
			continue
		}
		// Minimiser of the quadratic through f, the slope dd and fa, kept in [0.1a, 0.5a].
		t := -dd / (2 * (fa - f - dd))
		if !(t >= 0.1) {
			t = 0.1
		} else if t > 0.5 {
			t = 0.5
		}
		a *= t
	}
	return nil, 0, nil, lsFailed, nil
}
