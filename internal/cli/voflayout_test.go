package cli

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpreduce/gpreduce/internal/model"
)

// writeAdditiveCSV writes n rows of d inputs uniform on [-1, 1] and y = sum_k sin(3 x_k) plus
// noise 0.1, with a header x1..xd,y, and returns the path.
func writeAdditiveCSV(t *testing.T, dir, name string, n, d int, seed uint64) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 3))
	var b strings.Builder
	for k := 1; k <= d; k++ {
		fmt.Fprintf(&b, "x%d,", k)
	}
	b.WriteString("y\n")
	for i := 0; i < n; i++ {
		var y float64
		for k := 0; k < d; k++ {
			x := 2*rng.Float64() - 1
			y += math.Sin(3 * x)
			fmt.Fprintf(&b, "%g,", x)
		}
		fmt.Fprintf(&b, "%g\n", y+0.1*rng.NormFloat64())
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestEvalVOFLayout: eval --method vof on d = 5 with the default layout runs the additive
// layout, reports it in the JSON ("layout") and the printed method line, and carries a sizing
// warning; --layout additive and its synonym --additive choose it without the warning;
// --layout tensor refuses with an error naming the layout and --max-features; an unknown
// layout is refused by name.
func TestEvalVOFLayout(t *testing.T) {
	dir := t.TempDir()
	tr := writeAdditiveCSV(t, dir, "train.csv", 200, 5, 1)
	te := writeAdditiveCSV(t, dir, "test.csv", 40, 5, 2)
	base := []string{"eval", "--method", "vof", "--train", tr, "--test", te, "--header", "--target", "y", "--max-iter", "20"}
	for _, c := range []struct {
		name   string
		args   []string
		sizing bool
		err    []string // every one in stderr; nil for success
	}{
		{"default", nil, true, nil},
		{"--layout auto", []string{"--layout", "auto"}, true, nil},
		{"--layout additive", []string{"--layout", "additive"}, false, nil},
		{"--additive", []string{"--additive"}, false, nil},
		{"--layout tensor", []string{"--layout", "tensor"}, false, []string{"layout: tensor needs 21^5 features", "--max-features 4096"}},
		{"--layout tensor --additive", []string{"--layout", "tensor", "--additive"}, false, []string{"layout: tensor contradicts --additive"}},
		{"--layout grid", []string{"--layout", "grid"}, false, []string{"layout: unknown layout \"grid\""}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := run(t, append(append(append([]string(nil), base...), c.args...), "--json")...)
			if c.err != nil {
				if code == 0 {
					t.Fatalf("exit 0; want a refusal\n%s", out)
				}
				for _, w := range c.err {
					if !strings.Contains(errOut, w) {
						t.Errorf("stderr %q does not contain %q", errOut, w)
					}
				}
				return
			}
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var r struct {
				evalJSON
				Layout string `json:"layout"`
			}
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatal(err)
			}
			if r.Layout != "additive" || r.Features != 5*21 || hasCode(r.Warnings, model.WarnSizing) != c.sizing {
				t.Errorf("layout %q, %d features, warnings %v; want additive, 105 features, a sizing warning %v", r.Layout, r.Features, r.Warnings, c.sizing)
			}
			if !(r.RMSE < 0.3) {
				t.Errorf("RMSE %g on an additive function with noise 0.1 (target sd about 1.5)", r.RMSE)
			}
		})
	}
	code, out, errOut := run(t, base...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "method      vof (kernel rbf, 105 features, additive layout)") ||
		!strings.Contains(out, "warning     sizing: vof: 21^5 tensor features exceed --max-features 4096; using the additive layout") {
		t.Errorf("printed summary lacks the layout or the sizing warning:\n%s", out)
	}
}

// TestJobFileVOFLayout: a job file gives the layout under vof: or flat, and a bad one is
// refused naming the setting.
func TestJobFileVOFLayout(t *testing.T) {
	for _, c := range []struct {
		yaml, layout, err string
	}{
		{"method: vof\nvof: {layout: tensor, features: 9}\ndata: {uri: a.csv}\n", "tensor", ""},
		{"method: vof\nlayout: additive\ndata: {uri: a.csv}\n", "additive", ""},
		{"method: vof\nvof: {layout: grid}\ndata: {uri: a.csv}\n", "", `layout: unknown layout "grid"`},
		{"method: vof\nvof: {layout: tensor, additive: true}\ndata: {uri: a.csv}\n", "", "layout: tensor contradicts --additive"},
	} {
		j, err := parseJobFile([]byte(c.yaml), "/base")
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want one containing %q", c.yaml, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.yaml, err)
			continue
		}
		if got := j.spec.GetVof().GetLayout(); got != c.layout {
			t.Errorf("%q: layout %q, want %q", c.yaml, got, c.layout)
		}
	}
}
