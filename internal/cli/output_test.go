package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/train"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// listingFake adds ListJobs to the fake coordinator, for jobs and completion.
type listingFake struct{ *fakeCoordinator }

func (f listingFake) ListJobs(ctx context.Context, _ *pb.ListJobsRequest) (*pb.ListJobsResponse, error) {
	if err := f.redirect(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*pb.Job
	for _, id := range slices.Sorted(mapsKeys(f.jobs)) {
		out = append(out, f.jobs[id])
	}
	return &pb.ListJobsResponse{Jobs: out}, nil
}

func mapsKeys(m map[string]*pb.Job) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestOutputFormats: status and jobs print the same fields as JSON and YAML, and --json is
// -o json.
func TestOutputFormats(t *testing.T) {
	f := startFakeAs(t, nil, func(f *fakeCoordinator) pb.CoordinatorServer { return listingFake{f} })
	f.jobs["j-1"] = &pb.Job{Id: "j-1", State: pb.JobState_JOB_STATE_RUNNING, Iteration: 3,
		Spec: &pb.JobSpec{Method: "gl", Kernel: "rbf", MaxIter: 10, Data: &pb.DataSource{Uri: "/d.csv"}}}
	conn := []string{"--addr", f.addr, "--token", testToken}
	for _, tc := range []struct {
		cmd   []string
		table string // a line the table form has
	}{
		{[]string{"status", "j-1"}, "state       running"},
		{[]string{"jobs"}, "ID  "},
	} {
		_, asJSON, _ := run(t, append(append(tc.cmd, conn...), "-o", "json")...)
		_, alias, _ := run(t, append(append(tc.cmd, conn...), "--json")...)
		code, asYAML, errOut := run(t, append(append(tc.cmd, conn...), "-o", "yaml")...)
		if code != 0 {
			t.Fatalf("%v -o yaml: exit %d: %s", tc.cmd, code, errOut)
		}
		_, table, _ := run(t, append(tc.cmd, conn...)...)
		if asJSON != alias {
			t.Errorf("%v: --json printed %q, -o json %q", tc.cmd, alias, asJSON)
		}
		var fromJSON, fromYAML any
		if err := json.Unmarshal([]byte(asJSON), &fromJSON); err != nil {
			t.Fatalf("%v -o json: %v: %s", tc.cmd, err, asJSON)
		}
		if err := yaml.Unmarshal([]byte(asYAML), &fromYAML); err != nil {
			t.Fatalf("%v -o yaml: %v: %s", tc.cmd, err, asYAML)
		}
		if jb, _ := json.Marshal(fromJSON); string(jb) != mustJSON(t, fromYAML) {
			t.Errorf("%v: YAML %s differs from JSON %s", tc.cmd, asYAML, asJSON)
		}
		if !strings.Contains(table, tc.table) {
			t.Errorf("%v: the table lacks %q:\n%s", tc.cmd, tc.table, table)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestEveryPrintingCommandHasOutput: every command that prints has -o and --json.
func TestEveryPrintingCommandHasOutput(t *testing.T) {
	for _, name := range []string{"eval", "demo", "gen", "import", "submit", "status", "jobs", "cancel", "delete", "logs",
		"members", "members remove", "workers", "model", "model get", "model show", "version"} {
		code, out, errOut := run(t, append(strings.Fields(name), "--help")...)
		if code != 0 {
			t.Fatalf("%s --help: exit %d: %s", name, code, errOut)
		}
		if !strings.Contains(out, "-o, --output string") || !strings.Contains(out, "--json") {
			t.Errorf("%s has no -o/--json:\n%s", name, out)
		}
	}
}

// TestGenModelShowPredictStdout: gen writes a CSV that eval trains on; model show describes
// the model in every format; predict --out - writes the predictions to stdout.
func TestGenModelShowPredictStdout(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "train.csv")
	if code, out, errOut := run(t, "gen", "--rows", "300", "--dims", "2", "--seed", "3", "--out", data); code != 0 || !strings.Contains(out, "wrote 300 rows") {
		t.Fatalf("gen: exit %d: %s%s", code, out, errOut)
	}
	b, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if lines[0] != "x0,x1,y" || len(lines) != 301 {
		t.Fatalf("gen wrote header %q and %d lines", lines[0], len(lines))
	}
	_, again, _ := run(t, "gen", "--rows", "300", "--dims", "2", "--seed", "3", "--out", "-")
	if again != string(b) {
		t.Error("gen --out - differs from the file the same flags wrote")
	}
	if _, other, _ := run(t, "gen", "--rows", "300", "--dims", "2", "--seed", "4", "--out", "-"); other == again {
		t.Error("gen --seed 4 wrote the same data as --seed 3")
	}
	mpath := filepath.Join(dir, "m.gpm")
	if code, _, errOut := run(t, "eval", "--method", "gl", "--data", data, "--header", "--lengthscale-bounds", "0.3,2", "--nodes-per-dim", "12,12",
		"--max-iter", "15", "--model-out", mpath, "-o", "json"); code != 0 {
		t.Fatalf("eval: exit %d: %s", code, errOut)
	}
	code, out, errOut := run(t, "model", "show", mpath, "-o", "json")
	if code != 0 {
		t.Fatalf("model show: exit %d: %s", code, errOut)
	}
	var d modelDescription
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if d.Method != "gl" || d.Kernel != "rbf" || d.D != 2 || !slices.Equal(d.Inputs, []string{"x0", "x1"}) || d.Target != "y" ||
		d.Posterior != "gl" || d.Sizes["features"] != 144.0 || fmt.Sprint(d.Sizes["nodes_per_dim"]) != "[12 12]" || len(d.Domain) != 2 || d.NTrain != 270 {
		t.Errorf("model show: %+v", d)
	}
	// The lengthscales are in input units: the inputs span [-2, 2] (standard deviation
	// ~1.15), so a standardized lengthscale l is about 1.15 l here; none is the raw 0.3-2.
	if h := d.Hyperparameters; len(h.Lengthscales) != 2 || h.NoiseVariance <= 0 || h.SignalVariance <= 0 {
		t.Errorf("hyperparameters %+v", h)
	}
	_, table, _ := run(t, "model", "show", mpath)
	for _, want := range []string{"method      gl (kernel rbf)", "inputs      x0, x1 (d = 2); target y", "features 144", "nodes per dim 12 12", "domain      x0 in ["} {
		if !strings.Contains(table, want) {
			t.Errorf("model show lacks %q:\n%s", want, table)
		}
	}
	_, asYAML, _ := run(t, "model", "show", mpath, "-o", "yaml")
	var y modelDescription
	if err := yaml.Unmarshal([]byte(asYAML), &y); err != nil || fmt.Sprint(y.Sizes["features"]) != "144" {
		t.Errorf("model show -o yaml: %v: %s", err, asYAML)
	}

	preds := filepath.Join(dir, "preds.csv")
	if code, _, errOut := run(t, "predict", "--model", mpath, "--data", data, "--header", "--out", preds); code != 0 {
		t.Fatalf("predict --out FILE: exit %d: %s", code, errOut)
	}
	want, _ := os.ReadFile(preds)
	code, got, errOut := run(t, "predict", "--model", mpath, "--data", data, "--header", "--out", "-")
	if code != 0 || got != string(want) || !strings.HasPrefix(got, "mean,latent_var,noisy_var") {
		t.Errorf("predict --out -: exit %d, stdout differs from the file (%d vs %d bytes): %s", code, len(got), len(want), errOut)
	}
}

// TestSubmitDataFlags: submit takes eval's --uci DIR --split K and --train-rows, and its
// --shard-timeout is a duration that still takes bare seconds.
func TestSubmitDataFlags(t *testing.T) {
	f := startFake(t, nil)
	dir := t.TempDir()
	uci := filepath.Join(dir, "toy")
	if err := os.MkdirAll(uci, 0o755); err != nil {
		t.Fatal(err)
	}
	csv := writeCSV(t, dir, "d.csv", 20, 0)
	conn := []string{"--addr", f.addr, "--token", testToken}
	for _, tc := range []struct {
		name    string
		args    []string
		want    *pb.DataSource
		timeout int32
		code    int
		stderr  string
	}{
		{"uci", []string{"--uci", uci, "--split", "3", "--method", "exact"}, &pb.DataSource{Uri: uci, Format: "uci", Split: 3}, 0, 0, ""},
		{"data uci", []string{"--data", uci, "--format", "uci", "--split", "3", "--method", "exact"}, &pb.DataSource{Uri: uci, Format: "uci", Split: 3}, 0, 0, ""},
		{"train rows", []string{"--data", csv, "--header", "--train-rows", "10", "--shard-timeout", "2m"},
			&pb.DataSource{Uri: csv, Format: "csv", Header: true, TrainRows: 10}, 120, 0, ""},
		{"bare seconds", []string{"--data", csv, "--header", "--shard-timeout", "90"}, &pb.DataSource{Uri: csv, Format: "csv", Header: true}, 90, 0, "deprecated"},
		{"uci and data", []string{"--uci", uci, "--data", csv}, nil, 0, ExitUsage, "not both"},
		{"negative train rows", []string{"--data", csv, "--train-rows", "-1"}, nil, 0, ExitUsage, "--train-rows"},
		{"fractional timeout", []string{"--data", csv, "--shard-timeout", "1500ms"}, nil, 0, ExitUsage, "whole number of seconds"},
		{"with a job file", []string{filepath.Join(dir, "job.yaml"), "--train-rows", "5"}, nil, 0, ExitUsage, "--train-rows cannot be combined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.mu.Lock()
			before := len(f.submits)
			f.mu.Unlock()
			code, _, errOut := run(t, append(append([]string{"submit"}, tc.args...), conn...)...)
			if code != tc.code || !strings.Contains(errOut, tc.stderr) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q)", code, tc.code, errOut, tc.stderr)
			}
			if tc.want == nil {
				return
			}
			f.mu.Lock()
			req := f.submits[len(f.submits)-1]
			n := len(f.submits)
			f.mu.Unlock()
			if n != before+1 {
				t.Fatal("nothing submitted")
			}
			d := req.GetSpec().GetData()
			if d.GetUri() != tc.want.GetUri() || d.GetFormat() != tc.want.GetFormat() || d.GetSplit() != tc.want.GetSplit() ||
				d.GetHeader() != tc.want.GetHeader() || d.GetTrainRows() != tc.want.GetTrainRows() {
				t.Errorf("data source %v, want %v", d, tc.want)
			}
			if got := req.GetSpec().GetShardTimeoutSeconds(); got != tc.timeout {
				t.Errorf("shard timeout %d s, want %d", got, tc.timeout)
			}
		})
	}
}

