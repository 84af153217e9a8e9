package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/gpreduce/gpreduce/internal/coordinator"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/train"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// A job file is the YAML form of a pb.JobSpec, decoded through protojson: the JobSpec's
// snake_case field names are its keys, plus an optional client-chosen id. Keys left out take
// the defaults of `coordinator eval`. A method's settings go under the method's key, or, as
// in job files written before the settings messages, flat at the top level, where they are
// the chosen method's:
//
//	id: co2-gl-1            # optional
//	method: gl              # auto (the default) or a method of --method in `coordinator eval --help`
//	kernel: rbf
//	seed: 0
//	lengthscale_bounds: [0.02, 0.3]
//	signal_variance_bounds: [0.05, 20]
//	noise_variance_bounds: [1e-4, 1]
//	max_iter: 100
//	gl:                     # the method's settings (the fields of GLSettings)
//	  nodes_per_dim: [200]
//	  gl_box: [300]
//	max_features: 8192      # flat: the same as under gl:
//	data:
//	  uri: co2.csv          # path (relative to this file), file:// or http(s):// URL
//	  format: csv           # csv or uci
//	  split: 0              # uci
//	  header: true
//	  target: ppm
//	  columns: [year]
//	shards: 4
//	shard_timeout_seconds: 300
//
// The YAML is YAML 1.2 (go.yaml.in/yaml/v3): `target: y` is the string "y". A setting of
// another method is refused by the one wrong-method error (train.WrongMethod).

// job is a job ready to submit: its client-chosen ID (or "") and its spec.
type job struct {
	id   string
	spec *pb.JobSpec
}

// readJobFile reads and checks a YAML job file; errors name the file.
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

// maxJobNodes bounds the YAML nodes a job file may expand to (aliases included).
const maxJobNodes = 1 << 16

// parseJobFile parses a YAML job. Unknown and duplicate keys are errors; relative local data
// paths are taken relative to baseDir.
func parseJobFile(b []byte, baseDir string) (*job, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		msg := strings.Join(strings.Fields(strings.TrimPrefix(err.Error(), "yaml: ")), " ")
		return nil, fmt.Errorf("not valid YAML: %s", msg)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 || doc.Content[0].Tag == "!!null" {
		return nil, fmt.Errorf("the job file is empty: give at least data.uri (see `coordinator submit --help`)")
	}
	root := doc.Content[0]
	if root.Kind == yaml.AliasNode {
		root = root.Alias
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("the job file: expected a mapping of keys to values, got %s", yamlKind(root))
	}
	d := &jobDecoder{}
	j, err := d.decode(root)
	if err != nil {
		return nil, err
	}
	s, err := train.SpecFromJobSpec(j.spec)
	if err != nil {
		return nil, renameSetting(err, yamlNames)
	}
	if j.spec.GetData() == nil {
		return nil, fmt.Errorf("data: missing; give at least data.uri (a CSV path or URL, or a UCI dataset directory with data.format: uci)")
	}
	ds := j.spec.GetData()
	src := shard.Source{URI: ds.GetUri(), Format: ds.GetFormat(), Split: int(ds.GetSplit()), Header: ds.GetHeader(), Target: ds.GetTarget(), Columns: ds.GetColumns()}
	spec, err := buildJobSpec(s, src, int(j.spec.GetShards()), int(j.spec.GetShardTimeoutSeconds()), baseDir, yamlNames)
	if err != nil {
		return nil, err
	}
	return &job{id: j.id, spec: spec}, nil
}

// jobDecoder turns the YAML tree into JSON typed by the JobSpec's descriptors, then the
// JobSpec by protojson.
type jobDecoder struct {
	nodes int
}

