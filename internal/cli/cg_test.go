package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/train"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// TestCGSettingsReachTheJobSpec: the cg and kmcg settings survive both client paths, YAML job
// files and submit's flags, into the JobSpec sent to the cluster.
func TestCGSettingsReachTheJobSpec(t *testing.T) {
	base := func(method string) *pb.JobSpec {
		kern := "rbf"
		if method == "cg" || method == "kmcg" {
			kern = "auto" // cg and kmcg choose the kernel by the evidence unless one is named
		}
		return &pb.JobSpec{Method: method, Kernel: kern,
			LengthscaleBounds: []float64{0.05, 100}, SignalVarianceBounds: []float64{0.05, 20}, NoiseVarianceBounds: []float64{1e-4, 2},
			MaxIter: 100, Data: &pb.DataSource{Uri: "/d/x.csv", Format: "csv"}}
	}
	cgRR := base("cg")
	cgRR.Settings = &pb.JobSpec_Cg{Cg: &pb.CGSettings{Truncation: "rr", RrMin: 40, RrRate: 0.08, Probes: 12, PrecondRank: -1,
		LearningRate: 0.01, CgTol: 1e-6, VarianceRank: 64}}
	cgFixed := base("cg")
	cgFixed.Settings = &pb.JobSpec_Cg{Cg: &pb.CGSettings{Truncation: "fixed", CgIters: 25, PrecondRank: 9}}
	kmcg := base("kmcg")
	kmcg.Settings = &pb.JobSpec_Kmcg{Kmcg: &pb.KMCGSettings{CgIters: 50, CgTol: 0.02, Subset: 1500, VarianceRank: 300, KmcgNoise: "evidence"}}
	for _, tc := range []struct {
		name  string
		yaml  string
		flags []string
		want  *pb.JobSpec
	}{
		{"cg rr", "method: cg\ntruncation: rr\nrr_min: 40\nrr_rate: 0.08\nprobes: 12\nprecond_rank: -1\nlearning_rate: 0.01\ncg_tol: 1.0e-6\nvariance_rank: 64\n",
			[]string{"--method", "cg", "--truncation", "rr", "--rr-min", "40", "--rr-rate", "0.08", "--probes", "12", "--precond-rank", "-1",
				"--learning-rate", "0.01", "--cg-tol", "1e-6", "--variance-rank", "64"}, cgRR},
		{"cg fixed", "method: cg\ntruncation: fixed\ncg_iters: 25\nprecond_rank: 9\n",
			[]string{"--method", "cg", "--truncation", "fixed", "--cg-iters", "25", "--precond-rank", "9"}, cgFixed},
		{"kmcg", "method: kmcg\ncg_iters: 50\ncg_tol: 0.02\nsubset: 1500\nvariance_rank: 300\nkmcg_noise: evidence\n",
			[]string{"--method", "kmcg", "--cg-iters", "50", "--cg-tol", "0.02", "--subset", "1500", "--variance-rank", "300", "--kmcg-noise", "evidence"}, kmcg},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, err := parseJobFile([]byte(tc.yaml+"data: {uri: /d/x.csv}\n"), "/d")
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(j.spec, tc.want) {
				t.Errorf("YAML:\n got %v\nwant %v", j.spec, tc.want)
			}
			s, err := flagSpec(tc.flags...)
			if err != nil {
				t.Fatal(err)
			}
			js, err := buildJobSpec(s, shard.Source{URI: "/d/x.csv", Format: "csv"}, 0, 0, ".", flagNames)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(js, tc.want) {
				t.Errorf("flags:\n got %v\nwant %v", js, tc.want)
			}
		})
	}
}