// TestCoresFlag: eval's --cores and its deprecated alias --workers both set the goroutines.
func TestCoresFlag(t *testing.T) {
	dir := t.TempDir()
	tr := writeCSV(t, dir, "train.csv", 120, 0)
	for _, flag := range []string{"--cores", "--workers"} {
		code, out, errOut := run(t, "eval", "--method", "exact", "--data", tr, "--header", "--max-iter", "3", flag, "3", "-o", "json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", flag, code, errOut)
		}
		var r evalResult
		if err := json.Unmarshal([]byte(out), &r); err != nil || r.Workers != 3 {
			t.Errorf("%s 3: workers %d (%v)", flag, r.Workers, err)
		}
		if deprecated := strings.Contains(errOut, "deprecated"); deprecated != (flag == "--workers") {
			t.Errorf("%s: stderr %q", flag, errOut)
		}
	}
	_, help, _ := run(t, "eval", "--help")
	if strings.Contains(help, "--workers") || !strings.Contains(help, "--cores") {
		t.Error("eval --help should list --cores and hide --workers")
	}
}

// TestLogFormat: --log-format json writes JSON log lines, console text ones, on both
// programs.
func TestLogFormat(t *testing.T) {
	for _, tc := range []struct {
		format string
		json   bool
	}{{"json", true}, {"console", false}} {
		var lf logFlags
		lf.level, lf.format = "info", tc.format
		var buf bytes.Buffer
		log, err := lf.logger(&buf, false)
		if err != nil {
			t.Fatal(err)
		}
		log.Info().Str("k", "v").Msg("hello")
		var m map[string]any
		isJSON := json.Unmarshal(buf.Bytes(), &m) == nil
		if isJSON != tc.json || !strings.Contains(buf.String(), "hello") {
			t.Errorf("--log-format %s wrote %q", tc.format, buf.String())
		}
	}
	flags, err := ServeFlags("worker")
	if err != nil {
		t.Fatal(err)
	}
	if flags.Lookup("log-format") == nil {
		t.Error("worker serve flags lack --log-format")
	}
}

