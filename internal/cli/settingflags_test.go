package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestBoolSettingFlags: a boolean setting's flag takes no value (--additive before another
// flag is --additive=true) and takes an explicit one; a bad value names the flag.
func TestBoolSettingFlags(t *testing.T) {
	good := writeCSV(t, t.TempDir(), "good.csv", 60, 0)
	for _, tc := range []struct {
		flags    []string
		features int // 0: the run fails
		err      string
	}{
		{[]string{"--additive", "--features", "5"}, 10, ""},
		{[]string{"--additive=false", "--features", "5"}, 25, ""},
		{[]string{"--additive=maybe", "--features", "5"}, 0, "additive"},
		{[]string{"--additive", "--basis", "trig", "--features", "4"}, 0, "--features: 4 is even"},
	} {
		args := append([]string{"eval", "--method", "vof", "--max-iter", "2", "--json", "--data", good, "--header"}, tc.flags...)
		code, out, errOut := run(t, args...)
		if tc.features == 0 {
			if code == 0 || !strings.Contains(errOut, tc.err) {
				t.Errorf("%v: exit %d, stderr %q; want a failure naming %q", tc.flags, code, errOut, tc.err)
			}
			continue
		}
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.flags, code, errOut)
		}
		var res struct{ Features int }
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.Features != tc.features {
			t.Errorf("%v: %d features (%v), want %d", tc.flags, res.Features, err, tc.features)
		}
	}
}
