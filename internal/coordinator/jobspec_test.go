package coordinator

import (
	"bytes"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/engine/remote"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/train"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

func TestPlanFromSpecDefaults(t *testing.T) {
	js := &pb.JobSpec{Method: "gl", Data: &pb.DataSource{Uri: " data.csv "}}
	p, err := planFromSpec(js)
	if err != nil {
		t.Fatal(err)
	}
	want := jobPlan{
		Spec:         train.DefaultSpec("gl"),
		Source:       shard.Source{URI: "data.csv", Format: "csv"},
		ShardTimeout: remote.DefaultShardTimeout,
	}
	if !planEqual(p, want) {
		t.Fatalf("plan %+v\nwant %+v", p, want)
	}
}

// specEqual compares specs, their settings messages by proto.Equal.
func specEqual(a, b train.Spec) bool {
	sa, sb := a.Settings, b.Settings
	a.Settings, b.Settings = nil, nil
	return reflect.DeepEqual(a, b) && proto.Equal(sa, sb)
}

// planEqual compares plans, their settings messages by proto.Equal.
func planEqual(a, b jobPlan) bool {
	sa, sb := a.Spec, b.Spec
	a.Spec, b.Spec = train.Spec{}, train.Spec{}
	return reflect.DeepEqual(a, b) && specEqual(sa, sb)
}

// TestPlanFromSpecLegacyFields: a job stored before the settings oneof (flat fields) reads
// into its method's message; max_features and exact_max_rows, which older clients sent with
// every job, are dropped for a method without them; other settings of another method are
// refused by the wrong-method error.
func TestPlanFromSpecLegacyFields(t *testing.T) {
	data := &pb.DataSource{Uri: "d.csv"}
	p, err := planFromSpec(&pb.JobSpec{Method: "gl", NodesPerDim: []int32{3, 4}, GlBox: []float64{1, 2}, MaxFeatures: 8192, ExactMaxRows: 5000, Data: data})
	if err != nil {
		t.Fatal(err)
	}
	if want := (&pb.GLSettings{NodesPerDim: []int32{3, 4}, GlBox: []float64{1, 2}, MaxFeatures: 8192}); !proto.Equal(p.Spec.Settings, want) {
		t.Errorf("gl settings %v, want %v", p.Spec.Settings, want)
	}
	stored := specFromPlan(p)
	if stored.GetMaxFeatures() != 0 || len(stored.GetNodesPerDim()) != 0 || stored.GetGl() == nil {
		t.Errorf("stored %v: the flat fields should be gone, the settings under gl", stored)
	}
	p, err = planFromSpec(&pb.JobSpec{Method: "auto", MaxFeatures: 625, ExactMaxRows: 100, Data: data})
	if err != nil || !proto.Equal(p.Spec.Settings, &pb.AutoSettings{MaxFeatures: 625, ExactMaxRows: 100}) {
		t.Errorf("auto: %v, %v", p.Spec.Settings, err)
	}
	_, err = planFromSpec(&pb.JobSpec{Method: "cg", Features: 64, Data: data})
	if want := "spec." + train.WrongMethod("features", "cg").Error(); status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != want {
		t.Errorf("err %v, want %q", err, want)
	}
	_, err = planFromSpec(&pb.JobSpec{Method: "gl", NodesPerDim: []int32{3}, Settings: &pb.JobSpec_Gl{Gl: &pb.GLSettings{NodesPerDim: []int32{4}}}, Data: data})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("flat and nested: %v", err)
	}
}

// TestPlanFromSpecWrongCase: settings under another method's case are refused, naming the
// setting and where it goes.
func TestPlanFromSpecWrongCase(t *testing.T) {
	data := &pb.DataSource{Uri: "d.csv"}
	for _, tc := range []struct {
		js   *pb.JobSpec
		want string
	}{
		{&pb.JobSpec{Method: "gl", Settings: &pb.JobSpec_Cg{Cg: &pb.CGSettings{CgIters: 5}}, Data: data}, "spec.cg_iters: a setting of cg and kmcg; drop it for method gl"},
		{&pb.JobSpec{Method: "kmcg", Settings: &pb.JobSpec_Cg{Cg: &pb.CGSettings{CgIters: 5}}, Data: data}, "spec.cg_iters: given under cg, but the method is kmcg; put it under kmcg"},
		{&pb.JobSpec{Method: "exact", Settings: &pb.JobSpec_Rff{Rff: &pb.RFFSettings{}}, Data: data}, "spec.rff: the settings of method rff; drop them for method exact"},
	} {
		_, err := planFromSpec(tc.js)
		if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != tc.want {
			t.Errorf("err %v, want %q", err, tc.want)
		}
	}
}