// TestProgress: iteration events of any phase draw a bar (a line every tenth off a
// terminal), events without a message or iteration print nothing, and on a terminal the bar
// shows the elapsed time and an estimate of the time left.
func TestProgress(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf, false)
	p.observe(train.Event{Phase: "sample", MaxIter: 40, Message: "MALA: 40 iterations"})
	for i := 1; i <= 40; i++ {
		p.observe(train.Event{Phase: "sample", Iteration: i, MaxIter: 40, Objective: 1.5})
	}
	p.observe(train.Event{Phase: "fit"})
	// MALA's events come every 50 iterations: every tenth event is shown, not every one.
	for i := 1050; i <= 10000; i += 50 {
		p.observe(train.Event{Phase: "mala", Iteration: i, MaxIter: 10000, Objective: 0.5})
	}
	p.done()
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	if len(lines) != 6+19 {
		t.Errorf("%d lines, want the message, iterations 1, 10, 20, 30, 40 and 19 of 180 MALA events (the first, every tenth):\n%s", len(lines), buf.String())
	}
	for _, l := range lines {
		if strings.TrimSpace(l) == "sample" || strings.TrimSpace(l) == "fit" || strings.TrimSpace(l) == "" {
			t.Errorf("an empty event line %q in\n%s", l, buf.String())
		}
	}

	buf.Reset()
	now := time.Unix(1000, 0)
	p = &progress{w: &buf, tty: true, now: func() time.Time { return now }}
	p.observe(train.Event{Phase: "optimize", Iteration: 1, MaxIter: 11, Objective: 2})
	now = now.Add(10 * time.Second)
	p.observe(train.Event{Phase: "optimize", Iteration: 6, MaxIter: 11, Objective: 1})
	if s := buf.String(); !strings.Contains(s, "10s") || !strings.Contains(s, "eta <= 10s") {
		t.Errorf("the bar lacks the elapsed time 10s and eta <= 10s (5 iterations in 10 s, 5 to go): %q", s)
	}
	buf.Reset()
	p.observe(train.Event{Phase: "fit", Message: "posterior at the optimum"})
	now = now.Add(3 * time.Second)
	p.redraw()
	p.done()
	if s := buf.String(); !strings.Contains(s, "fit       posterior at the optimum\n") || !strings.Contains(s, "fit       ... 3.0s") {
		t.Errorf("a phase without iterations shows its elapsed time: %q", s)
	}
}

