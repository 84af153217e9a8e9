package shard

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/gpreduce/gpreduce/internal/reduce"
)

// sampleCheckEvery is how many rows DistinctTask.Map and SampleTask.Map read between context checks.
const sampleCheckEvery = 1 << 16

// DistinctTask is the engine task of the GP-GRIEF grid placement (Evans & Nair 2018, §4; the
// per-column rule follows the authors' code, see features.GRIEFGrid): per input
// column it collects the sorted distinct values, the smallest Cap+1 of them (reduce.Distinct), so
// that after the merge a column with at most Cap values is known exactly and one with more is
// known to be "many". With Cap = mbar the result feeds features.GRIEFGrid together with the
// column extremes of MomentsTask. It reads the raw (unstandardized) inputs.
type DistinctTask struct {
	Cap int
}

// Map returns a *reduce.Distinct over the t.D input columns of t. It fails if Cap < 0 and stops
// with ctx's error if ctx is done.
func (k DistinctTask) Map(ctx context.Context, ref Ref, t *Table) (reduce.Stats, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if k.Cap < 0 {
		return nil, fmt.Errorf("distinct task: cap %d is negative", k.Cap)
	}
	s := reduce.NewDistinct(t.D, k.Cap)
	for i := 0; i < t.N(); i++ {
		if i%sampleCheckEvery == sampleCheckEvery-1 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		s.Add(t.Row(i))
	}
	return s, nil
}

// SampleTask is the engine task of the random subsample used to initialise the kernel
// hyperparameters (GP-GRIEF, Evans & Nair 2018, §6: an exact GP fitted to min(n,
// 1000) random rows; here min(n, K)). Each
// row i of the shard with index ref.Index gets the key
//
//	u_i = the i-th Float64 of rand.New(rand.NewPCG(Seed, uint64(ref.Index))),
//
// drawn in row order, and the shard keeps the K rows with the smallest keys (reduce.Sample). The
// merge over shards then holds the K smallest keys overall: a uniform random subset of min(n, K)
// rows that depends only on Seed and the fixed shard layout, not on which worker ran which shard.
// The rows are raw (unstandardized).
type SampleTask struct {
	K    int
	Seed uint64
}

// Map returns a *reduce.Sample of at most K raw rows of t. It fails if K < 0 and stops with
// ctx's error if ctx is done.
func (k SampleTask) Map(ctx context.Context, ref Ref, t *Table) (reduce.Stats, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if k.K < 0 {
		return nil, fmt.Errorf("sample task: size %d is negative", k.K)
	}
	rng := rand.New(rand.NewPCG(k.Seed, uint64(ref.Index)))
	s := reduce.NewSample(k.K, t.D)
	for i := 0; i < t.N(); i++ {
		if i%sampleCheckEvery == sampleCheckEvery-1 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		s.Add(rng.Float64(), t.Row(i), t.Y[i])
	}
	return s, nil
}

// trainRowsStream seeds SampleRows.
const trainRowsStream = 0x74726f7773

// SampleRows returns k of t's rows drawn without replacement by a fixed random stream, in
// their order in t: the same rows for the same table and k, whoever draws them (eval
// --train-rows, a cluster job with DataSource.train_rows). k must be at most t.N().
func SampleRows(t *Table, k int) *Table {
	idx := rand.New(rand.NewPCG(trainRowsStream, 0)).Perm(t.N())[:k]
	slices.Sort(idx)
	out := &Table{Source: t.Source, Columns: t.Columns, Target: t.Target, D: t.D, X: make([]float64, 0, k*t.D), Y: make([]float64, 0, k)}
	for _, i := range idx {
		out.X = append(out.X, t.Row(i)...)
		out.Y = append(out.Y, t.Y[i])
	}
	return out
}
