package model

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// v1Legacy returns the Version-1 golden model name in the legacy envelope (no checksum), so
// that hand-made changes to its body reach the Version-1 decoder, and the decoded model.
func v1Legacy(t *testing.T, name string) ([]byte, *Model) {
	t.Helper()
	b := readGolden(t, "v1", name)
	m, err := Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return legacy(b), m
}

// TestDecodeVersion1Combinations: Version-1 groups that are not one posterior are refused:
// a GRIEF posterior followed by an expansion, and an exact posterior followed by one.
func TestDecodeVersion1Combinations(t *testing.T) {
	u64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	grief, _ := v1Legacy(t, "grief")
	exact, _ := v1Legacy(t, "exact")
	exp, em := v1Legacy(t, "expansion")
	// The expansion body: common fields, four absent groups, the GRIEF-absent flag, the
	// expansion's presence flag and section.
	head := 12 + bodySplit(t, em).nameAt + 4*8
	if binary.LittleEndian.Uint64(exp[head:]) != 0 || binary.LittleEndian.Uint64(exp[head+8:]) != 1 {
		t.Fatalf("no GRIEF-absent and expansion flags at byte %d", head)
	}
	section := exp[head+16:]
	for name, b := range map[string][]byte{
		"GRIEF and expansion": cat(grief, u64(1), section),
		"exact and expansion": cat(exact, u64(0), u64(1), section),
	} {
		got, p, err := decodeSafely(b)
		if p != nil || got != nil || err == nil || !strings.Contains(err.Error(), "2 posteriors") {
			t.Errorf("%s: panic %v, error %v, want 2 posteriors", name, p, err)
		}
	}
	if _, _, err := decodeSafely(exp); err != nil {
		t.Fatalf("the intact expansion model: %v", err)
	}
}

// TestDecodeStrayTrailingFlags: the Version-1 encoder never wrote a false presence flag
// except the GRIEF-absent flag before an expansion or a trailer, so Decode rejects every
// other one, and an empty trailer.
func TestDecodeStrayTrailingFlags(t *testing.T) {
	u64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	exact, _ := v1Legacy(t, "exact")
	grief, _ := v1Legacy(t, "grief")
	exp, em := v1Legacy(t, "expansion")
	head := 12 + bodySplit(t, em).nameAt + 4*8 // where the GRIEF-absent flag starts
	badFlag := append([]byte(nil), exp...)
	binary.LittleEndian.PutUint64(badFlag[head+8:], 2) // the expansion's presence flag
	for name, b := range map[string][]byte{
		"exact, GRIEF absent":                   cat(exact, u64(0)),
		"exact, GRIEF and expansion absent":     cat(exact, u64(0), u64(0)),
		"exact, expansion flag only":            cat(exact, u64(0), u64(1)),
		"exact, empty trailer":                  cat(exact, u64(0), u64(0), u64(0)),
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
