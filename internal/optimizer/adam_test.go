package optimizer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// noisyQuadratic is f(x) = 0.5 sum a_i (x_i - c_i)^2 with gradient noise of standard
// deviation sigma drawn from rng (a stream, so it only suits uninterrupted runs).
func noisyQuadratic(a, c []float64, sigma float64, rng *rand.Rand) Objective {
	return func(x, g []float64) (float64, error) {
		f := 0.0
		for i := range x {
			d := x[i] - c[i]
			f += float64(0.5 * float64(a[i]*float64(d*d)))
			g[i] = float64(a[i]*d) + float64(sigma*rng.NormFloat64())
		}
		return f, nil
	}
}

// pointNoiseQuadratic is like noisyQuadratic but draws its noise from a generator seeded by
// the bits of x, so it is a deterministic function of the point and runs can be resumed.
func pointNoiseQuadratic(a, c []float64, sigma float64) Objective {
	return func(x, g []float64) (float64, error) {
		seed := uint64(0x9e3779b97f4a7c15)
		for _, v := range x {
			seed = (seed ^ math.Float64bits(v)) * 0xbf58476d1ce4e5b9
		}
		rng := rand.New(rand.NewPCG(seed, 7))
		f := 0.0
		for i := range x {
			d := x[i] - c[i]
			noise := float64(sigma * rng.NormFloat64())
			f += float64(0.5*float64(a[i]*float64(d*d))) + noise
			g[i] = float64(a[i]*d) + noise
		}
		return f, nil
	}
}

func TestAdamNoisyQuadratic(t *testing.T) {
	a := []float64{1, 4, 0.5, 2, 10}
	c := []float64{0.5, -1, 2, 0, -0.3}
	cases := []struct {
		name  string
		sigma float64
		set   AdamSettings
		tol   float64
	}{
		{"exact gradient constant", 0, AdamSettings{LearningRate: 0.01, MaxIter: 3000}, 1e-3},
		{"noisy cosine", 0.5, AdamSettings{LearningRate: 0.05, MaxIter: 4000, Schedule: Schedule{Kind: "cosine", MinLR: 1e-4}}, 0.05},
		{"noisy exponential", 0.5, AdamSettings{LearningRate: 0.05, MaxIter: 4000, Schedule: Schedule{Kind: "exponential", Decay: 0.999, MinLR: 1e-4}}, 0.05},
		{"noisy step", 0.5, AdamSettings{LearningRate: 0.05, MaxIter: 4000, Schedule: Schedule{Kind: "step", Decay: 0.5, StepEvery: 500}}, 0.05},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			st := NewAdamState(make([]float64, len(c)))
			calls := 0
			obj := noisyQuadratic(a, c, tc.sigma, rng)
			counted := func(x, g []float64) (float64, error) { calls++; return obj(x, g) }
			if err := MinimizeAdam(context.Background(), counted, st, nil, nil, tc.set, nil); err != nil {
				t.Fatal(err)
			}
			if st.Iter != tc.set.MaxIter || calls != tc.set.MaxIter || !st.Done || st.Reason != ReasonMaxIter {
				t.Errorf("Iter %d, calls %d, Done %v %q; want %d steps", st.Iter, calls, st.Done, st.Reason, tc.set.MaxIter)
			}
			d := maxAbsDiff(st.X, c)
			if d > tc.tol {
				t.Errorf("x = %v, want %v within %g (diff %g)", st.X, c, tc.tol, d)
			}
			t.Logf("max |x - c| = %.3g", d)
		})
	}
}

func TestAdamBox(t *testing.T) {
	a := []float64{1, 1, 1}
	c := []float64{3, -3, 0.25}
	lower, upper := []float64{-1, -1, -1}, []float64{1, 0.5, 1}
	calls := 0
	st := NewAdamState([]float64{5, 0, 0}) // outside the box: clipped before the first call
	obj := guarded(t, pointNoiseQuadratic(a, c, 0.1), lower, upper, &calls)
	set := AdamSettings{LearningRate: 0.05, MaxIter: 2000, Schedule: Schedule{Kind: "cosine"}}
	if err := MinimizeAdam(context.Background(), obj, st, lower, upper, set, nil); err != nil {
		t.Fatal(err)
	}
	if st.X[0] != 1 || st.X[1] != -1 {
		t.Errorf("x = %v: want x0 exactly 1 and x1 exactly -1", st.X)
	}
	if math.Abs(st.X[2]-0.25) > 0.02 {
		t.Errorf("x2 = %v, want 0.25", st.X[2])
	}
	if calls != 2000 {
		t.Errorf("%d calls", calls)
	}
}

