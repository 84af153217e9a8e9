// Package wire converts between the in-process forms of tasks, shard statistics, shard
// references and sources (tasks, reduce, shard) and their gRPC messages (proto/gpreduce/v1).
// Tasks are encoded and decoded by their kind's entry in the task registry (internal/tasks),
// looked up by the task's type or by the field set in the oneof of pb.Task; the Decoder holds
// the caches those decoders share and the broadcast blobs (blob.go). Statistics are encoded
// and decoded by their entry in the statistics registry of internal/tasks (EncodeStats and
// DecodeStats delegate to it). The remote engine encodes
// tasks and decodes statistics with it; workers do the reverse. A round trip preserves every
// bit.
package wire
