// Package train holds the training methods, one file each, reading top to bottom like the
// paper's algorithm: each defines its map step (shard -> statistic) and its coordinator loop
// over the merged statistics.
//
// Each method file registers its method in an init function (register): its name, a one-line
// summary, its settings message from proto/gpreduce/v1 (e.g. pb.CGSettings, whose field
// comments are the CLI's flag help), the map-task kinds it runs, how it validates its
// settings (with their defaults in the same file) and how it trains. Run looks the method up
// (Methods, LookupMethod); "auto" is not a method but the default choice among them
// (auto.go). A Spec is made from a pb.JobSpec by SpecFromJobSpec alone, and a setting given
// for a method that does not have it is the one WrongMethod error.
//
// Adding a method touches its train file, its settings message in the JobSpec's settings
// oneof (coordinator.proto, with the regenerated code), its model part and its tests; a
// method with map tasks of its own also adds their file in internal/tasks, which registers
// the task kinds and their statistics, with their messages in types.proto. vof is the
// example: train/vof.go, internal/vof and features/vof*.go, model/posterior_vof.go,
// tasks/vof.go, VOFSettings and the VOF task and statistics messages.
package train
