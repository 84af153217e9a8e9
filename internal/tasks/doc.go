// Package tasks holds the map steps that run on a job's shards (engine.Task), the registry
// of their kinds and the registry of the shard statistics they return. A kind is named by its
// field in the oneof kind of pb.Task ("moments", "gram", "vof_kuf", ...) and registers, in its
// own file, how its tasks travel to a worker: encode a task to its message, decode a message
// back to a task, the input dimensions the task assumes of a shard, and, for tasks that carry
// broadcast blobs (the kernel inputs X), the slim form that names them by hash.
//
// The map steps of the training methods live here (GramTask, RFFTask, RowsTask, KernelTask)
// and those of the data pass in shard (MomentsTask, DistinctTask, SampleTask), so both
// executors, the wire codec (internal/wire) and the worker (internal/worker) depend on this
// package and on none of the method loops in internal/train. The registry is filled by init
// functions and only read afterwards: Kinds lists the names, Lookup finds a kind by name, Of
// finds the kind of a task value, and Wrap and Unwrap set and read the oneof of a pb.Task by
// the kind's name (protoreflect), so no code outside a kind's file switches over kinds.
//
// The statistics (reduce.Stats) register the same way (stats.go, Stat): each by its field in
// the oneof kind of pb.Stats, its Go type, how it encodes to its message and how its message
// decodes back after checking its shapes. The statistics of package reduce register in
// stats_reduce.go, those of a method's own tasks beside the tasks (vof.go). EncodeStats and
// DecodeStats look them up (StatOf, LookupStat), and WrapStats and UnwrapStats set and read
// the oneof of a pb.Stats, so the wire codec holds no per-statistic code.
package tasks