func TestPlanFromSpecFields(t *testing.T) {
	js := &pb.JobSpec{
		Method: "rff", Kernel: "matern32", Seed: 11,
		LengthscaleBounds: []float64{0.2, 3}, SignalVarianceBounds: []float64{0.1, 10}, NoiseVarianceBounds: []float64{1e-3, 1},
		MaxIter: 40, Settings: &pb.JobSpec_Rff{Rff: &pb.RFFSettings{Features: 64, MaxFeatures: 1000}},
		Data:   &pb.DataSource{Uri: "d.csv", Format: "CSV", Header: true, Target: "y", Columns: []string{"a", "b"}},
		Shards: 8, ShardTimeoutSeconds: 9,
	}
	p, err := planFromSpec(js)
	if err != nil {
		t.Fatal(err)
	}
	want := jobPlan{
		Spec: train.Spec{
			Method: "rff", Kernel: "matern32", Seed: 11,
			LengthscaleBounds: [2]float64{0.2, 3}, SignalVarianceBounds: [2]float64{0.1, 10}, NoiseVarianceBounds: [2]float64{1e-3, 1},
			MaxIter: 40, Settings: &pb.RFFSettings{Features: 64, MaxFeatures: 1000},
		},
		Source:       shard.Source{URI: "d.csv", Format: "csv", Header: true, Target: "y", Columns: []string{"a", "b"}},
		Shards:       8,
		ShardTimeout: 9 * time.Second,
	}
	if !planEqual(p, want) {
		t.Fatalf("plan %+v\nwant %+v", p, want)
	}
	// The stored form has every default filled in and converts back to the same plan.
	again, err := planFromSpec(specFromPlan(p))
	if err != nil || !planEqual(again, p) {
		t.Fatalf("round trip: %+v, %v", again, err)
	}
	a, _ := encodeSpec(specFromPlan(p))
	b, _ := encodeSpec(specFromPlan(again))
	if !bytes.Equal(a, b) {
		t.Fatal("the encoding is not deterministic")
	}
	dec, err := decodeSpec(a)
	if err != nil || !proto.Equal(dec, specFromPlan(p)) {
		t.Fatalf("decode: %v, %v", dec, err)
	}
}

