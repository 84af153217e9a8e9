package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/gpreduce/gpreduce/internal/coordinator"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/train"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// jobFile is the YAML form of a job: the fields of pb.JobSpec with their snake_case names,
// plus an optional client-chosen id. Keys left out take the defaults of `coordinator eval`.
//
//	id: co2-gl-1            # optional
//	method: auto            # auto, gl, rff, exact, grief, cg or kmcg (default auto)
//	kernel: rbf
//	seed: 0
//	lengthscale_bounds: [0.02, 0.3]
//	signal_variance_bounds: [0.05, 20]
//	noise_variance_bounds: [1e-4, 1]
//	max_iter: 100
//	features: 0             # rff
//	nodes_per_dim: [200]    # gl
//	gl_box: [300]           # gl
//	max_features: 8192
//	exact_max_rows: 5000
//	inference: type2        # grief: type2 (GRIEF-II), type1 or type2-weights
//	grid: 10                # grief
//	eigenfunctions: 1000    # grief
//	samples: 180            # grief type1
//	truncation: fixed       # cg: fixed or rr
//	cg_iters: 100           # cg fixed: J; kmcg: P
//	rr_min: 80              # cg rr
//	rr_rate: 0.05           # cg rr
//	probes: 10              # cg
//	precond_rank: 5         # cg (-1: none)
//	learning_rate: 0.05     # cg
//	cg_tol: 1e-4            # cg (kmcg default 0.01)
//	subset: 0               # kmcg: inducing rows M (0: all)
//	variance_rank: 100      # cg
//	data:
//	  uri: co2.csv          # path (relative to this file), file:// or http(s):// URL
//	  format: csv           # csv or uci
//	  split: 0              # uci
//	  header: true
//	  target: ppm
//	  columns: [year]
//	shards: 4
//	shard_timeout_seconds: 300
type jobFile struct {
	ID                   string    `json:"id"`
	Method               string    `json:"method"`
	Kernel               string    `json:"kernel"`
	Seed                 *uint64   `json:"seed"`
	LengthscaleBounds    []float64 `json:"lengthscale_bounds"`
	SignalVarianceBounds []float64 `json:"signal_variance_bounds"`
	NoiseVarianceBounds  []float64 `json:"noise_variance_bounds"`
	MaxIter              *int32    `json:"max_iter"`
	Features             *int32    `json:"features"`
	NodesPerDim          []int32   `json:"nodes_per_dim"`
	GLBox                []float64 `json:"gl_box"`
	MaxFeatures          *int32    `json:"max_features"`
	ExactMaxRows         *int32    `json:"exact_max_rows"`
	Inference            string    `json:"inference"`
	Grid                 *int32    `json:"grid"`
	Eigenfunctions       *int32    `json:"eigenfunctions"`
	Samples              *int32    `json:"samples"`
	Truncation           string    `json:"truncation"`
	CGIters              int32     `json:"cg_iters"`
	RRMin                int32     `json:"rr_min"`
	RRRate               float64   `json:"rr_rate"`
	Probes               int32     `json:"probes"`
	PrecondRank          int32     `json:"precond_rank"`
	LearningRate         float64   `json:"learning_rate"`
	CGTol                float64   `json:"cg_tol"`
	Subset               int32     `json:"subset"`
	VarianceRank         int32     `json:"variance_rank"`
	KMCGNoise            string    `json:"kmcg_noise"`
	Data                 *dataFile `json:"data"`
	Shards               int32     `json:"shards"`
	ShardTimeoutSeconds  int32     `json:"shard_timeout_seconds"`
}

// dataFile is the data: section of a job file (pb.DataSource).
type dataFile struct {
	URI     string   `json:"uri"`
	Format  string   `json:"format"`
	Split   int32    `json:"split"`
	Header  bool     `json:"header"`
	Target  string   `json:"target"`
	Columns []string `json:"columns"`
}

// job is a job ready to submit: its client-chosen ID (or "") and its spec.
type job struct {
	id   string
	spec *pb.JobSpec
}

// readJobFile reads and checks a YAML job file.
func readJobFile(path string) (*job, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read job file: %w", err)
	}
	base := filepath.Dir(path)
	j, err := parseJobFile(b, base)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return j, nil
}

