package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/train"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// candidates are the values the round trip tries for a field, chosen by its kind alone (none
// is a zero, so each differs from the default): numbers small enough for every limit, and for
// strings the words of the field's comment in coordinator.proto (a string setting's comment
// names its choices). The first value the method accepts is used.
func candidates(f protoreflect.FieldDescriptor) []string {
	switch f.Kind() {
	case protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Uint32Kind, protoreflect.Uint64Kind:
		return []string{"3", "2", "1", "7"}
	case protoreflect.DoubleKind, protoreflect.FloatKind:
		return []string{"0.03", "0.5", "2.5"}
	case protoreflect.BoolKind:
		return []string{"true"}
	}
	words := regexp.MustCompile(`[a-z][a-z0-9-]*[a-z0-9]`).FindAllString(pb.FieldComment(string(f.ContainingMessage().Name()), string(f.Name())), -1)
	return words
}

// settingValue is field f of m as comparable text ("3", "0.5", "[3]").
func settingValue(m proto.Message, f protoreflect.FieldDescriptor) string {
	v := m.ProtoReflect().Get(f)
	if f.IsList() {
		var parts []string
		for i := 0; i < v.List().Len(); i++ {
			parts = append(parts, fmt.Sprint(v.List().Get(i).Interface()))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return fmt.Sprint(v.Interface())
}

// TestEverySettingRoundTrips walks the method registry (and auto) and proves, for each field
// of each method's settings message, that a non-default value set through the derived flag
// survives flags -> JobSpec -> YAML job file -> JobSpec -> train settings. There is no
// per-method code: values come from the field's kind (candidates); when a value needs another
// setting (rr_min needs truncation rr, samples needs inference type1), the test finds that
// setting among the message's other fields and their candidates.
//
// The other half of the round trip, wire encode/decode of each method's tasks
// (Method.Tasks, kinds of pb.Task), is linked by the lead after the tasks branch is merged.
func TestEverySettingRoundTrips(t *testing.T) {
	for _, method := range train.MethodNames() {
		fresh, _ := train.NewSettings(method)
		fields := fresh.ProtoReflect().Descriptor().Fields()
		if fields.Len() == 0 {
			t.Errorf("%s: a settings message without fields", method)
		}
		for i := 0; i < fields.Len(); i++ {
			f := fields.Get(i)
			t.Run(method+"/"+string(f.Name()), func(t *testing.T) {
				args, value := roundTripArgs(t, method, f, fields)
				s, err := flagSpec(args...)
				if err != nil {
					t.Fatalf("flags %v: %v", args, err)
				}
				js, err := buildJobSpec(s, shard.Source{URI: "/d/x.csv", Format: "csv"}, 2, 60, ".", flagNames)
				if err != nil {
					t.Fatalf("flags %v: JobSpec: %v", args, err)
				}
				y, err := jobFileYAML("rt-1", js)
				if err != nil {
					t.Fatal(err)
				}
				j, err := parseJobFile(y, "/d")
				if err != nil {
					t.Fatalf("reading back\n%s: %v", y, err)
				}
				if j.id != "rt-1" || !proto.Equal(j.spec, js) {
					t.Errorf("YAML round trip\n%s\n got %v\nwant %v", y, j.spec, js)
				}
				back, err := train.SpecFromJobSpec(j.spec)
				if err != nil {
					t.Fatal(err)
				}
				if back.Method != method || back.Settings == nil || back.Settings.ProtoReflect().Descriptor() != f.ContainingMessage() {
					t.Fatalf("train spec of method %q with settings %T", back.Method, back.Settings)
				}
				if got := settingValue(back.Settings, f); got != value {
					t.Errorf("--%s %s came back as %s (YAML\n%s)", flagName(f.Name()), value, got, y)
				}
			})
		}
	}
}

// roundTripArgs returns the flags that set f to its first accepted candidate, with a helper
// setting from the other fields when f alone is refused, and the value as settingValue shows
// it.
func roundTripArgs(t *testing.T, method string, f protoreflect.FieldDescriptor, fields protoreflect.FieldDescriptors) ([]string, string) {
	t.Helper()
	base := []string{"--method", method}
	show := func(v string) string {
		if f.IsList() {
			return "[" + v + "]"
		}
		if x, err := strconv.ParseFloat(v, 64); err == nil && f.Kind() == protoreflect.DoubleKind {
			return fmt.Sprint(x)
		}
		return v
	}
	var lastErr error
	for _, v := range candidates(f) {
		args := append(append([]string(nil), base...), "--"+flagName(f.Name()), v)
		if _, lastErr = flagSpec(args...); lastErr == nil {
			return args, show(v)
		}
		for j := 0; j < fields.Len(); j++ {
			g := fields.Get(j)
			if g.Name() == f.Name() {
				continue
			}
			for _, w := range candidates(g) {
				with := append(append([]string(nil), args...), "--"+flagName(g.Name()), w)
				if _, err := flagSpec(with...); err == nil {
					return with, show(v)
				}
			}
		}
	}
	t.Fatalf("no candidate value of %s is accepted for method %s (last: %v)", f.Name(), method, lastErr)
	return nil, ""
}

// TestJobFileTargetY: in YAML 1.2 `target: y` is the string "y" (sigs.k8s.io/yaml, YAML 1.1,
// made it true and the job failed on the cluster); the job runs with y as its target.
func TestJobFileTargetY(t *testing.T) {
	dir := t.TempDir()
	data := writeCSV(t, dir, "d.csv", 60, 0) // columns a, b, y
	job := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(job, []byte("method: exact\nmax_iter: 5\ndata:\n  uri: d.csv\n  header: yes\n  target: y\n  columns: [a, b]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	j, err := readJobFile(job)
	if err != nil {
		t.Fatal(err)
	}
	if d := j.spec.GetData(); d.GetTarget() != "y" || !d.GetHeader() || d.GetUri() != data {
		t.Fatalf("data %v: want target \"y\", header, uri %s", d, data)
	}
	s, err := train.SpecFromJobSpec(j.spec)
	if err != nil {
		t.Fatal(err)
	}
	d := j.spec.GetData()
	src := shard.Source{URI: d.GetUri(), Format: d.GetFormat(), Header: d.GetHeader(), Target: d.GetTarget(), Columns: d.GetColumns()}
	l, tabs, err := shard.Reader{}.LoadAll(context.Background(), src, 2)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.NewLocal(l.Refs, tabs, 1)
	if err != nil {
		t.Fatal(err)
	}
	s.Columns, s.Target = tabs[0].Columns, tabs[0].Target
	m, err := train.Train(context.Background(), eng, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Target != "y" || m.NTrain != 60 {
		t.Errorf("model target %q on %d rows, want y on 60", m.Target, m.NTrain)
	}
	// Other YAML 1.1 booleans are strings too where a string is wanted.
	for _, v := range []string{"n", "no", "off", "on", "Y"} {
		j, err := parseJobFile([]byte("data: {uri: /d.csv, header: true, target: "+v+", columns: [a]}\n"), "/")
		if err != nil || j.spec.GetData().GetTarget() != v {
			t.Errorf("target: %s: %v, %v", v, j, err)
		}
	}
}

// jobFileSeeds are job files the fuzzer starts from.
var jobFileSeeds = []string{
	fullJob,
	"data:\n  uri: /data/x.csv\n",
	"method: cg\ncg: {truncation: rr, rr_min: 40}\ndata: {uri: a.csv}\n",
	"method: kmcg\ncg_iters: 50\nkmcg: {subset: 100}\ndata: {uri: a.csv, header: true, target: y}\n",
	"method: grief\ninference: type1\nsamples: 4\ndata: {uri: /d, format: uci, split: 3}\n",
	"method: auto\nauto: {exact_max_rows: 10}\nmax_features: 20\ndata: {uri: a.csv}\n",
	"a: &x {uri: a.csv}\ndata: *x\n",
	"method: [gl\n",
	"- a\n- b\n",
	"seed: 18446744073709551615\nlengthscale_bounds: ['1', 2]\ndata: {uri: a.csv}\n",
}

// FuzzJobFile: the job-file parser never panics, and a file it accepts gives a spec that
// converts to train settings and survives writing as YAML and reading back.
func FuzzJobFile(f *testing.F) {
	for _, s := range jobFileSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		j, err := parseJobFile(b, "/base")
		if err != nil {
			return
		}
		if _, err := train.SpecFromJobSpec(j.spec); err != nil {
			t.Fatalf("accepted %q but its spec does not convert: %v", b, err)
		}
		y, err := jobFileYAML(j.id, j.spec)
		if err != nil {
			t.Fatal(err)
		}
		again, err := parseJobFile(y, "/base")
		if err != nil {
			t.Fatalf("accepted %q, but not its YAML form\n%s: %v", b, y, err)
		}
		if again.id != j.id || !proto.Equal(again.spec, j.spec) {
			t.Fatalf("%q: YAML round trip\n got %v\nwant %v", b, again.spec, j.spec)
		}
	})
}

// TestSettingFlagsKeepTheirNames: the flags derived from the settings messages include every
// method-setting flag eval and submit had before they were derived, with the same type, so
// users' scripts keep working; a new method may add flags.
func TestSettingFlagsKeepTheirNames(t *testing.T) {
	before := map[string]string{
		"cg-iters": "int", "cg-tol": "float", "eigenfunctions": "int", "exact-max-rows": "int", "features": "int",
		"gl-box": "floats", "grid": "int", "inference": "string", "kmcg-noise": "string", "learning-rate": "float",
		"max-features": "int", "nodes-per-dim": "ints", "precond-rank": "int", "probes": "int", "rr-min": "int",
		"rr-rate": "float", "samples": "int", "subset": "int", "truncation": "string", "variance-rank": "int",
	}
	for name, cmd := range map[string]*cobra.Command{"eval": newEvalCmd(&env{}), "submit": newSubmitCmd(&env{})} {
		for flag, typ := range before {
			f := cmd.Flags().Lookup(flag)
			if f == nil {
				t.Errorf("%s: --%s is gone", name, flag)
				continue
			}
			if got := f.Value.Type(); got != typ {
				t.Errorf("%s --%s: type %s, want %s", name, flag, got, typ)
			}
			if f.Usage == "" {
				t.Errorf("%s --%s: no help", name, flag)
			}
		}
	}
}
