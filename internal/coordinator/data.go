package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gpreduce/gpreduce/internal/shard"
)

// DefaultPlanTimeout bounds planning a job's data source on the leader: finding its size
// and reading its first line (a plain CSV), or reading it whole to count its rows (a
// gzipped CSV or a UCI split).
const DefaultPlanTimeout = 2 * time.Minute

// planData plans src into k shards with the runner's data reader (its access policy and
// bounds), on the job's own goroutine, never on raft's, and within the plan timeout. The
// leader reads no shard: a plain CSV's columns come from its first line, so a source whose
// rows are too long or that stalls fails its job with a bounded cost to the leader.
func (r *runner) planData(ctx context.Context, src shard.Source, k int) (shard.Layout, error) {
	timeout := r.planTimeout
	if timeout <= 0 {
		timeout = DefaultPlanTimeout
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	l, err := r.data.Plan(pctx, src, k)
	if err != nil && ctx.Err() == nil && errors.Is(pctx.Err(), context.DeadlineExceeded) {
		return shard.Layout{}, fmt.Errorf("plan the data %s: gave up after %s: the source is too slow or does not answer: %w",
			src.URI, timeout, err)
	}
	return l, err
}