// parseJobFile parses a YAML job. Unknown and duplicate keys are errors; relative local data
// paths are taken relative to baseDir.
func parseJobFile(b []byte, baseDir string) (*job, error) {
	js, err := yaml.YAMLToJSONStrict(b)
	if err != nil {
		msg := strings.Join(strings.Fields(strings.TrimPrefix(err.Error(), "yaml: ")), " ")
		return nil, fmt.Errorf("not valid YAML: %s", strings.TrimPrefix(msg, "unmarshal errors: "))
	}
	var raw any
	if err := json.Unmarshal(js, &raw); err != nil {
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	if raw == nil {
		return nil, fmt.Errorf("the job file is empty: give at least data.uri (see `coordinator submit --help`)")
	}
	if err := checkKeys(raw, reflect.TypeOf(jobFile{}), ""); err != nil {
		return nil, err
	}
	var f jobFile
	// Typed decode: UnmarshalStrict also turns YAML numbers into strings where a string is
	// wanted, so `columns: [0, 3]` selects columns by index.
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return nil, decodeError(err)
	}
	return f.job(baseDir)
}

// checkKeys walks a decoded YAML document against the struct type t and reports the first
// key (in sorted order) that t has no field for, with its dotted path and the known keys.
func checkKeys(v any, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		if v == nil {
			return nil
		}
		where := "the job file"
		if path != "" {
			where = path
		}
		return fmt.Errorf("%s: expected a mapping of keys to values, got %s", where, jsonKind(v))
	}
	fields := map[string]reflect.Type{}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		fields[name] = t.Field(i).Type
		names = append(names, name)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		full := k
		if path != "" {
			full = path + "." + k
		}
		ft, ok := fields[k]
		if !ok {
			msg := fmt.Sprintf("unknown key %q", full)
			if s := closest(k, names); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			where := "a job"
			if path != "" {
				where = path
			}
			return fmt.Errorf("%s; %s takes %s", msg, where, strings.Join(names, ", "))
		}
		if err := checkKeys(m[k], ft, full); err != nil {
			return err
		}
	}
	return nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "a list"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}

