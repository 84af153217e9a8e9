// Package wire converts between the in-process forms of tasks, shard statistics, shard
// references and sources (train, reduce, shard) and their gRPC messages (proto/gpreduce/v1).
// The remote engine encodes tasks and decodes statistics with it; workers do the reverse. A
// round trip preserves every bit.
package wire
