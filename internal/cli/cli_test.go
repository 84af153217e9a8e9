package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpreduce/gpreduce/internal/model"
	"github.com/gpreduce/gpreduce/internal/testutil"
)

// run executes the coordinator command line and returns exit code, stdout and stderr.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Execute(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// writeCSV writes rows of a smooth 2-D function (with a header) and returns the path.
func writeCSV(t *testing.T, dir, name string, n int, offset int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("a,b,y\n")
	for i := 0; i < n; i++ {
		a := math.Sin(float64(i+offset) * 0.37)
		c := math.Cos(float64(i+offset) * 0.91)
		fmt.Fprintf(&b, "%g,%g,%g\n", a, c, math.Sin(2*a)+0.5*c+0.05*math.Sin(float64(i)*7.3))
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestEvalJSON(t *testing.T) {
	dir := t.TempDir()
	tr := writeCSV(t, dir, "train.csv", 300, 0)
	te := writeCSV(t, dir, "test.csv", 50, 1000)
	code, out, errOut := run(t, "eval", "--method", "gl", "--train", tr, "--test", te, "--header", "--target", "y",
		"--lengthscale-bounds", "0.5,1.5", "--nodes-per-dim", "40,40", "--json", "--shards", "3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out)
	}
	for _, k := range []string{"method", "kernel", "n_train", "n_test", "d", "rmse", "nll", "coverage95", "train_seconds", "predict_seconds", "iterations", "hyperparameters"} {
		if _, ok := r[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	if r["n_train"].(float64) != 300 || r["n_test"].(float64) != 50 || r["d"].(float64) != 2 {
		t.Errorf("sizes: %v", r)
	}
	if rmse := r["rmse"].(float64); !(rmse > 0 && rmse < 0.3) {
		t.Errorf("rmse %g: the target has standard deviation ~0.8 and the model should explain most of it", rmse)
	}
	h := r["hyperparameters"].(map[string]any)
	if len(h["lengthscales"].([]any)) != 2 {
		t.Errorf("hyperparameters: %v", h)
	}
}

// TestWorkersDoNotChangeTheModel: --workers 1 and --workers 4 over the same --shards write
// byte-identical models.
func TestWorkersDoNotChangeTheModel(t *testing.T) {
	dir := t.TempDir()
	tr := writeCSV(t, dir, "train.csv", 2000, 0)
	te := writeCSV(t, dir, "test.csv", 20, 5000)
	var models [][]byte
	for _, w := range []string{"1", "4"} {
		out := filepath.Join(dir, "m"+w+".gpm")
		code, _, errOut := run(t, "eval", "--method", "gl", "--train", tr, "--test", te, "--header",
			"--lengthscale-bounds", "0.5,1", "--nodes-per-dim", "20,20", "--max-iter", "20", "--shards", "8", "--cores", w, "--model-out", out, "--json")
		if code != 0 {
			t.Fatalf("workers %s: exit %d: %s", w, code, errOut)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		models = append(models, b)
	}
	if !bytes.Equal(models[0], models[1]) {
		t.Error("the model written with --workers 1 differs from the one with --workers 4")
	}
}

// TestBadInput: one case per bad-input class; each exits 1 with a message naming the file,
// line and column or the flag, and never panics.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	good := writeCSV(t, dir, "good.csv", 40, 0)
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	wide := func() string {
		var b strings.Builder
		for i := 0; i < 30; i++ {
			fmt.Fprintf(&b, "%d,%d,%d,%d,%d,%d\n", i, i*i%7, i%5, i%3, (i*13)%11, i%4)
		}
		return write("wide.csv", b.String())
	}()
	cases := []struct {
		name  string
		train string
		extra []string
		want  []string
	}{
		{"non-numeric field", write("nonnum.csv", "a,b,y\n1,2,3\n4,abc,6\n"), nil, []string{"nonnum.csv:3:2", "not a number"}},
		{"NaN", write("nan.csv", "a,b,y\n1,2,3\n4,NaN,6\n"), nil, []string{"nan.csv:3:2"}},
		{"Inf", write("inf.csv", "a,b,y\n1,2,3\n4,5,-Inf\n"), nil, []string{"inf.csv:3:3"}},
		{"ragged row", write("ragged.csv", "a,b,y\n1,2,3\n4,5\n"), nil, []string{"ragged.csv:3", "fields"}},
		{"empty file", write("empty.csv", ""), nil, []string{"empty.csv", "empty"}},
		{"constant target", write("const.csv", "a,b,y\n1,2,3\n4,5,3\n6,1,3\n"), nil, []string{"const.csv", "constant"}},
		{"inverted bounds", good, []string{"--lengthscale-bounds", "2,0.1"}, []string{"lengthscale-bounds", "swap"}},
		{"bad bounds syntax", good, []string{"--noise-variance-bounds", "x,1"}, []string{"--noise-variance-bounds"}},
		{"d too large for the tensor grid", wide, []string{"--method", "gl", "--target", "5"}, []string{"rff", "grief", "nodes"}},
		{"unknown method", good, []string{"--method", "svgp"}, []string{"method", "svgp"}},
		{"unknown kernel", good, []string{"--kernel", "periodic"}, []string{"kernel", "periodic"}},
		{"missing file", filepath.Join(dir, "nope.csv"), nil, []string{"nope.csv"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			header := []string{"--header"}
			if strings.HasSuffix(c.train, "wide.csv") {
				header = nil
			}
			args := append([]string{"eval", "--train", c.train, "--test", good}, header...)
			if strings.HasSuffix(c.train, "wide.csv") {
				args = []string{"eval", "--train", c.train, "--test", c.train}
			}
			args = append(args, c.extra...)
			code, _, errOut := run(t, args...)
			want := ExitError
			if c.name == "missing file" {
				want = ExitNotFound
			}
			if code != want {
				t.Fatalf("exit %d, want %d; stderr: %s", code, want, errOut)
			}
			for _, w := range c.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("error %q does not mention %q", strings.TrimSpace(errOut), w)
				}
			}
		})
	}
}

func TestDemoAndPredict(t *testing.T) {
	dir := t.TempDir()
	mpath := filepath.Join(dir, "demo.gpm")
	code, out, errOut := run(t, "demo", "--out", mpath)
	if code != 0 {
		t.Fatalf("demo exit %d: %s", code, errOut)
	}
	for _, w := range []string{"test RMSE", "coverage95", mpath} {
		if !strings.Contains(out, w) {
			t.Errorf("demo output lacks %q:\n%s", w, out)
		}
	}
	checkStandardized(t, out, mpath)
	x := filepath.Join(dir, "x.csv")
	if err := os.WriteFile(x, []byte("year\n1965.5\n1980.25\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	preds := filepath.Join(dir, "preds.csv")
	code, _, errOut = run(t, "predict", "--model", mpath, "--data", x, "--header", "--out", preds)
	if code != 0 {
		t.Fatalf("predict exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile(preds)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 3 || lines[0] != "mean,latent_var,noisy_var,outside_domain,extrapolated" {
		t.Fatalf("predictions file:\n%s", b)
	}
	// CO2 was about 320 ppm in 1965 and 339 ppm in 1980.
	for i, want := range []float64{320, 339} {
		var m, lv, nv float64
		if _, err := fmt.Sscanf(strings.ReplaceAll(lines[i+1], ",", " "), "%g %g %g", &m, &lv, &nv); err != nil {
			t.Fatal(err)
		}
		if math.Abs(m-want) > 2 || !(lv > 0) || !(nv > lv) {
			t.Errorf("row %d: mean %g (want about %g), latent var %g, noisy var %g", i, m, want, lv, nv)
		}
	}
	// A model file that is not a model.
	junk := filepath.Join(dir, "junk.gpm")
	if err := os.WriteFile(junk, []byte("not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, "predict", "--model", junk, "--data", x, "--header", "--out", preds); code != 1 || !strings.Contains(errOut, "junk.gpm") {
		t.Errorf("junk model: exit %d, %s", code, errOut)
	}
}

func TestUCISplitThroughEval(t *testing.T) {
	dir := testutil.SharedData(t)
	code, out, errOut := run(t, "eval", "--method", "exact", "--uci", filepath.Join(dir, "uci", "challenger"), "--split", "2", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r struct {
		NTrain int     `json:"n_train"`
		NTest  int     `json:"n_test"`
		RMSE   float64 `json:"rmse"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.NTrain+r.NTest != 23 || !(r.RMSE > 0) {
		t.Errorf("challenger split 2: %+v", r)
	}
	if code, _, errOut := run(t, "eval", "--method", "exact", "--uci", filepath.Join(dir, "uci", "challenger"), "--split", "12"); code != 1 || !strings.Contains(errOut, "split") {
		t.Errorf("split 12: exit %d, %s", code, errOut)
	}
}

// checkStandardized reads the printed test RMSE and NLL and the standardized figures, and
// checks them against each other with the model's target scale: RMSE_std = RMSE / s and
// NLL_std = NLL - log s (the cluster demo once printed zeros).
func checkStandardized(t *testing.T, out, modelPath string) {
	t.Helper()
	var rmse, nll, rmseStd, nllStd float64
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "test RMSE"):
			fmt.Sscanf(strings.TrimPrefix(l, "test RMSE"), "%g", &rmse)
		case strings.HasPrefix(l, "test NLL"):
			fmt.Sscanf(strings.TrimPrefix(l, "test NLL"), "%g", &nll)
		case strings.HasPrefix(l, "standardized target:"):
			fmt.Sscanf(strings.ReplaceAll(strings.TrimPrefix(l, "standardized target: RMSE "), ", NLL", ""), "%g %g", &rmseStd, &nllStd)
		}
	}
	b, err := os.ReadFile(modelPath)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	sy := m.Transform.YScale
	if !(rmse > 0) || rmseStd == 0 || nllStd == 0 || math.Abs(rmseStd*sy-rmse) > 1e-5*rmse || math.Abs(nllStd+math.Log(sy)-nll) > 1e-5*(1+math.Abs(nll)) {
		t.Errorf("standardized figures RMSE %g, NLL %g do not match RMSE %g, NLL %g with target scale %g:\n%s", rmseStd, nllStd, rmse, nll, sy, out)
	}
}
