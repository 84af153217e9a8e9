package model

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/gpreduce/gpreduce/internal/kernel"
)

// TestExpansionModelPredict: an expansion with Minus = R^-1 predicts what the exact model on
// the same data predicts, and a kmcg-shaped one what its formula gives, in original units.
func TestExpansionModelPredict(t *testing.T) {
	const rows = 700 // more than one predict block
	for _, fam := range []kernel.Family{kernel.RBF, kernel.Matern12} {
		m, ex := expansionModel(fam), exactModelOf(fam)
		if err := m.Validate(); err != nil {
			t.Fatal(err)
		}
		x := testRows(m, rows, 3)
		got, err := m.Predict(x, rows)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ex.Predict(x, rows)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < rows; i++ {
			for _, pair := range [][2]float64{{got.Mean[i], want.Mean[i]}, {got.LatentVar[i], want.LatentVar[i]}, {got.NoisyVar[i], want.NoisyVar[i]}} {
				if math.Abs(pair[0]-pair[1]) > 1e-10*math.Max(1, math.Abs(pair[1])) {
					t.Fatalf("%s row %d: expansion %v, exact %v", fam, i, got, want)
				}
			}
		}
	}

	m := kmcgModel()
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	x := testRows(m, rows, 4)
	got, err := m.Predict(x, rows)
	if err != nil {
		t.Fatal(err)
	}
	e, d := m.Expansion, m.D
	n := len(e.Alpha)
	xs := make([]float64, d)
	kx := make([]float64, n)
	quad := func(M []float64, r int) float64 {
		var s float64
		for j := 0; j < r; j++ {
			var c float64
			for i := 0; i < n; i++ {
				c += M[i*r+j] * kx[i]
			}
			s += c * c
		}
		return s
	}
	ys, y2 := m.Transform.YScale, m.Transform.YScale*m.Transform.YScale
	for r := 0; r < rows; r++ {
		m.Transform.ApplyRow(x[r*d:(r+1)*d], xs)
		var mu float64
		for i := 0; i < n; i++ {
			kx[i] = e.Kernel.Eval(xs, e.X[i*d:(i+1)*d])
			mu += kx[i] * e.Alpha[i]
		}
		lv := math.Max(0, e.Kernel.Eval(xs, xs)-quad(e.Minus, e.RMinus)+e.PlusScale*quad(e.Plus, e.RPlus))
		wantMean, wantVar := ys*mu+m.Transform.YMean, y2*lv
		if math.Abs(got.Mean[r]-wantMean) > 1e-10*math.Max(1, math.Abs(wantMean)) ||
			math.Abs(got.LatentVar[r]-wantVar) > 1e-10*math.Max(1, wantVar) ||
			math.Abs(got.NoisyVar[r]-wantVar-y2*m.Hyper.NoiseVariance) > 1e-10*math.Max(1, wantVar) {
			t.Fatalf("row %d: mean %v var %v noisy %v, want %v %v", r, got.Mean[r], got.LatentVar[r], got.NoisyVar[r], wantMean, wantVar)
		}
	}
}

