package coordinator

import (
	"fmt"
	"math"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// Limits on the fields of a JobSpec. The coordinator checks them on every submission (a raw
// gRPC client gets the same answer as the CLI, which checks them before sending), so no job
// can ask for more shards, features or iterations than a cluster can hold. Memory sets most
// of them: gl and rff keep an s x s Gram matrix (8 s^2 bytes: 32 GiB at s = 2^16), exact a
// Cholesky factor of n x n.
const (
	MaxShards              = 1 << 20   // shards
	MaxIterations          = 1 << 20   // max_iter
	MaxFeatures            = 1 << 16   // features, max_features, eigenfunctions
	MaxExactRows           = 1 << 16   // exact_max_rows
	MaxDims                = 1 << 10   // entries of nodes_per_dim, gl_box and data.columns
	MaxNodesPerDim         = 1 << 16   // each entry of nodes_per_dim
	MaxSolverIterations    = 1 << 16   // cg_iters, rr_min, variance_rank, precond_rank
	MaxSubset              = 1 << 30   // subset
	MaxShardTimeoutSeconds = 7 * 86400 // shard_timeout_seconds: a week
	MaxSpecBytes           = 64 << 10  // the encoded JobSpec
	MaxURIBytes            = 4096      // data.uri
	MaxColumnBytes         = 1024      // data.target and each of data.columns
)

// LimitError is a JobSpec field outside its limit. Field is the snake_case name (a job
// file's key).
type LimitError struct {
	Field string
	Msg   string
}

// Error names the field and the limit.
func (e *LimitError) Error() string { return e.Field + ": " + e.Msg }

// CheckLimits checks the JobSpec fields against the limits above (and that the floats are
// finite); the method-specific rules are train.Spec.Validate's.
func CheckLimits(js *pb.JobSpec) error {
	if js == nil {
		return nil
	}
	if n := proto.Size(js); n > MaxSpecBytes {
		return &LimitError{"spec", fmt.Sprintf("%d bytes encoded, more than %d; a job spec is settings and a data address, not data", n, MaxSpecBytes)}
	}
	for _, c := range []struct {
		field string
		v     int32
		max   int64
	}{
		{"shards", js.GetShards(), MaxShards},
		{"max_iter", js.GetMaxIter(), MaxIterations},
		{"shard_timeout_seconds", js.GetShardTimeoutSeconds(), MaxShardTimeoutSeconds},
	} {
		if int64(c.v) > c.max {
			return &LimitError{c.field, fmt.Sprintf("%d is more than the limit %d; lower it", c.v, c.max)}
		}
	}
	if n := len(js.GetData().GetColumns()); n > MaxDims {
		return &LimitError{"data.columns", fmt.Sprintf("%d entries, more than the limit %d input columns", n, MaxDims)}
	}
	for _, f := range []struct {
		field string
		v     []float64
	}{{"lengthscale_bounds", js.GetLengthscaleBounds()}, {"signal_variance_bounds", js.GetSignalVarianceBounds()},
		{"noise_variance_bounds", js.GetNoiseVarianceBounds()}} {
		for _, v := range f.v {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return &LimitError{f.field, fmt.Sprintf("%g is not a finite number", v)}
			}
		}
	}
	if err := checkSettingLimits(js); err != nil {
		return err
	}
	if n := len(js.GetData().GetUri()); n > MaxURIBytes {
		return &LimitError{"data.uri", fmt.Sprintf("%d bytes, more than the limit %d", n, MaxURIBytes)}
	}
	if n := len(js.GetData().GetTarget()); n > MaxColumnBytes {
		return &LimitError{"data.target", fmt.Sprintf("%d bytes, more than the limit %d", n, MaxColumnBytes)}
	}
	for _, c := range js.GetData().GetColumns() {
		if len(c) > MaxColumnBytes {
			return &LimitError{"data.columns", fmt.Sprintf("a name of %d bytes, more than the limit %d", len(c), MaxColumnBytes)}
		}
	}
	return nil
}

// settingLimits are the limits of the methods' settings, by field name (a setting two methods
// share has one limit).
var settingLimits = map[protoreflect.Name]int64{
	"features": MaxFeatures, "max_features": MaxFeatures, "eigenfunctions": MaxFeatures,
	"exact_max_rows": MaxExactRows, "cg_iters": MaxSolverIterations, "rr_min": MaxSolverIterations,
	"variance_rank": MaxSolverIterations, "precond_rank": MaxSolverIterations, "subset": MaxSubset,
}

// checkSettingLimits checks the method's settings, in the settings oneof or in the
// deprecated flat fields of an older client: whole numbers against settingLimits, lists
// (per input column) against MaxDims and nodes_per_dim's entries against MaxNodesPerDim,
// floats for being finite.
func checkSettingLimits(js *pb.JobSpec) error {
	var err error
	check := func(f protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		name := string(f.Name())
		var vals []protoreflect.Value
		if f.IsList() {
			if n := v.List().Len(); n > MaxDims {
				err = &LimitError{name, fmt.Sprintf("%d entries, more than the limit %d input columns", n, MaxDims)}
				return false
			}
			for i := 0; i < v.List().Len(); i++ {
				vals = append(vals, v.List().Get(i))
			}
		} else {
			vals = append(vals, v)
		}
		for _, x := range vals {
			switch f.Kind() {
			case protoreflect.Int32Kind, protoreflect.Int64Kind:
				if max, ok := settingLimits[f.Name()]; ok && x.Int() > max {
					err = &LimitError{name, fmt.Sprintf("%d is more than the limit %d; lower it", x.Int(), max)}
				} else if f.Name() == "nodes_per_dim" && x.Int() > MaxNodesPerDim {
					err = &LimitError{name, fmt.Sprintf("%d nodes is more than the limit %d per dimension", x.Int(), MaxNodesPerDim)}
				}
			case protoreflect.DoubleKind:
				if math.IsNaN(x.Float()) || math.IsInf(x.Float(), 0) {
					err = &LimitError{name, fmt.Sprintf("%g is not a finite number", x.Float())}
				}
			}
			if err != nil {
				return false
			}
		}
		return true
	}
	m := js.ProtoReflect()
	m.Range(func(f protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if f.Options().(*descriptorpb.FieldOptions).GetDeprecated() {
			return check(f, v)
		}
		return true
	})
	if err != nil {
		return err
	}
	if f := m.WhichOneof(m.Descriptor().Oneofs().ByName("settings")); f != nil {
		m.Get(f).Message().Range(check)
	}
	return err
}
