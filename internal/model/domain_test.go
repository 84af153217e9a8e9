package model

import (
	"bytes"
	"math"
	"reflect"
	"testing"
)

// TestDomainSizingChoiceRoundTrip: the domain box, the sizing record, the method choice and
// the training box are optional tagged sections that decode to the same values and re-encode to the same
// bytes, alone or with warnings, after every kind of posterior.
func TestDomainSizingChoiceRoundTrip(t *testing.T) {
	for name, m := range withWarnings(t) {
		for _, warn := range []bool{false, true} {
			m := clone(t, m)
			if !warn {
				m.Warnings = nil
			}
			lo, hi := make([]float64, m.D), make([]float64, m.D)
			for k := range lo {
				lo[k], hi[k] = -1-float64(k), 2+float64(k)
			}
			m.Domain = &Domain{Lo: lo, Hi: hi}
			m.Sizing = &Sizing{LengthscaleMin: hi, LengthscaleMax: append([]float64(nil), hi...)}
			m.Choice = &MethodChoice{Requested: "auto", Reason: "n = 40 <= exact-max-rows 5000"}
			m.TrainBox = &Domain{Lo: append([]float64(nil), lo...), Hi: append([]float64(nil), hi...)}
			b := encode(t, m)
			d, err := Decode(bytes.NewReader(b))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !reflect.DeepEqual(d.Domain, m.Domain) || !reflect.DeepEqual(d.Sizing, m.Sizing) || !reflect.DeepEqual(d.Choice, m.Choice) || !reflect.DeepEqual(d.TrainBox, m.TrainBox) {
				t.Fatalf("%s: decoded %+v %+v %+v %+v", name, d.Domain, d.Sizing, d.Choice, d.TrainBox)
			}
			if !bytes.Equal(encode(t, d), b) {
				t.Fatalf("%s: re-encoding differs", name)
			}
		}
	}
}

func TestDomainValidate(t *testing.T) {
	for name, dom := range map[string]*Domain{
		"short":    {Lo: []float64{}, Hi: []float64{1}},
		"inverted": {Lo: []float64{2}, Hi: []float64{1}},
		"nan":      {Lo: []float64{math.NaN()}, Hi: []float64{1}},
	} {
		m := glModel()
		m.Domain = dom
		if err := m.Validate(); err == nil {
			t.Errorf("%s domain %+v accepted", name, dom)
		}
		m = glModel()
		m.TrainBox = dom
		if err := m.Validate(); err == nil {
			t.Errorf("%s training box %+v accepted", name, dom)
		}
	}
	m := glModel()
	m.Choice = &MethodChoice{Requested: "auto"}
	if err := m.Validate(); err == nil {
		t.Errorf("a method choice without a reason accepted")
	}
}

// TestPredictOutsideDomain: rows outside the box are flagged, counted, and get the prior in
// original units; rows inside get exactly what a model without a domain predicts.
func TestPredictOutsideDomain(t *testing.T) {
	m := glModel() // XMean 2, XScale 3: standardized box [-1, 1] is [-1, 5] in original units
	x := []float64{-4, -1, 0, 2, 5, 5.01, math.NaN(), 100}
	want := []bool{true, false, false, false, false, true, true, true}
	free, err := m.Predict(x, len(x))
	if err != nil {
		t.Fatal(err)
	}
	if free.Outside != nil || free.NOutside != 0 {
		t.Fatalf("a model without a domain flagged rows: %v", free.Outside)
	}
	m.Domain = &Domain{Lo: []float64{-1}, Hi: []float64{1}}
	p, err := m.Predict(x, len(x))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.Outside, want) || p.NOutside != 4 {
		t.Fatalf("outside %v (%d), want %v", p.Outside, p.NOutside, want)
	}
	s2 := m.Transform.YScale * m.Transform.YScale
	for i := range x {
		if !want[i] {
			if p.Mean[i] != free.Mean[i] || p.LatentVar[i] != free.LatentVar[i] || p.NoisyVar[i] != free.NoisyVar[i] {
				t.Errorf("row %d inside the domain changed", i)
			}
			continue
		}
		if p.Mean[i] != m.Transform.YMean || p.LatentVar[i] != m.Hyper.SignalVariance*s2 || p.NoisyVar[i] != (m.Hyper.SignalVariance+m.Hyper.NoiseVariance)*s2 {
			t.Errorf("row %d outside: %g, %g, %g; want the prior", i, p.Mean[i], p.LatentVar[i], p.NoisyVar[i])
		}
	}
	if s := m.DomainString(); s != "t in [-1, 5]" {
		t.Errorf("DomainString %q", s)
	}
}

