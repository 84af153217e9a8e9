package store

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gpreduce/gpreduce/internal/testutil"
)

// testLogger logs at warn level (COORDINATOR_TEST_LOG=debug|info|... to change) to t.Log.
func testLogger(t testing.TB) zerolog.Logger { return testutil.Logger(t, "COORDINATOR_TEST_LOG") }

// testConfig returns a config with small raft timeouts, a free loopback port and small model
// chunks.
func testConfig(t testing.TB, id string, log zerolog.Logger) Config {
	return Config{
		ID:                 id,
		RaftAddr:           "127.0.0.1:0",
		DataDir:            filepath.Join(t.TempDir(), id),
		Logger:             log,
		ApplyTimeout:       5 * time.Second,
		ModelChunkBytes:    1000,
		HeartbeatTimeout:   250 * time.Millisecond,
		ElectionTimeout:    250 * time.Millisecond,
		LeaderLeaseTimeout: 200 * time.Millisecond,
		CommitTimeout:      5 * time.Millisecond,
		TransportTimeout:   2 * time.Second,
		Security:           RaftSecurity{Secret: []byte(testRaftSecret)},
	}
}

// testRaftSecret is the raft secret of the test clusters.
const testRaftSecret = "raft secret of the coordinator tests"

func testContext(t testing.TB) context.Context { return testutil.Context(t) }

// eventually polls cond until it returns nil (testutil.Eventually).
func eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	testutil.Eventually(t, timeout, what, cond)
}

func mustOpen(t testing.TB, cfg Config) *Node {
	t.Helper()
	n, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Open(%s): %v", cfg.ID, err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// waitSelfLeader waits until n is the leader (a bootstrapped single node elects itself).
func waitSelfLeader(t testing.TB, n *Node) {
	t.Helper()
	eventually(t, 10*time.Second, n.ID()+" becomes leader", func() error {
		if !n.IsLeader() {
			return fmt.Errorf("state %s", n.raft.State())
		}
		return nil
	})
}

// cluster is a set of nodes on loopback; cfgs[i] opens nodes[i] again after a restart.
type cluster struct {
	t     testing.TB
	log   zerolog.Logger
	mu    sync.Mutex // guards nodes for fetchBlob
	cfgs  []Config
	nodes []*Node
}

// newCluster starts node 0 bootstrapped and joins the others as voters.
func newCluster(t testing.TB, size int, tweak func(*Config)) *cluster {
	t.Helper()
	c := &cluster{t: t, log: testLogger(t)}
	ctx := testContext(t)
	for i := range size {
		cfg := testConfig(t, fmt.Sprintf("n%d", i), c.log)
		cfg.Bootstrap = i == 0
		cfg.FetchBlob = c.fetchBlob
		if tweak != nil {
			tweak(&cfg)
		}
		n := mustOpen(t, cfg)
		cfg.RaftAddr = n.Addr() // a restart must use the same address
		c.add(cfg, n)
		if i == 0 {
			waitSelfLeader(t, n)
			continue
		}
		// A leader whose new follower is still catching up may step down; join through
		// whoever leads now.
		eventually(t, 10*time.Second, "join "+cfg.ID, func() error {
			return c.waitLeader(c.nodes[:i]).AddVoter(ctx, cfg.ID, n.Addr())
		})
	}
	c.waitLeader(nil)
	return c
}

// fetchBlob is the nodes' BlobFetcher: what the Server does over gRPC, from the other
// nodes' stores directly.
func (c *cluster) fetchBlob(_ context.Context, hash string, _ int64) ([]byte, error) {
	c.mu.Lock()
	nodes := slices.Clone(c.nodes)
	c.mu.Unlock()
	for _, n := range nodes {
		if b, err := n.Blob(hash); err == nil {
			return b, nil
		}
	}
	return nil, fmt.Errorf("blob %s: on no node", hash)
}

// add appends a node opened with cfg.
func (c *cluster) add(cfg Config, n *Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cfgs, c.nodes = append(c.cfgs, cfg), append(c.nodes, n)
}

// leader waits until exactly one of the live nodes is leader and every live node knows it.
func (c *cluster) waitLeader(live []*Node) *Node {
	c.t.Helper()
	if live == nil {
		live = c.nodes
	}
	var leader *Node
	eventually(c.t, 10*time.Second, "a leader known to all", func() error {
		leader = nil
		for _, n := range live {
			if n.IsLeader() {
				if leader != nil {
					return fmt.Errorf("two leaders: %s and %s", leader.ID(), n.ID())
				}
				leader = n
			}
		}
		if leader == nil {
			return fmt.Errorf("no leader")
		}
		for _, n := range live {
			if addr, _ := n.Leader(); addr != leader.Addr() {
				return fmt.Errorf("%s thinks the leader is %q, not %s", n.ID(), addr, leader.Addr())
			}
		}
		return nil
	})
	return leader
}

// restart closes every node and opens them again from their data dirs.
func (c *cluster) restart() {
	c.t.Helper()
	for _, n := range c.nodes {
		if err := n.Close(); err != nil {
			c.t.Fatalf("Close(%s): %v", n.ID(), err)
		}
	}
	for i, cfg := range c.cfgs {
		n := mustOpen(c.t, cfg)
		c.mu.Lock()
		c.nodes[i] = n
		c.mu.Unlock()
	}
}

// memSink is a raft.SnapshotSink in memory.
type memSink struct {
	buf      []byte
	closed   bool
	canceled bool
}

func (s *memSink) Write(p []byte) (int, error) { s.buf = append(s.buf, p...); return len(p), nil }
func (s *memSink) Close() error                { s.closed = true; return nil }
func (s *memSink) ID() string                  { return "mem" }
func (s *memSink) Cancel() error               { s.canceled = true; return nil }

var _ io.Writer = (*memSink)(nil)

// blobHash names a blob as the store does.
func blobHash(b []byte) string { return BlobHash(b) }