// decode reads the top-level mapping: id, the JobSpec's fields, and flat settings, which it
// moves under the method's key.
func (d *jobDecoder) decode(root *yaml.Node) (*job, error) {
	jd := (&pb.JobSpec{}).ProtoReflect().Descriptor()
	method := train.Auto
	if v := mappingValue(root, "method"); v != nil && v.Kind == yaml.ScalarNode && strings.TrimSpace(v.Value) != "" {
		method = strings.TrimSpace(v.Value)
	}
	settingNames := map[string]bool{}
	for _, st := range train.Settings() {
		settingNames[string(st.Name)] = true
	}
	out := map[string]any{}
	flat := map[string]any{}
	j := &job{}
	keys, vals, err := d.mapping(root, "")
	if err != nil {
		return nil, err
	}
	for i, k := range keys {
		v := vals[i]
		f := jd.Fields().ByName(protoreflect.Name(k))
		switch {
		case k == "id":
			if v.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("id (line %d): expected a string, got %s", v.Line, yamlKind(v))
			}
			j.id = v.Value
		case f != nil && !deprecated(f):
			x, err := d.value(v, f, k)
			if err != nil {
				return nil, err
			}
			if x != nil {
				out[k] = x
			}
		case settingNames[k]:
			msg, ok := train.NewSettings(method)
			if !ok {
				return nil, fmt.Errorf("method: unknown method %q; use %s", method, strings.Join(train.MethodNames(), ", "))
			}
			sf := msg.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(k))
			if sf == nil {
				return nil, renameSetting(train.WrongMethod(k, method), yamlNames)
			}
			x, err := d.value(v, sf, k)
			if err != nil {
				return nil, err
			}
			if x != nil {
				flat[k] = x
			}
		default:
			return nil, unknownKey(k, "", jobKeys(jd))
		}
	}
	if len(flat) > 0 {
		nested, _ := out[method].(map[string]any)
		if nested == nil {
			nested = map[string]any{}
		}
		for k, v := range flat {
			if _, dup := nested[k]; dup {
				return nil, fmt.Errorf("%s: given twice, flat and under %s; keep one", k, method)
			}
			nested[k] = v
		}
		out[method] = nested
	}
	if _, ok := out["method"]; !ok {
		out["method"] = train.Auto
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("the job file: %w", err)
	}
	j.spec = &pb.JobSpec{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(b, j.spec); err != nil {
		return nil, fmt.Errorf("the job file: %w", err)
	}
	return j, nil
}

// deprecated reports whether f is one of JobSpec's deprecated flat settings, which a job file
// gives flat or under the method's key instead.
func deprecated(f protoreflect.FieldDescriptor) bool {
	return f.Options().(*descriptorpb.FieldOptions).GetDeprecated()
}

// jobKeys are the keys a job file takes at the top level.
func jobKeys(jd protoreflect.MessageDescriptor) []string {
	keys := []string{"id"}
	for i := 0; i < jd.Fields().Len(); i++ {
		if f := jd.Fields().Get(i); !deprecated(f) {
			keys = append(keys, string(f.Name()))
		}
	}
	for _, st := range train.Settings() {
		keys = append(keys, string(st.Name))
	}
	return keys
}

// mappingValue is the value of key in a mapping node, or nil.
func mappingValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// count counts a node against maxJobNodes and resolves an alias.
func (d *jobDecoder) count(n *yaml.Node) (*yaml.Node, error) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	d.nodes++
	if d.nodes > maxJobNodes {
		return nil, fmt.Errorf("the job file expands to more than %d values; a job is settings and a data address, not data", maxJobNodes)
	}
	return n, nil
}

// mapping returns a mapping node's keys and values, refusing duplicate and non-string keys.
func (d *jobDecoder) mapping(m *yaml.Node, path string) ([]string, []*yaml.Node, error) {
	var keys []string
	var vals []*yaml.Node
	seen := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		kn, err := d.count(m.Content[i])
		if err != nil {
			return nil, nil, err
		}
		if kn.Kind != yaml.ScalarNode {
			return nil, nil, fmt.Errorf("%s (line %d): a key must be a name, got %s", where(path), kn.Line, yamlKind(kn))
		}
		if line, dup := seen[kn.Value]; dup {
			return nil, nil, fmt.Errorf("%s (line %d): key %q already given at line %d; keep one", where(path), kn.Line, join(path, kn.Value), line)
		}
		seen[kn.Value] = kn.Line
		vn, err := d.count(m.Content[i+1])
		if err != nil {
			return nil, nil, err
		}
		keys = append(keys, kn.Value)
		vals = append(vals, vn)
	}
	return keys, vals, nil
}

