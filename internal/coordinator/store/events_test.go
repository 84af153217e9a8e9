package store

import (
	"testing"
)

func TestEventRing(t *testing.T) {
	var r eventRing
	if evs, next := r.since(0); len(evs) != 0 || next != 0 {
		t.Fatalf("empty ring: %v, %d", evs, next)
	}
	for i := range eventsPerJob + 10 {
		r.add(Event{Iteration: int32(i)})
	}
	// The ring keeps the last eventsPerJob events, in order.
	evs, next := r.since(0)
	if len(evs) != eventsPerJob || next != eventsPerJob+10 || evs[0].Iteration != 10 || evs[len(evs)-1].Iteration != eventsPerJob+9 {
		t.Fatalf("replay: %d events from %d, next %d", len(evs), evs[0].Iteration, next)
	}
	if evs, _ := r.since(next - 2); len(evs) != 2 || evs[1].Iteration != eventsPerJob+9 {
		t.Fatalf("tail: %v", evs)
	}
	// A copy does not see later events.
	c := r.clone()
	r.add(Event{Iteration: -1})
	if evs, _ := c.since(0); evs[len(evs)-1].Iteration != eventsPerJob+9 {
		t.Fatalf("the clone changed: last %d", evs[len(evs)-1].Iteration)
	}
	// Long messages are cut.
	r.add(Event{Message: string(make([]byte, 3*eventMessageBytes))})
	if evs, _ := r.since(r.next - 1); len(evs[0].Message) > eventMessageBytes+3 {
		t.Fatalf("message of %d bytes kept", len(evs[0].Message))
	}
}