// TestCompletion: --method and --kernel complete from the method and kernel lists, job IDs
// from the cluster, and nothing (no error) when the cluster is down.
func TestCompletion(t *testing.T) {
	f := startFakeAs(t, nil, func(f *fakeCoordinator) pb.CoordinatorServer { return listingFake{f} })
	f.jobs["j-1"] = &pb.Job{Id: "j-1", State: pb.JobState_JOB_STATE_RUNNING, Spec: &pb.JobSpec{Method: "gl"}}
	f.jobs["k-2"] = &pb.Job{Id: "k-2", State: pb.JobState_JOB_STATE_SUCCEEDED, Spec: &pb.JobSpec{Method: "exact"}}
	for _, tc := range []struct {
		args []string
		want []string
		not  []string
	}{
		{[]string{"eval", "--method", ""}, train.MethodNames(), nil},
		{[]string{"submit", "--kernel", ""}, []string{"rbf", "matern12", "matern32", "matern52", "auto"}, nil},
		{[]string{"status", "--addr", f.addr, "--token", testToken, ""}, []string{"j-1\trunning gl", "k-2\tsucceeded exact"}, nil},
		{[]string{"cancel", "--addr", f.addr, "--token", testToken, "k"}, []string{"k-2\tsucceeded exact"}, []string{"j-1"}},
		{[]string{"delete", "--addr", f.addr, "--token", testToken, "j-1", ""}, []string{"k-2\tsucceeded exact"}, []string{"j-1\t"}},
		{[]string{"logs", "--addr", "127.0.0.1:1", ""}, nil, []string{"j-1"}},
		{[]string{"status", "-o", ""}, []string{"table", "json", "yaml"}, nil},
	} {
		code, out, errOut := run(t, append([]string{"__complete"}, tc.args...)...)
		if code != 0 {
			t.Fatalf("__complete %v: exit %d: %s", tc.args, code, errOut)
		}
		got := strings.Split(strings.TrimSpace(out), "\n")
		got = got[:len(got)-1] // the directive
		for _, w := range tc.want {
			if !slices.Contains(got, w) {
				t.Errorf("__complete %v: %q lacks %q", tc.args, got, w)
			}
		}
		for _, n := range tc.not {
			for _, g := range got {
				if strings.HasPrefix(g, n) {
					t.Errorf("__complete %v offers %q", tc.args, g)
				}
			}
		}
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		if code, out, _ := run(t, "completion", shell); code != 0 || len(out) < 100 {
			t.Errorf("completion %s: exit %d, %d bytes", shell, code, len(out))
		}
	}
}

