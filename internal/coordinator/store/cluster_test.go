package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"
)

// fixture is what writeFixture stores: a succeeded job with a model, a running job with a
// checkpoint, a pending job.
type fixture struct {
	model []byte
	jobs  []Job // as read on the leader after writing
}

func writeFixture(t *testing.T, ctx context.Context, leader *Node) fixture {
	t.Helper()
	model := make([]byte, 7777) // 8 chunks
	rand.Read(model)
	mustDo(t, leader.SubmitJob(ctx, "done", []byte(`{"method":"gl"}`), t0))
	mustDo(t, leader.SetState(ctx, "done", JobRunning, "", t0.Add(time.Second)))
	mustDo(t, leader.PutModel(ctx, "done", model, []byte(`{"rmse":0.1}`), t0.Add(2*time.Second)))
	mustDo(t, leader.SetState(ctx, "done", JobSucceeded, "", t0.Add(3*time.Second)))
	mustDo(t, leader.SubmitJob(ctx, "running", []byte(`{"method":"cg"}`), t0.Add(time.Minute)))
	mustDo(t, leader.SetState(ctx, "running", JobRunning, "", t0.Add(time.Minute)))
	mustDo(t, leader.SaveCheckpoint(ctx, "running", 12, -3.25, []byte("optimizer state"), t0.Add(2*time.Minute)))
	mustDo(t, leader.SubmitJob(ctx, "pending", nil, t0.Add(time.Hour)))
	return fixture{model: model, jobs: leader.Jobs()}
}

// hasFixture reports whether n's state holds the fixture.
func hasFixture(n *Node, fx fixture) error {
	got := n.Jobs()
	if !reflect.DeepEqual(normalize(got), normalize(fx.jobs)) {
		return fmt.Errorf("%s has jobs %+v", n.ID(), got)
	}
	m, err := n.Model("done")
	if err != nil {
		return fmt.Errorf("%s: %w", n.ID(), err)
	}
	if !bytes.Equal(m, fx.model) {
		return fmt.Errorf("%s: model differs", n.ID())
	}
	return nil
}

func waitFixture(t *testing.T, nodes []*Node, fx fixture) {
	t.Helper()
	for _, n := range nodes {
		eventually(t, 10*time.Second, n.ID()+" has the replicated state", func() error { return hasFixture(n, fx) })
	}
}

func without(nodes []*Node, n *Node) []*Node {
	return slices.DeleteFunc(slices.Clone(nodes), func(m *Node) bool { return m == n })
}

// checkNotLeader checks that a proposal on follower f fails with a NotLeaderError naming
// the leader.
func checkNotLeader(t *testing.T, ctx context.Context, f, leader *Node) {
	t.Helper()
	err := f.SubmitJob(ctx, "via-follower", nil, t0)
	var nle *NotLeaderError
	if !errors.Is(err, ErrNotLeader) || !errors.As(err, &nle) {
		t.Fatalf("submit on follower %s: %v, want a NotLeaderError", f.ID(), err)
	}
	if nle.Leader != leader.Addr() || nle.LeaderID != leader.ID() {
		t.Fatalf("NotLeaderError names %s at %s, want %s at %s", nle.LeaderID, nle.Leader, leader.ID(), leader.Addr())
	}
	if err := f.AddVoter(ctx, "x", "127.0.0.1:1"); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("AddVoter on follower: %v", err)
	}
	if err := f.Barrier(ctx); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("Barrier on follower: %v", err)
	}
}

