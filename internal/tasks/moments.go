package tasks

import (
	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/shard"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// The moments kind: shard.MomentsTask, the column moments of the data pass. Its message
// has no fields.
func init() {
	register(Kind{
		Name:  "moments",
		Types: []engine.Task{shard.MomentsTask{}, (*shard.MomentsTask)(nil)},
		Encode: func(engine.Task) (proto.Message, error) {
			return &pb.MomentsTask{}, nil
		},
		Decode: func(_ Env, m proto.Message) (engine.Task, error) {
			if _, err := message[*pb.MomentsTask]("moments", m); err != nil {
				return nil, err
			}
			return shard.MomentsTask{}, nil
		},
		Example: func() engine.Task { return shard.MomentsTask{} },
	})
}