// closest returns the name within edit distance 2 of s, or else one that starts the other
// ("nodes_per_dimension" for "nodes_per_dim"), if there is one.
func closest(s string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if l := strings.ToLower(s); len(n) >= 4 && len(l) >= 4 && (strings.HasPrefix(l, n) || strings.HasPrefix(n, l)) && bestD > 2 {
			best = n
		}
		if d := editDistance(strings.ToLower(s), n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// decodeError rewords a typed-decoding error from sigs.k8s.io/yaml: it names the key and
// what it expected.
func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		want := te.Type.String()
		switch te.Type.Kind() {
		case reflect.Int32, reflect.Int, reflect.Int64:
			want = "a whole number"
		case reflect.Uint64:
			want = "a non-negative whole number"
		case reflect.Float64:
			want = "a number"
		case reflect.String:
			want = "a string"
		case reflect.Bool:
			want = "true or false"
		case reflect.Slice:
			want = "a list"
		case reflect.Struct:
			want = "a mapping"
		}
		field := te.Field
		if field == "" {
			field = "the job file"
		}
		return fmt.Errorf("%s: expected %s, got %s", field, want, te.Value)
	}
	msg := err.Error()
	for _, p := range []string{"error unmarshaling JSON: ", "while decoding JSON: ", "json: ", "error converting YAML to JSON: ", "yaml: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return errors.New(msg)
}

// job turns the decoded file into a checked job, filling defaults.
func (f *jobFile) job(baseDir string) (*job, error) {
	method := f.Method
	if method == "" {
		method = train.Auto
	}
	s := train.DefaultSpec(method)
	if f.Kernel != "" {
		s.Kernel = f.Kernel
	}
	if f.Seed != nil {
		s.Seed = *f.Seed
	}
	for _, b := range []struct {
		key string
		v   []float64
		dst *[2]float64
	}{{"lengthscale_bounds", f.LengthscaleBounds, &s.LengthscaleBounds}, {"signal_variance_bounds", f.SignalVarianceBounds, &s.SignalVarianceBounds}, {"noise_variance_bounds", f.NoiseVarianceBounds, &s.NoiseVarianceBounds}} {
		if b.v == nil {
			continue
		}
		if len(b.v) != 2 {
			return nil, fmt.Errorf("%s: give two numbers [LO, HI], got %d", b.key, len(b.v))
		}
		*b.dst = [2]float64{b.v[0], b.v[1]}
	}
	if f.MaxIter != nil {
		s.MaxIter = int(*f.MaxIter)
	}
	if f.Features != nil {
		s.Features = int(*f.Features)
	}
	if f.MaxFeatures != nil {
		s.MaxFeatures = int(*f.MaxFeatures)
	}
	if f.ExactMaxRows != nil {
		s.ExactMaxRows = int(*f.ExactMaxRows)
	}
	s.Inference = f.Inference
	if f.Grid != nil {
		s.Grid = int(*f.Grid)
	}
	if f.Eigenfunctions != nil {
		s.Eigenfunctions = int(*f.Eigenfunctions)
	}
	if f.Samples != nil {
		s.Samples = int(*f.Samples)
	}
	s.Truncation, s.CGIters, s.RRMin, s.RRRate, s.Probes = f.Truncation, int(f.CGIters), int(f.RRMin), f.RRRate, int(f.Probes)
	s.PrecondRank, s.LearningRate, s.CGTol, s.Subset, s.VarianceRank = int(f.PrecondRank), f.LearningRate, f.CGTol, int(f.Subset), int(f.VarianceRank)
	s.KMCGNoise = f.KMCGNoise
	for _, n := range f.NodesPerDim {
		s.NodesPerDim = append(s.NodesPerDim, int(n))
	}
	s.GLBox = f.GLBox
	if f.Data == nil {
		return nil, fmt.Errorf("data: missing; give at least data.uri (a CSV path or URL, or a UCI dataset directory with data.format: uci)")
	}
	src := shard.Source{URI: f.Data.URI, Format: f.Data.Format, Split: int(f.Data.Split), Header: f.Data.Header, Target: f.Data.Target, Columns: f.Data.Columns}
	spec, err := buildJobSpec(s, src, int(f.Shards), int(f.ShardTimeoutSeconds), baseDir, yamlNames)
	if err != nil {
		return nil, err
	}
	return &job{id: f.ID, spec: spec}, nil
}

// fieldNames says how errors name the spec's settings: YAML keys or command-line flags.
type fieldNames map[string]string

var (
	yamlNames = fieldNames{
		"lengthscale-bounds": "lengthscale_bounds", "signal-variance-bounds": "signal_variance_bounds",
		"noise-variance-bounds": "noise_variance_bounds", "max-iter": "max_iter", "nodes-per-dim": "nodes_per_dim",
		"gl-box": "gl_box", "uri": "data.uri", "format": "data.format", "split": "data.split", "shards": "shards",
		"shard-timeout": "shard_timeout_seconds", "columns": "data.columns", "header": "data.header", "target": "data.target",
		"max-features": "max_features", "exact-max-rows": "exact_max_rows",
		"cg-iters": "cg_iters", "rr-min": "rr_min", "rr-rate": "rr_rate", "precond-rank": "precond_rank",
		"learning-rate": "learning_rate", "cg-tol": "cg_tol", "variance-rank": "variance_rank", "kmcg-noise": "kmcg_noise",
	}
	flagNames = fieldNames{
		"method": "--method", "kernel": "--kernel", "lengthscale-bounds": "--lengthscale-bounds",
		"signal-variance-bounds": "--signal-variance-bounds", "noise-variance-bounds": "--noise-variance-bounds",
		"max-iter": "--max-iter", "features": "--features", "nodes-per-dim": "--nodes-per-dim", "gl-box": "--gl-box",
		"uri": "--data", "format": "--format", "split": "--split", "shards": "--shards", "shard-timeout": "--shard-timeout",
		"columns": "--columns", "header": "--header", "target": "--target",
		"max-features": "--max-features", "exact-max-rows": "--exact-max-rows",
		"inference": "--inference", "grid": "--grid", "eigenfunctions": "--eigenfunctions", "samples": "--samples",
		"truncation": "--truncation", "cg-iters": "--cg-iters", "rr-min": "--rr-min", "rr-rate": "--rr-rate",
		"probes": "--probes", "precond-rank": "--precond-rank", "learning-rate": "--learning-rate", "cg-tol": "--cg-tol",
		"subset": "--subset", "variance-rank": "--variance-rank", "kmcg-noise": "--kmcg-noise",
	}
)

func (n fieldNames) name(k string) string {
	if v, ok := n[k]; ok {
		return v
	}
	return k
}

// checkSpec runs Spec.Validate for d input columns (0: unknown), naming the offending setting
// as a YAML key or a flag.
func checkSpec(s train.Spec, d int, names fieldNames) error {
	if err := s.Validate(d); err != nil {
		msg := err.Error()
		if k, rest, ok := strings.Cut(msg, ": "); ok && !strings.Contains(k, " ") {
			msg = names.name(k) + ": " + rest
		}
		return errors.New(msg)
	}
	return nil
}

// buildJobSpec checks a job up front, as far as the client can without reading the data,
// and returns its message. Relative local paths become absolute against baseDir.
func buildJobSpec(s train.Spec, src shard.Source, shards, timeoutSec int, baseDir string, names fieldNames) (*pb.JobSpec, error) {
	d := 0
	if len(src.Columns) > 0 {
		d = len(src.Columns)
	}
	if err := checkSpec(s, d, names); err != nil {
		return nil, err
	}
	for _, c := range []struct {
		name string
		v    int
	}{
		{"grid", s.Grid}, {"eigenfunctions", s.Eigenfunctions}, {"samples", s.Samples}, {"cg-iters", s.CGIters},
		{"rr-min", s.RRMin}, {"probes", s.Probes}, {"precond-rank", s.PrecondRank}, {"subset", s.Subset}, {"variance-rank", s.VarianceRank},
	} {
		if c.v > 1<<30 {
			return nil, fmt.Errorf("%s: %d is too large; give at most 2^30", names.name(c.name), c.v)
		}
	}
	if s.MaxIter > 1<<30 || s.Features > 1<<30 || s.MaxFeatures > 1<<30 || s.ExactMaxRows > 1<<30 || s.Features < 0 || s.MaxFeatures < 0 || s.ExactMaxRows < 0 {
		return nil, fmt.Errorf("max_iter, features, max_features and exact_max_rows must be between 0 and 2^30")
	}
	uri := strings.TrimSpace(src.URI)
	if uri == "" {
		return nil, fmt.Errorf("%s: missing: give a CSV path or URL, or a UCI dataset directory", names.name("uri"))
	}
	format := strings.ToLower(src.Format)
	switch format {
	case "":
		format = "csv"
	case "csv", "uci":
	default:
		return nil, fmt.Errorf("%s: unknown format %q: use csv or uci", names.name("format"), src.Format)
	}
	if format == "uci" {
		if src.Split < 0 || src.Split >= shard.UCISplits {
			return nil, fmt.Errorf("%s: %d is out of range: choose a split from 0 to %d", names.name("split"), src.Split, shard.UCISplits-1)
		}
		if src.Header || src.Target != "" || len(src.Columns) > 0 {
			return nil, fmt.Errorf("a UCI dataset fixes its columns (no header, inputs first, target last): drop %s, %s and %s",
				names.name("header"), names.name("target"), names.name("columns"))
		}
	} else if src.Split != 0 {
		return nil, fmt.Errorf("%s: only a UCI dataset (format uci) has splits", names.name("split"))
	}
	for i, c := range src.Columns {
		if strings.TrimSpace(c) == "" {
			return nil, fmt.Errorf("%s: item %d is empty", names.name("columns"), i+1)
		}
	}
	if slices.Contains(src.Columns, src.Target) && src.Target != "" {
		return nil, fmt.Errorf("%s: the target %q is also an input; drop it from %s", names.name("columns"), src.Target, names.name("columns"))
	}
	if !strings.Contains(uri, "://") && !filepath.IsAbs(uri) {
		abs, err := filepath.Abs(filepath.Join(baseDir, uri))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", names.name("uri"), err)
		}
		uri = abs
	}
	if shards < 0 || shards > 1<<20 {
		return nil, fmt.Errorf("%s: %d must be between 0 (automatic) and 2^20", names.name("shards"), shards)
	}
	if timeoutSec < 0 || timeoutSec > 1<<30 {
		return nil, fmt.Errorf("%s: %d seconds must not be negative (0 means 300)", names.name("shard-timeout"), timeoutSec)
	}
	src.URI, src.Format = uri, format
	js := coordinator.JobSpecOf(s, src, shards, time.Duration(timeoutSec)*time.Second)
	// The coordinator's limits, checked here too so the answer comes before the upload.
	if err := coordinator.CheckLimits(js); err != nil {
		var le *coordinator.LimitError
		if errors.As(err, &le) {
			return nil, fmt.Errorf("%s: %s", names.name(strings.TrimSuffix(strings.ReplaceAll(strings.TrimPrefix(le.Field, "data."), "_", "-"), "-seconds")), le.Msg)
		}
		return nil, err
	}
	return js, nil
}
