package coordinator

import (
	"testing"

	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

func TestEventLog(t *testing.T) {
	l := newEventLog()
	ev := func(id string, i int, st pb.JobState) *pb.JobEvent {
		return &pb.JobEvent{JobId: id, Iteration: int32(i), State: st}
	}
	evs, next, changed := l.since("a", 0)
	if len(evs) != 0 || next != 0 {
		t.Fatalf("empty log: %v, %d", evs, next)
	}
	for i := range eventsPerJob + 10 {
		l.publish(ev("a", i, pb.JobState_JOB_STATE_RUNNING))
	}
	select {
	case <-changed:
	default:
		t.Fatal("publish did not wake the watcher")
	}
	l.publish(ev("b", 0, pb.JobState_JOB_STATE_RUNNING))

	// The ring keeps the last eventsPerJob events, in order.
	evs, next, changed = l.since("a", 0)
	if len(evs) != eventsPerJob || next != eventsPerJob+10 || evs[0].GetIteration() != 10 || evs[len(evs)-1].GetIteration() != eventsPerJob+9 {
		t.Fatalf("replay: %d events from %d, next %d", len(evs), evs[0].GetIteration(), next)
	}
	if evs, _, _ := l.since("a", next-2); len(evs) != 2 || evs[1].GetIteration() != eventsPerJob+9 {
		t.Fatalf("tail: %v", evs)
	}
	l.publish(ev("a", -1, pb.JobState_JOB_STATE_SUCCEEDED))
	<-changed
	l.publish(ev("a", -2, pb.JobState_JOB_STATE_RUNNING)) // after the end: dropped
	if evs, _, _ := l.since("a", next); len(evs) != 1 || evs[0].GetState() != pb.JobState_JOB_STATE_SUCCEEDED {
		t.Fatalf("after the end: %v", evs)
	}
	if evs, _, _ := l.since("b", 0); len(evs) != 1 {
		t.Fatalf("other job: %v", evs)
	}

	// Finished jobs' rings are bounded too.
	for i := range finishedRings + 5 {
		l.publish(ev(string(rune('A'+i%26))+string(rune('0'+i/26)), 0, pb.JobState_JOB_STATE_FAILED))
	}
	if n := len(l.jobs); n != finishedRings+1 { // + the unfinished "b"
		t.Fatalf("%d rings kept", n)
	}
}