func TestExpansionModelRoundTrip(t *testing.T) {
	for name, m := range map[string]*Model{"cg": expansionModel(kernel.Matern32), "kmcg": kmcgModel()} {
		t.Run(name, func(t *testing.T) {
			b := encode(t, m)
			if !bytes.Equal(encode(t, m), b) {
				t.Fatal("two encodings of the same model differ")
			}
			d, err := Decode(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			if d.Expansion == nil || d.Exact != nil || d.GRIEF != nil || d.Features != nil {
				t.Fatalf("decoded posteriors: expansion %v, exact %v, GRIEF %v, features %v", d.Expansion != nil, d.Exact != nil, d.GRIEF != nil, d.Features != nil)
			}
			if !bytes.Equal(encode(t, d), b) {
				t.Fatal("re-encoding the decoded model gives different bytes")
			}
			const rows = 600
			x := testRows(m, rows, 8)
			p1, err := m.Predict(x, rows)
			if err != nil {
				t.Fatal(err)
			}
			p2, err := d.Predict(x, rows)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < rows; i++ {
				if math.Float64bits(p1.Mean[i]) != math.Float64bits(p2.Mean[i]) || math.Float64bits(p1.LatentVar[i]) != math.Float64bits(p2.LatentVar[i]) {
					t.Fatalf("row %d: decoded model predicts %v %v, original %v %v", i, p2.Mean[i], p2.LatentVar[i], p1.Mean[i], p1.LatentVar[i])
				}
			}
			for n := 0; n < len(b); n++ {
				if got, p, err := decodeSafely(b[:n]); p != nil || err == nil || got != nil {
					t.Fatalf("prefix %d of %d: panic %v, err %v", n, len(b), p, err)
				}
			}
		})
	}
}

// TestExpansionEncodingLayout: the expansion is appended after what the model encodes to
// without it, behind a GRIEF-absent flag when there is no GRIEF section, so the encodings of
// models without an expansion (those written before it existed) are unchanged.
func TestExpansionEncodingLayout(t *testing.T) {
	u64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	m := expansionModel(kernel.RBF)
	with := modelBody(encode(t, m))
	x := m.Expansion
	m.Expansion = nil
	without := modelBody(encode(t, m))
	if !bytes.HasPrefix(with, append(append(without, u64(0)...), u64(1)...)) {
		t.Fatalf("an expansion model's encoding does not extend the encoding without it by a false and a true flag")
	}
	g := griefModel(t)
	gb := modelBody(encode(t, g))
	g.Expansion = x
	both := modelBody(encode(t, g))
	if !bytes.HasPrefix(both, append(gb, u64(1)...)) || len(both)-len(gb) != len(with)-len(without)-8 {
		t.Fatalf("a GRIEF model's expansion does not follow its GRIEF section (%d, %d bytes)", len(both)-len(gb), len(with)-len(without))
	}
}

// TestExpansionWithGRIEFRejected: a model with both a GRIEF and an expansion posterior is
// invalid, and Decode reads both sections (the error is about the posteriors, not the bytes).
func TestExpansionWithGRIEFRejected(t *testing.T) {
	m := griefModel(t)
	m.Expansion = expansionModel(kernel.RBF).Expansion
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "2 posteriors") {
		t.Fatalf("Validate: %v, want 2 posteriors", err)
	}
	got, p, err := decodeSafely(encode(t, m))
	if p != nil || got != nil || err == nil || !strings.Contains(err.Error(), "2 posteriors") {
		t.Fatalf("Decode: panic %v, error %v, want 2 posteriors", p, err)
	}
}

// TestDecodeStrayTrailingFlags: Encode never writes a false presence flag except the
// GRIEF-absent flag before an expansion, so Decode rejects every other one.
func TestDecodeStrayTrailingFlags(t *testing.T) {
	u64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	exact, grief := encode(t, exactModel()), encode(t, griefModel(t))
	m := expansionModel(kernel.RBF)
	exp := encode(t, m)
	m.Expansion = nil
	head := len(encode(t, m)) // where the GRIEF-absent flag starts
	if binary.LittleEndian.Uint64(exp[head:]) != 0 || binary.LittleEndian.Uint64(exp[head+8:]) != 1 {
		t.Fatalf("no GRIEF-absent and expansion flags at byte %d", head)
	}
	badFlag := append([]byte(nil), exp...)
	binary.LittleEndian.PutUint64(badFlag[head+8:], 2) // the expansion's presence flag
	for name, b := range map[string][]byte{
		"exact, GRIEF absent":                   cat(exact, u64(0)),
		"exact, GRIEF and expansion absent":     cat(exact, u64(0), u64(0)),
		"exact, expansion flag only":            cat(exact, u64(0), u64(1)),
		"GRIEF, expansion absent":               cat(grief, u64(0)),
		"GRIEF, bad expansion flag":             cat(grief, u64(7)),
		"expansion flag 2":                      badFlag,
		"expansion, trailing flag":              cat(exp, u64(0)),
		"expansion, trailing expansion section": cat(exp, exp[head+8:]),
		"expansion, no GRIEF-absent flag":       cat(exp[:head], exp[head+8:]),
	} {
		got, p, err := decodeSafely(b)
		if p != nil || got != nil || err == nil {
			t.Errorf("%s: panic %v, error %v", name, p, err)
		}
	}
}

// modelBody is the body of an encoded model: what follows the header and the checksum.
func modelBody(b []byte) []byte { return b[12+sha256.Size:] }
