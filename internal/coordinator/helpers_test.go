package coordinator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gpreduce/gpreduce/internal/coordinator/store"
)

// testLogWriter forwards log lines to t.Log until the test's cleanups have run, then drops
// them (raft goroutines may log after a test ends, which t.Log does not allow).
type testLogWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(string(p))
	}
	return len(p), nil
}

// testLogger logs at warn level (COORDINATOR_TEST_LOG=debug|info|... to change) to t.Log.
func testLogger(t testing.TB) zerolog.Logger {
	w := &testLogWriter{t: t}
	t.Cleanup(func() { // registered first, so it runs after every other cleanup
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	level := zerolog.WarnLevel
	if s := os.Getenv("COORDINATOR_TEST_LOG"); s != "" {
		if l, err := zerolog.ParseLevel(s); err == nil {
			level = l
		}
	}
	return zerolog.New(zerolog.ConsoleWriter{Out: w, NoColor: true, TimeFormat: "15:04:05.000"}).
		Level(level).With().Timestamp().Logger()
}

// testRaftSecret is the raft secret of the test clusters.
const testRaftSecret = "raft secret of the coordinator tests"

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond every 10 ms until it returns nil or waitSlack times timeout
// passes.
// waitSlack stretches every wait: a deadline here only bounds how long a failing test
// hangs, it measures nothing, and a loaded 2-core machine can be many times slower than the
// one a timeout was chosen on. Tests that assert a bound on time measure it themselves.
const waitSlack = 6

func eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	timeout *= waitSlack
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %s: %v", what, timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// openSingle opens a bootstrapped single-member store and waits until it leads.
func openSingle(t *testing.T, tweak func(*store.Config)) (*store.Node, store.Config) {
	t.Helper()
	cfg := store.Config{
		ID: "n0", RaftAddr: "127.0.0.1:0", DataDir: filepath.Join(t.TempDir(), "n0"), Logger: testLogger(t),
		Bootstrap: true, ApplyTimeout: 5 * time.Second, ModelChunkBytes: 1000,
		HeartbeatTimeout: 250 * time.Millisecond, ElectionTimeout: 250 * time.Millisecond,
		LeaderLeaseTimeout: 200 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
		TransportTimeout: 2 * time.Second, Security: store.RaftSecurity{Secret: []byte(testRaftSecret)},
	}
	if tweak != nil {
		tweak(&cfg)
	}
	n, err := store.Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Open(%s): %v", cfg.ID, err)
	}
	t.Cleanup(func() { _ = n.Close() })
	eventually(t, 10*time.Second, cfg.ID+" becomes leader", func() error {
		if !n.IsLeader() {
			return fmt.Errorf("not the leader yet")
		}
		return nil
	})
	return n, cfg
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// t0 is the command time of the store-level tests.
var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// blobHash and raftDBFile name a blob and the raft database as the store does.
func blobHash(b []byte) string { return store.BlobHash(b) }

const raftDBFile = store.RaftDBFile
