package coordinator

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/engine/remote"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/train"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// jobPlan is what a job runs: the training settings, where the rows come from, the fixed
// shard count (0: automatic, see shard.Plan) and how long a shard may wait for a worker.
type jobPlan struct {
	Spec         train.Spec
	Source       shard.Source
	Shards       int
	ShardTimeout time.Duration
}

// specError is the InvalidArgument status for a bad JobSpec field.
func specError(field, format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, "spec.%s: %s", field, fmt.Sprintf(format, args...))
}

// planFromSpec checks a submitted JobSpec up front and converts it (train.SpecFromJobSpec:
// the method known, its settings its own, the bounds sane, the defaults filled in) with its
// data source, shard count and timeout. Errors are codes.InvalidArgument statuses that name
// the JobSpec field and say what to change. SubmitJob calls it before the job is stored, and
// the runner again on the stored spec.
func planFromSpec(js *pb.JobSpec) (jobPlan, error) {
	if js == nil {
		return jobPlan{}, status.Error(codes.InvalidArgument, "spec: missing: give the method and the data")
	}
	if err := CheckLimits(js); err != nil {
		var le *LimitError
		if errors.As(err, &le) && le.Field != "spec" {
			return jobPlan{}, specError(le.Field, "%s", le.Msg)
		}
		return jobPlan{}, status.Errorf(codes.InvalidArgument, "%v", err)
	}
	for _, f := range []struct {
		field string
		v     int32
	}{{"shards", js.GetShards()}, {"shard_timeout_seconds", js.GetShardTimeoutSeconds()}} {
		if f.v < 0 {
			return jobPlan{}, specError(f.field, "%d is negative; give a positive number, or 0 for the default", f.v)
		}
	}
	s, err := train.SpecFromJobSpec(js)
	if err != nil {
		return jobPlan{}, trainSpecError(err)
	}
	src, err := sourceFromSpec(js.GetData())
	if err != nil {
		return jobPlan{}, err
	}
	p := jobPlan{Spec: s, Source: src, Shards: int(js.GetShards()), ShardTimeout: remote.DefaultShardTimeout}
	if v := js.GetShardTimeoutSeconds(); v > 0 {
		p.ShardTimeout = time.Duration(v) * time.Second
	}
	return p, nil
}

// trainSpecError turns a train.SpecFromJobSpec error ("lengthscale-bounds: ...", named after
// the CLI flag) into an InvalidArgument status naming the JobSpec field.
func trainSpecError(err error) error {
	msg := err.Error()
	if name, rest, ok := strings.Cut(msg, ": "); ok && !strings.Contains(name, " ") {
		return specError(strings.ReplaceAll(name, "-", "_"), "%s", rest)
	}
	return status.Errorf(codes.InvalidArgument, "spec: %s", msg)
}

// sourceFromSpec checks and converts the data source.
func sourceFromSpec(d *pb.DataSource) (shard.Source, error) {
	if d == nil || strings.TrimSpace(d.GetUri()) == "" {
		return shard.Source{}, specError("data.uri", "empty: give a path, file:// URL or http(s):// URL of a CSV file, or a UCI dataset directory")
	}
	src := shard.Source{
		URI: strings.TrimSpace(d.GetUri()), Format: strings.ToLower(d.GetFormat()), Split: int(d.GetSplit()),
		Header: d.GetHeader(), Target: d.GetTarget(), Columns: append([]string(nil), d.GetColumns()...), TrainRows: int(d.GetTrainRows()),
	}
	if d.GetTrainRows() < 0 || d.GetTrainRows() > 1<<40 {
		return shard.Source{}, specError("data.train_rows", "%d: give a positive number of rows, or 0 for all", d.GetTrainRows())
	}
	if len(src.Columns) == 0 {
		src.Columns = nil
	}
	switch src.Format {
	case "", "csv":
		src.Format = "csv"
		if src.Split != 0 {
			return shard.Source{}, specError("data.split", "%d is set for a CSV source; splits are for format \"uci\": drop it", src.Split)
		}
	case "uci":
		if src.Split < 0 || src.Split > 9 {
			return shard.Source{}, specError("data.split", "%d is out of range; a UCI dataset has splits 0 to 9", src.Split)
		}
		if src.Header || src.Target != "" || src.Columns != nil {
			return shard.Source{}, specError("data", "a UCI dataset fixes its columns (no header, inputs first, target last): drop header, target and columns")
		}
	default:
		return shard.Source{}, specError("data.format", "unknown format %q; use \"csv\" or \"uci\"", d.GetFormat())
	}
	if !src.Header {
		for _, c := range src.Columns {
			if !isIndex(c) {
				return shard.Source{}, specError("data.columns", "column %q is a name but the data has no header; set data.header or give 0-based column indices", c)
			}
		}
		if src.Target != "" && !isIndex(src.Target) {
			return shard.Source{}, specError("data.target", "column %q is a name but the data has no header; set data.header or give a 0-based column index", src.Target)
		}
	}
	return src, nil
}

// isIndex reports whether a column selection is a 0-based index.
func isIndex(s string) bool {
	_, err := strconv.Atoi(strings.TrimSpace(s))
	return err == nil
}

// specFromPlan is the JobSpec form of p: the spec as stored, with every default filled in.
func specFromPlan(p jobPlan) *pb.JobSpec {
	return JobSpecOf(p.Spec, p.Source, p.Shards, p.ShardTimeout)
}

// JobSpecOf is the JobSpec message of a training spec (train.Spec.JobSpec: the common
// fields and the settings oneof), its data source, the fixed shard count (0: automatic) and
// the shard timeout (0: the coordinator's default).
func JobSpecOf(s train.Spec, src shard.Source, shards int, shardTimeout time.Duration) *pb.JobSpec {
	js := s.JobSpec()
	js.Data = &pb.DataSource{
		Uri: src.URI, Format: src.Format, Split: int32(src.Split),
		Header: src.Header, Target: src.Target, Columns: src.Columns, TrainRows: int64(src.TrainRows),
	}
	js.Shards = int32(shards)
	js.ShardTimeoutSeconds = int32(shardTimeout / time.Second)
	return js
}

// encodeSpec is the stored form of a job's spec: the deterministic protobuf encoding.
func encodeSpec(js *pb.JobSpec) ([]byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(js)
	if err != nil {
		return nil, fmt.Errorf("encode job spec: %w", err)
	}
	return b, nil
}

// decodeSpec reads a stored spec.
func decodeSpec(b []byte) (*pb.JobSpec, error) {
	js := &pb.JobSpec{}
	if err := proto.Unmarshal(b, js); err != nil {
		return nil, fmt.Errorf("decode job spec: %w", err)
	}
	return js, nil
}
