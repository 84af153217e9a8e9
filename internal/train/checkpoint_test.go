package train

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"math"
	"testing"

	"github.com/gpreduce/gpreduce/internal/model"
	"github.com/gpreduce/gpreduce/internal/shard"
)

// TestResumeGivesIdenticalModel: a run stopped at any checkpoint (as when a leader dies) and
// resumed from it produces the same model bytes as an uninterrupted run, for every method.
func TestResumeGivesIdenticalModel(t *testing.T) {
	for _, method := range []string{"gl", "rff", "exact"} {
		t.Run(method, func(t *testing.T) {
			tab := synthTable(600, 2, 71)
			if method == "exact" {
				tab = synthTable(200, 2, 71)
			}
			spec := DefaultSpec(method)
			spec.LengthscaleBounds = [2]float64{0.5, 1}
			set(&spec, "nodes_per_dim", []int{14, 14})
			set(&spec, "features", 48)
			spec.MaxIter = 12
			m := resumeMatches(t, tab, spec)
			// The model records the training inputs' box (standardized), kept across resumes.
			for k := 0; k < tab.D; k++ {
				lo, hi := math.Inf(1), math.Inf(-1)
				for i := 0; i < tab.N(); i++ {
					lo, hi = min(lo, tab.X[i*tab.D+k]), max(hi, tab.X[i*tab.D+k])
				}
				wantLo := (lo - m.Transform.XMean[k]) / m.Transform.XScale[k]
				wantHi := (hi - m.Transform.XMean[k]) / m.Transform.XScale[k]
				if m.TrainBox == nil || math.Abs(m.TrainBox.Lo[k]-wantLo) > 1e-12 || math.Abs(m.TrainBox.Hi[k]-wantHi) > 1e-12 {
					t.Fatalf("training box %+v, want input %d in [%v, %v]", m.TrainBox, k, wantLo, wantHi)
				}
			}
		})
	}
}

// resumeMatches interrupts runs of spec at several checkpoints, resumes each, and checks
// that every resumed model is bitwise the uninterrupted one.
func resumeMatches(t *testing.T, tab *shard.Table, spec Spec) *model.Model {
	t.Helper()
	return resumeMatchesFrom(t, tab, spec, nil)
}

// resumeMatchesFrom is resumeMatches for runs that all begin by resuming from the checkpoint
// from (nil: a fresh start).
func resumeMatchesFrom(t *testing.T, tab *shard.Table, spec Spec, from []byte) *model.Model {
	t.Helper()
	eng := localEngine(t, tab, 4, 2)
	var cks [][]byte
	full, err := Run(context.Background(), eng, spec, Hooks{Resume: from, Save: func(_ context.Context, _ int, _ float64, ck []byte) error {
		cks = append(cks, append([]byte(nil), ck...))
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	want, err := full.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if len(cks) < 5 {
		t.Fatalf("only %d checkpoints saved", len(cks))
	}
	for _, k := range []int{0, 1, 2, len(cks) / 2, len(cks) - 1} {
		// Interrupt a fresh run at checkpoint k, then resume from it.
		stop := errors.New("leader died")
		n := 0
		var last []byte
		_, err := Run(context.Background(), localEngine(t, tab, 4, 1), spec, Hooks{Resume: from, Save: func(_ context.Context, _ int, _ float64, ck []byte) error {
			last = append([]byte(nil), ck...)
			n++
			if n > k {
				return stop
			}
			return nil
		}})
		if !errors.Is(err, stop) {
			t.Fatalf("checkpoint %d: interrupted run returned %v", k, err)
		}
		if !bytes.Equal(last, cks[k]) {
			t.Fatalf("checkpoint %d differs between runs", k)
		}
		m, err := Run(context.Background(), localEngine(t, tab, 4, 3), spec, Hooks{Resume: last})
		if err != nil {
			t.Fatalf("resume from checkpoint %d: %v", k, err)
		}
		got, err := m.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("model resumed from checkpoint %d of %d differs from the uninterrupted one", k, len(cks))
		}
		// The same checkpoint as a build before the training box was recorded wrote it (no
		// Lo, Hi): the resumed run repeats the moments pass and gives the same model.
		ck, err := DecodeCheckpoint(last)
		if err != nil {
			t.Fatal(err)
		}
		if ck.Lo == nil || ck.Hi == nil {
			t.Fatalf("checkpoint %d holds no training box", k)
		}
		ck.Lo, ck.Hi = nil, nil
		var old bytes.Buffer
		if err := gob.NewEncoder(&old).Encode(ck); err != nil {
			t.Fatal(err)
		}
		m, err = Run(context.Background(), localEngine(t, tab, 4, 2), spec, Hooks{Resume: old.Bytes()})
		if err != nil {
			t.Fatalf("resume from checkpoint %d without its box: %v", k, err)
		}
		if got, err = m.Bytes(); err != nil || !bytes.Equal(got, want) {
			t.Errorf("model resumed from checkpoint %d without its box differs from the uninterrupted one (%v)", k, err)
		}
	}
	return full
}

// TestResumeAutoGivesIdenticalModel: the method auto chooses is chosen again on resume, from
// the same statistics, and the resumed model (choice included) is bitwise the same.
func TestResumeAutoGivesIdenticalModel(t *testing.T) {
	for _, c := range []struct {
		name  string
		tab   *shard.Table
		exact int
		box   bool // narrow lengthscale bounds
	}{
		{"exact", synthTable(200, 2, 71), 0, true},
		{"gl", synthTable(600, 1, 71), 100, true},
		// grief's fit is all noise, auto retrains with rff (TestAutoFallsBackFromAllNoiseGRIEF):
		// a resume in either phase gives the same model.
		{AutoFallbackMethod, highFrequencyTable(480), 150, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := DefaultSpec(Auto)
			if c.box {
				spec.LengthscaleBounds = [2]float64{0.5, 1}
			}
			set(&spec, "exact_max_rows", c.exact)
			set(&spec, "cg_max_rows", c.exact) // no cg range: gl or grief above exact
			spec.MaxIter = 12
			if m := resumeMatches(t, c.tab, spec); m.Method != c.name || m.Choice == nil {
				t.Fatalf("auto trained %s (choice %+v), want %s", m.Method, m.Choice, c.name)
			}
		})
	}
}

func TestResumeRejectsForeignCheckpoint(t *testing.T) {
	tab := synthTable(100, 1, 72)
	spec := DefaultSpec("gl")
	set(&spec, "nodes_per_dim", []int{20})
	spec.MaxIter = 2
	var ck []byte
	if _, err := Run(context.Background(), localEngine(t, tab, 2, 1), spec, Hooks{Save: func(_ context.Context, _ int, _ float64, b []byte) error { ck = b; return nil }}); err != nil {
		t.Fatal(err)
	}
	spec.Method = "rff"
	if _, err := Run(context.Background(), localEngine(t, tab, 2, 1), spec, Hooks{Resume: ck}); err == nil {
		t.Error("an rff job resumed from a gl checkpoint")
	}
	if _, err := Run(context.Background(), localEngine(t, tab, 2, 1), spec, Hooks{Resume: []byte("garbage")}); err == nil {
		t.Error("a garbage checkpoint was accepted")
	}
}