func TestAdamResumeBitwise(t *testing.T) {
	a := []float64{1, 4, 0.5, 2}
	c := []float64{0.5, -1, 2, 3}
	lower, upper := ones(4, -2), ones(4, 2)
	obj := pointNoiseQuadratic(a, c, 0.3)
	set := AdamSettings{LearningRate: 0.1, MaxIter: 200, Schedule: Schedule{Kind: "step", Decay: 0.7, StepEvery: 30, MinLR: 0.001}}

	ref := NewAdamState(ones(4, 0))
	var saved []*AdamState
	err := MinimizeAdam(context.Background(), obj, ref, lower, upper, set, func(s *AdamState) error {
		c := new(AdamState)
		roundTrip(t, "gob", s, c)
		saved = append(saved, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if ref.X[3] != 2 {
		t.Fatalf("the bound is not active (x = %v); the test should cover projection", ref.X)
	}
	for _, codec := range []string{"gob", "json"} {
		for _, k := range []int{1, 2, 45, 150, 199} {
			t.Run(fmt.Sprintf("%s/k=%d", codec, k), func(t *testing.T) {
				st := new(AdamState)
				roundTrip(t, codec, saved[k-1], st)
				if st.Iter != k {
					t.Fatalf("saved state %d has Iter %d", k, st.Iter)
				}
				if err := MinimizeAdam(context.Background(), obj, st, lower, upper, set, nil); err != nil {
					t.Fatal(err)
				}
				if !adamEqual(st, ref) {
					t.Errorf("resumed at %d: X %v F %v; uninterrupted X %v F %v", k, st.X, st.F, ref.X, ref.F)
				}
			})
		}
	}

	// Interrupted by cancellation every 17 evaluations, resumed from encoded copies.
	st := NewAdamState(ones(4, 0))
	interruptions := 0
	for cut := 17; ; cut += 17 {
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		counted := func(x, g []float64) (float64, error) {
			calls++
			if calls == cut%23+1 {
				cancel()
			}
			return obj(x, g)
		}
		err := MinimizeAdam(ctx, counted, st, lower, upper, set, nil)
		cancel()
		if err == nil {
			break
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		interruptions++
		next := new(AdamState)
		roundTrip(t, "json", st, next)
		st = next
	}
	if interruptions < 5 || !adamEqual(st, ref) {
		t.Errorf("after %d interruptions: X %v; uninterrupted X %v", interruptions, st.X, ref.X)
	}
}

func adamEqual(a, b *AdamState) bool {
	return sameBits(a.X, b.X) && sameBits(a.M, b.M) && sameBits(a.V, b.V) && sameBits(a.Grad, b.Grad) &&
		math.Float64bits(a.F) == math.Float64bits(b.F) && a.Iter == b.Iter && a.Done == b.Done && a.Reason == b.Reason
}

func TestAdamErrors(t *testing.T) {
	quad := pointNoiseQuadratic([]float64{1, 1}, []float64{0, 0}, 0)
	cases := []struct {
		name         string
		obj          Objective
		lower, upper []float64
		set          AdamSettings
		want         string
	}{
		{"inverted bounds", quad, []float64{-1, 1}, []float64{1, -1}, AdamSettings{}, "variable 1 are inverted"},
		{"one bound only", quad, []float64{-1, -1}, nil, AdamSettings{}, "0 upper bounds"},
		{"beta1", quad, nil, nil, AdamSettings{Beta1: 1}, "Beta1"},
		{"schedule kind", quad, nil, nil, AdamSettings{Schedule: Schedule{Kind: "linear"}}, "unknown schedule kind"},
		{"min above base", quad, nil, nil, AdamSettings{LearningRate: 0.01, Schedule: Schedule{Kind: "cosine", MinLR: 0.1}}, "exceeds"},
		{"NaN gradient", func(x, g []float64) (float64, error) { g[0] = math.NaN(); return 0, nil }, nil, nil, AdamSettings{}, "iteration 1"},
		{"objective error", func(x, g []float64) (float64, error) { return 0, errBoom }, nil, nil, AdamSettings{}, "boom"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := NewAdamState([]float64{0.5, 0.5})
			err := MinimizeAdam(context.Background(), tc.obj, st, tc.lower, tc.upper, tc.set, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
			if st.Iter != 0 || !sameBits(st.X, []float64{0.5, 0.5}) {
				t.Errorf("state changed: %+v", st)
			}
		})
	}
	st := NewAdamState([]float64{1})
	err := MinimizeAdam(context.Background(), func(x, g []float64) (float64, error) { return 0, errBoom }, st, nil, nil, AdamSettings{}, nil)
	if !errors.Is(err, errBoom) {
		t.Errorf("objective error not wrapped: %v", err)
	}
}

func TestAdamOnIterAndCancel(t *testing.T) {
	obj := pointNoiseQuadratic([]float64{1}, []float64{1}, 0)
	st := NewAdamState([]float64{0})
	err := MinimizeAdam(context.Background(), obj, st, nil, nil, AdamSettings{}, func(s *AdamState) error {
		if s.Iter == 10 {
			return errBoom
		}
		return nil
	})
	if err != errBoom || st.Iter != 10 {
		t.Errorf("onIter error: %v at %d", err, st.Iter)
	}
	ctx, cancel := context.WithCancel(context.Background())
	err = MinimizeAdam(ctx, obj, st, nil, nil, AdamSettings{}, func(s *AdamState) error {
		if s.Iter == 20 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || st.Iter != 20 || st.Done {
		t.Errorf("cancel: %v at %d (Done %v)", err, st.Iter, st.Done)
	}
}

func TestScheduleRate(t *testing.T) {
	cases := []struct {
		name          string
		s             Schedule
		iter, maxIter int
		want          float64
	}{
		{"zero value is constant", Schedule{}, 57, 100, 0.1},
		{"constant", Schedule{Kind: "constant", MinLR: 0.5}, 3, 100, 0.1},
		{"exponential 0", Schedule{Kind: "exponential", Decay: 0.5}, 0, 100, 0.1},
		{"exponential 3", Schedule{Kind: "exponential", Decay: 0.5}, 3, 100, 0.0125},
		{"exponential floor", Schedule{Kind: "exponential", Decay: 0.5, MinLR: 0.02}, 3, 100, 0.02},
		{"step before first", Schedule{Kind: "step", Decay: 0.1, StepEvery: 10}, 9, 100, 0.1},
		{"step at first", Schedule{Kind: "step", Decay: 0.1, StepEvery: 10}, 10, 100, 0.01},
		{"step second", Schedule{Kind: "step", Decay: 0.1, StepEvery: 10}, 25, 100, 0.001},
		{"step floor", Schedule{Kind: "step", Decay: 0.1, StepEvery: 10, MinLR: 0.005}, 25, 100, 0.005},
		{"cosine start", Schedule{Kind: "cosine", MinLR: 0.02}, 0, 100, 0.1},
		{"cosine middle", Schedule{Kind: "cosine", MinLR: 0.02}, 50, 100, 0.06},
		{"cosine quarter", Schedule{Kind: "cosine"}, 25, 100, 0.05 * (1 + math.Sqrt2/2)},
		{"cosine end", Schedule{Kind: "cosine", MinLR: 0.02}, 100, 100, 0.02},
		{"cosine past end", Schedule{Kind: "cosine", MinLR: 0.02}, 150, 100, 0.02},
		{"cosine no length", Schedule{Kind: "cosine", MinLR: 0.02}, 10, 0, 0.1},
		{"negative iter", Schedule{Kind: "exponential", Decay: 0.5}, -4, 100, 0.1},
		{"multistep before", Schedule{Kind: "multistep", Decay: 0.1, Milestones: []float64{0.5, 0.7, 0.9}}, 49, 100, 0.1},
		{"multistep first", Schedule{Kind: "multistep", Decay: 0.1, Milestones: []float64{0.5, 0.7, 0.9}}, 50, 100, 0.01},
		{"multistep last", Schedule{Kind: "multistep", Decay: 0.1, Milestones: []float64{0.5, 0.7, 0.9}}, 95, 100, 0.0001},
		{"multistep floor", Schedule{Kind: "multistep", Decay: 0.1, Milestones: []float64{0.5}, MinLR: 0.05}, 60, 100, 0.05},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.s.Validate(); err != nil {
				t.Fatal(err)
			}
			got := tc.s.Rate(0.1, tc.iter, tc.maxIter)
			if math.Abs(got-tc.want) > 1e-15 {
				t.Errorf("Rate(0.1, %d, %d) = %v, want %v", tc.iter, tc.maxIter, got, tc.want)
			}
		})
	}
}

func TestScheduleValidate(t *testing.T) {
	bad := []struct {
		s    Schedule
		want string
	}{
		{Schedule{Kind: "linear"}, "unknown schedule kind"},
		{Schedule{Kind: "exponential"}, "Decay"},
		{Schedule{Kind: "exponential", Decay: 1.5}, "Decay"},
		{Schedule{Kind: "step", Decay: 0.5}, "StepEvery"},
		{Schedule{Kind: "cosine", MinLR: -1}, "MinLR"},
		{Schedule{Kind: "cosine", MinLR: math.NaN()}, "MinLR"},
		{Schedule{Kind: "multistep", Milestones: []float64{0.5}}, "Decay"},
		{Schedule{Kind: "multistep", Decay: 0.1, Milestones: []float64{0.7, 0.5}}, "milestones"},
		{Schedule{Kind: "multistep", Decay: 0.1, Milestones: []float64{1.5}}, "milestones"},
	}
	for _, tc := range bad {
		if err := tc.s.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one containing %q", tc.s, err, tc.want)
		}
	}
}
