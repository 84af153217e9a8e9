package coordinator

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gpreduce/gpreduce/internal/testutil"

	"github.com/gpreduce/gpreduce/internal/coordinator/store"
)

// testLogger logs at warn level (COORDINATOR_TEST_LOG=debug|info|... to change) to t.Log.
func testLogger(t testing.TB) zerolog.Logger { return testutil.Logger(t, "COORDINATOR_TEST_LOG") }

// testRaftSecret is the raft secret of the test clusters.
const testRaftSecret = "raft secret of the coordinator tests"

func testContext(t testing.TB) context.Context { return testutil.ClusterContext(t) }

// eventually polls cond until it returns nil (testutil.Eventually).
func eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	testutil.Eventually(t, timeout, what, cond)
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
