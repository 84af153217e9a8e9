package model

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// withWarnings returns each kind of model (plain posterior, GRIEF, expansion) carrying two
// warnings, so the tagged trailer is exercised after every possible preceding section.
func withWarnings(t testing.TB) map[string]*Model {
	out := map[string]*Model{"grief": griefModel(t)}
	for name, m := range validModels() {
		out[name] = m
	}
	for _, m := range out {
		m.Warn(WarnBound, "lengthscale 3 is on its upper bound %g", 100.0)
		m.Warn(WarnNotConverged, "L-BFGS stopped at max-iter %d", 50)
		m.Warn(WarnBound, "lengthscale 3 is on its upper bound %g", 100.0) // deduplicated
	}
	return out
}

func TestWarningsRoundTrip(t *testing.T) {
	for name, m := range withWarnings(t) {
		t.Run(name, func(t *testing.T) {
			if len(m.Warnings) != 2 {
				t.Fatalf("%d warnings after a duplicate Warn, want 2", len(m.Warnings))
			}
			plain := clone(t, m)
			plain.Warnings = nil
			b0, b := modelBody(encode(t, plain)), modelBody(encode(t, m))
			if !bytes.HasPrefix(b, b0[:len(b0)-8]) || len(b) <= len(b0) {
				t.Fatalf("warnings are not a trailer after the model without them (%d vs %d bytes)", len(b), len(b0))
			}
			d, err := Decode(bytes.NewReader(encode(t, m)))
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Warnings) != 2 || d.Warnings[0] != m.Warnings[0] || d.Warnings[1] != m.Warnings[1] {
				t.Fatalf("decoded warnings %v, want %v", d.Warnings, m.Warnings)
			}
			if !d.HasWarning(WarnNotConverged) || d.HasWarning(WarnAllNoise) {
				t.Fatalf("HasWarning disagrees with %v", d.Warnings)
			}
			if b2 := modelBody(encode(t, d)); !bytes.Equal(b, b2) {
				t.Fatalf("re-encoding gives different bytes")
			}
		})
	}
}

// TestWarningsTrailerCorrupt: a trailer that is unknown, repeated, over-long or
// followed by bytes is refused with an error, never a panic.
func TestWarningsTrailerCorrupt(t *testing.T) {
	m := exactModel()
	base := untrailed(t, m)
	u64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	str := func(s string) []byte { return append(u64(uint64(len(s))), s...) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	one := cat(u64(1), str("c"), str("m")) // one warning
	for name, tc := range map[string]struct {
		b    []byte
		want string
	}{
		"unknown tag":         {cat(base, u64(1), str("nosuch"), str("")), "unknown or out-of-order"},
		"repeated tag":        {cat(base, u64(2), str("warnings"), str(string(one)), str("warnings"), str(string(one))), "unknown or out-of-order"},
		"empty warnings":      {cat(base, u64(1), str("warnings"), str(string(u64(0)))), "empty model section"},
		"payload trailing":    {cat(base, u64(1), str("warnings"), str(string(one)+"x")), "bytes after model section"},
		"payload short":       {cat(base, u64(1), str("warnings"), str(string(one[:20]))), "truncated"},
		"bytes after trailer": {cat(base, u64(1), str("warnings"), str(string(one)), u64(0)), "after the end"},
		"count too large":     {cat(base, u64(1<<20)), "exceeds"},
		"control character":   {cat(base, u64(1), str("warnings"), str(string(cat(u64(1), str("c"), str("a\nb"))))), "control character"},
	} {
		got, p, err := decodeSafely(tc.b)
		if p != nil || got != nil || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: panic %v, error %v, want one containing %q", name, p, err, tc.want)
		}
	}
	if got, _, err := decodeSafely(cat(base, u64(0))); err != nil || len(got.Warnings) != 0 {
		t.Fatalf("a hand-written empty trailer: %v, %v", got, err)
	}
	if got, _, err := decodeSafely(cat(base, u64(1), str("warnings"), str(string(one)))); err != nil || len(got.Warnings) != 1 {
		t.Fatalf("a hand-written valid trailer: %v, %v", got, err)
	}
}

// untrailed is the model's encoding in the legacy envelope (no checksum, so hand-made
// trailers need no resealing) without the count of tagged sections that ends its body.
func untrailed(t testing.TB, m *Model) []byte {
	t.Helper()
	b := legacy(encode(t, m))
	if n := binary.LittleEndian.Uint64(b[len(b)-8:]); n != 0 {
		t.Fatalf("the model has %d tagged sections", n)
	}
	return b[:len(b)-8]
}
