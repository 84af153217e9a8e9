// Package engine runs map-reduce rounds over a job's fixed shards. A Task computes a statistic
// of one shard; Reduce runs it on every shard and merges the results in shard order, Gather
// returns them per shard in shard order. The local executor here runs tasks on a goroutine
// pool; the number of goroutines never changes the result.
package engine
