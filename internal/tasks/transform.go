package tasks

import (
	"fmt"

	"github.com/gpreduce/gpreduce/internal/shard"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// EncodeTransform returns the message form of a standardization.
func EncodeTransform(t shard.Transform) *pb.Transform {
	return &pb.Transform{XMean: t.XMean, XScale: t.XScale, YMean: t.YMean, YScale: t.YScale}
}

// DecodeTransform checks and returns a standardization.
func DecodeTransform(m *pb.Transform) (shard.Transform, error) {
	if m == nil || len(m.XMean) == 0 || len(m.XMean) != len(m.XScale) || !(m.YScale > 0) {
		return shard.Transform{}, fmt.Errorf("malformed transform")
	}
	return shard.Transform{XMean: m.XMean, XScale: m.XScale, YMean: m.YMean, YScale: m.YScale}, nil
}
