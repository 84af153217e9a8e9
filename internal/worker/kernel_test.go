package worker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/tasks"
	"github.com/gpreduce/gpreduce/internal/wire"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// statsBytes is the deterministic encoding of a statistic: equal bytes mean equal bits.
func statsBytes(t *testing.T, s reduce.Stats) []byte {
	t.Helper()
	m, err := wire.EncodeStats(s)
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRunKernelTasks runs the kernel map steps through the worker's gRPC service on CSV
// byte-range shards and checks each shard's statistic bit for bit against the task run
// locally; a kernel of another input dimension is refused as INVALID_ARGUMENT.
func TestRunKernelTasks(t *testing.T) {
	ctx := context.Background()
	path := writeData(t, t.TempDir(), 400)
	w := startWorker(t, Config{Cores: 2, JoinToken: "tok", UnregisteredTasks: true})
	c := workerClient(t, w.Addr(), "tok")
	src := shard.Source{URI: path, Header: true, Target: "y"}
	refs, err := shard.Plan(ctx, src, 3)
	if err != nil {
		t.Fatal(err)
	}
	op := &tasks.KernelOp{Kernel: kernel.Kernel{Family: kernel.RBF, Lengthscales: []float64{1.3}, SignalVariance: 0.9}, Offsets: []int{0}}
	var tabs []*shard.Table
	for _, r := range refs {
		tab, err := shard.Load(ctx, src, r)
		if err != nil {
			t.Fatal(err)
		}
		tabs = append(tabs, tab)
		op.X = append(op.X, tab.X...)
		op.Offsets = append(op.Offsets, op.Offsets[len(op.Offsets)-1]+tab.N())
	}
	n := op.N()
	vec := func(k int, s float64) []float64 {
		v := make([]float64, n*k)
		for i := range v {
			v[i] = float64(i%17) - s
		}
		return v
	}
	for _, task := range []*tasks.KernelTask{
		{Op: op, Kind: tasks.KernelMVM, K: 2, V: vec(2, 3)},
		{Op: op, Kind: tasks.KernelMVM, K: 1, V: []float64{0.5, -2, 3}, Idx: []int{9, n - 1, 0}},
		{Op: op, Kind: tasks.KernelQuad, K: 2, A: vec(2, 5), B: vec(2, 8)},
		{Op: op, Kind: tasks.KernelCols, Idx: []int{n - 1, 0, 7}},
	} {
		msg, err := wire.EncodeTask(task)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range refs {
			want, err := task.Map(ctx, r, tabs[i])
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.RunTask(ctx, &pb.RunTaskRequest{JobId: "job-1", Round: 1, Source: wire.EncodeSource(src), Shard: wire.EncodeRef(r), Task: msg})
			if err != nil {
				t.Fatalf("kind %d, shard %d: %v", task.Kind, i, err)
			}
			got, err := wire.DecodeStats(resp.Stats)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(statsBytes(t, got), statsBytes(t, want)) {
				t.Fatalf("kind %d, shard %d: the worker's result differs from the local one", task.Kind, i)
			}
		}
	}

	// A kernel over 2 inputs does not fit a shard of 1.
	op2 := &tasks.KernelOp{Kernel: kernel.Kernel{Family: kernel.RBF, Lengthscales: []float64{1, 1}, SignalVariance: 1},
		X: make([]float64, 2*tabs[0].N()), Offsets: []int{0, tabs[0].N()}}
	msg, err := wire.EncodeTask(&tasks.KernelTask{Op: op2, Kind: tasks.KernelCols, Idx: []int{0}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.RunTask(ctx, &pb.RunTaskRequest{JobId: "job-1", Round: 2, Source: wire.EncodeSource(src), Shard: wire.EncodeRef(refs[0]), Task: msg})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "2 inputs but the shard has 1") ||
		!strings.Contains(err.Error(), "kernel task") {
		t.Errorf("2-D kernel on a 1-D shard: %v", err)
	}
	// A malformed kernel task is refused before the shard is read.
	_, err = c.RunTask(ctx, &pb.RunTaskRequest{JobId: "job-1", Round: 3, Source: wire.EncodeSource(src), Shard: wire.EncodeRef(refs[0]),
		Task: &pb.Task{Kind: &pb.Task_Kernel{Kernel: &pb.KernelTask{Kind: 1}}}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "decode task") {
		t.Errorf("kernel task without an op: %v", err)
	}
}

func TestTaskKind(t *testing.T) {
	for _, tc := range []struct {
		task engine.Task
		want string
	}{
		{shard.MomentsTask{}, "moments"},
		{shard.DistinctTask{Cap: 2}, "distinct"},
		{shard.SampleTask{K: 2}, "sample"},
		{&tasks.RowsTask{Transform: shard.Transform{XMean: []float64{0}, XScale: []float64{1}, YScale: 1}}, "rows"},
		{&tasks.KernelTask{Op: &tasks.KernelOp{Kernel: kernel.Kernel{Lengthscales: []float64{1}, SignalVariance: 1}, X: []float64{0}, Offsets: []int{0, 1}},
			Kind: tasks.KernelCols, Idx: []int{0}}, "kernel"},
	} {
		m, err := wire.EncodeTask(tc.task)
		if err != nil {
			t.Fatal(err)
		}
		if got := taskKind(m); got != tc.want {
			t.Errorf("%T: kind %q, want %q", tc.task, got, tc.want)
		}
	}
	if got := taskKind(&pb.Task{}); got != taskKindUnknown {
		t.Errorf("empty task: kind %q", got)
	}
}

// TestRunKernelBlobs: a task naming the kernel inputs by hash (wire.Slim) runs once the
// worker holds them from a full task, bit for bit like the full one; before that, or after the
// worker lost them, it is FAILED_PRECONDITION with the missing-blob detail, and the blob
// metrics count it. A full task whose inputs do not match their hash is INVALID_ARGUMENT.
func TestRunKernelBlobs(t *testing.T) {
	ctx := context.Background()
	path := writeData(t, t.TempDir(), 300)
	src := shard.Source{URI: path, Header: true, Target: "y"}
	refs, err := shard.Plan(ctx, src, 2)
	if err != nil {
		t.Fatal(err)
	}
	op := &tasks.KernelOp{Kernel: kernel.Kernel{Family: kernel.Matern32, Lengthscales: []float64{0.9}, SignalVariance: 1.2}, Offsets: []int{0}}
	var tabs []*shard.Table
	for _, r := range refs {
		tab, err := shard.Load(ctx, src, r)
		if err != nil {
			t.Fatal(err)
		}
		tabs = append(tabs, tab)
		op.X = append(op.X, tab.X...)
		op.Offsets = append(op.Offsets, op.Offsets[len(op.Offsets)-1]+tab.N())
	}
	op2 := &tasks.KernelOp{Kernel: op.Kernel, X: op.X, Offsets: op.Offsets}
	op2.Kernel.SignalVariance = 2.5 // another hyperparameter value over the same inputs
	n := op.N()
	hash := tasks.HashFloats(op.X)
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(i%13) - 6
	}
	encode := func(op *tasks.KernelOp) (task *tasks.KernelTask, full, slim *pb.Task) {
		t.Helper()
		task = &tasks.KernelTask{Op: op, Kind: tasks.KernelMVM, K: 1, V: v}
		full, err := wire.EncodeTask(task)
		if err != nil {
			t.Fatal(err)
		}
		slim, blobs := wire.Slim(full)
		if len(blobs) != 1 || blobs[0] != hash {
			t.Fatalf("blobs %x", blobs)
		}
		return task, full, slim
	}
	task1, full1, slim1 := encode(op)
	_, _, slim2 := encode(op2)
	badHash := proto.Clone(full1).(*pb.Task)
	badHash.GetKernel().GetOp().XSha256[0] ^= 0xff

	const (
		ok = iota
		missing
		invalid
	)
	type step struct {
		what string
		task *pb.Task // nil: clear the worker's blob cache
		want int
	}
	tests := []struct {
		name         string
		budget       int64
		steps        []step
		hits, misses int // per shard
	}{
		{"default budget", 0, []step{
			{"slim before the full task", slim1, missing},
			{"full with a wrong hash", badHash, invalid},
			{"slim after the wrong hash", slim1, missing},
			{"full", full1, ok},
			{"slim", slim1, ok},
			{"slim of another op over the same inputs", slim2, ok},
			{"clear the blobs", nil, ok},
			{"slim of a cached op", slim1, ok},
			{"full again", full1, ok},
		}, 3, 2},
		{"budget below the inputs", int64(8*len(op.X) - 8), []step{
			{"full", full1, ok},
			{"slim of the same op (cached op)", slim1, ok},
			{"slim of another op: the inputs were not kept", slim2, missing},
		}, 1, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := startWorker(t, Config{Cores: 2, MetricsAddr: "127.0.0.1:0", BlobCacheBytes: tc.budget, UnregisteredTasks: true})
			c := workerClient(t, w.Addr(), "")
			for _, s := range tc.steps {
				if s.task == nil {
					w.dec.Blobs().Clear()
					continue
				}
				for i, r := range refs {
					resp, err := c.RunTask(ctx, &pb.RunTaskRequest{JobId: "job-1", Round: 1, Source: wire.EncodeSource(src), Shard: wire.EncodeRef(r), Task: s.task})
					switch s.want {
					case ok:
						if err != nil {
							t.Fatalf("%s, shard %d: %v", s.what, i, err)
						}
						if s.task != slim2 {
							want, err := task1.Map(ctx, r, tabs[i])
							if err != nil {
								t.Fatal(err)
							}
							got, err := wire.DecodeStats(resp.Stats)
							if err != nil {
								t.Fatal(err)
							}
							if !bytes.Equal(statsBytes(t, got), statsBytes(t, want)) {
								t.Fatalf("%s, shard %d: the worker's result differs from the local one", s.what, i)
							}
						}
					case missing:
						h, isMissing := wire.MissingBlobOf(err)
						if status.Code(err) != codes.FailedPrecondition || !isMissing || h != hash ||
							!strings.Contains(err.Error(), fmt.Sprintf("missing blob sha256:%x", hash)) {
							t.Fatalf("%s, shard %d: %v, want FAILED_PRECONDITION for the missing blob", s.what, i, err)
						}
					case invalid:
						if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "does not match the inputs") {
							t.Fatalf("%s, shard %d: %v, want INVALID_ARGUMENT for the hash mismatch", s.what, i, err)
						}
					}
				}
			}
			body := scrape(t, w.MetricsAddr())
			st := w.dec.Blobs().Stats()
			for _, want := range []string{
				fmt.Sprintf("gpreduce_worker_blob_cache_hits_total %d", tc.hits*len(refs)),
				fmt.Sprintf("gpreduce_worker_blob_cache_misses_total %d", tc.misses*len(refs)),
				fmt.Sprintf("gpreduce_worker_blob_cache_bytes %d", st.Bytes),
				fmt.Sprintf("gpreduce_worker_blob_cache_blobs %d", st.Blobs),
				fmt.Sprintf(`gpreduce_worker_tasks_total{kind="kernel",outcome="missing_blob"} %d`, tc.misses*len(refs)),
			} {
				if !strings.Contains(body, want) {
					t.Errorf("metrics lack %q", want)
				}
			}
			if tc.budget > 0 && st.Bytes > tc.budget {
				t.Errorf("%d blob bytes held over a budget of %d", st.Bytes, tc.budget)
			}
			if tc.budget == 0 && st.Bytes != int64(8*len(op.X)) {
				t.Errorf("%d blob bytes held, want the %d of the inputs", st.Bytes, 8*len(op.X))
			}
		})
	}
}

// scrape returns the worker's metrics page.
func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}
