package tasks

import (
	"fmt"
	"math"

	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/shard"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// The sample kind: shard.SampleTask, a seeded uniform sample of a shard's rows.
func init() {
	register(Kind{
		Name:  "sample",
		Types: []engine.Task{shard.SampleTask{}, (*shard.SampleTask)(nil)},
		Encode: func(task engine.Task) (proto.Message, error) {
			var t shard.SampleTask
			switch v := task.(type) {
			case shard.SampleTask:
				t = v
			case *shard.SampleTask:
				t = *v
			}
			if t.K < 0 || t.K > math.MaxInt32 {
				return nil, fmt.Errorf("sample task of %d rows", t.K)
			}
			return &pb.SampleTask{K: int32(t.K), Seed: t.Seed}, nil
		},
		Decode: func(_ Env, msg proto.Message) (engine.Task, error) {
			m, err := message[*pb.SampleTask]("sample", msg)
			if err != nil {
				return nil, err
			}
			n := m.GetK()
			if n < 0 {
				return nil, fmt.Errorf("sample task of %d rows", n)
			}
			return shard.SampleTask{K: int(n), Seed: m.GetSeed()}, nil
		},
		Example: func() engine.Task { return shard.SampleTask{K: 7, Seed: 11} },
	})
}
