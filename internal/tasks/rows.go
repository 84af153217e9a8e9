package tasks

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// RowsTask returns a shard's rows standardized, for methods that need all rows in one place.
type RowsTask struct {
	Transform shard.Transform
}

// Map standardizes the shard's rows.
func (t *RowsTask) Map(_ context.Context, _ shard.Ref, tab *shard.Table) (reduce.Stats, error) {
	r := &reduce.Rows{D: tab.D, X: make([]float64, len(tab.X)), Y: make([]float64, tab.N())}
	for i := 0; i < tab.N(); i++ {
		t.Transform.ApplyRow(tab.Row(i), r.X[i*tab.D:(i+1)*tab.D])
		r.Y[i] = t.Transform.Y(tab.Y[i])
	}
	return r, nil
}

func init() {
	register(Kind{
		Name:  "rows",
		Types: []engine.Task{(*RowsTask)(nil)},
		Encode: func(t engine.Task) (proto.Message, error) {
			return &pb.RowsTask{Transform: EncodeTransform(t.(*RowsTask).Transform)}, nil
		},
		Decode: func(_ Env, m proto.Message) (engine.Task, error) {
			r, err := message[*pb.RowsTask]("rows", m)
			if err != nil {
				return nil, err
			}
			tf, err := DecodeTransform(r.GetTransform())
			if err != nil {
				return nil, err
			}
			return &RowsTask{Transform: tf}, nil
		},
		Inputs: func(t engine.Task) []int {
			return []int{len(t.(*RowsTask).Transform.XMean)}
		},
		Example: func() engine.Task { return &RowsTask{Transform: smallTransform()} },
	})
}
