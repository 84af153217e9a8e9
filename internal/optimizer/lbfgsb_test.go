package optimizer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

// runLBFGS creates a state at x0 and minimises obj (guarded against leaving the box).
func runLBFGS(t *testing.T, obj Objective, x0, lower, upper []float64, set LBFGSSettings) *LBFGSState {
	t.Helper()
	st, err := NewLBFGSState(x0, lower, upper)
	if err != nil {
		t.Fatal(err)
	}
	if err := MinimizeLBFGSB(context.Background(), guarded(t, obj, lower, upper, nil), st, lower, upper, set, nil); err != nil {
		t.Fatal(err)
	}
	if !st.Done || st.Reason == "" {
		t.Fatalf("run returned without Done/Reason: %+v", st)
	}
	return st
}

func TestLBFGSQuadraticInterior(t *testing.T) {
	cases := []struct {
		name         string
		a, c         []float64
		lower, upper []float64
		x0           []float64
	}{
		{"diag2", diag(1, 10), []float64{0.3, -0.7}, ones(2, -5), ones(2, 5), []float64{4, 4}},
		{"dense5", spd(5, 0.5), []float64{1, -2, 0.5, 3, -1}, ones(5, -10), ones(5, 10), ones(5, 0)},
		{"illcond10", diag(1, 3, 10, 30, 100, 300, 1000, 3000, 1e4, 1), []float64{0.1, 0.2, 0.3, 0.4, 0.5, -0.1, -0.2, -0.3, -0.4, -0.5}, ones(10, -1), ones(10, 1), ones(10, 0.9)},
		{"start on bound", diag(2, 2, 2), []float64{0.5, 0.5, 0.5}, ones(3, 0), ones(3, 1), []float64{0, 1, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := runLBFGS(t, quadratic(tc.a, tc.c), tc.x0, tc.lower, tc.upper, LBFGSSettings{GradTol: 1e-10, FuncTol: -1})
			if d := maxAbsDiff(st.X, tc.c); d > 1e-8 {
				t.Errorf("x = %v, want %v (max diff %g, %s after %d iterations)", st.X, tc.c, d, st.Reason, st.Iter)
			}
		})
	}
}

func TestLBFGSQuadraticDefaults(t *testing.T) {
	c := []float64{1, -2, 0.5, 3, -1}
	st := runLBFGS(t, quadratic(spd(5, 0.5), c), ones(5, 0), ones(5, -10), ones(5, 10), LBFGSSettings{})
	if d := maxAbsDiff(st.X, c); d > 1e-6 {
		t.Errorf("default settings: x = %v, want %v (diff %g, %s)", st.X, c, d, st.Reason)
	}
}

func TestLBFGSQuadraticOnBound(t *testing.T) {
	cases := []struct {
		name         string
		a, c         []float64
		lower, upper []float64
		x0           []float64
	}{
		{"diag", diag(1, 4, 2, 8), []float64{3, -0.5, -4, 0.2}, ones(4, -1), ones(4, 1), ones(4, 0)},
		{"dense", spd(4, 0.2), []float64{3, -3, 0.1, 2}, ones(4, -1), ones(4, 1), ones(4, 0)},
		{"dense6", spd(6, 1), []float64{5, -5, 0.2, -0.3, 4, 0}, []float64{-1, -2, -1, -1, 0, -1}, []float64{1, 2, 1, 0, 3, 1}, []float64{0.5, 0, 0, -0.5, 0, 0.9}},
		{"fixed variable", diag(1, 1, 1), []float64{2, 2, 2}, []float64{-1, 0.5, -1}, []float64{1, 0.5, 1}, []float64{0, 0.5, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := boxQPSolution(t, tc.a, tc.c, tc.lower, tc.upper)
			obj := quadratic(tc.a, tc.c)
			st := runLBFGS(t, obj, tc.x0, tc.lower, tc.upper, LBFGSSettings{GradTol: 1e-10, FuncTol: -1})
			g := make([]float64, len(st.X))
			obj(st.X, g)
			if pg := projGradInf(st.X, g, tc.lower, tc.upper); pg > 1e-9 {
				t.Errorf("projected gradient %g at %v", pg, st.X)
			}
			for i, w := range want {
				x := st.X[i]
				switch {
				case w == tc.lower[i] || w == tc.upper[i]:
					if x != w {
						t.Errorf("x[%d] = %v, want exactly the bound %v", i, x, w)
					}
					if (x == tc.lower[i] && g[i] < 0 && tc.lower[i] != tc.upper[i]) || (x == tc.upper[i] && g[i] > 0 && tc.lower[i] != tc.upper[i]) {
						t.Errorf("KKT: x[%d] = %v on a bound with gradient %v pointing inward", i, x, g[i])
					}
				default:
					if math.Abs(x-w) > 1e-8 || math.Abs(g[i]) > 1e-8 {
						t.Errorf("x[%d] = %v (gradient %g), want free value %v", i, x, g[i], w)
					}
				}
			}
		})
	}
}

