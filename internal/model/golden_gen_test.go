package model

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// TestWriteV1Golden writes testdata/v1 with the Version-1 encoder: one file per model and
// the predictions of each at fixed rows. Run once, with GPREDUCE_WRITE_V1_GOLDEN=1, before
// the Version-2 layout replaced that encoder.
func TestWriteV1Golden(t *testing.T) {
	if os.Getenv("GPREDUCE_WRITE_V1_GOLDEN") == "" {
		t.Skip("set GPREDUCE_WRITE_V1_GOLDEN=1 to write testdata/v1")
	}
	models := map[string]*Model{"grief": griefModel(t)}
	for name, m := range validModels() {
		models[name] = m
	}
	for _, name := range []string{"gl", "exact", "grief", "expansion-kmcg"} {
		m := clone(t, models[name])
		m.Warn(WarnBound, "lengthscale 1 is on its upper bound %g", 100.0)
		m.Warn(WarnNotConverged, "L-BFGS stopped at max-iter %d", 50)
		m.LogLikSE = 0.75
		lo, hi := make([]float64, m.D), make([]float64, m.D)
		for k := range lo {
			lo[k], hi[k] = -1-float64(k), 2+float64(k)
		}
		m.Domain = &Domain{Lo: lo, Hi: hi}
		m.Sizing = &Sizing{LengthscaleMin: []float64{0.1, 0.2}[:m.D], LengthscaleMax: []float64{10, 20}[:m.D]}
		m.Choice = &MethodChoice{Requested: "auto", Reason: "golden " + name}
		models[name+"-sections"] = m
	}
	preds := map[string]goldenPrediction{}
	names := make([]string, 0, len(models))
	for name := range models {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		m := models[name]
		b := encode(t, m)
		if err := os.WriteFile(filepath.Join("testdata", "v1", name+".model"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		preds[name] = predictGolden(t, m)
	}
	leg := legacy(encode(t, models["gl-sections"]))
	if err := os.WriteFile(filepath.Join("testdata", "v1", "gl-sections-legacy.model"), leg, 0o644); err != nil {
		t.Fatal(err)
	}
	preds["gl-sections-legacy"] = preds["gl-sections"]
	j, err := json.MarshalIndent(preds, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("testdata", "v1", "predictions.json"), append(j, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// goldenPrediction is a model's prediction of goldenRows rows of testRows(m, goldenRows,
// goldenSeed), each float as the hex of its IEEE-754 bits.
type goldenPrediction struct {
	Mean, LatentVar, NoisyVar []string
	Outside                   []bool
}

const goldenRows, goldenSeed = 9, 11

func predictGolden(t *testing.T, m *Model) goldenPrediction {
	t.Helper()
	p, err := m.Predict(testRows(m, goldenRows, goldenSeed), goldenRows)
	if err != nil {
		t.Fatal(err)
	}
	hex := func(v []float64) []string {
		out := make([]string, len(v))
		for i, x := range v {
			out[i] = fmt.Sprintf("%016x", math.Float64bits(x))
		}
		return out
	}
	return goldenPrediction{Mean: hex(p.Mean), LatentVar: hex(p.LatentVar), NoisyVar: hex(p.NoisyVar), Outside: p.Outside}
}
