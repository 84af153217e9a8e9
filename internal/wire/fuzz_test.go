package wire

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/features"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/tasks"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// FuzzDecodeTask: no task message, however malformed, panics the decoder, and a decoded
// kernel task runs on every shard of its op without panicking. The decoder holds the inputs
// of the seed op as a blob, so slim seeds (inputs named by hash) decode too; only a slim op
// can fail for a missing blob.
func FuzzDecodeTask(f *testing.F) {
	tf := shard.Transform{XMean: []float64{0, 0}, XScale: []float64{1, 1}, YScale: 1}
	gl, err := features.NewGL(kernel.RBF, []float64{3, 3}, []int{4, 5})
	if err != nil {
		f.Fatal(err)
	}
	op := &tasks.KernelOp{
		Kernel:  kernel.Kernel{Family: kernel.Matern52, Lengthscales: []float64{0.5, 2}, SignalVariance: 1.5},
		X:       []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
		Offsets: []int{0, 2, 2, 5},
	}
	seeds := []engine.Task{
		shard.MomentsTask{},
		shard.DistinctTask{Cap: 3},
		shard.SampleTask{K: 4, Seed: 1},
		&tasks.GramTask{Features: gl, Transform: tf},
		&tasks.RowsTask{Transform: tf},
		&tasks.KernelTask{Op: op, Kind: tasks.KernelMVM, K: 2, V: []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		&tasks.KernelTask{Op: op, Kind: tasks.KernelQuad, K: 1, A: []float64{1, 2, 3, 4, 5}, B: []float64{5, 4, 3, 2, 1}},
		&tasks.KernelTask{Op: op, Kind: tasks.KernelCols, Idx: []int{4, 0}},
		&tasks.KernelTask{Op: op, Kind: tasks.KernelMVM, K: 1, V: []float64{2, -1}, Idx: []int{3, 1}},
	}
	add := func(m *pb.Task) {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range seeds {
		m, err := EncodeTask(s)
		if err != nil {
			f.Fatal(err)
		}
		add(m)
		if slim, blobs := Slim(m); len(blobs) > 0 {
			add(slim)
		}
	}
	// A slim op of an unknown blob, and a full op whose hash is not its inputs'.
	m, err := EncodeTask(seeds[len(seeds)-1])
	if err != nil {
		f.Fatal(err)
	}
	slim, _ := Slim(m)
	slim.GetKernel().GetOp().XSha256 = make([]byte, 32)
	add(slim)
	m.GetKernel().GetOp().XSha256 = make([]byte, 32)
	add(m)
	blob := tasks.HashFloats(op.X)
	f.Fuzz(func(t *testing.T, b []byte) {
		var m pb.Task
		if proto.Unmarshal(b, &m) != nil {
			return
		}
		dec := NewDecoder()
		dec.Blobs().Put(blob, op.X)
		task, err := dec.DecodeTask(&m)
		if errors.Is(err, ErrMissingBlob) && len(m.GetKernel().GetOp().GetX()) > 0 {
			t.Errorf("a full op failed for a missing blob: %v", err)
		}
		if err != nil {
			return
		}
		kt, ok := task.(*tasks.KernelTask)
		if !ok {
			return
		}
		for i := 0; i+1 < len(kt.Op.Offsets); i++ {
			if _, err := kt.Map(context.Background(), shard.Ref{Index: i}, nil); err != nil {
				t.Errorf("shard %d of a decoded kernel task: %v", i, err)
			}
		}
	})
}