func TestLBFGSRosenbrock(t *testing.T) {
	cases := []struct {
		name string
		x0   []float64
	}{
		{"2d", []float64{-1.2, 1}},
		{"10d", []float64{-1.2, 1, -1.2, 1, -1.2, 1, -1.2, 1, -1.2, 1}},
		{"10d from zero", ones(10, 0)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := len(tc.x0)
			st := runLBFGS(t, rosenbrock, tc.x0, ones(n, -100), ones(n, 100), LBFGSSettings{GradTol: 1e-10, FuncTol: -1, MaxIter: 2000, MaxEvals: 5000})
			if d := maxAbsDiff(st.X, ones(n, 1)); d > 1e-7 {
				t.Errorf("x = %v (diff %g, f %g, %s after %d iterations, %d evals)", st.X, d, st.F, st.Reason, st.Iter, st.Evals)
			}
			t.Logf("%s: %d iterations, %d evaluations, %s", tc.name, st.Iter, st.Evals, st.Reason)
		})
	}
}

// The objective must never be called outside the box, even when every step wants to leave
// it; guarded also returns a tempting -1e300 outside, which would be accepted if it were
// ever evaluated.
func TestLBFGSNeverLeavesBox(t *testing.T) {
	cases := []struct {
		name         string
		obj          Objective
		x0           []float64
		lower, upper []float64
	}{
		{"rosenbrock tight box", rosenbrock, []float64{-1.2, 0.1}, []float64{-1.5, -0.5}, []float64{0.5, 0.2}},
		{"steep linear-ish", quadratic(diag(1e-6, 1e-6, 1e-6), ones(3, 1e8)), ones(3, 0), ones(3, -1), ones(3, 1)},
		{"huge curvature far optimum", quadratic(spd(4, 1e3), ones(4, -1e6)), ones(4, 0.5), ones(4, 0), ones(4, 1)},
		{"narrow box", quadratic(diag(1, 1), []float64{10, -10}), []float64{0, 0}, []float64{-1e-9, -1e-9}, []float64{1e-9, 1e-9}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			st, err := NewLBFGSState(tc.x0, tc.lower, tc.upper)
			if err != nil {
				t.Fatal(err)
			}
			err = MinimizeLBFGSB(context.Background(), guarded(t, tc.obj, tc.lower, tc.upper, &calls), st, tc.lower, tc.upper, LBFGSSettings{MaxIter: 500}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if calls != st.Evals {
				t.Errorf("%d objective calls, state counts %d", calls, st.Evals)
			}
			g := make([]float64, len(st.X))
			tc.obj(st.X, g)
			if pg := projGradInf(st.X, g, tc.lower, tc.upper); pg > 1e-5 {
				t.Errorf("projected gradient %g at %v (%s)", pg, st.X, st.Reason)
			}
		})
	}
}

