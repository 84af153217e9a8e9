package coordinator

import (
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gpreduce/gpreduce/internal/coordinator/store"
	"github.com/gpreduce/gpreduce/internal/engine/remote"
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestRegistry(t *testing.T) {
	clock := &fakeClock{now: t0}
	r := newRegistry(0, zerolog.Nop())
	r.now = clock.Now
	var dropped []string
	r.onDrop = func(addr string) { dropped = append(dropped, addr) }
	if r.timeout != DefaultHeartbeatTimeout || r.interval() != time.Second {
		t.Fatalf("timeout %s, interval %s", r.timeout, r.interval())
	}
	steps := []struct {
		name, addr string
		want       string
	}{
		{"b", "h1:1", "b"},
		{"", "h2:1", "w-1"},
		{"b", "h3:1", "w-2"}, // the name is held by a live worker elsewhere
		{"b", "h1:1", "b"},   // the same worker again (restarted)
		{"", "h4:1", "w-3"},
	}
	sessions := map[string]remote.Session{} // the latest session of each ID
	seen := map[string]bool{}
	for _, s := range steps {
		id, session, err := r.register(s.name, s.addr, 2)
		if err != nil || id != s.want {
			t.Fatalf("register(%q, %s) = %q, %v; want %q", s.name, s.addr, id, err, s.want)
		}
		if len(session) < 32 || seen[session] {
			t.Fatalf("register(%q, %s): session %q is short or was handed out before", s.name, s.addr, session)
		}
		seen[session], sessions[id] = true, remote.Session(session)
	}
	if _, _, err := r.register("x", "", 1); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("empty address: %v", err)
	}
	want := []remote.Worker{{ID: "b", Addr: "h1:1"}, {ID: "w-1", Addr: "h2:1"}, {ID: "w-2", Addr: "h3:1"}, {ID: "w-3", Addr: "h4:1"}}
	for i := range want {
		want[i].Session = sessions[want[i].ID]
	}
	if got := r.Live(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Live() = %v, want %v", got, want)
	}

	// Only b and w-2 keep beating; the others fall out of Live at once and out of the
	// registry at the next sweep.
	for range 4 {
		clock.advance(time.Second)
		for _, id := range []string{"b", "w-2"} {
			if err := r.heartbeat(id); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := r.Live(); !reflect.DeepEqual(got, []remote.Worker{want[0], want[2]}) {
		t.Fatalf("Live() after the deadline = %v", got)
	}
	if err := r.heartbeat("w-1"); !errors.Is(err, ErrWorkerNotFound) {
		t.Fatalf("heartbeat of an expired worker: %v", err)
	}
	r.sweep()
	if !reflect.DeepEqual(slices.Sorted(slices.Values(dropped)), []string{"h2:1", "h4:1"}) {
		t.Fatalf("dropped %v", dropped)
	}
	if err := r.heartbeat("nobody"); !errors.Is(err, ErrWorkerNotFound) {
		t.Fatalf("heartbeat of an unknown worker: %v", err)
	}
	// The expired name is free again.
	if id, _, _ := r.register("", "h5:1", 1); id != "w-1" {
		t.Fatalf("id %q, want w-1 again", id)
	}
	if l := r.list(); len(l) != 3 || l[0].id != "b" || l[0].cores != 2 || !l[0].lastSeen.Equal(clock.Now()) {
		t.Fatalf("list() = %+v", l)
	}
	r.clear()
	if len(r.Live()) != 0 {
		t.Fatal("clear left workers")
	}
}
