package optimizer

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// AdamSettings controls MinimizeAdam. Zero values select the defaults given per field (so
// Beta1 = 0 cannot be requested).
type AdamSettings struct {
	// LearningRate is the base step size, shaped per iteration by Schedule; default 0.01.
	LearningRate float64
	// Beta1 and Beta2 are the decay rates of the first and second moment estimates, in
	// (0, 1); defaults 0.9 and 0.999.
	Beta1, Beta2 float64
	// Eps is added to the square root of the second moment; default 1e-8.
	Eps float64
	// MaxIter is the number of steps after which the run stops; default 1000.
	MaxIter int
	// Schedule shapes the learning rate; the zero value is constant. Its MinLR must not
	// exceed LearningRate.
	Schedule Schedule
}

func (s AdamSettings) resolve() (AdamSettings, error) {
	if s.LearningRate == 0 {
		s.LearningRate = 0.01
	}
	if s.Beta1 == 0 {
		s.Beta1 = 0.9
	}
	if s.Beta2 == 0 {
		s.Beta2 = 0.999
	}
	if s.Eps == 0 {
		s.Eps = 1e-8
	}
	if s.MaxIter == 0 {
		s.MaxIter = 1000
	}
	switch {
	case !finite(s.LearningRate) || s.LearningRate < 0:
		return s, fmt.Errorf("learning rate %v: it must be positive and finite", s.LearningRate)
	case !(s.Beta1 > 0 && s.Beta1 < 1) || !(s.Beta2 > 0 && s.Beta2 < 1):
		return s, fmt.Errorf("Beta1 %v and Beta2 %v: both must lie in (0, 1)", s.Beta1, s.Beta2)
	case !finite(s.Eps) || s.Eps < 0:
		return s, fmt.Errorf("Eps %v: it must be positive and finite", s.Eps)
	case s.MaxIter < 0:
		return s, fmt.Errorf("MaxIter %d: it must not be negative", s.MaxIter)
	}
	if err := s.Schedule.Validate(); err != nil {
		return s, err
	}
	if s.Schedule.Kind != "" && s.Schedule.Kind != "constant" && s.Schedule.MinLR > s.LearningRate {
		return s, fmt.Errorf("schedule MinLR %v exceeds the learning rate %v", s.Schedule.MinLR, s.LearningRate)
	}
	return s, nil
}

// AdamState is the complete state of a MinimizeAdam run, in plain exported fields so that
// gob or JSON encoding saves it exactly and a run resumed from a decoded copy continues bit
// for bit like the original. Create it with NewAdamState; MinimizeAdam updates it in place.
// Decode a saved state into a zero AdamState, as gob leaves fields it does not send untouched.
type AdamState struct {
	// X is the current point.
	X []float64
	// M and V are the (biased) first and second moment estimates of the gradient.
	M, V []float64
	// Iter counts the steps taken; the bias corrections use Iter+1 for the next step.
	Iter int
	// F and Grad are the objective value and gradient returned at the point the last step
	// was taken from (the point before X); zero before the first step. F = -0 is stored as +0.
	F    float64
	Grad []float64
	// Done is set when the run has stopped (Reason ReasonMaxIter); MinimizeAdam returns at
	// once on a Done state (clear Done to continue with a larger MaxIter).
	Done bool
	// Reason says why the run stopped; empty while not Done.
	Reason string
}

// NewAdamState starts a run at a copy of x0, with zero moments.
func NewAdamState(x0 []float64) *AdamState {
	n := len(x0)
	return &AdamState{X: cloneVec(x0), M: make([]float64, n), V: make([]float64, n)}
}