func where(path string) string {
	if path == "" {
		return "the job file"
	}
	return path
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// unknownKey is the error for a key no field has, with a suggestion and the known keys.
func unknownKey(k, path string, names []string) error {
	msg := fmt.Sprintf("unknown key %q", join(path, k))
	if s := closest(k, names); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return fmt.Errorf("%s; %s takes %s", msg, where(path), strings.Join(names, ", "))
}

// value converts the YAML node n of field f (at key path key) to its JSON form for protojson,
// or nil for a null value (the field left out). Scalars are read from their text, so a string
// field takes `y`, `1` or `true` as written, and numbers may be quoted.
func (d *jobDecoder) value(n *yaml.Node, f protoreflect.FieldDescriptor, key string) (any, error) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, nil
	}
	if f.IsList() {
		if n.Kind != yaml.SequenceNode {
			return nil, fmt.Errorf("%s (line %d): expected a list, got %s", key, n.Line, yamlKind(n))
		}
		out := []any{}
		for _, c := range n.Content {
			c, err := d.count(c)
			if err != nil {
				return nil, err
			}
			x, err := d.single(c, f, key)
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return out, nil
	}
	return d.single(n, f, key)
}

// single converts one value of field f.
func (d *jobDecoder) single(n *yaml.Node, f protoreflect.FieldDescriptor, key string) (any, error) {
	if f.Kind() == protoreflect.MessageKind {
		if n.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%s (line %d): expected a mapping of keys to values, got %s", key, n.Line, yamlKind(n))
		}
		md := f.Message()
		keys, vals, err := d.mapping(n, key)
		if err != nil {
			return nil, err
		}
		out := map[string]any{}
		for i, k := range keys {
			sf := md.Fields().ByName(protoreflect.Name(k))
			if sf == nil {
				var names []string
				for j := 0; j < md.Fields().Len(); j++ {
					names = append(names, string(md.Fields().Get(j).Name()))
				}
				return nil, unknownKey(k, key, names)
			}
			x, err := d.value(vals[i], sf, join(key, k))
			if err != nil {
				return nil, err
			}
			if x != nil {
				out[k] = x
			}
		}
		return out, nil
	}
	if n.Kind != yaml.ScalarNode {
		return nil, fmt.Errorf("%s (line %d): expected %s, got %s", key, n.Line, kindWord(f), yamlKind(n))
	}
	v := strings.TrimSpace(n.Value)
	bad := func() error {
		return fmt.Errorf("%s (line %d): expected %s, got %q", key, n.Line, kindWord(f), n.Value)
	}
	switch f.Kind() {
	case protoreflect.StringKind:
		return n.Value, nil
	case protoreflect.BoolKind:
		switch strings.ToLower(v) {
		case "true", "yes", "on":
			return true, nil
		case "false", "no", "off":
			return false, nil
		}
		return nil, bad()
	case protoreflect.Int32Kind:
		x, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return nil, bad()
		}
		return x, nil
	case protoreflect.Int64Kind:
		x, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, bad()
		}
		return strconv.FormatInt(x, 10), nil
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind:
		x, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, bad()
		}
		return strconv.FormatUint(x, 10), nil
	case protoreflect.DoubleKind, protoreflect.FloatKind:
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, bad()
		}
		return x, nil
	}
	return nil, fmt.Errorf("%s: fields of kind %s have no YAML form", key, f.Kind())
}

// kindWord says what a field takes.
func kindWord(f protoreflect.FieldDescriptor) string {
	switch f.Kind() {
	case protoreflect.Int32Kind, protoreflect.Int64Kind:
		return "a whole number"
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind:
		return "a non-negative whole number"
	case protoreflect.DoubleKind, protoreflect.FloatKind:
		return "a number"
	case protoreflect.BoolKind:
		return "true or false"
	case protoreflect.MessageKind:
		return "a mapping"
	}
	return "a string"
}

// yamlKind names a node's kind for an error.
func yamlKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "nothing"
}

// jobFileYAML writes js (and id, if any) as a job file that parseJobFile reads back: the
// protojson form with the proto field names, as YAML.
func jobFileYAML(id string, js *pb.JobSpec) ([]byte, error) {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(js)
	if err != nil {
		return nil, err
	}
	var v map[string]any
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if id != "" {
		v["id"] = id
	}
	return yaml.Marshal(numbers(v))
}

