package train

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gpreduce/gpreduce/internal/model"
	"github.com/gpreduce/gpreduce/internal/shard"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

func TestChooseMethod(t *testing.T) {
	cases := []struct {
		name      string
		n, d      int
		exact, cg int
		ls        [2]float64
		want      string
		because   string
	}{
		{"small n", 300, 8, 0, 0, [2]float64{0.1, 2}, "exact", "n = 300 <= exact-max-rows 5000"},
		{"exact limit from the spec", 300, 8, 200, 0, [2]float64{0.1, 2}, "cg", "d = 8 > 3 (a Gauss-Legendre grid grows as nodes^d) and n <= cg-max-rows 20000"},
		{"cg limit from the spec", 300, 8, 200, 250, [2]float64{0.1, 2}, "grief", "d = 8 > 3 (a Gauss-Legendre grid grows as nodes^d) and n > cg-max-rows 250"},
		{"cg off", 300, 8, 200, 200, [2]float64{0.1, 2}, "grief", "n > cg-max-rows 200"},
		{"d = 1, grid fits", 20000, 1, 0, 0, [2]float64{0.1, 2}, "gl", "fits: s ="},
		{"d = 2, default bounds", 20000, 2, 0, 0, [2]float64{0.1, 2}, "cg", "only with a raised lower lengthscale bound and n <= cg-max-rows 20000"},
		{"d = 2, default bounds, large n", 20001, 2, 0, 0, [2]float64{0.1, 2}, "grief", "only with a raised lower lengthscale bound and n > cg-max-rows 20000"},
		{"d = 1, very wide upper bound", 20000, 1, 0, 0, [2]float64{0.1, 300}, "gl", "fits: s ="},
		{"d = 2, tight bounds", 20000, 2, 0, 0, [2]float64{0.5, 1}, "gl", "fits: s ="},
		{"d = 3, default bounds", 45000, 3, 0, 0, [2]float64{0.1, 2}, "grief", "Gauss-Legendre grid"},
		{"d = 4", 20000, 4, 0, 0, [2]float64{1, 1.5}, "cg", "d = 4 > 3"},
		{"d = 4, large n", 45000, 4, 0, 0, [2]float64{1, 1.5}, "grief", "d = 4 > 3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := DefaultSpec(Auto)
			set(&spec, "exact_max_rows", c.exact)
			set(&spec, "cg_max_rows", c.cg)
			spec.LengthscaleBounds = c.ls
			p := &prepared{n: c.n, d: c.d}
			ext := make([]float64, c.d)
			for k := range ext {
				ext[k] = 3.8
			}
			m, why := chooseMethod(spec, p, ext)
			if m != c.want || !strings.Contains(why, c.because) {
				t.Fatalf("chose %s (%s), want %s because %q", m, why, c.want, c.because)
			}
		})
	}
}

// trainAutoEvents trains spec on tab over shards shards of the local engine and returns the
// model and the messages of its "method" events.
func trainAutoEvents(t *testing.T, tab *shard.Table, shards int, spec Spec) (*model.Model, []string) {
	t.Helper()
	var events []string
	m, err := Train(t.Context(), localEngine(t, tab, shards, 2), spec, func(ev Event) {
		if ev.Phase == "method" {
			events = append(events, ev.Message)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return m, events
}

// TestAutoTrainRecordsChoice: Train with method auto trains the chosen method, reports the
// choice as an event and records it in the model, which survives encoding.
func TestAutoTrainRecordsChoice(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	tab := &shard.Table{Source: "auto", D: 2}
	for i := 0; i < 60; i++ {
		a, b := rng.Float64(), rng.Float64()
		tab.X = append(tab.X, a, b)
		tab.Y = append(tab.Y, a-b+0.1*rng.NormFloat64())
	}
	spec := DefaultSpec(Auto)
	spec.MaxIter = 20
	m, events := trainAutoEvents(t, tab, 2, spec)
	if m.Method != "exact" || m.Choice == nil || m.Choice.Requested != Auto || !strings.Contains(m.Choice.Reason, "n = 60") {
		t.Fatalf("method %s, choice %+v", m.Method, m.Choice)
	}
	if len(events) != 1 || !strings.Contains(events[0], "auto chose exact") {
		t.Fatalf("method events %q", events)
	}
	spec.Settings = &pb.GRIEFSettings{Inference: "type1"}
	if _, err := Train(t.Context(), localEngine(t, tab, 2, 2), spec, nil); err == nil || !strings.Contains(err.Error(), "inference") {
		t.Fatalf("a grief setting with auto: err = %v", err)
	}
}

// highFrequencyTable is y = sin(40 x_1) sin(40 x_2) + 0.1 e on n rows of 4 uniform inputs:
// a GRIEF grid of 10 points per input cannot represent a period of 0.16, while the exact GP
// on a few hundred of the rows can.
func highFrequencyTable(n int) *shard.Table {
	rng := rand.New(rand.NewPCG(3, 40))
	tab := &shard.Table{Source: "high-frequency", D: 4}
	for i := 0; i < n; i++ {
		x := []float64{rng.Float64(), rng.Float64(), rng.Float64(), rng.Float64()}
		tab.X = append(tab.X, x...)
		tab.Y = append(tab.Y, math.Sin(40*x[0])*math.Sin(40*x[1])+0.1*rng.NormFloat64())
	}
	return tab
}

// TestAutoFallsBackFromAllNoiseGRIEF: when auto's grief model is the all-noise fit while the
// exact GP on the sampled rows found signal, auto retrains with rff from the same start and
// says so in the choice; grief's model alone is the all-noise one.
func TestAutoFallsBackFromAllNoiseGRIEF(t *testing.T) {
	tab := highFrequencyTable(480)
	spec := DefaultSpec(Auto)
	set(&spec, "exact_max_rows", 150)
	set(&spec, "cg_max_rows", 150) // no cg range: grief
	m, events := trainAutoEvents(t, tab, 4, spec)
	if m.Method != AutoFallbackMethod || m.Choice == nil {
		t.Fatalf("method %s, choice %+v, want the fallback %s", m.Method, m.Choice, AutoFallbackMethod)
	}
	if !strings.Contains(m.Choice.Reason, "grief's fit is all noise") || !strings.Contains(m.Choice.Reason, "retrained with "+AutoFallbackMethod) {
		t.Errorf("choice reason %q does not say why it fell back", m.Choice.Reason)
	}
	if len(events) != 2 || !strings.Contains(events[0], "auto chose grief") || !strings.Contains(events[1], "retraining with "+AutoFallbackMethod) {
		t.Errorf("method events %q", events)
	}
	if m.HasWarning(model.WarnAllNoise) || m.Hyper.NoiseVariance > 0.2 {
		t.Errorf("the fallback model is all noise too (standardized noise %v)", m.Hyper.NoiseVariance)
	}
	// grief alone on the same data is the all-noise fit the fallback replaces.
	gs := DefaultSpec("grief")
	g, err := Train(t.Context(), localEngine(t, tab, 4, 2), gs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !g.HasWarning(model.WarnAllNoise) {
		t.Errorf("grief alone is not all noise (standardized noise %v): the test data no longer exercises the fallback", g.Hyper.NoiseVariance)
	}
}
