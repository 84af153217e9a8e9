package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/model"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/train"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// evalJSON is the part of eval's JSON these tests read.
type evalJSON struct {
	Method          string          `json:"method"`
	MethodRequested string          `json:"method_requested"`
	MethodReason    string          `json:"method_reason"`
	Features        int             `json:"features"`
	Domain          string          `json:"domain"`
	OutsideDomain   int             `json:"outside_domain"`
	Extrapolated    int             `json:"extrapolated"`
	Warnings        []warningResult `json:"warnings"`
	RMSE            float64         `json:"rmse"`
	NLL             float64         `json:"nll"`
	RMSEStd         float64         `json:"rmse_standardized"`
	NLLStd          float64         `json:"nll_standardized"`
}

// runEvalJSON runs an eval command line that ends in --json, requires exit code 0, and
// decodes its output.
func runEvalJSON(t *testing.T, args ...string) evalJSON {
	t.Helper()
	code, out, errOut := run(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r evalJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func hasCode(ws []warningResult, code string) bool {
	for _, w := range ws {
		if w.Code == code {
			return true
		}
	}
	return false
}

// TestEvalAutoReportsChoice: eval without --method chooses, prints the choice and why, and
// records it in the JSON; warnings is always a list.
func TestEvalAutoReportsChoice(t *testing.T) {
	dir := t.TempDir()
	tr := writeCSV(t, dir, "train.csv", 200, 0)
	te := writeCSV(t, dir, "test.csv", 40, 1000)
	args := []string{"eval", "--train", tr, "--test", te, "--header", "--target", "y", "--max-iter", "30"}
	code, out, errOut := run(t, append(args, "--json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r evalJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Method != "exact" || r.MethodRequested != "auto" || !strings.Contains(r.MethodReason, "n = 200 <= exact-max-rows 5000") {
		t.Errorf("auto on 200 rows: %+v", r)
	}
	if !strings.Contains(out, `"warnings":[`) {
		t.Errorf("JSON has no warnings list: %s", out)
	}
	def := train.DefaultSpec("auto").LengthscaleBounds
	grid := fmt.Sprintf("the Gauss-Legendre grid for the bounds %g,%g fits max-features 8192 only with a raised lower lengthscale bound", def[0], def[1])
	for _, c := range []struct {
		flags          []string
		method, reason string
	}{
		{[]string{"--exact-max-rows", "100"}, "cg", "n = 200 > exact-max-rows 100, " + grid + " and n <= cg-max-rows 20000"},
		{[]string{"--exact-max-rows", "100", "--cg-max-rows", "100"}, "grief", "n = 200 > exact-max-rows 100, " + grid + " and n > cg-max-rows 100"},
	} {
		code, out, errOut = run(t, append(args, c.flags...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.flags, code, errOut)
		}
		if !strings.Contains(out, "chosen by   auto: "+c.reason) || !strings.Contains(out, "method      "+c.method+" ") {
			t.Errorf("auto with %v on d = 2 (the default bounds' grid does not fit): want %s because %q; output\n%s", c.flags, c.method, c.reason, out)
		}
	}
}

// TestEvalGLSizingWarning: gl on 2-D data whose default-bounds grid exceeds the budget runs,
// narrows the lengthscale window, and says so in the JSON, the printed summary and the model.
func TestEvalGLSizingWarning(t *testing.T) {
	dir := t.TempDir()
	tr := writeCSV(t, dir, "train.csv", 200, 0)
	te := writeCSV(t, dir, "test.csv", 40, 1000)
	mpath := filepath.Join(dir, "m.gpm")
	r := runEvalJSON(t, "eval", "--method", "gl", "--max-features", "625", "--train", tr, "--test", te, "--header",
		"--target", "y", "--max-iter", "30", "--json", "--model-out", mpath)
	if r.Method != "gl" || r.Features > 625 || !hasCode(r.Warnings, model.WarnSizing) || r.Domain == "" || r.OutsideDomain != 0 {
		t.Fatalf("gl over the budget: %+v", r)
	}
	def := train.DefaultSpec("gl").LengthscaleBounds
	defaultBounds := fmt.Sprintf("%g,%g", def[0], def[1])
	var msg string
	for _, w := range r.Warnings {
		if w.Code == model.WarnSizing {
			msg = w.Message
		}
	}
	if !strings.Contains(msg, defaultBounds) || !strings.Contains(msg, "narrowed to") || !strings.Contains(msg, "max-features 625") {
		t.Errorf("sizing warning %q does not say what was narrowed and why", msg)
	}
	b, err := os.ReadFile(mpath)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if m.Sizing == nil || !m.HasWarning(model.WarnSizing) || !(m.Sizing.LengthscaleMin[0] > def[0]) {
		t.Fatalf("model sizing record %+v, warnings %v", m.Sizing, m.Warnings)
	}
	for k, l := range m.Hyper.Lengthscales {
		if l < m.Sizing.LengthscaleMin[k]*(1-1e-9) || l > m.Sizing.LengthscaleMax[k]*(1+1e-9) {
			t.Errorf("lengthscale %d = %g outside the sized window %g..%g", k, l, m.Sizing.LengthscaleMin[k], m.Sizing.LengthscaleMax[k])
		}
	}
	code, out, _ := run(t, "eval", "--method", "gl", "--max-features", "625", "--train", tr, "--test", te, "--header", "--target", "y", "--max-iter", "30")
	if code != 0 || !strings.Contains(out, "warning     sizing: gl: the lengthscale bounds "+defaultBounds+" need more than max-features 625") {
		t.Errorf("printed summary lacks the sizing warning:\n%s", out)
	}
}

// TestPredictFlagsOutsideDomain: predict with a gl model flags rows beyond its domain in an
// outside_domain column, gives them the prior, and counts them on stderr.
func TestPredictFlagsOutsideDomain(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("t,y\n")
	for i := 0; i < 120; i++ {
		x := float64(i) / 12
		fmt.Fprintf(&b, "%g,%g\n", x, 0.5*x+2*math.Sin(2*math.Pi*x)+0.1*math.Sin(float64(i)*7.3))
	}
	data := filepath.Join(dir, "series.csv")
	if err := os.WriteFile(data, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	mpath := filepath.Join(dir, "m.gpm")
	code, _, errOut := run(t, "eval", "--method", "gl", "--data", data, "--header", "--test-tail", "0.1",
		"--lengthscale-bounds", "0.05,0.3", "--max-iter", "40", "--model-out", mpath)
	if code != 0 {
		t.Fatalf("eval exit %d: %s", code, errOut)
	}
	x := filepath.Join(dir, "x.csv")
	if err := os.WriteFile(x, []byte("t\n5\n9.5\n30\n-40\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	preds := filepath.Join(dir, "preds.csv")
	code, _, errOut = run(t, "predict", "--model", mpath, "--data", x, "--header", "--out", preds)
	if code != 0 {
		t.Fatalf("predict exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "2 of 4 rows lie outside the model's domain (t in [") {
		t.Errorf("stderr does not count the rows outside: %q", errOut)
	}
	// 30 and -40 lie tens of lengthscales beyond the training range [0, 8.92]; 5 inside it.
	if !strings.Contains(errOut, "rows lie beyond the training inputs' range") {
		t.Errorf("stderr does not count the rows extrapolated: %q", errOut)
	}
	out, err := os.ReadFile(preds)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 5 || lines[0] != "mean,latent_var,noisy_var,outside_domain,extrapolated" {
		t.Fatalf("predictions:\n%s", out)
	}
	var prior [3]float64
	for i, want := range []int{0, 0, 1, 1} {
		var v [3]float64
		var o, ex int
		if _, err := fmt.Sscanf(strings.ReplaceAll(lines[i+1], ",", " "), "%g %g %g %d %d", &v[0], &v[1], &v[2], &o, &ex); err != nil {
			t.Fatal(err)
		}
		if o != want {
			t.Errorf("row %d: outside_domain %d, want %d", i, o, want)
		}
		if i != 1 && ex != want { // row 1 (9.5) lies within a few lengthscales of the range
			t.Errorf("row %d: extrapolated %d, want %d", i, ex, want)
		}
		if o == 1 {
			if prior[0] == 0 {
				prior = v
			} else if v != prior {
				t.Errorf("rows outside differ: %v vs %v; both should be the prior", v, prior)
			}
		}
	}
}

// TestWarningsPrinted: warnings of every class in a model (here written by hand: the bound,
// convergence and all-noise checks belong to the optimizer) reach eval's JSON and summary,
// the job status JSON and the printed job.
func TestWarningsPrinted(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	tab := &shard.Table{Source: "w", D: 1, Columns: []string{"x"}, Target: "y"}
	for i := 0; i < 40; i++ {
		x := rng.Float64()
		tab.X = append(tab.X, x)
		tab.Y = append(tab.Y, math.Sin(6*x)+0.1*rng.NormFloat64())
	}
	refs, tabs := shard.PartitionCount(tab, 1)
	eng, err := engine.NewLocal(refs, tabs, 1)
	if err != nil {
		t.Fatal(err)
	}
	spec := train.DefaultSpec(train.Auto)
	spec.MaxIter = 10
	spec.Columns, spec.Target = tab.Columns, tab.Target
	m, err := train.Train(t.Context(), eng, spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.Warn(model.WarnBound, "lengthscale of x is on its upper bound 2")
	m.Warn(model.WarnNotConverged, "L-BFGS stopped at max-iter 10")
	m.Warn(model.WarnAllNoise, "noise variance 0.99 of the target's")
	codes := []string{model.WarnBound, model.WarnNotConverged, model.WarnAllNoise}

	r, err := score(m, tab, tab, 1, 1, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(r)
	var back evalJSON
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printResult(&out, r)
	for _, c := range codes {
		if !hasCode(back.Warnings, c) {
			t.Errorf("eval JSON lacks %s: %s", c, js)
		}
		if !strings.Contains(out.String(), "warning     "+c+": ") {
			t.Errorf("eval summary lacks %s:\n%s", c, out.String())
		}
	}
	if back.RMSEStd == 0 || math.Abs(back.RMSEStd*m.Transform.YScale-back.RMSE) > 1e-12*back.RMSE ||
		math.Abs(back.NLLStd+math.Log(m.Transform.YScale)-back.NLL) > 1e-12 {
		t.Errorf("standardized figures %g, %g for RMSE %g, NLL %g, y scale %g", back.RMSEStd, back.NLLStd, back.RMSE, back.NLL, m.Transform.YScale)
	}

	// The job status: the proto fields as the coordinator fills them.
	j := &pb.Job{Id: "j-7", State: pb.JobState_JOB_STATE_SUCCEEDED, Spec: &pb.JobSpec{Method: "auto", Kernel: "rbf"},
		Metrics: &pb.JobMetrics{MethodChoice: &pb.MethodChoice{Method: m.Method, Reason: m.Choice.Reason}, Hyperparameters: &pb.Hyperparameters{}}}
	for _, w := range m.Warnings {
		j.Warnings = append(j.Warnings, &pb.Warning{Code: w.Code, Message: w.Message})
	}
	jr := newJobResult(j)
	jjs, _ := json.Marshal(jr)
	out.Reset()
	printJob(&out, j)
	for _, c := range codes {
		if !hasCode(jr.Warnings, c) || !strings.Contains(string(jjs), `"code":"`+c+`"`) {
			t.Errorf("job status JSON lacks %s: %s", c, jjs)
		}
		if !strings.Contains(out.String(), "warning     "+c+": ") {
			t.Errorf("printed job lacks %s:\n%s", c, out.String())
		}
	}
	if jr.ChosenMethod != "exact" || !strings.Contains(out.String(), "chosen      exact: n = 40") {
		t.Errorf("job status does not show the choice: %+v\n%s", jr, out.String())
	}

	// Test rows beyond a model's domain: counted, scored with the prior, and warned about.
	m.Domain = &model.Domain{Lo: []float64{-0.5}, Hi: []float64{0.5}}
	r, err = score(m, tab, tab, 1, 1, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	printResult(&out, r)
	want := 0
	for i := 0; i < tab.N(); i++ {
		if z := (tab.X[i] - m.Transform.XMean[0]) / m.Transform.XScale[0]; z < -0.5 || z > 0.5 {
			want++
		}
	}
	if want == 0 || r.OutsideDomain != want || !hasCode(r.Warnings, model.WarnOutsideDomain) ||
		!strings.Contains(out.String(), fmt.Sprintf("warning     outside_domain: %d of 40 rows lie outside the model's domain (x in [", want)) ||
		!strings.Contains(out.String(), fmt.Sprintf("(%d test rows outside)", want)) {
		t.Errorf("%d rows outside (want %d), warnings %v; summary:\n%s", r.OutsideDomain, want, r.Warnings, out.String())
	}
}

// TestEvalCalibrationWarning: the leave-one-out check warns when the predictive intervals are
// too narrow for the data, and not where the model fits (concrete, servo). The failing cases
// hold the noise variance far below the data's (standardized bounds 1e-6..1e-5; concrete's
// fitted noise is about 0.1): the standardized residuals' mean square is then in the
// hundreds or thousands with exact, rff and grief on concrete and 6.2 with cg on servo (cg's
// concrete cache stops unconverged there, and its check is then not made). Yacht split 0,
// whose check fired with every method before the search's far starts, now sits at the
// band's edge (mean square 1.28-1.36 against 1 +- 0.34: exact and grief warn, rff and cg do
// not) and is no longer a case either way.
func TestEvalCalibrationWarning(t *testing.T) {
	tight := []string{"--noise-variance-bounds", "1e-6,1e-5"}
	for _, c := range []struct {
		data, method string
		flags        []string
		want         bool
	}{
		{"concrete", "exact", tight, true}, {"concrete", "exact", nil, false}, {"servo", "exact", nil, false},
		// The feature methods' check is a map round over the training rows (tasks.LOOTask).
		{"concrete", "grief", tight, true}, {"concrete", "rff", tight, true}, {"concrete", "grief", nil, false},
		// cg's: the same round on the mean solve and the variance cache, bracketed by the
		// cache's tolerance. With the noise held below 1e-5 concrete's fit is far off
		// (mean square about 600, as exact's); servo's is not (the Matern 3/2 fit absorbs
		// the noise: mean square 1.13, exact's hyperparameters), and cg, which reaches
		// exact's optimum, must not warn there.
		{"concrete", "cg", tight, true}, {"servo", "cg", tight, false}, {"concrete", "cg", nil, false},
	} {
		name := c.data + "/" + c.method
		if c.flags != nil {
			name += "/tight-noise"
		}
		t.Run(name, func(t *testing.T) {
			args := append([]string{"eval", "--uci", filepath.Join("..", "..", "testdata", "uci", c.data), "--split", "0", "--method", c.method, "--json"}, c.flags...)
			r := runEvalJSON(t, args...)
			if got := hasCode(r.Warnings, model.WarnCalibration); got != c.want {
				t.Errorf("calibration warning %v, want %v: %+v", got, c.want, r.Warnings)
			}
		})
	}
}

// TestEvalExtrapolationWarning: test rows far beyond the training inputs' range (a trend the
// stationary kernel cannot follow) are counted in eval's JSON and warned about, in the JSON
// and the printed summary; test rows inside the range are not.
func TestEvalExtrapolationWarning(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, from, to int) string {
		var b strings.Builder
		b.WriteString("t,y\n")
		for i := from; i < to; i++ {
			x := float64(i) / 10
			fmt.Fprintf(&b, "%g,%g\n", x, x+math.Sin(3*x)+0.05*math.Sin(float64(i)*7.3))
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	train := write("train.csv", 0, 100) // t in [0, 9.9]
	for _, c := range []struct {
		name     string
		test     string
		want     int
		warnWant bool
	}{
		{"inside", write("inside.csv", 5, 95), 0, false},
		// t in [20, 29.9]: at least ten lengthscales beyond (the fit's lengthscale is about 0.5).
		{"beyond", write("beyond.csv", 200, 300), 100, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"eval", "--method", "exact", "--train", train, "--test", c.test, "--header", "--target", "y"}
			r := runEvalJSON(t, append(args, "--json")...)
			if r.Extrapolated != c.want || hasCode(r.Warnings, model.WarnExtrapolation) != c.warnWant {
				t.Fatalf("extrapolated %d, want %d; warnings %+v", r.Extrapolated, c.want, r.Warnings)
			}
			code, out, errOut := run(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if got := strings.Contains(out, "extrapolation: 100 of 100 rows lie beyond the training inputs' range"); got != c.warnWant {
				t.Errorf("printed summary names the extrapolation: %v, want %v:\n%s", got, c.warnWant, out)
			}
		})
	}
}