func TestClusterReplicatesAndFailsOver(t *testing.T) {
	for _, mode := range []string{"close", "hard-stop"} {
		t.Run(mode, func(t *testing.T) {
			c := newCluster(t, 3, nil)
			ctx := testContext(t)
			leader := c.waitLeader(nil)
			servers, err := leader.Servers(ctx)
			if err != nil || len(servers) != 3 {
				t.Fatalf("Servers() = %+v, %v", servers, err)
			}

			// Followers see leadership changes too: they start with false.
			followers := without(c.nodes, leader)
			if v := <-followers[0].LeadershipChanges(); v {
				t.Fatal("follower reports leadership")
			}

			fx := writeFixture(t, ctx, leader)
			waitFixture(t, c.nodes, fx)
			for _, f := range followers {
				checkNotLeader(t, ctx, f, leader)
			}

			start := time.Now()
			switch mode {
			case "close":
				mustDo(t, leader.Close())
			case "hard-stop":
				// The network goes first, then the process, without any handover.
				_ = leader.trans.Close()
				_ = leader.close(false)
			}
			next := c.waitLeader(followers)
			// Only logged: how fast a new leader is elected is shown by the raft timeouts, not
			// measured here, where a loaded machine may be slow.
			t.Logf("%s: new leader %s after %s", mode, next.ID(), time.Since(start))
			if err := hasFixture(next, fx); err != nil {
				// The new leader has every committed entry; wait for it to apply them.
				mustDo(t, next.Barrier(ctx))
				mustDo(t, hasFixture(next, fx))
			}
			mustDo(t, next.Barrier(ctx))
			if running := next.JobsInState(JobRunning); len(running) != 1 || running[0].Iteration != 12 || string(running[0].Checkpoint) != "optimizer state" {
				t.Fatalf("running jobs on the new leader: %+v", running)
			}

			// The two survivors still make progress, and the follower redirects to the new leader.
			mustDo(t, next.SaveCheckpoint(ctx, "running", 13, -3.5, []byte("resumed"), t0.Add(3*time.Minute)))
			mustDo(t, next.SubmitJob(ctx, "after-failover", nil, t0.Add(2*time.Hour)))
			other := without(followers, next)[0]
			eventually(t, 10*time.Second, "replication to the surviving follower", func() error {
				j, err := other.Job("running")
				if err != nil || j.Iteration != 13 {
					return fmt.Errorf("iteration %d, %v", j.Iteration, err)
				}
				_, err = other.Job("after-failover")
				return err
			})
			checkNotLeader(t, ctx, other, next)
		})
	}
}

func TestClusterFullRestart(t *testing.T) {
	c := newCluster(t, 3, nil)
	ctx := testContext(t)
	leader := c.waitLeader(nil)
	fx := writeFixture(t, ctx, leader)
	waitFixture(t, c.nodes, fx)

	c.restart() // node 0 still has Bootstrap set: it must not bootstrap again
	leader = c.waitLeader(nil)
	waitFixture(t, c.nodes, fx)
	servers, err := leader.Servers(ctx)
	if err != nil || len(servers) != 3 {
		t.Fatalf("servers after restart: %+v, %v", servers, err)
	}
	mustDo(t, leader.SetState(ctx, "running", JobFailed, "stopped", t0.Add(time.Hour)))
	for _, n := range c.nodes {
		eventually(t, 10*time.Second, "replication after restart", func() error {
			if j, _ := n.Job("running"); j.State != JobFailed {
				return fmt.Errorf("%s: job is %s", n.ID(), j.State)
			}
			return nil
		})
	}
}

