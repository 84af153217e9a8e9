package shard

// The default shard count of a job, used when the job does not fix one. It depends only on
// the size of the data (never on the machine or the number of workers), so the same job gives
// the same shards, and the same bits, on one worker or sixteen.
const (
	// DefaultRowsPerShard caps the rows of a default shard: large data gets one shard per
	// this many rows.
	DefaultRowsPerShard = 1 << 16
	// DefaultMinRowsPerShard is the smallest default shard, one Gram block (GramBlockRows of
	// package tasks): below it the per-shard overhead outweighs the parallel work.
	DefaultMinRowsPerShard = 256
	// DefaultParallelShards is the number of shards data of moderate size is cut into, so
	// that the cores of a machine (the local engine runs shards on --cores goroutines) and
	// the workers of a small cluster all get work: with one shard per 65,536 rows a 14,000-row
	// set was one shard, and one core did all of a cg product or a Gram pass.
	DefaultParallelShards = 16
	// defaultBytesPerShard and defaultMinBytesPerShard are the same bounds for a CSV file cut
	// by byte ranges before its rows are counted (about 128 bytes a row).
	defaultBytesPerShard    = 8 << 20
	defaultMinBytesPerShard = DefaultMinRowsPerShard * 128
)

// DefaultShards is the default shard count of n rows:
//
//	max(ceil(n / DefaultRowsPerShard), min(DefaultParallelShards, ceil(n / DefaultMinRowsPerShard))),
//
// at least 1.
func DefaultShards(n int) int {
	return max(1, ceilDiv(n, DefaultRowsPerShard), min(DefaultParallelShards, ceilDiv(n, DefaultMinRowsPerShard)))
}

// DefaultByteShards is the default shard count of a CSV file of size bytes, by the rule of
// DefaultShards with byte bounds.
func DefaultByteShards(size int64) int {
	return int(max(1, ceilDiv64(size, defaultBytesPerShard), min(DefaultParallelShards, ceilDiv64(size, defaultMinBytesPerShard))))
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func ceilDiv64(a, b int64) int64 { return (a + b - 1) / b }