// TestSampledSourceMatchesEval: a source with TrainRows (what submit --train-rows sends)
// loads the rows eval --train-rows trains on.
func TestSampledSourceMatchesEval(t *testing.T) {
	dir := t.TempDir()
	tr := writeCSV(t, dir, "train.csv", 500, 0)
	src := shard.Source{URI: tr, Format: "csv", Header: true, TrainRows: 120}
	_, tabs, err := shard.Reader{}.LoadAll(context.Background(), src, 3)
	if err != nil {
		t.Fatal(err)
	}
	df := dataFlags{trainCSV: tr, testCSV: tr, header: true, trainRows: 120}
	td, _, err := df.load(context.Background(), runFlags{shards: 3})
	if err != nil {
		t.Fatal(err)
	}
	got := concatTables(tabs)
	if got.N() != 120 || !slices.Equal(got.X, td.all.X) || !slices.Equal(got.Y, td.all.Y) || len(tabs) != len(td.tabs) {
		t.Errorf("the sampled source has %d rows in %d shards; eval's sample %d in %d; equal rows: %v",
			got.N(), len(tabs), td.all.N(), len(td.tabs), slices.Equal(got.Y, td.all.Y))
	}
	for i := range tabs {
		if tabs[i].N() != td.tabs[i].N() {
			t.Errorf("shard %d: %d rows, eval's %d", i, tabs[i].N(), td.tabs[i].N())
		}
	}
}