// numbers turns json.Numbers into int64 or float64, so YAML writes them unquoted.
func numbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	}
	return v
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

// fieldNames says how errors name a setting given in kebab case ("cg-iters", "uri"): as a
// YAML key or as a command-line flag.
type fieldNames func(string) string

// dataKeys are the settings a job file gives under data:.
var dataKeys = []string{"uri", "format", "split", "header", "target", "columns"}

// yamlNames names a setting as a job file's key: cg-iters -> cg_iters, uri -> data.uri.
func yamlNames(k string) string {
	switch {
	case slices.Contains(dataKeys, k):
		return "data." + k
	case k == "shard-timeout":
		return "shard_timeout_seconds"
	}
	return strings.ReplaceAll(k, "-", "_")
}

// flagNames names a setting as a flag: cg-iters -> --cg-iters, uri -> --data.
func flagNames(k string) string {
	if k == "uri" {
		return "--data"
	}
	return "--" + k
}

// renameSetting renames the setting that starts a train error ("cg-iters: ...") by names.
func renameSetting(err error, names fieldNames) error {
	msg := err.Error()
	if k, rest, ok := strings.Cut(msg, ": "); ok && !strings.Contains(k, " ") {
		return errors.New(names(k) + ": " + rest)
	}
	return err
}

// checkSpec runs Spec.Validate for d input columns (0: unknown), naming the offending setting
// as a YAML key or a flag.
func checkSpec(s train.Spec, d int, names fieldNames) error {
	if err := s.Validate(d); err != nil {
		return renameSetting(err, names)
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
	uri := strings.TrimSpace(src.URI)
	if uri == "" {
		return nil, fmt.Errorf("%s: missing: give a CSV path or URL, or a UCI dataset directory", names("uri"))
	}
	format := strings.ToLower(src.Format)
	switch format {
	case "":
		format = "csv"
	case "csv", "uci":
	default:
		return nil, fmt.Errorf("%s: unknown format %q: use csv or uci", names("format"), src.Format)
	}
	if format == "uci" {
		if src.Split < 0 || src.Split >= shard.UCISplits {
			return nil, fmt.Errorf("%s: %d is out of range: choose a split from 0 to %d", names("split"), src.Split, shard.UCISplits-1)
		}
		if src.Header || src.Target != "" || len(src.Columns) > 0 {
			return nil, fmt.Errorf("a UCI dataset fixes its columns (no header, inputs first, target last): drop %s, %s and %s",
				names("header"), names("target"), names("columns"))
		}
	} else if src.Split != 0 {
		return nil, fmt.Errorf("%s: only a UCI dataset (format uci) has splits", names("split"))
	}
	for i, c := range src.Columns {
		if strings.TrimSpace(c) == "" {
			return nil, fmt.Errorf("%s: item %d is empty", names("columns"), i+1)
		}
	}
	if slices.Contains(src.Columns, src.Target) && src.Target != "" {
		return nil, fmt.Errorf("%s: the target %q is also an input; drop it from %s", names("columns"), src.Target, names("columns"))
	}
	if !strings.Contains(uri, "://") && !filepath.IsAbs(uri) {
		abs, err := filepath.Abs(filepath.Join(baseDir, uri))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", names("uri"), err)
		}
		uri = abs
	}
	if shards < 0 || shards > 1<<20 {
		return nil, fmt.Errorf("%s: %d must be between 0 (automatic) and 2^20", names("shards"), shards)
	}
	if timeoutSec < 0 || timeoutSec > 1<<30 {
		return nil, fmt.Errorf("%s: %d seconds must not be negative (0 means 300)", names("shard-timeout"), timeoutSec)
	}
	src.URI, src.Format = uri, format
	js := coordinator.JobSpecOf(s, src, shards, time.Duration(timeoutSec)*time.Second)
	// The coordinator's limits, checked here too so the answer comes before the upload.
	if err := coordinator.CheckLimits(js); err != nil {
		var le *coordinator.LimitError
		if errors.As(err, &le) {
			return nil, fmt.Errorf("%s: %s", names(strings.TrimSuffix(strings.ReplaceAll(strings.TrimPrefix(le.Field, "data."), "_", "-"), "-seconds")), le.Msg)
		}
		return nil, err
	}
	return js, nil
}
