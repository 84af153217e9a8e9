package model

import (
	"bytes"
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

// The standard error of an estimated log likelihood is an optional trailer section: a model
// without one encodes as before up to the count of sections, one with it (alone or after warnings) round-trips to the same
// bytes, and a negative or non-finite value is refused.
func TestLogLikSERoundTrip(t *testing.T) {
	for name, m := range withWarnings(t) {
		for _, warned := range []bool{false, true} {
			c := clone(t, m)
			if !warned {
				c.Warnings = nil
			}
			b0 := modelBody(encode(t, c))
			c.LogLikSE = 1.25
			b := encode(t, c)
			if body := modelBody(b); len(body) <= len(b0) || (!warned && !bytes.HasPrefix(body, b0[:len(b0)-8])) {
				t.Fatalf("%s (warnings %v): the standard error is not a trailer section", name, warned)
			}
			d, err := Decode(bytes.NewReader(b))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if d.LogLikSE != 1.25 || len(d.Warnings) != len(c.Warnings) {
				t.Fatalf("%s: decoded se %v and %d warnings", name, d.LogLikSE, len(d.Warnings))
			}
			if !bytes.Equal(encode(t, d), b) {
				t.Fatalf("%s: re-encoding gives different bytes", name)
			}
		}
	}
	m := exactModel()
	base := untrailed(t, m)
	u64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	str := func(s string) []byte { return append(u64(uint64(len(s))), s...) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for _, v := range []float64{-1, math.Inf(1), math.NaN()} {
		b := cat(base, u64(1), str("loglik_se"), str(string(u64(math.Float64bits(v)))))
		got, p, err := decodeSafely(b)
		if p != nil || got != nil || err == nil || !strings.Contains(err.Error(), "standard error") {
			t.Errorf("se %v: panic %v, error %v", v, p, err)
		}
	}
}