func TestNewLBFGSStateErrors(t *testing.T) {
	inf := math.Inf(1)
	cases := []struct {
		name         string
		x0, lo, up   []float64
		wantContains string
	}{
		{"inverted", []float64{0, 0, 0}, []float64{-1, 2, -1}, []float64{1, 1, 1}, "variable 1 are inverted"},
		{"length", []float64{0, 0}, []float64{-1}, []float64{1, 1}, "1 lower and 2 upper bounds for 2 variables"},
		{"nan x0", []float64{0, math.NaN()}, ones(2, -1), ones(2, 1), "x0[1]"},
		{"infinite bound", []float64{0, 0}, []float64{-inf, -1}, ones(2, 1), "variable 0"},
		{"nan bound", []float64{0, 0}, ones(2, -1), []float64{1, math.NaN()}, "variable 1"},
		{"empty", nil, nil, nil, "empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewLBFGSState(tc.x0, tc.lo, tc.up)
			if err == nil || !strings.Contains(err.Error(), tc.wantContains) {
				t.Errorf("error %v, want one containing %q", err, tc.wantContains)
			}
		})
	}
	// The same validation guards MinimizeLBFGSB.
	st, _ := NewLBFGSState([]float64{0, 0}, ones(2, -1), ones(2, 1))
	err := MinimizeLBFGSB(context.Background(), rosenbrock, st, []float64{-1, 1}, []float64{1, 0}, LBFGSSettings{}, nil)
	if err == nil || !strings.Contains(err.Error(), "variable 1 are inverted") {
		t.Errorf("MinimizeLBFGSB with inverted bounds: %v", err)
	}
	if err := MinimizeLBFGSB(context.Background(), rosenbrock, st, ones(2, -1), ones(2, 1), LBFGSSettings{Memory: -1}, nil); err == nil {
		t.Error("negative Memory accepted")
	}
}

func TestNewLBFGSStateClips(t *testing.T) {
	x0 := []float64{-5, 0.5, 7}
	st, err := NewLBFGSState(x0, ones(3, -1), ones(3, 1))
	if err != nil {
		t.Fatal(err)
	}
	if !sameBits(st.X, []float64{-1, 0.5, 1}) {
		t.Errorf("X = %v, want [-1 0.5 1]", st.X)
	}
	if x0[0] != -5 {
		t.Error("x0 was modified")
	}
}

// A NaN or infinite value or gradient at a trial point shrinks the step; at the start point
// it is an error.
func TestLBFGSNonFiniteTrialPoint(t *testing.T) {
	lower, upper := []float64{-10}, []float64{10}
	cases := []struct {
		name string
		bad  func(g []float64) float64
	}{
		{"NaN value", func(g []float64) float64 { return math.NaN() }},
		{"+Inf value", func(g []float64) float64 { return math.Inf(1) }},
		{"-Inf value", func(g []float64) float64 { return math.Inf(-1) }},
		{"NaN gradient", func(g []float64) float64 { g[0] = math.NaN(); return 0 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			holes := 0
			obj := func(x, g []float64) (float64, error) {
				if math.Abs(x[0]+2) < 0.6 { // the first step from -3 lands in this hole
					holes++
					return tc.bad(g), nil
				}
				d := x[0] - 1
				g[0] = 2 * d
				return d * d, nil
			}
			st := runLBFGS(t, obj, []float64{-3}, lower, upper, LBFGSSettings{})
			if holes == 0 {
				t.Fatal("the objective never returned a bad value; the test tests nothing")
			}
			if math.Abs(st.X[0]-1) > 1e-8 {
				t.Errorf("x = %v, want 1 (%s)", st.X, st.Reason)
			}

			st, _ = NewLBFGSState([]float64{-2}, lower, upper)
			err := MinimizeLBFGSB(context.Background(), obj, st, lower, upper, LBFGSSettings{}, nil)
			if err == nil || !strings.Contains(err.Error(), "start point") {
				t.Errorf("bad value at the start point: error %v", err)
			}
		})
	}
}

