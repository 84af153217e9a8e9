package coordinator

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/gpreduce/gpreduce/internal/coordinator/store"
)

// Retention: the leader deletes finished jobs (their records, models, checkpoints and events)
// beyond the newest ServerConfig.RetainJobs, and those finished longer than
// ServerConfig.RetainFor ago, so the replicated state and every member's blob store stay
// bounded however many jobs run.

// Timing and batching of retention.
const (
	retentionCheck = 2 * time.Second // how often the leader applies the retention rules
	retentionBatch = 256             // jobs deleted per raft command
)

// expired returns the IDs of the finished jobs in jobs that the rules delete at now: all but
// the keep newest finished ones (keep > 0), and those finished more than maxAge ago
// (maxAge > 0). A job's finish time is its UpdatedAt.
func expired(jobs []store.Job, keep int, maxAge time.Duration, now time.Time) []string {
	var done []store.Job
	for _, j := range jobs {
		if j.State.Finished() {
			done = append(done, j)
		}
	}
	slices.SortFunc(done, func(a, b store.Job) int { // newest first
		if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	var out []string
	for i, j := range done {
		if (keep > 0 && i >= keep) || (maxAge > 0 && now.Sub(j.UpdatedAt) > maxAge) {
			out = append(out, j.ID)
		}
	}
	return out
}

// runRetention applies the retention rules every retentionCheck while this member leads,
// until ctx ends.
func (s *Server) runRetention(ctx context.Context) {
	if s.cfg.RetainJobs <= 0 && s.cfg.RetainFor <= 0 {
		return
	}
	t := time.NewTicker(retentionCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !s.state.IsLeader() {
			continue
		}
		ids := expired(s.state.JobViews(), s.cfg.RetainJobs, s.cfg.RetainFor, time.Now())
		for len(ids) > 0 {
			n := min(len(ids), retentionBatch)
			if err := s.state.ExpireJobs(ctx, ids[:n], time.Time{}); err != nil {
				if ctx.Err() == nil {
					s.log.Warn().Err(err).Msg("retention: deleting finished jobs failed; will retry")
				}
				break
			}
			s.log.Info().Int("jobs", n).Msg("retention: finished jobs deleted")
			ids = ids[n:]
		}
	}
}
