package coordinator

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/gpreduce/gpreduce/internal/coordinator/store"
	"github.com/gpreduce/gpreduce/internal/engine/remote"
)

// ErrWorkerNotFound means a heartbeat named a worker that is not registered (or was dropped
// after missing its deadline): the worker should register again.
var ErrWorkerNotFound = errors.New("worker not registered")

// DefaultHeartbeatTimeout is how long a worker stays in the pool after its last heartbeat.
const DefaultHeartbeatTimeout = 3 * time.Second

// workerEntry is a registered worker.
type workerEntry struct {
	id, addr string
	session  string // the registration's secret, sent with every task (wire.SessionKey)
	cores    int
	lastSeen time.Time
}

// registry is the leader's pool of workers, in memory only: workers register again with
// a new leader. A worker whose last heartbeat is older than the timeout is not live and is
// dropped by sweep. It implements remote.Pool and is safe for concurrent use.
type registry struct {
	timeout time.Duration
	now     func() time.Time
	log     zerolog.Logger
	onDrop  func(addr string) // called (outside the lock) with the address of a dropped worker

	mu      sync.Mutex
	workers map[string]*workerEntry
}

var _ remote.Pool = (*registry)(nil)

func newRegistry(timeout time.Duration, log zerolog.Logger) *registry {
	if timeout <= 0 {
		timeout = DefaultHeartbeatTimeout
	}
	return &registry{timeout: timeout, now: time.Now, log: log, workers: map[string]*workerEntry{}}
}

// interval is the heartbeat interval the registry asks of workers.
func (r *registry) interval() time.Duration { return r.timeout / 3 }

// register adds a worker serving at addr and returns its ID, name if it is given and free
// (or held by a worker at the same address, which is taken to be this worker restarted),
// else the first free "w-<n>", and a new random session for the worker's tasks.
func (r *registry) register(name, addr string, cores int) (id, session string, err error) {
	if addr == "" {
		return "", "", fmt.Errorf("register worker: empty address: %w", store.ErrInvalidArgument)
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("register worker: session: %w", err)
	}
	session = hex.EncodeToString(b)
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	id = name
	if old, taken := r.workers[name]; name == "" || (taken && old.addr != addr && r.alive(old, now)) {
		for n := 1; ; n++ {
			id = "w-" + strconv.Itoa(n)
			if _, taken := r.workers[id]; !taken {
				break
			}
		}
	}
	r.workers[id] = &workerEntry{id: id, addr: addr, session: session, cores: cores, lastSeen: now}
	r.log.Info().Str("worker", id).Str("addr", addr).Int("cores", cores).Msg("worker registered")
	return id, session, nil
}

// heartbeat refreshes worker id; it fails with ErrWorkerNotFound if id is not registered (or
// was dropped), and the worker should register again.
func (r *registry) heartbeat(id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.workers[id]
	if !ok || !r.alive(w, r.now()) {
		return fmt.Errorf("worker %q: %w", id, ErrWorkerNotFound)
	}
	w.lastSeen = r.now()
	return nil
}

func (r *registry) alive(w *workerEntry, now time.Time) bool {
	return now.Sub(w.lastSeen) <= r.timeout
}

// Live returns the workers heard from within the timeout, sorted by ID.
func (r *registry) Live() []remote.Worker {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	out := make([]remote.Worker, 0, len(r.workers))
	for _, w := range r.workers {
		if r.alive(w, now) {
			out = append(out, remote.Worker{ID: w.id, Addr: w.addr, Session: remote.Session(w.session)})
		}
	}
	slices.SortFunc(out, func(a, b remote.Worker) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// list returns copies of the live workers, sorted by ID.
func (r *registry) list() []workerEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	var out []workerEntry
	for _, w := range r.workers {
		if r.alive(w, now) {
			out = append(out, *w)
		}
	}
	slices.SortFunc(out, func(a, b workerEntry) int { return cmp.Compare(a.id, b.id) })
	return out
}

// sweep drops the workers whose heartbeat is overdue.
func (r *registry) sweep() {
	r.mu.Lock()
	now := r.now()
	var dropped []*workerEntry
	for id, w := range r.workers {
		if !r.alive(w, now) {
			delete(r.workers, id)
			dropped = append(dropped, w)
		}
	}
	r.mu.Unlock()
	for _, w := range dropped {
		r.log.Warn().Str("worker", w.id).Str("addr", w.addr).Dur("silent", now.Sub(w.lastSeen)).
			Msg("worker missed its heartbeat deadline; dropped from the pool")
		r.forget(w.addr)
	}
}

// clear drops every worker (when this node stops leading, workers register with the next
// leader).
func (r *registry) clear() {
	r.mu.Lock()
	dropped := r.workers
	r.workers = map[string]*workerEntry{}
	r.mu.Unlock()
	for _, w := range dropped {
		r.forget(w.addr)
	}
}

// forget tells onDrop about addr unless another registered worker still uses it.
func (r *registry) forget(addr string) {
	if r.onDrop == nil {
		return
	}
	r.mu.Lock()
	for _, w := range r.workers {
		if w.addr == addr {
			r.mu.Unlock()
			return
		}
	}
	r.mu.Unlock()
	r.onDrop(addr)
}

// runSweeper sweeps every timeout/3 until ctx ends.
func (r *registry) runSweeper(ctx context.Context) {
	t := time.NewTicker(max(r.timeout/3, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.sweep()
		}
	}
}
