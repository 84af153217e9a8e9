package worker

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/train"
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
	w := startWorker(t, Config{Cores: 2, JoinToken: "tok"})
	c := workerClient(t, w.Addr(), "tok")
	src := shard.Source{URI: path, Header: true, Target: "y"}
	refs, err := shard.Plan(ctx, src, 3)
	if err != nil {
		t.Fatal(err)
	}
	op := &train.KernelOp{Kernel: kernel.Kernel{Family: kernel.RBF, Lengthscales: []float64{1.3}, SignalVariance: 0.9}, Offsets: []int{0}}
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
	for _, task := range []*train.KernelTask{
		{Op: op, Kind: train.KernelMVM, K: 2, V: vec(2, 3)},
		{Op: op, Kind: train.KernelMVM, K: 1, V: []float64{0.5, -2, 3}, Idx: []int{9, n - 1, 0}},
		{Op: op, Kind: train.KernelQuad, K: 2, A: vec(2, 5), B: vec(2, 8)},
		{Op: op, Kind: train.KernelCols, Idx: []int{n - 1, 0, 7}},
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
	op2 := &train.KernelOp{Kernel: kernel.Kernel{Family: kernel.RBF, Lengthscales: []float64{1, 1}, SignalVariance: 1},
		X: make([]float64, 2*tabs[0].N()), Offsets: []int{0, tabs[0].N()}}
	msg, err := wire.EncodeTask(&train.KernelTask{Op: op2, Kind: train.KernelCols, Idx: []int{0}})
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
		{shard.MomentsTask{}, taskKindMoments},
		{shard.DistinctTask{Cap: 2}, taskKindDistinct},
		{shard.SampleTask{K: 2}, taskKindSample},
		{&train.RowsTask{Transform: shard.Transform{XMean: []float64{0}, XScale: []float64{1}, YScale: 1}}, taskKindRows},
		{&train.KernelTask{Op: &train.KernelOp{Kernel: kernel.Kernel{Lengthscales: []float64{1}, SignalVariance: 1}, X: []float64{0}, Offsets: []int{0, 1}},
			Kind: train.KernelCols, Idx: []int{0}}, taskKindKernel},
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