// MinimizeAdam runs Adam (Kingma and Ba) on obj from st, which may be fresh from
// NewAdamState or decoded from a checkpoint, until st.Iter reaches set.MaxIter. Every step
// evaluates the objective once at st.X; the value is only recorded (there is no line
// search, so noisy objectives and gradients are fine), and a NaN or infinite value or
// gradient is an error. The step uses the rate set.Schedule.Rate(set.LearningRate, st.Iter,
// set.MaxIter).
//
// lower and upper are nil for an unconstrained run; otherwise they give a box as for
// NewLBFGSState, st.X is clipped into it before the first evaluation and every new point is
// projected onto it, so the objective is never evaluated outside the box.
//
// st is updated only after a complete step: if ctx (checked before every evaluation) is
// cancelled or the objective fails, the error is returned (objective errors wrapped) and st
// still holds the last completed step. onIter, if non-nil, is called after every step and
// after a stop without a step; if it returns an error, the run stops with that error.
func MinimizeAdam(ctx context.Context, obj Objective, st *AdamState, lower, upper []float64, set AdamSettings, onIter func(*AdamState) error) error {
	if obj == nil {
		return errors.New("adam: nil objective")
	}
	if st == nil {
		return errors.New("adam: nil state: create one with NewAdamState")
	}
	set, err := set.resolve()
	if err != nil {
		return fmt.Errorf("adam: %w", err)
	}
	n := len(st.X)
	if n == 0 {
		return errors.New("adam: state has no variables")
	}
	if err := checkFinite("X", st.X); err != nil {
		return fmt.Errorf("adam: %w", err)
	}
	if len(st.M) == 0 && len(st.V) == 0 && st.Iter == 0 {
		st.M, st.V = make([]float64, n), make([]float64, n)
	}
	if len(st.M) != n || len(st.V) != n {
		return fmt.Errorf("adam: state has %d and %d moment entries for %d variables", len(st.M), len(st.V), n)
	}
	if st.Iter < 0 {
		return fmt.Errorf("adam: state has iteration %d", st.Iter)
	}
	bounded := lower != nil || upper != nil
	if bounded {
		if err := checkBox(lower, upper, n); err != nil {
			return fmt.Errorf("adam: %w", err)
		}
	}
	if st.Done {
		return nil
	}
	if bounded {
		x := cloneVec(st.X)
		if clipInto(x, lower, upper) {
			st.X = x
		}
	}
	b1, b2, eps := set.Beta1, set.Beta2, set.Eps
	for {
		if st.Iter >= set.MaxIter {
			st.Done, st.Reason = true, ReasonMaxIter
			if onIter != nil {
				if err := onIter(st); err != nil {
					return err
				}
			}
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		f, g, err := evaluate(obj, st.X)
		if err != nil {
			return fmt.Errorf("adam: objective in iteration %d: %w", st.Iter+1, err)
		}
		if !finite(f) || !allFinite(g) {
			return fmt.Errorf("adam: objective in iteration %d gave value %v and a gradient that is finite: %v", st.Iter+1, f, allFinite(g))
		}
		t := float64(st.Iter + 1)
		lr := set.Schedule.Rate(set.LearningRate, st.Iter, set.MaxIter)
		bc1 := 1 - math.Pow(b1, t)
		bc2 := 1 - math.Pow(b2, t)
		x, m, v := make([]float64, n), make([]float64, n), make([]float64, n)
		for i := range n {
			m[i] = float64(b1*st.M[i]) + float64((1-b1)*g[i])
			v[i] = float64(b2*st.V[i]) + float64(float64((1-b2)*g[i])*g[i])
			step := float64(lr*(m[i]/bc1)) / (math.Sqrt(v[i]/bc2) + eps)
			x[i] = st.X[i] - step
			if bounded {
				x[i] = clip(x[i], lower[i], upper[i])
			}
		}
		if !allFinite(x) {
			return fmt.Errorf("adam: step %d left the finite range", st.Iter+1)
		}
		st.X, st.M, st.V, st.F, st.Grad = x, m, v, canon(f), g
		st.Iter++
		if st.Iter >= set.MaxIter {
			st.Done, st.Reason = true, ReasonMaxIter
		}
		if onIter != nil {
			if err := onIter(st); err != nil {
				return err
			}
		}
		if st.Done {
			return nil
		}
	}
}