var errBoom = errors.New("boom")

func TestLBFGSObjectiveError(t *testing.T) {
	lower, upper := ones(2, -5), ones(2, 5)
	calls := 0
	obj := func(x, g []float64) (float64, error) {
		calls++
		if calls == 6 {
			return 0, errBoom
		}
		return rosenbrock(x, g)
	}
	st, _ := NewLBFGSState([]float64{-1.2, 1}, lower, upper)
	var last *LBFGSState
	err := MinimizeLBFGSB(context.Background(), obj, st, lower, upper, LBFGSSettings{}, func(s *LBFGSState) error {
		last = cloneState(t, s)
		return nil
	})
	if !errors.Is(err, errBoom) || err == errBoom {
		t.Fatalf("error %v: want errBoom wrapped", err)
	}
	if !statesEqual(st, last) {
		t.Errorf("state changed by the failed iteration:\n%+v\n%+v", st, last)
	}
}

func TestLBFGSOnIterError(t *testing.T) {
	lower, upper := ones(2, -5), ones(2, 5)
	st, _ := NewLBFGSState([]float64{-1.2, 1}, lower, upper)
	err := MinimizeLBFGSB(context.Background(), rosenbrock, st, lower, upper, LBFGSSettings{}, func(s *LBFGSState) error {
		if s.Iter == 4 {
			return errBoom
		}
		return nil
	})
	if err != errBoom || st.Iter != 4 || st.Done {
		t.Errorf("error %v at iteration %d (done %v): want errBoom at 4", err, st.Iter, st.Done)
	}
}

func TestLBFGSLimits(t *testing.T) {
	lower, upper := ones(10, -5), ones(10, 5)
	x0 := ones(10, 0)
	cases := []struct {
		name   string
		set    LBFGSSettings
		reason string
		check  func(st *LBFGSState) bool
	}{
		{"max iter", LBFGSSettings{MaxIter: 5}, ReasonMaxIter, func(st *LBFGSState) bool { return st.Iter == 5 }},
		{"max evals", LBFGSSettings{MaxEvals: 7}, ReasonMaxEvals, func(st *LBFGSState) bool { return st.Evals == 7 }},
		{"func tol", LBFGSSettings{FuncTol: 1e-3, GradTol: -1}, ReasonFuncTol, func(st *LBFGSState) bool { return st.SmallDecreases == FuncTolIters }},
		{"grad tol", LBFGSSettings{GradTol: 1e-3, FuncTol: -1}, ReasonGradTol, func(st *LBFGSState) bool {
			return projGradInf(st.X, st.Grad, lower, upper) <= 1e-3
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			st, _ := NewLBFGSState(x0, lower, upper)
			err := MinimizeLBFGSB(context.Background(), guarded(t, rosenbrock, lower, upper, &calls), st, lower, upper, tc.set, nil)
			if err != nil {
				t.Fatal(err)
			}
			if st.Reason != tc.reason || !tc.check(st) {
				t.Errorf("stopped with %q after %d iterations, %d evals", st.Reason, st.Iter, st.Evals)
			}
			if calls != st.Evals {
				t.Errorf("%d calls, Evals %d", calls, st.Evals)
			}
			// A finished state returns at once.
			before := cloneState(t, st)
			if err := MinimizeLBFGSB(context.Background(), guarded(t, rosenbrock, lower, upper, &calls), st, lower, upper, tc.set, nil); err != nil || calls != st.Evals || !statesEqual(st, before) {
				t.Errorf("resuming a Done state: err %v, calls %d", err, calls)
			}
		})
	}
}

