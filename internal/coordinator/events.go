package coordinator

import (
	"sync"

	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// Progress events live only in the leader's memory: the runner and the API publish them, and
// WatchJob replays a job's recent events and then follows new ones.

// Bounds of the event log.
const (
	eventsPerJob  = 1000 // events kept per job (the oldest are dropped)
	finishedRings = 256  // finished jobs whose events are kept (the oldest are dropped)
)

// jobEvents is one job's ring of events. Event i (counting from 0 since the ring was created)
// is ring[i%len] while i >= next-len(ring).
type jobEvents struct {
	ring     []*pb.JobEvent
	next     uint64        // number of events ever published
	changed  chan struct{} // closed and replaced on every publish
	finished bool
}

// eventLog holds per-job event rings. It is safe for concurrent use.
type eventLog struct {
	mu       sync.Mutex
	jobs     map[string]*jobEvents
	finished []string // finished jobs in the order they finished
}

func newEventLog() *eventLog {
	return &eventLog{jobs: map[string]*jobEvents{}}
}

func (l *eventLog) get(id string) *jobEvents {
	j, ok := l.jobs[id]
	if !ok {
		j = &jobEvents{changed: make(chan struct{})}
		l.jobs[id] = j
	}
	return j
}

// publish appends ev to its job's ring and wakes the job's watchers. An event in a finished
// state marks the job finished; later events of that job are dropped.
func (l *eventLog) publish(ev *pb.JobEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	j := l.get(ev.GetJobId())
	if j.finished {
		return
	}
	if len(j.ring) < eventsPerJob {
		j.ring = append(j.ring, ev)
	} else {
		j.ring[j.next%eventsPerJob] = ev
	}
	j.next++
	close(j.changed)
	j.changed = make(chan struct{})
	if finishedState(ev.GetState()) {
		j.finished = true
		l.finished = append(l.finished, ev.GetJobId())
		for len(l.finished) > finishedRings {
			delete(l.jobs, l.finished[0])
			l.finished = l.finished[1:]
		}
	}
}

// since returns the job's events from number from on (those still in the ring), the number
// to ask for next, and a channel closed when more events arrive.
func (l *eventLog) since(id string, from uint64) (evs []*pb.JobEvent, next uint64, changed <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	j := l.get(id)
	oldest := j.next - uint64(len(j.ring))
	from = max(from, oldest)
	for i := from; i < j.next; i++ {
		evs = append(evs, j.ring[i%eventsPerJob])
	}
	return evs, j.next, j.changed
}

// finishedState reports whether s is a final job state.
func finishedState(s pb.JobState) bool {
	return s == pb.JobState_JOB_STATE_SUCCEEDED || s == pb.JobState_JOB_STATE_FAILED || s == pb.JobState_JOB_STATE_CANCELED
}
