package worker

import (
	"strings"
	"testing"
	"time"
)

func TestRegistration(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T) (join []string, leader *fakeCoordinator, check func(t *testing.T, w *Worker, logs string))
	}{
		{"direct to the leader", func(t *testing.T) ([]string, *fakeCoordinator, func(*testing.T, *Worker, string)) {
			l := startCoordinator(t, "join-secret")
			return []string{l.addr}, l, func(t *testing.T, w *Worker, logs string) {
				eventually(t, "heartbeats arrive", func() bool { return l.beats("w1") >= 3 })
				if regs := l.registrations(); len(regs) != 1 {
					t.Errorf("registered %d times: %+v", len(regs), regs)
				}
			}
		}},
		{"redirected by a follower", func(t *testing.T) ([]string, *fakeCoordinator, func(*testing.T, *Worker, string)) {
			l := startCoordinator(t, "join-secret")
			f := startCoordinator(t, "join-secret")
			f.leader = l.addr
			return []string{f.addr}, l, func(t *testing.T, w *Worker, logs string) {
				eventually(t, "heartbeats arrive", func() bool { return l.beats("w1") >= 2 })
				if regs := f.registrations(); len(regs) != 0 {
					t.Errorf("the follower registered the worker: %+v", regs)
				}
			}
		}},
		{"unreachable address first", func(t *testing.T) ([]string, *fakeCoordinator, func(*testing.T, *Worker, string)) {
			l := startCoordinator(t, "join-secret")
			return []string{"127.0.0.1:1", l.addr}, l, func(t *testing.T, w *Worker, logs string) {
				eventually(t, "heartbeats arrive", func() bool { return l.beats("w1") >= 2 })
			}
		}},
		{"registers again after NOT_FOUND", func(t *testing.T) ([]string, *fakeCoordinator, func(*testing.T, *Worker, string)) {
			l := startCoordinator(t, "join-secret")
			l.forget = 1
			return []string{l.addr}, l, func(t *testing.T, w *Worker, logs string) {
				eventually(t, "the second registration heartbeats", func() bool { return l.beats("w2") >= 2 })
				eventually(t, "the worker takes its new ID", func() bool { return w.ID() == "w2" })
				if l.beats("w1") != 0 {
					t.Errorf("w1 heartbeats counted after it was forgotten")
				}
			}
		}},
		{"leader steps down and names the new one", func(t *testing.T) ([]string, *fakeCoordinator, func(*testing.T, *Worker, string)) {
			old := startCoordinator(t, "join-secret")
			l := startCoordinator(t, "join-secret")
			return []string{old.addr}, old, func(t *testing.T, w *Worker, logs string) {
				eventually(t, "registered with the old leader", func() bool { return old.beats("w1") >= 1 })
				old.mu.Lock()
				old.demoteTo = l.addr
				old.mu.Unlock()
				eventually(t, "heartbeats reach the new leader", func() bool { return l.beats("w1") >= 2 })
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			join, leader, check := tc.setup(t)
			logs := &syncBuffer{}
			w := startWorker(t, Config{Join: join, Name: "w-test", Cores: 3, JoinToken: "join-secret", Logger: testLogger(logs)})
			eventually(t, "registered", func() bool { return len(leader.registrations()) > 0 })
			r := leader.registrations()[0]
			if r.address != w.AdvertiseAddr() || r.address != w.Addr() || r.name != "w-test" || r.cores != 3 {
				t.Errorf("registration %+v; want address %s, name w-test, 3 cores", r, w.Addr())
			}
			check(t, w, logs.String())
			if !strings.Contains(logs.String(), `"message":"registered"`) {
				t.Errorf("registration not logged:\n%s", logs)
			}
		})
	}
}

func TestLostLeaderLogged(t *testing.T) {
	old := startCoordinator(t, "tok")
	l := startCoordinator(t, "tok")
	logs := &syncBuffer{}
	w := startWorker(t, Config{Join: []string{old.addr}, JoinToken: "tok", Logger: testLogger(logs)})
	eventually(t, "registered", func() bool { return w.ID() == "w1" })
	old.mu.Lock()
	old.demoteTo = l.addr
	old.mu.Unlock()
	eventually(t, "moved to the new leader", func() bool { return l.beats("w1") >= 1 })
	if !containsAll(logs.String(), "lost leader", `"level":"info"`, l.addr) {
		t.Errorf("leader change not logged:\n%s", logs)
	}
}

func TestWrongJoinTokenNeverRegisters(t *testing.T) {
	l := startCoordinator(t, "right")
	logs := &syncBuffer{}
	startWorker(t, Config{Join: []string{l.addr}, JoinToken: "wrong", Logger: testLogger(logs)})
	// The coordinator's auth interceptor refuses the calls before the fake sees them, so the
	// refused attempts are counted in the log: one "cannot register" line each.
	eventually(t, "two refused registrations logged", func() bool {
		return strings.Count(logs.String(), "cannot register") >= 2
	})
	if regs := l.registrations(); len(regs) != 0 {
		t.Fatalf("registered with a wrong token: %+v", regs)
	}
	if !containsAll(logs.String(), "cannot register", "wrong token") {
		t.Errorf("failures not logged:\n%s", logs)
	}
}

func TestBackoff(t *testing.T) {
	w, err := New(Config{Join: []string{"x:1"}, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	r := newRegistrar(w)
	prev := time.Duration(0)
	for i := 0; i < 30; i++ {
		d := r.backoff()
		want := min(backoffBase<<i, backoffCap)
		if d < want/2 || d > want {
			t.Fatalf("attempt %d: backoff %v outside [%v, %v]", i, d, want/2, want)
		}
		if i > 0 && want < backoffCap && d < prev/2 {
			t.Fatalf("attempt %d: backoff %v fell from %v", i, d, prev)
		}
		prev = d
	}
}