func TestLBFGSContextCancel(t *testing.T) {
	lower, upper := ones(2, -5), ones(2, 5)

	// Already cancelled: no evaluation at all.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := 0
	st, _ := NewLBFGSState([]float64{-1.2, 1}, lower, upper)
	err := MinimizeLBFGSB(ctx, guarded(t, rosenbrock, lower, upper, &calls), st, lower, upper, LBFGSSettings{}, nil)
	if !errors.Is(err, context.Canceled) || calls != 0 {
		t.Errorf("pre-cancelled: error %v after %d calls", err, calls)
	}

	// Cancelled from onIter after iteration 3.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	err = MinimizeLBFGSB(ctx, rosenbrock, st, lower, upper, LBFGSSettings{}, func(s *LBFGSState) error {
		if s.Iter == 3 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || st.Iter != 3 || st.Done {
		t.Errorf("cancelled at iteration 3: error %v, Iter %d, Done %v", err, st.Iter, st.Done)
	}
}

// resumeCase is a problem used by the resume tests: it has active bounds, a full memory and
// (for the last one) NaN holes, so that every part of the state matters.
type resumeCase struct {
	name         string
	obj          Objective
	x0           []float64
	lower, upper []float64
	set          LBFGSSettings
}

// holeHits counts the NaNs the "holes" resume case returned (tests run sequentially).
var holeHits int

func resumeCases() []resumeCase {
	lo := ones(10, -2)
	up := ones(10, 2)
	up[3], lo[6] = 0.5, 1.3 // two bounds bind at the solution
	holey := func(x, g []float64) (float64, error) {
		if math.Abs(x[0]-0.7) < 0.05 && x[1] > 0.5 { // a hole the path runs into
			holeHits++
			return math.NaN(), nil
		}
		return rosenbrock(x, g)
	}
	return []resumeCase{
		{"rosenbrock10 box", rosenbrock, []float64{-1.2, 1, -1.2, 1, -1.2, 1, -1.2, 1, -1.2, 1}, lo, up, LBFGSSettings{Memory: 4, GradTol: 1e-12, MaxIter: 300}},
		{"quadratic bound", quadratic(diag(1, 3, 10, 30, 100, 300, 1000, 3000, 1e4, 1), []float64{0.1, 0.2, 0.3, 0.4, 0.5, -0.1, -0.2, -0.3, -0.4, -0.5}), ones(10, 0.9), ones(10, -0.35), ones(10, 0.35), LBFGSSettings{GradTol: 1e-14, FuncTol: -1}},
		{"holes", holey, ones(4, 0), ones(4, -3), ones(4, 3), LBFGSSettings{Memory: 3, GradTol: 1e-12}},
	}
}

