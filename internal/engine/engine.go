package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
)

// Task is one map step. Map computes the statistic of one shard; it must be deterministic
// (the same shard gives the same bits whatever runs it) and must not modify the shard.
type Task interface {
	Map(ctx context.Context, ref shard.Ref, data *shard.Table) (reduce.Stats, error)
}

// Engine runs tasks over a job's fixed shards.
type Engine interface {
	// Shards lists the job's shards in shard order.
	Shards() []shard.Ref
	// Reduce runs t on every shard and merges the results in shard order.
	Reduce(ctx context.Context, t Task) (reduce.Stats, error)
	// Gather runs t on every shard and returns the per-shard results in shard order.
	Gather(ctx context.Context, t Task) ([]reduce.Stats, error)
}

// Local runs tasks in this process on a pool of goroutines over in-memory shards.
type Local struct {
	refs    []shard.Ref
	data    []*shard.Table
	workers int
}

// NewLocal returns a local engine over the given shards (refs[i] describes data[i]) with the
// given number of goroutines (at least 1).
func NewLocal(refs []shard.Ref, data []*shard.Table, workers int) (*Local, error) {
	if len(refs) != len(data) {
		return nil, fmt.Errorf("local engine: %d refs for %d shards", len(refs), len(data))
	}
	if len(refs) == 0 {
		return nil, fmt.Errorf("local engine: no shards")
	}
	return &Local{refs: refs, data: data, workers: max(1, workers)}, nil
}

// Shards lists the shards in shard order.
func (l *Local) Shards() []shard.Ref { return l.refs }

// Gather runs t on every shard, at most l.workers at a time, and returns results in shard order.
// The first error (in shard order) is returned, naming the shard.
func (l *Local) Gather(ctx context.Context, t Task) ([]reduce.Stats, error) {
	out, _, err := l.run(ctx, t, false)
	return out, err
}

// Reduce runs t on every shard and merges the results in shard order, as MergeInOrder does
// (the same bits), folding each result in as soon as those of the shards before it are in:
// at most about l.workers results wait at a time instead of one per shard (a GRIEF Gram
// statistic of 4000 eigenfunctions is 128 MiB per shard).
func (l *Local) Reduce(ctx context.Context, t Task) (reduce.Stats, error) {
	_, acc, err := l.run(ctx, t, true)
	return acc, err
}

// run maps t over the shards. With merge it folds the results into acc in shard order as
// they become available and returns no per-shard results; without, it returns them all.
func (l *Local) run(ctx context.Context, t Task, merge bool) ([]reduce.Stats, reduce.Stats, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make([]reduce.Stats, len(l.refs))
	errs := make([]error, len(l.refs))
	var (
		mu       sync.Mutex
		f        InOrder
		mergeErr error
	)
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(l.workers, len(l.refs)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := ctx.Err(); err != nil {
					errs[i] = err
					continue
				}
				st, err := t.Map(ctx, l.refs[i], l.data[i])
				if err != nil {
					errs[i] = fmt.Errorf("%v: %w", l.refs[i], err)
					cancel()
					continue
				}
				if !merge {
					out[i] = st
					continue
				}
				mu.Lock()
				out[i] = st
				if err := f.Fold(out); err != nil && mergeErr == nil {
					mergeErr = err
					cancel()
				}
				mu.Unlock()
			}
		}()
	}
	for i := range l.refs {
		next <- i
	}
	close(next)
	wg.Wait()
	// Report the first real failure in shard order ahead of the cancellations it caused.
	var canceled error
	for _, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
			if canceled == nil {
				canceled = err
			}
		default:
			return nil, nil, err
		}
	}
	if mergeErr != nil {
		return nil, nil, mergeErr
	}
	if canceled != nil {
		return nil, nil, canceled
	}
	if merge && f.Folded != len(out) {
		return nil, nil, fmt.Errorf("merge: %d of %d shard results", f.Folded, len(out))
	}
	return out, f.Acc, nil
}

// InOrder merges per-shard results in shard order as they arrive: Fold merges into Acc every
// result that is next in order (out[Folded] non-nil), exactly as MergeInOrder would (Acc =
// out[0], then Acc.Merge(out[i]) for i = 1, 2, ...), and clears its slot, so only results
// that arrived ahead of their turn are held.
type InOrder struct {
	Acc    reduce.Stats
	Folded int // out[0..Folded-1] are in Acc
}

// Fold merges the results now next in shard order; the error names the shard.
func (f *InOrder) Fold(out []reduce.Stats) error {
	for ; f.Folded < len(out) && out[f.Folded] != nil; f.Folded++ {
		if f.Folded == 0 {
			f.Acc = out[0]
		} else if err := f.Acc.Merge(out[f.Folded]); err != nil {
			return fmt.Errorf("merge shard %d: %w", f.Folded, err)
		}
		out[f.Folded] = nil
	}
	return nil
}

// MergeInOrder folds parts[1:] into parts[0] in order and returns parts[0].
func MergeInOrder(parts []reduce.Stats) (reduce.Stats, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("merge: no shard results")
	}
	acc := parts[0]
	for i, p := range parts[1:] {
		if err := acc.Merge(p); err != nil {
			return nil, fmt.Errorf("merge shard %d: %w", i+1, err)
		}
	}
	return acc, nil
}
