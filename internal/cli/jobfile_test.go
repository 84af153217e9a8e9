package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/train"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

const fullJob = `# every key of a job file
id: co2-gl-1
method: gl
kernel: matern52
seed: 42
lengthscale_bounds: [0.02, 0.3]
signal_variance_bounds: [0.05, 20]
noise_variance_bounds: [1.0e-4, 1]
max_iter: 50
nodes_per_dim: [200, 30]
gl_box: [300, 12.5]
max_features: 10000
data:
  uri: data/co2.csv
  format: csv
  header: true
  target: ppm
  columns: [year, 1]
shards: 4
shard_timeout_seconds: 60
`

func TestJobFileFull(t *testing.T) {
	dir := t.TempDir()
	j, err := parseJobFile([]byte(fullJob), dir)
	if err != nil {
		t.Fatal(err)
	}
	want := &pb.JobSpec{
		Method: "gl", Kernel: "matern52", Seed: 42,
		LengthscaleBounds: []float64{0.02, 0.3}, SignalVarianceBounds: []float64{0.05, 20}, NoiseVarianceBounds: []float64{1e-4, 1},
		MaxIter: 50, Settings: &pb.JobSpec_Gl{Gl: &pb.GLSettings{NodesPerDim: []int32{200, 30}, GlBox: []float64{300, 12.5}, MaxFeatures: 10000}},
		Data: &pb.DataSource{Uri: filepath.Join(dir, "data", "co2.csv"), Format: "csv", Header: true, Target: "ppm",
			Columns: []string{"year", "1"}},
		Shards: 4, ShardTimeoutSeconds: 60,
	}
	if j.id != "co2-gl-1" {
		t.Errorf("id %q", j.id)
	}
	if !proto.Equal(j.spec, want) {
		t.Errorf("spec\n got %v\nwant %v", j.spec, want)
	}
}

// TestJobFileDefaults: a job file with only data.uri gets the defaults of eval.
func TestJobFileDefaults(t *testing.T) {
	j, err := parseJobFile([]byte("data:\n  uri: /data/x.csv\n"), "/elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	want := &pb.JobSpec{
		Method: "auto", Kernel: "auto",
		LengthscaleBounds: []float64{0.05, 100}, SignalVarianceBounds: []float64{0.05, 20}, NoiseVarianceBounds: []float64{1e-4, 2},
		MaxIter: 100, Settings: &pb.JobSpec_Auto{Auto: &pb.AutoSettings{}}, Data: &pb.DataSource{Uri: "/data/x.csv", Format: "csv"},
	}
	if !proto.Equal(j.spec, want) {
		t.Errorf("spec\n got %v\nwant %v", j.spec, want)
	}
	// URLs are kept as they are; UCI takes a split.
	j, err = parseJobFile([]byte("method: exact\ndata: {uri: 'https://example.com/a.csv'}\n"), "/x")
	if err != nil || j.spec.Data.Uri != "https://example.com/a.csv" {
		t.Fatalf("%v %v", j, err)
	}
	j, err = parseJobFile([]byte("data: {uri: /d/yacht, format: uci, split: 3}\n"), "/x")
	if err != nil || j.spec.Data.Format != "uci" || j.spec.Data.Split != 3 {
		t.Fatalf("%v %v", j, err)
	}
}

