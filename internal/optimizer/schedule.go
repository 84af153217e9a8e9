package optimizer

import (
	"fmt"
	"math"
)

// Schedule is a learning-rate schedule for Adam. Rate gives the rate for an iteration; the
// kinds are
//
//	"constant" (or ""): base
//	"exponential":      max(base * Decay^iter, MinLR)
//	"step":             max(base * Decay^floor(iter/StepEvery), MinLR)
//	"cosine":           MinLR + (base - MinLR) (1 + cos(pi min(iter, maxIter)/maxIter)) / 2
//	"multistep":        max(base * Decay^#{m in Milestones : iter >= m maxIter}, MinLR)
//
// where iter counts the steps already taken (0 for the first step).
type Schedule struct {
	// Kind is "constant", "exponential", "step", "cosine" or "multistep"; empty means "constant".
	Kind string
	// Decay is the factor per iteration ("exponential") or per StepEvery iterations ("step");
	// it must lie in (0, 1] for those kinds and is ignored by the others.
	Decay float64
	// StepEvery is the number of iterations between decays of "step"; at least 1 there.
	StepEvery int
	// MinLR is the floor of "exponential", "step" and "multistep" and the final rate of
	// "cosine"; it must be finite and non-negative and is ignored by "constant".
	MinLR float64
	// Milestones are the fractions of maxIter in (0, 1], increasing, at which "multistep"
	// multiplies the rate by Decay (PyTorch's MultiStepLR; Potapczynski et al. 2021, App. E, use 0.5,
	// 0.7, 0.9 with Decay 0.1).
	Milestones []float64
}

// Validate reports whether the schedule's kind is known and its parameters fit the kind.
func (s Schedule) Validate() error {
	if !finite(s.MinLR) || s.MinLR < 0 {
		return fmt.Errorf("schedule MinLR is %v: it must be finite and non-negative", s.MinLR)
	}
	switch s.Kind {
	case "", "constant", "cosine":
		return nil
	case "multistep":
		if !(s.Decay > 0 && s.Decay <= 1) {
			return fmt.Errorf("multistep schedule Decay is %v: it must lie in (0, 1]", s.Decay)
		}
		prev := 0.0
		for _, m := range s.Milestones {
			if !(m > prev && m <= 1) {
				return fmt.Errorf("multistep schedule milestones %v: they must increase within (0, 1]", s.Milestones)
			}
			prev = m
		}
		return nil
	case "exponential", "step":
		if !(s.Decay > 0 && s.Decay <= 1) {
			return fmt.Errorf("%s schedule Decay is %v: it must lie in (0, 1]", s.Kind, s.Decay)
		}
		if s.Kind == "step" && s.StepEvery < 1 {
			return fmt.Errorf("step schedule StepEvery is %d: it must be at least 1", s.StepEvery)
		}
		return nil
	}
	return fmt.Errorf("unknown schedule kind %q: use constant, exponential, step, cosine or multistep", s.Kind)
}

// Rate returns the learning rate of the step taken after iter steps (iter 0 is the first),
// for base rate base and a run of maxIter steps (used by "cosine" only; maxIter <= 0 gives
// base there). A negative iter counts as 0. Rate does not validate the schedule: an unknown
// kind gives base, and StepEvery < 1 counts as 1; call Validate to catch such mistakes.
func (s Schedule) Rate(base float64, iter int, maxIter int) float64 {
	iter = max(iter, 0)
	switch s.Kind {
	case "exponential":
		return max(float64(base*math.Pow(s.Decay, float64(iter))), s.MinLR)
	case "step":
		every := max(s.StepEvery, 1)
		return max(float64(base*math.Pow(s.Decay, float64(iter/every))), s.MinLR)
	case "multistep":
		r := base
		for _, m := range s.Milestones {
			if float64(iter) >= m*float64(maxIter) {
				r *= s.Decay
			}
		}
		return max(r, s.MinLR)
	case "cosine":
		if maxIter <= 0 {
			return base
		}
		t := float64(min(iter, maxIter)) / float64(maxIter)
		c := float64(0.5 * (1 + math.Cos(math.Pi*t)))
		return s.MinLR + float64((base-s.MinLR)*c)
	}
	return base
}
