// Package worker is the worker process of a gpreduce cluster: it registers with the
// coordinators' leader and heartbeats, and serves the Worker gRPC service, which loads
// shards into a memory-bounded LRU cache (optionally spilling to disk) and runs map steps
// on them, at most Cores at a time. Tasks are deterministic, so a duplicated or retried
// task is simply computed again and gives the same bits.
package worker
