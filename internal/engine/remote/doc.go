// Package remote is the cluster executor of engine.Engine: it runs each map step on the job's
// fixed shards on remote workers over gRPC, keeping each shard on the same worker across
// rounds, moving shards off workers that fail or leave and retrying them elsewhere.
// Results are placed by shard index and merged in shard order, so a Reduce is bitwise
// identical to the local engine whichever workers ran what. Broadcast blobs of a task (the
// kernel inputs X of the CG methods) travel to each worker process once; later tasks name
// them by content hash (wire.Slim), and a worker that lost them gets the task again in full.
package remote