func TestPlanFromSpecErrors(t *testing.T) {
	data := &pb.DataSource{Uri: "d.csv"}
	for _, tc := range []struct {
		name string
		js   *pb.JobSpec
		want string // the field named at the start of the message
	}{
		{"nil", nil, "spec: missing"},
		{"no method", &pb.JobSpec{Data: data}, "spec.method: not set"},
		{"unknown method", &pb.JobSpec{Method: "svm", Data: data}, "spec.method: unknown method"},
		{"kernel", &pb.JobSpec{Method: "gl", Kernel: "cubic", Data: data}, "spec.kernel:"},
		{"one bound", &pb.JobSpec{Method: "gl", LengthscaleBounds: []float64{1}, Data: data}, "spec.lengthscale_bounds: 1 values; give two"},
		{"three bounds", &pb.JobSpec{Method: "gl", NoiseVarianceBounds: []float64{1, 2, 3}, Data: data}, "spec.noise_variance_bounds: 3 values"},
		{"inverted", &pb.JobSpec{Method: "gl", SignalVarianceBounds: []float64{2, 1}, Data: data}, "spec.signal_variance_bounds: lower bound 2 is above upper bound 1; swap them"},
		{"negative bound", &pb.JobSpec{Method: "gl", LengthscaleBounds: []float64{-1, 1}, Data: data}, "spec.lengthscale_bounds:"},
		{"max iter", &pb.JobSpec{Method: "gl", MaxIter: -1, Data: data}, "spec.max_iter:"},
		{"odd features", &pb.JobSpec{Method: "rff", Features: 3, Data: data}, "spec.features:"},
		{"negative features", &pb.JobSpec{Method: "rff", Features: -2, Data: data}, "spec.features: -2 is negative"},
		{"negative max features", &pb.JobSpec{Method: "gl", Settings: &pb.JobSpec_Gl{Gl: &pb.GLSettings{MaxFeatures: -2}}, Data: data}, "spec.max_features: -2 is negative"},
		{"features for gl", &pb.JobSpec{Method: "gl", Settings: &pb.JobSpec_Rff{Rff: &pb.RFFSettings{Features: 8}}, Data: data}, "spec." + train.WrongMethod("features", "gl").Error()},
		{"nodes", &pb.JobSpec{Method: "gl", NodesPerDim: []int32{0}, Data: data}, "spec.nodes_per_dim:"},
		{"box", &pb.JobSpec{Method: "gl", GlBox: []float64{-1}, Data: data}, "spec.gl_box:"},
		{"shards", &pb.JobSpec{Method: "gl", Shards: -1, Data: data}, "spec.shards: -1 is negative"},
		{"timeout", &pb.JobSpec{Method: "gl", ShardTimeoutSeconds: -5, Data: data}, "spec.shard_timeout_seconds:"},
		{"no data", &pb.JobSpec{Method: "gl"}, "spec.data.uri: empty"},
		{"blank uri", &pb.JobSpec{Method: "gl", Data: &pb.DataSource{Uri: "  "}}, "spec.data.uri: empty"},
		{"format", &pb.JobSpec{Method: "gl", Data: &pb.DataSource{Uri: "d", Format: "parquet"}}, "spec.data.format: unknown format \"parquet\""},
		{"csv split", &pb.JobSpec{Method: "gl", Data: &pb.DataSource{Uri: "d", Split: 2}}, "spec.data.split: 2 is set for a CSV source"},
		{"uci split", &pb.JobSpec{Method: "gl", Data: &pb.DataSource{Uri: "d", Format: "uci", Split: 10}}, "spec.data.split: 10 is out of range"},
		{"uci header", &pb.JobSpec{Method: "gl", Data: &pb.DataSource{Uri: "d", Format: "uci", Header: true}}, "spec.data: a UCI dataset fixes its columns"},
		{"name without header", &pb.JobSpec{Method: "gl", Data: &pb.DataSource{Uri: "d", Columns: []string{"a"}}}, "spec.data.columns: column \"a\" is a name"},
		{"target without header", &pb.JobSpec{Method: "gl", Data: &pb.DataSource{Uri: "d", Target: "y"}}, "spec.data.target:"},
		// The limits a raw gRPC client meets as the CLI does.
		{"shards limit", &pb.JobSpec{Method: "gl", Shards: 2_000_000_000, Data: data}, "spec.shards: 2000000000 is more than the limit 1048576"},
		{"features limit", &pb.JobSpec{Method: "rff", Features: 1 << 20, Data: data}, "spec.features: 1048576 is more than the limit 65536"},
		{"max features limit", &pb.JobSpec{Method: "gl", MaxFeatures: 1 << 30, Data: data}, "spec.max_features:"},
		{"eigenfunctions limit", &pb.JobSpec{Method: "grief", Eigenfunctions: 1 << 20, Data: data}, "spec.eigenfunctions:"},
		{"iterations limit", &pb.JobSpec{Method: "gl", MaxIter: 1 << 30, Data: data}, "spec.max_iter:"},
		{"exact rows limit", &pb.JobSpec{Method: "exact", ExactMaxRows: 1 << 20, Data: data}, "spec.exact_max_rows:"},
		{"nodes limit", &pb.JobSpec{Method: "gl", NodesPerDim: []int32{1 << 20}, Data: data}, "spec.nodes_per_dim: 1048576 nodes"},
		{"dims limit", &pb.JobSpec{Method: "gl", GlBox: make([]float64, 2000), Data: data}, "spec.gl_box: 2000 entries"},
		{"cg iters limit", &pb.JobSpec{Method: "cg", CgIters: 1 << 20, Data: data}, "spec.cg_iters:"},
		{"timeout limit", &pb.JobSpec{Method: "gl", ShardTimeoutSeconds: 1 << 30, Data: data}, "spec.shard_timeout_seconds:"},
		{"nan bound", &pb.JobSpec{Method: "gl", LengthscaleBounds: []float64{math.NaN(), 1}, Data: data}, "spec.lengthscale_bounds: NaN is not a finite number"},
		{"uri limit", &pb.JobSpec{Method: "gl", Data: &pb.DataSource{Uri: strings.Repeat("a", 5000)}}, "spec.data.uri: 5000 bytes"},
		{"spec size", &pb.JobSpec{Method: "gl", Data: &pb.DataSource{Uri: "d", Header: true, Columns: slices.Repeat([]string{strings.Repeat("c", 1000)}, 100)}}, "spec: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := planFromSpec(tc.js)
			if status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), tc.want) {
				t.Fatalf("error %v, want InvalidArgument starting %q", err, tc.want)
			}
		})
	}
	// UCI sources with a split in range are fine.
	if _, err := planFromSpec(&pb.JobSpec{Method: "exact", Data: &pb.DataSource{Uri: "dir", Format: "uci", Split: 9}}); err != nil {
		t.Fatal(err)
	}
}

func TestValidJobID(t *testing.T) {
	for id, want := range map[string]bool{
		"a": true, "job-1.2_x": true, "9": true, "": false, "-a": false, ".a": false, "a b": false, "a/b": false,
		strings.Repeat("a", 128): true, strings.Repeat("a", 129): false, "é": false,
	} {
		if got := validJobID(id); got != want {
			t.Errorf("validJobID(%q) = %v", id, got)
		}
	}
}