// TestPredictExtrapolated: a row is flagged when it lies beyond the training box by more than
// ExtrapolationLengthscales lengthscales of its input, counted, and the largest distance
// reported in lengthscales; every prediction is what a model without the box gives.
func TestPredictExtrapolated(t *testing.T) {
	m := glModel()                // XMean 2, XScale 3: the standardized box [-1, 1] is [-1, 5] in original units
	m.Hyper.Lengthscales[0] = 0.5 // 1.5 in original units
	// Beyond the box by 0, 0, 1/1.5, 1.6/1.5, 3/1.5 and 6/1.5 lengthscales.
	x := []float64{0, 5, 6, 6.6, -4, 11}
	want := []bool{false, false, false, true, true, true}
	free, err := m.Predict(x, len(x))
	if err != nil {
		t.Fatal(err)
	}
	if free.Extrapolated != nil || free.NExtrapolated != 0 || free.BeyondInput != -1 {
		t.Fatalf("a model without a training box flagged rows: %v", free.Extrapolated)
	}
	m.TrainBox = &Domain{Lo: []float64{-1}, Hi: []float64{1}}
	p, err := m.Predict(x, len(x))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.Extrapolated, want) || p.NExtrapolated != 3 {
		t.Fatalf("extrapolated %v (%d), want %v", p.Extrapolated, p.NExtrapolated, want)
	}
	if math.Abs(p.Beyond-4) > 1e-12 || p.BeyondInput != 0 {
		t.Errorf("beyond %v lengthscales in input %d, want 4 in input 0", p.Beyond, p.BeyondInput)
	}
	if !reflect.DeepEqual(p.Mean, free.Mean) || !reflect.DeepEqual(p.LatentVar, free.LatentVar) || !reflect.DeepEqual(p.NoisyVar, free.NoisyVar) {
		t.Errorf("the flags changed the predictions")
	}
	if s := m.TrainBoxString(); s != "t in [-1, 5]" {
		t.Errorf("TrainBoxString %q", s)
	}
}

// TestBeyondTrainBox: the distance beyond the training box in lengthscales is the scaled
// Euclidean distance to the box (a corner row 0.8 and 0.75 lengthscales out in two inputs is
// 1.10 out), for an additive kernel the largest per-input distance, and +Inf for a NaN input.
func TestBeyondTrainBox(t *testing.T) {
	m := &Model{D: 2, Hyper: Hyper{Lengthscales: []float64{0.5, 2}}, TrainBox: &Domain{Lo: []float64{-1, -1}, Hi: []float64{1, 1}}}
	for _, c := range []struct {
		name     string
		x        []float64
		additive bool
		want     float64
		at       int
	}{
		{"inside", []float64{0.3, -1}, false, 0, -1},
		{"one input", []float64{2, 0}, false, 2, 0},
		{"corner", []float64{1.4, 2.5}, false, math.Sqrt(0.8*0.8 + 0.75*0.75), 0},
		{"corner, additive", []float64{1.4, 2.5}, true, 0.8, 0},
		{"second input farther", []float64{-1.1, -4}, false, math.Sqrt(0.2*0.2 + 1.5*1.5), 1},
		{"NaN", []float64{math.NaN(), 0}, false, math.Inf(1), 0},
	} {
		got, at := m.beyondTrainBox(c.x, c.additive)
		if math.Abs(got-c.want) > 1e-12 && !(math.IsInf(got, 1) && math.IsInf(c.want, 1)) || at != c.at {
			t.Errorf("%s: %v lengthscales in input %d, want %v in input %d", c.name, got, at, c.want, c.at)
		}
	}
}
