package coordinator

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/gpreduce/gpreduce/internal/coordinator/store"
)

// Batching of the runner's progress events (see store.Event).
const (
	eventFlushEvery = 200 * time.Millisecond // how long progress events wait for their batch
	eventBatchMax   = 256                    // events in one raft command
	eventBacklogMax = 4096                   // events held while raft is unavailable (the oldest are dropped)
)

// eventBatcher collects the runner's progress events and proposes them in batches (every
// eventFlushEvery, or at once before a state change through flush), while this member leads.
// Events that cannot be proposed (leadership lost) are dropped: the next leader adds its own.
type eventBatcher struct {
	node store.Store
	log  zerolog.Logger

	mu      sync.Mutex
	pending []store.Event
	kick    chan struct{}
	flushMu sync.Mutex // one proposal at a time, in order
}

func newEventBatcher(node store.Store, log zerolog.Logger) *eventBatcher {
	return &eventBatcher{node: node, log: log, kick: make(chan struct{}, 1)}
}

// add queues ev.
func (b *eventBatcher) add(ev store.Event) {
	b.mu.Lock()
	b.pending = append(b.pending, ev)
	if over := len(b.pending) - eventBacklogMax; over > 0 {
		b.pending = append([]store.Event(nil), b.pending[over:]...)
	}
	full := len(b.pending) >= eventBatchMax
	b.mu.Unlock()
	if full {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
}

// flush proposes the queued events now.
func (b *eventBatcher) flush(ctx context.Context) error {
	b.flushMu.Lock()
	defer b.flushMu.Unlock()
	for {
		b.mu.Lock()
		n := min(len(b.pending), eventBatchMax)
		batch := b.pending[:n:n]
		b.pending = b.pending[n:]
		b.mu.Unlock()
		if n == 0 {
			return nil
		}
		if !b.node.IsLeader() {
			continue // drop: not ours to record
		}
		if err := b.node.AppendEvents(ctx, batch); err != nil {
			return err
		}
	}
}

// run flushes the queue every eventFlushEvery until ctx ends.
func (b *eventBatcher) run(ctx context.Context) {
	t := time.NewTicker(eventFlushEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-b.kick:
		}
		if err := b.flush(ctx); err != nil && ctx.Err() == nil {
			b.log.Debug().Err(err).Msg("job events not recorded")
		}
	}
}
