// Package train holds the training methods, one file each, reading top to bottom like the
// paper's algorithm: each defines its map step (shard -> statistic) and its coordinator loop
// over the merged statistics. Train dispatches a Spec to its method over any engine.Engine.
package train