// TestCGJobFileErrors: misplaced, malformed or misspelled cg settings in a job file are
// errors naming the YAML key.
func TestCGJobFileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"probes for gl", "method: gl\nprobes: 3\n", []string{"probes: a setting of cg; drop it for method gl"}},
		{"probes for auto", "probes: 3\n", []string{"probes: a setting of cg; drop it for method auto"}},
		{"cg_iters for grief", "method: grief\ncg_iters: 3\n", []string{"cg_iters: a setting of cg and kmcg; drop it for method grief"}},
		{"subset for cg", "method: cg\nsubset: 30\n", []string{"subset: a setting of kmcg; drop it for method cg"}},
		{"kmcg_noise for cg", "method: cg\nkmcg_noise: evidence\n", []string{"kmcg_noise: a setting of kmcg"}},
		{"unknown kmcg_noise", "method: kmcg\nkmcg_noise: refit\n", []string{"kmcg_noise:", "start", "evidence"}},
		{"rr_rate with fixed J", "method: cg\ncg_iters: 50\nrr_rate: 0.1\n", []string{"rr_rate:", "truncation rr"}},
		{"cg_iters with rr", "method: cg\ntruncation: rr\ncg_iters: 50\n", []string{"cg_iters:", "drop one"}},
		{"unknown truncation", "method: cg\ntruncation: halving\n", []string{"truncation:", "halving", "fixed", "rr"}},
		{"bad precond_rank", "method: cg\nprecond_rank: -4\n", []string{"precond_rank:", "-1 for no preconditioner"}},
		{"cg_tol out of range", "method: kmcg\ncg_tol: 2\n", []string{"cg_tol:", "(0, 1)"}},
		{"fractional probes", "method: cg\nprobes: 2.5\n", []string{"probes", "whole number"}},
		{"learning_rate not a number", "method: cg\nlearning_rate: fast\n", []string{"learning_rate", "a number"}},
		{"huge subset", "method: kmcg\nsubset: 2000000000\n", []string{"subset:", "more than the limit"}},
		{"misspelled key", "method: cg\ncg_iter: 30\n", []string{`unknown key "cg_iter"`, `did you mean "cg_iters"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseJobFile([]byte(tc.yaml+"data: {uri: a.csv}\n"), "/base")
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestCGFlags: the command line refuses cg settings for other methods with Spec.Validate's
// message naming the flag, before reading any data or dialing a coordinator, and the help
// lists the new methods and flags.
func TestCGFlags(t *testing.T) {
	dir := t.TempDir()
	good := writeCSV(t, dir, "good.csv", 40, 0)
	job := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(job, []byte("method: cg\ndata: {uri: good.csv}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"eval rff with probes", []string{"eval", "--method", "rff", "--probes", "3", "--train", good, "--test", good, "--header"},
			[]string{"--probes: a setting of cg; drop it for method rff"}},
		{"eval before reading data", []string{"eval", "--method", "rff", "--probes", "3", "--train", filepath.Join(dir, "nope.csv"), "--test", good},
			[]string{"--probes: a setting of cg; drop it"}},
		{"eval kmcg with truncation", []string{"eval", "--method", "kmcg", "--truncation", "rr", "--data", good, "--header"},
			[]string{"--truncation: a setting of cg; drop it for method kmcg"}},
		{"eval bad truncation", []string{"eval", "--method", "cg", "--truncation", "halving", "--data", good, "--header"},
			[]string{"--truncation:", "halving"}},
		{"eval bad precond rank", []string{"eval", "--method", "cg", "--precond-rank", "-3", "--data", good, "--header"},
			[]string{"--precond-rank:", "-1 for no preconditioner"}},
		{"eval not a number", []string{"eval", "--method", "cg", "--rr-rate", "fast", "--data", good, "--header"},
			[]string{"rr-rate"}},
		{"submit rff with probes", []string{"submit", "--method", "rff", "--probes", "3", "--data", good, "--addr", "127.0.0.1:1"},
			[]string{"--probes: a setting of cg; drop it for method rff"}},
		{"submit huge cg iters", []string{"submit", "--method", "cg", "--cg-iters", "5000000000", "--data", good, "--addr", "127.0.0.1:1"},
			[]string{"--cg-iters", "whole number"}},
		{"submit job file with flags", []string{"submit", job, "--probes", "3", "--learning-rate", "0.1", "--addr", "127.0.0.1:1"},
			[]string{"--learning-rate, --probes cannot be combined with a job file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := run(t, tc.args...)
			want := ExitError
			if tc.name == "eval not a number" || tc.name == "submit huge cg iters" || tc.name == "submit job file with flags" {
				want = ExitUsage // a bad flag value; flags a job file replaces
			}
			if code != want {
				t.Fatalf("exit %d, want %d; stderr: %s", code, want, errOut)
			}
			if strings.Contains(errOut, "panic") {
				t.Fatalf("panicked: %s", errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("error %q does not mention %q", strings.TrimSpace(errOut), w)
				}
			}
		})
	}
	for _, cmd := range []string{"eval", "submit"} {
		code, out, errOut := run(t, cmd, "--help")
		if code != 0 {
			t.Fatalf("%s --help: exit %d: %s", cmd, code, errOut)
		}
		// --method's help lists every registered method (train.Methods).
		line := methodFlagLine(t, out)
		for _, m := range train.Methods() {
			if !regexp.MustCompile(`\b` + regexp.QuoteMeta(m.Name) + `\b`).MatchString(line) {
				t.Errorf("%s --help: --method does not list %s: %q", cmd, m.Name, line)
			}
		}
		for _, w := range []string{"--truncation", "--cg-iters", "--rr-min", "--rr-rate", "--probes",
			"--precond-rank", "--learning-rate", "--cg-tol", "--subset", "--variance-rank", "(default 100)", "(default 0.05)", "(default 0.0001)"} {
			if !strings.Contains(out, w) {
				t.Errorf("%s --help lacks %q", cmd, w)
			}
		}
	}
}

// methodFlagLine returns the --method line of a command's help.
func methodFlagLine(t *testing.T, help string) string {
	t.Helper()
	for _, l := range strings.Split(help, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "--method ") {
			return l
		}
	}
	t.Fatalf("no --method in the help:\n%s", help)
	return ""
}

// eval --train-rows trains on a fixed sample of the training rows and reports scores on the
// standardized target too; a negative count is refused.
func TestEvalTrainRows(t *testing.T) {
	dir := t.TempDir()
	good := writeCSV(t, dir, "good.csv", 120, 0)
	code, out, errOut := run(t, "eval", "--method", "exact", "--data", good, "--header", "--train-rows", "50", "--max-iter", "5", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r struct {
		NTrain  int     `json:"n_train"`
		RMSE    float64 `json:"rmse"`
		RMSEStd float64 `json:"rmse_standardized"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if r.NTrain != 50 || !(r.RMSEStd > 0) {
		t.Errorf("result %+v", r)
	}
	code, _, errOut = run(t, "eval", "--method", "exact", "--data", good, "--header", "--train-rows", "-3")
	if code != 1 || !strings.Contains(errOut, "--train-rows -3") {
		t.Errorf("exit %d: %s", code, errOut)
	}
}
