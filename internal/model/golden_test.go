package model

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/v2 from the Version-1 files of testdata/v1")

// testdata/v1 holds models written by the Version-1 encoder (before posteriors were
// registered), one per kind of posterior, some with every tagged section and one in the
// legacy envelope without a checksum, and predictions.json the predictions each gave then.
// testdata/v2 holds what this build encodes them to.

// goldenPrediction is a model's prediction of goldenRows rows of testRows(m, goldenRows,
// goldenSeed), each float as the hex of its IEEE-754 bits.
type goldenPrediction struct {
	Mean, LatentVar, NoisyVar []string
	Outside                   []bool
}

const goldenRows, goldenSeed = 9, 11

// goldenNames lists the models of testdata/v1, without the .model suffix, sorted.
func goldenNames(t testing.TB) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "v1", "*.model"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no golden models in testdata/v1 (%v)", err)
	}
	var names []string
	for _, p := range paths {
		names = append(names, strings.TrimSuffix(filepath.Base(p), ".model"))
	}
	sort.Strings(names)
	return names
}

func readGolden(t testing.TB, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", dir, name+".model"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkGoldenPrediction compares m's prediction with the one recorded when the Version-1 file
// was written, to 1e-12 relative: the decoded model is the same, but the prediction code may
// have changed its summation order since (the blocked predictors of the compute core moved
// the last bits). TestDecodeVersion1Golden checks bit equality between the Version-1 and the
// Version-2 decodings, which run the same code.
func checkGoldenPrediction(t *testing.T, m *Model, want goldenPrediction) {
	t.Helper()
	p, err := m.Predict(testRows(m, goldenRows, goldenSeed), goldenRows)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		got  []float64
		want []string
	}{{"mean", p.Mean, want.Mean}, {"latent variance", p.LatentVar, want.LatentVar}, {"noisy variance", p.NoisyVar, want.NoisyVar}} {
		if len(c.got) != len(c.want) {
			t.Fatalf("%s: %d rows, recorded %d", c.what, len(c.got), len(c.want))
		}
		for i, v := range c.got {
			var bits uint64
			if _, err := fmt.Sscanf(c.want[i], "%x", &bits); err != nil {
				t.Fatal(err)
			}
			w := math.Float64frombits(bits)
			if relErr(v, w) > 1e-12 {
				t.Errorf("row %d %s = %v (%016x), recorded %v (%016x)", i, c.what, v, math.Float64bits(v), w, bits)
			}
		}
	}
	if fmt.Sprint(p.Outside) != fmt.Sprint(want.Outside) {
		t.Errorf("outside %v, recorded %v", p.Outside, want.Outside)
	}
}

// TestDecodeVersion1Golden: every Version-1 model decodes into the posterior of its kind
// with its tagged sections, predicts what it predicted when it was written, and encodes to
// the recorded Version-2 bytes, which decode to a model that predicts the same and encodes
// back to those bytes.
func TestDecodeVersion1Golden(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "v1", "predictions.json"))
	if err != nil {
		t.Fatal(err)
	}
	var preds map[string]goldenPrediction
	if err := json.Unmarshal(raw, &preds); err != nil {
		t.Fatal(err)
	}
	for _, name := range goldenNames(t) {
		t.Run(name, func(t *testing.T) {
			m, err := Decode(bytes.NewReader(readGolden(t, "v1", name)))
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.SplitN(name, "-", 2)[0]; m.Posterior.Name() != want || m.Version != Version {
				t.Fatalf("decoded a %s posterior at version %d, want %s at %d", m.Posterior.Name(), m.Version, want, Version)
			}
			if strings.Contains(name, "-sections") {
				if len(m.Warnings) != 2 || m.LogLikSE != 0.75 || m.Domain == nil || m.Sizing == nil || m.Choice == nil {
					t.Fatalf("tagged sections lost: %v %v %v %v %v", m.Warnings, m.LogLikSE, m.Domain, m.Sizing, m.Choice)
				}
			}
			want, ok := preds[name]
			if !ok {
				t.Fatalf("no recorded prediction")
			}
			checkGoldenPrediction(t, m, want)

			v2name := strings.TrimSuffix(name, "-legacy")
			b := encode(t, m)
			if *update && v2name == name {
				if err := os.WriteFile(filepath.Join("testdata", "v2", name+".model"), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			v2 := readGolden(t, "v2", v2name)
			if !bytes.Equal(b, v2) {
				t.Fatalf("encodes to %d bytes that differ from testdata/v2/%s.model (%d bytes)", len(b), v2name, len(v2))
			}
			m2, err := Decode(bytes.NewReader(v2))
			if err != nil {
				t.Fatal(err)
			}
			checkGoldenPrediction(t, m2, want)
			p1, err1 := m.Predict(testRows(m, goldenRows, goldenSeed), goldenRows)
			p2, err2 := m2.Predict(testRows(m2, goldenRows, goldenSeed), goldenRows)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			for i := range p1.Mean {
				if math.Float64bits(p1.Mean[i]) != math.Float64bits(p2.Mean[i]) || math.Float64bits(p1.LatentVar[i]) != math.Float64bits(p2.LatentVar[i]) {
					t.Fatalf("row %d: the Version-1 and Version-2 decodings predict different bits", i)
				}
			}
			if !bytes.Equal(encode(t, m2), v2) {
				t.Fatal("the Version-2 model does not encode back to its bytes")
			}
		})
	}
}
