package store

import (
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// Job events are replicated: the state changes add theirs when they are applied, and the
// runner's progress events (phases, optimizer iterations) travel in batches through raft
// (Node.AppendEvents), so every member holds each job's recent history and `coordinator logs`
// survives a change of leader. Each job keeps its last eventsPerJob events; a deleted job's
// go with it.

// Bounds of the replicated events.
const (
	eventsPerJob      = 500     // events kept per job (the oldest are dropped)
	eventMessageBytes = 1 << 10 // longest event message kept
)

// Event is one job event as replicated. Times are the leader's.
type Event struct {
	// JobID is the job the event belongs to.
	JobID string
	// State is the job's state when the event happened.
	State JobState
	// Phase names what the event is about ("state" for state changes, a training phase, ...).
	Phase string
	// Iteration and MaxIter are the optimizer's progress, Objective its value.
	Iteration int32
	MaxIter   int32
	Objective float64
	// Message says what happened.
	Message string
	// UnixNano is when, on the leader's clock.
	UnixNano int64
}

// Proto is the API form of the event.
func (e Event) Proto() *pb.JobEvent {
	return &pb.JobEvent{JobId: e.JobID, State: e.State.Proto(), Phase: e.Phase, Iteration: e.Iteration,
		MaxIter: e.MaxIter, Objective: e.Objective, Message: e.Message, UnixNano: e.UnixNano}
}

// eventRing is one job's last eventsPerJob events. Event i (counting from 0 since the job
// was submitted) is ring[i%eventsPerJob] while i >= next-len(ring). A snapshot copies it.
type eventRing struct {
	ring []Event
	next uint64
}

func (r *eventRing) add(ev Event) {
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
func (r *eventRing) since(from uint64) ([]Event, uint64) {
	oldest := r.next - uint64(len(r.ring))
	var out []Event
	for i := max(from, oldest); i < r.next; i++ {
		out = append(out, r.ring[i%eventsPerJob])
	}
	return out, r.next
}

// ordered returns the held events, oldest first.
func (r *eventRing) ordered() []Event {
	evs, _ := r.since(0)
	return evs
}

// clone returns a copy of r.
func (r eventRing) clone() eventRing {
	r.ring = append([]Event(nil), r.ring...)
	return r
}