func TestLBFGSResumeBitwise(t *testing.T) {
	for _, rc := range resumeCases() {
		// Uninterrupted reference run, keeping an encoded copy of every state.
		ref, _ := NewLBFGSState(rc.x0, rc.lower, rc.upper)
		var saved []*LBFGSState
		err := MinimizeLBFGSB(context.Background(), guarded(t, rc.obj, rc.lower, rc.upper, nil), ref, rc.lower, rc.upper, rc.set, func(s *LBFGSState) error {
			saved = append(saved, cloneState(t, s))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if ref.Iter < 10 {
			t.Fatalf("%s: only %d iterations; too short to test resuming", rc.name, ref.Iter)
		}
		t.Logf("%s: %d iterations, %d evaluations, %s, %d NaNs so far", rc.name, ref.Iter, ref.Evals, ref.Reason, holeHits)
		if rc.name == "holes" && holeHits == 0 {
			t.Errorf("holes: the objective never returned NaN")
		}
		for _, codec := range []string{"gob", "json"} {
			for _, k := range []int{1, 2, 5, ref.Iter / 2, ref.Iter - 1} {
				t.Run(fmt.Sprintf("%s/%s/k=%d", rc.name, codec, k), func(t *testing.T) {
					var at *LBFGSState
					for _, s := range saved {
						if s.Iter == k {
							at = s
						}
					}
					st := new(LBFGSState)
					roundTrip(t, codec, at, st)
					if err := MinimizeLBFGSB(context.Background(), guarded(t, rc.obj, rc.lower, rc.upper, nil), st, rc.lower, rc.upper, rc.set, nil); err != nil {
						t.Fatal(err)
					}
					if !statesEqual(st, ref) {
						t.Errorf("resumed at %d: X %v F %v iter %d evals %d %q; uninterrupted X %v F %v iter %d evals %d %q",
							k, st.X, st.F, st.Iter, st.Evals, st.Reason, ref.X, ref.F, ref.Iter, ref.Evals, ref.Reason)
					}
				})
			}
		}
	}
}

// A run cancelled in the middle of a line search leaves the last completed iteration in the
// state; resuming from it gives the uninterrupted result.
func TestLBFGSCancelMidLineSearchResume(t *testing.T) {
	for _, rc := range resumeCases() {
		t.Run(rc.name, func(t *testing.T) {
			ref, _ := NewLBFGSState(rc.x0, rc.lower, rc.upper)
			if err := MinimizeLBFGSB(context.Background(), rc.obj, ref, rc.lower, rc.upper, rc.set, nil); err != nil {
				t.Fatal(err)
			}
			st, _ := NewLBFGSState(rc.x0, rc.lower, rc.upper)
			interruptions := 0
			for cut := 7; ; cut += 7 {
				ctx, cancel := context.WithCancel(context.Background())
				calls := 0
				obj := func(x, g []float64) (float64, error) {
					calls++
					if calls == cut {
						cancel()
					}
					return rc.obj(x, g)
				}
				err := MinimizeLBFGSB(ctx, obj, st, rc.lower, rc.upper, rc.set, nil)
				cancel()
				if err == nil {
					break
				}
				if !errors.Is(err, context.Canceled) {
					t.Fatal(err)
				}
				interruptions++
				// Resume from an encoded copy, as on another machine.
				next := new(LBFGSState)
				roundTrip(t, "gob", st, next)
				st = next
			}
			if interruptions < 3 {
				t.Errorf("only %d interruptions", interruptions)
			}
			if !statesEqual(st, ref) {
				t.Errorf("interrupted run ended at X %v F %v; uninterrupted at X %v F %v", st.X, st.F, ref.X, ref.F)
			}
		})
	}
}

func TestLBFGSDeterministic(t *testing.T) {
	rc := resumeCases()[0]
	a, _ := NewLBFGSState(rc.x0, rc.lower, rc.upper)
	b, _ := NewLBFGSState(rc.x0, rc.lower, rc.upper)
	for _, st := range []*LBFGSState{a, b} {
		if err := MinimizeLBFGSB(context.Background(), rc.obj, st, rc.lower, rc.upper, rc.set, nil); err != nil {
			t.Fatal(err)
		}
	}
	if !statesEqual(a, b) {
		t.Error("two identical runs differ")
	}
}

func cloneState(t *testing.T, s *LBFGSState) *LBFGSState {
	t.Helper()
	c := new(LBFGSState)
	roundTrip(t, "gob", s, c)
	return c
}

// statesEqual compares everything that affects the continuation of a run, bit for bit.
func statesEqual(a, b *LBFGSState) bool {
	if a == nil || b == nil {
		return a == b
	}
	if !sameBits(a.X, b.X) || math.Float64bits(a.F) != math.Float64bits(b.F) || !sameBits(a.Grad, b.Grad) ||
		a.Evaluated != b.Evaluated || a.Iter != b.Iter || a.Evals != b.Evals || a.SmallDecreases != b.SmallDecreases ||
		a.Done != b.Done || a.Reason != b.Reason || len(a.S) != len(b.S) || len(a.Y) != len(b.Y) {
		return false
	}
	for j := range a.S {
		if !sameBits(a.S[j], b.S[j]) || !sameBits(a.Y[j], b.Y[j]) {
			return false
		}
	}
	return true
}
