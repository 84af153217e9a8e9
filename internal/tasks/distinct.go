package tasks

import (
	"fmt"
	"math"

	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/shard"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// The distinct kind: shard.DistinctTask, the distinct values of each column up to a cap.
func init() {
	register(Kind{
		Name:  "distinct",
		Types: []engine.Task{shard.DistinctTask{}, (*shard.DistinctTask)(nil)},
		Encode: func(task engine.Task) (proto.Message, error) {
			var t shard.DistinctTask
			switch v := task.(type) {
			case shard.DistinctTask:
				t = v
			case *shard.DistinctTask:
				t = *v
			}
			if t.Cap < 0 || t.Cap > math.MaxInt32-1 {
				return nil, fmt.Errorf("distinct task with cap %d", t.Cap)
			}
			return &pb.DistinctTask{Cap: int32(t.Cap)}, nil
		},
		Decode: func(_ Env, msg proto.Message) (engine.Task, error) {
			m, err := message[*pb.DistinctTask]("distinct", msg)
			if err != nil {
				return nil, err
			}
			c := m.GetCap()
			if c < 0 {
				return nil, fmt.Errorf("distinct task with cap %d", c)
			}
			return shard.DistinctTask{Cap: int(c)}, nil
		},
		Example: func() engine.Task { return shard.DistinctTask{Cap: 12} },
	})
}