// TestClusterSnapshotInstallAndRestart: the leader snapshots and compacts its log, so a node
// that joins afterwards is brought up to date with the snapshot over the network; then the
// whole cluster restarts from snapshots plus log tails.
func TestClusterSnapshotInstallAndRestart(t *testing.T) {
	c := newCluster(t, 2, func(cfg *Config) { cfg.TrailingLogs = 1 })
	ctx := testContext(t)
	leader := c.waitLeader(nil)
	fx := writeFixture(t, ctx, leader)
	waitFixture(t, c.nodes, fx)
	for _, n := range c.nodes {
		mustDo(t, n.Snapshot(ctx))
	}
	if first, _ := leader.store.FirstIndex(); first <= 2 {
		t.Fatalf("leader log not compacted: first index %d", first)
	}

	cfg := testConfig(t, "late", c.log)
	cfg.TrailingLogs = 1
	cfg.FetchBlob = c.fetchBlob // the snapshot names the model; the late node fetches it
	late := mustOpen(t, cfg)
	cfg.RaftAddr = late.Addr()
	c.add(cfg, late)
	eventually(t, 10*time.Second, "join late", func() error {
		return c.waitLeader(c.nodes[:2]).AddVoter(ctx, "late", late.Addr())
	})
	waitFixture(t, []*Node{late}, fx)
	if snaps, _ := filepath.Glob(filepath.Join(cfg.DataDir, "snapshots", "*", "state.bin")); len(snaps) == 0 {
		t.Fatal("the late node caught up without installing the leader's snapshot")
	}

	mustDo(t, leader.SubmitJob(ctx, "after-snapshot", nil, t0.Add(3*time.Hour)))
	for _, n := range c.nodes {
		eventually(t, 10*time.Second, "replication", func() error { _, err := n.Job("after-snapshot"); return err })
	}
	want := leader.Jobs()
	c.restart()
	leader = c.waitLeader(nil)
	for _, n := range c.nodes {
		eventually(t, 10*time.Second, n.ID()+" restored", func() error {
			if got := n.Jobs(); !reflect.DeepEqual(normalize(got), normalize(want)) {
				return fmt.Errorf("jobs %+v", got)
			}
			return nil
		})
		if m, err := n.Model("done"); err != nil || !bytes.Equal(m, fx.model) {
			t.Fatalf("%s: model after restart: %v", n.ID(), err)
		}
	}
}

func TestClusterRemoveServer(t *testing.T) {
	c := newCluster(t, 3, nil)
	ctx := testContext(t)
	leader := c.waitLeader(nil)
	followers := without(c.nodes, leader)
	gone, stay := followers[0], followers[1]

	if err := stay.RemoveServer(ctx, gone.ID()); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("RemoveServer on follower: %v", err)
	}
	mustDo(t, leader.RemoveServer(ctx, gone.ID()))
	servers, err := leader.Servers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range servers {
		ids = append(ids, s.ID)
	}
	slices.Sort(ids)
	want := []string{leader.ID(), stay.ID()}
	slices.Sort(want)
	if !reflect.DeepEqual(ids, want) {
		t.Fatalf("servers after removal %v, want %v", ids, want)
	}

	// The two remaining voters commit without it, while it is still running (and, no longer
	// hearing from a leader, asking for votes that the members refuse).
	mustDo(t, leader.SubmitJob(ctx, "two-node", nil, t0))
	eventually(t, 10*time.Second, "replication to the remaining follower", func() error {
		_, err := stay.Job("two-node")
		return err
	})
	if _, err := gone.Job("two-node"); !errors.Is(err, ErrJobNotFound) {
		t.Fatalf("removed node got the job: %v", err)
	}
	mustDo(t, gone.Close())
	leader = c.waitLeader([]*Node{leader, stay})
	mustDo(t, leader.SubmitJob(ctx, "after-close", nil, t0))

	// Removing the leader itself: it steps down (and shuts its raft down), leaving a
	// single-voter configuration whose voter elects itself.
	follower := without(without(c.nodes, gone), leader)
	mustDo(t, leader.RemoveServer(ctx, leader.ID()))
	next := c.waitLeader(follower)
	eventually(t, 10*time.Second, "the remaining node has the state", func() error {
		_, err := next.Job("after-close")
		return err
	})
	servers, err = next.Servers(ctx)
	if err != nil || len(servers) != 1 || servers[0].ID != next.ID() {
		t.Fatalf("servers after removing the leader: %+v, %v", servers, err)
	}
	mustDo(t, next.SubmitJob(ctx, "single", nil, t0))
}
