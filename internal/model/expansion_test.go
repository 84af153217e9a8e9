package model

import (
	"bytes"
	"crypto/sha256"
	"math"
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
	e, d := expansionOf(m).Expansion, m.D
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
			if _, ok := d.Posterior.(*ExpansionPosterior); !ok {
				t.Fatalf("decoded a %T posterior", d.Posterior)
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

// modelBody is the body of an encoded model: what follows the header and the checksum.
func modelBody(b []byte) []byte { return b[12+sha256.Size:] }