func TestJobFileErrors(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown key", "metod: gl\ndata: {uri: a.csv}\n", []string{`unknown key "metod"`, `did you mean "method"`}},
		{"unknown nested key", "data:\n  uri: a.csv\n  formt: csv\n", []string{`unknown key "data.formt"`, `"format"`}},
		{"unknown key, no suggestion", "data: {uri: a.csv}\nbatch_size: 32\n", []string{`unknown key "batch_size"`, "lengthscale_bounds", "cg_iters"}},
		{"longer key", "nodes_per_dimension: [3]\ndata: {uri: a.csv}\n", []string{`unknown key "nodes_per_dimension"`, `did you mean "nodes_per_dim"`}},
		{"case matters", "Method: gl\ndata: {uri: a.csv}\n", []string{`unknown key "Method"`}},
		{"duplicate key", "method: gl\nmethod: rff\ndata: {uri: a.csv}\n", []string{"method", "already"}},
		{"duplicate nested key", "data: {uri: a.csv, uri: b.csv}\n", []string{"data.uri", "already"}},
		{"flat and nested", "method: gl\nmax_features: 10\ngl: {max_features: 20}\ndata: {uri: a.csv}\n", []string{"max_features", "twice"}},
		{"settings under another method", "method: gl\ncg: {cg_iters: 50}\ndata: {uri: a.csv}\n", []string{"cg_iters: a setting of cg and kmcg; drop it for method gl"}},
		{"unknown nested setting", "method: cg\ncg: {cg_iter: 50}\ndata: {uri: a.csv}\n", []string{`unknown key "cg.cg_iter"`, `did you mean "cg_iters"`}},
		{"a list for a number", "max_iter: [1]\ndata: {uri: a.csv}\n", []string{"max_iter", "whole number", "a list"}},
		{"inverted bound", "lengthscale_bounds: [2, 0.1]\ndata: {uri: a.csv}\n", []string{"lengthscale_bounds", "swap"}},
		{"one bound", "noise_variance_bounds: [0.1]\ndata: {uri: a.csv}\n", []string{"noise_variance_bounds", "give two"}},
		{"negative bound", "signal_variance_bounds: [-1, 2]\ndata: {uri: a.csv}\n", []string{"signal_variance_bounds", "positive"}},
		{"wrong type", "max_iter: lots\ndata: {uri: a.csv}\n", []string{"max_iter", "whole number"}},
		{"fractional", "shards: 2.5\ndata: {uri: a.csv}\n", []string{"shards", "whole number"}},
		{"unknown method", "method: svgp\ndata: {uri: a.csv}\n", []string{"method", "svgp"}},
		{"unknown kernel", "kernel: periodic\ndata: {uri: a.csv}\n", []string{"kernel", "periodic"}},
		{"no data", "method: gl\n", []string{"data", "uri"}},
		{"no uri", "data: {format: csv}\n", []string{"data.uri", "missing"}},
		{"bad format", "data: {uri: a.parquet, format: parquet}\n", []string{"data.format", "parquet"}},
		{"uci with columns", "data: {uri: /d, format: uci, columns: [a]}\n", []string{"UCI", "data.columns"}},
		{"split without uci", "data: {uri: a.csv, split: 2}\n", []string{"data.split", "uci"}},
		{"nodes per column", "method: gl\nnodes_per_dim: [10, 10, 10]\ndata: {uri: a.csv, columns: [a, b]}\n", []string{"nodes_per_dim", "one per column"}},
		{"negative shards", "shards: -1\ndata: {uri: a.csv}\n", []string{"shards"}},
		{"gl setting with auto", "nodes_per_dim: [10, 10]\ndata: {uri: a.csv, columns: [a, b]}\n", []string{"nodes_per_dim", "method"}},
		{"empty", "", []string{"empty"}},
		{"not a mapping", "- a\n- b\n", []string{"mapping"}},
		{"data not a mapping", "data: a.csv\n", []string{"data", "mapping"}},
		{"bad yaml", "method: [gl\n", []string{"YAML"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseJobFile([]byte(c.yaml), "/base")
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestReadJobFileNamesTheFile: errors from a file name it, and relative data paths are
// relative to the file.
func TestReadJobFileNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "job.yaml")
	os.WriteFile(p, []byte("data:\n  uri: a.csv\n  colums: [x]\n"), 0o644)
	_, err := readJobFile(p)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), `"data.colums"`) {
		t.Fatalf("error %v should name %s and the key data.colums", err, p)
	}
	os.WriteFile(p, []byte("data:\n  uri: a.csv\n"), 0o644)
	j, err := readJobFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if j.spec.Data.Uri != filepath.Join(dir, "a.csv") {
		t.Errorf("uri %q, want it relative to the job file", j.spec.Data.Uri)
	}
	if _, err := readJobFile(filepath.Join(dir, "nope.yaml")); err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Errorf("missing file: %v", err)
	}
}

// TestGRIEFSettingsReachTheJobSpec: the GRIEF settings survive both client paths, YAML job
// files and submit's flags, into the JobSpec sent to the cluster.
func TestGRIEFSettingsReachTheJobSpec(t *testing.T) {
	j, err := parseJobFile([]byte("method: grief\ninference: type1\ngrid: 8\neigenfunctions: 300\nsamples: 40\ndata: {uri: /d/x.csv}\n"), "/d")
	if err != nil {
		t.Fatal(err)
	}
	if s := j.spec.GetGrief(); s.GetInference() != "type1" || s.GetGrid() != 8 || s.GetEigenfunctions() != 300 || s.GetSamples() != 40 {
		t.Errorf("YAML: %v", s)
	}
	s, err := flagSpec("--method", "grief", "--inference", "type1", "--grid", "6", "--eigenfunctions", "100", "--samples", "20")
	if err != nil {
		t.Fatal(err)
	}
	js, err := buildJobSpec(s, shard.Source{URI: "/d/x.csv", Format: "csv"}, 0, 0, ".", flagNames)
	if err != nil {
		t.Fatal(err)
	}
	if g := js.GetGrief(); g.GetInference() != "type1" || g.GetGrid() != 6 || g.GetEigenfunctions() != 100 || g.GetSamples() != 20 {
		t.Errorf("flags: %v", js)
	}
}

// flagSpec parses job-setting flags as eval and submit do and returns the spec.
func flagSpec(args ...string) (train.Spec, error) {
	var sf specFlags
	cmd := &cobra.Command{Use: "test"}
	sf.register(cmd, train.Auto)
	if err := cmd.Flags().Parse(args); err != nil {
		return train.Spec{}, err
	}
	return sf.spec()
}
