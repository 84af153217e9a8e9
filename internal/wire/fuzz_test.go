package wire

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/features"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/train"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// FuzzDecodeTask: no task message, however malformed, panics the decoder, and a decoded
// kernel task runs on every shard of its op without panicking.
func FuzzDecodeTask(f *testing.F) {
	tf := shard.Transform{XMean: []float64{0, 0}, XScale: []float64{1, 1}, YScale: 1}
	gl, err := features.NewGL(kernel.RBF, []float64{3, 3}, []int{4, 5})
	if err != nil {
		f.Fatal(err)
	}
	op := &train.KernelOp{
		Kernel:  kernel.Kernel{Family: kernel.Matern52, Lengthscales: []float64{0.5, 2}, SignalVariance: 1.5},
		X:       []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
		Offsets: []int{0, 2, 2, 5},
	}
	seeds := []engine.Task{
		shard.MomentsTask{},
		shard.DistinctTask{Cap: 3},
		shard.SampleTask{K: 4, Seed: 1},
		&train.GramTask{Features: gl, Transform: tf},
		&train.RowsTask{Transform: tf},
		&train.KernelTask{Op: op, Kind: train.KernelMVM, K: 2, V: []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		&train.KernelTask{Op: op, Kind: train.KernelQuad, K: 1, A: []float64{1, 2, 3, 4, 5}, B: []float64{5, 4, 3, 2, 1}},
		&train.KernelTask{Op: op, Kind: train.KernelCols, Idx: []int{4, 0}},
		&train.KernelTask{Op: op, Kind: train.KernelMVM, K: 1, V: []float64{2, -1}, Idx: []int{3, 1}},
	}
	for _, s := range seeds {
		m, err := EncodeTask(s)
		if err != nil {
			f.Fatal(err)
		}
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m pb.Task
		if proto.Unmarshal(b, &m) != nil {
			return
		}
		task, err := NewDecoder().DecodeTask(&m)
		if err != nil {
			return
		}
		kt, ok := task.(*train.KernelTask)
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
