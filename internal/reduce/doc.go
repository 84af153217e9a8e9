// Package reduce holds the statistics that map steps return per shard and their merges: the
// Gram statistic of feature methods (G = Z^T Z, b = Z^T y, y^T y, n), per-column moments
// merged with Chan's formula, and plain element-wise sums. Merges are applied in shard order,
// so a merged result depends only on the shards, never on which worker produced them.
package reduce
