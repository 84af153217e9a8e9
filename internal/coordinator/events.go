package coordinator

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"

	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// Job events are replicated: the state changes add theirs when they are applied, and the
// runner's progress events (phases, optimizer iterations) travel in batches through raft, so
// every member holds each job's recent history and `coordinator logs` survives a change of
// leader. Each job keeps its last eventsPerJob events; a deleted job's go with it.

// Bounds of the replicated events.
const (
	eventsPerJob      = 500                    // events kept per job (the oldest are dropped)
	eventMessageBytes = 1 << 10                // longest event message kept
	eventFlushEvery   = 200 * time.Millisecond // how long progress events wait for their batch
	eventBatchMax     = 256                    // events in one raft command
	eventBacklogMax   = 4096                   // events held while raft is unavailable (the oldest are dropped)
)

// eventRec is one job event as replicated. Times are the leader's.
type eventRec struct {
	JobID     string
	State     JobState
	Phase     string
	Iteration int32
	MaxIter   int32
	Objective float64
	Message   string
	UnixNano  int64
}

// proto is the API form of the event.
func (e eventRec) proto() *pb.JobEvent {
	return &pb.JobEvent{JobId: e.JobID, State: stateProto(e.State), Phase: e.Phase, Iteration: e.Iteration,
		MaxIter: e.MaxIter, Objective: e.Objective, Message: e.Message, UnixNano: e.UnixNano}
}

// eventRing is one job's last eventsPerJob events. Event i (counting from 0 since the job
// was submitted) is ring[i%eventsPerJob] while i >= next-len(ring). A snapshot copies it.
type eventRing struct {
	ring []eventRec
	next uint64
}

func (r *eventRing) add(ev eventRec) {
	if len(ev.Message) > eventMessageBytes {
		ev.Message = ev.Message[:eventMessageBytes] + "..."
	}
	if len(r.ring) < eventsPerJob {
		r.ring = append(r.ring, ev)
	} else {
		r.ring[r.next%eventsPerJob] = ev
	}
	r.next++
}

// since returns the events from number from on (those still held) and the number to ask
// for next.
func (r *eventRing) since(from uint64) ([]eventRec, uint64) {
	oldest := r.next - uint64(len(r.ring))
	var out []eventRec
	for i := max(from, oldest); i < r.next; i++ {
		out = append(out, r.ring[i%eventsPerJob])
	}
	return out, r.next
}

// ordered returns the held events, oldest first.
func (r *eventRing) ordered() []eventRec {
	evs, _ := r.since(0)
	return evs
}

// clone returns a copy of r.
func (r eventRing) clone() eventRing {
	r.ring = append([]eventRec(nil), r.ring...)
	return r
}

// eventBatcher collects the runner's progress events and proposes them in batches (every
// eventFlushEvery, or at once before a state change through flush), while this member leads.
// Events that cannot be proposed (leadership lost) are dropped: the next leader adds its own.
type eventBatcher struct {
	node *Node
	log  zerolog.Logger

	mu      sync.Mutex
	pending []eventRec
	kick    chan struct{}
	flushMu sync.Mutex // one proposal at a time, in order
}

func newEventBatcher(node *Node, log zerolog.Logger) *eventBatcher {
	return &eventBatcher{node: node, log: log, kick: make(chan struct{}, 1)}
}

// add queues ev.
func (b *eventBatcher) add(ev eventRec) {
	b.mu.Lock()
	b.pending = append(b.pending, ev)
	if over := len(b.pending) - eventBacklogMax; over > 0 {
		b.pending = append([]eventRec(nil), b.pending[over:]...)
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

// finishedState reports whether s is a final job state.
func finishedState(s pb.JobState) bool {
	return s == pb.JobState_JOB_STATE_SUCCEEDED || s == pb.JobState_JOB_STATE_FAILED || s == pb.JobState_JOB_STATE_CANCELED
}
