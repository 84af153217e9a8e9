package store

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// forger is the attack of issue 14: a program that speaks hashicorp/raft's wire protocol over
// plain TCP (raft's own NetworkTransport), learns a member's term and last index from the
// answer to a stale AppendEntries, and then sends AppendEntries with term+1 carrying an
// encoded submit command, committed at once through LeaderCommit.
type forger struct {
	trans *raft.NetworkTransport
}

func newForger(t *testing.T) *forger {
	t.Helper()
	trans, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 2*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = trans.Close() })
	return &forger{trans: trans}
}

func (f *forger) header() raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("attacker"), Addr: []byte(f.trans.LocalAddr())}
}

// forge sends the forged submit of job id to the member at addr and returns the member's
// answer, or the transport's error.
func (f *forger) forge(target raft.ServerAddress, id string) (*raft.AppendEntriesResponse, error) {
	var probe raft.AppendEntriesResponse
	if err := f.trans.AppendEntries("victim", target, &raft.AppendEntriesRequest{RPCHeader: f.header()}, &probe); err != nil {
		return nil, fmt.Errorf("read the term: %w", err)
	}
	cmd, err := encodeCommand(opSubmit, submitCmd{ID: id, Spec: []byte("forged"), Time: time.Now()})
	if err != nil {
		return nil, err
	}
	term, next := probe.Term+1, probe.LastLog+1
	req := &raft.AppendEntriesRequest{
		RPCHeader: f.header(), Term: term, LeaderCommitIndex: next,
		Entries: []*raft.Log{{Index: next, Term: term, Type: raft.LogCommand, Data: cmd}},
	}
	var resp raft.AppendEntriesResponse
	if err := f.trans.AppendEntries("victim", target, req, &resp); err != nil {
		return nil, fmt.Errorf("forged append: %w", err)
	}
	return &resp, nil
}

// TestForgedAppendEntries reproduces the attack on the raft port: against a member without
// raft security (allowed only alone on loopback) the forged entry is committed, which shows
// the forger works; against a 3-member cluster with a raft secret, or with mutual TLS, every
// member refuses the connection and no member ever holds the forged job.
func TestForgedAppendEntries(t *testing.T) {
	t.Run("plain single member (control)", func(t *testing.T) {
		cfg := testConfig(t, "plain", testLogger(t))
		cfg.Security, cfg.Bootstrap = RaftSecurity{}, true
		n := mustOpen(t, cfg)
		waitSelfLeader(t, n)
		resp, err := newForger(t).forge(raft.ServerAddress(n.Addr()), "forged")
		if err != nil || !resp.Success {
			t.Fatalf("the forger failed against a plain member (%+v, %v): the attack test proves nothing", resp, err)
		}
		eventually(t, 10*time.Second, "the forged job applied on the plain member", func() error {
			_, err := n.Job("forged")
			return err
		})
	})

	ca := newTestCA(t, "cluster CA")
	for _, tc := range []struct {
		name string
		sec  func() RaftSecurity
	}{
		{"secret", func() RaftSecurity { return RaftSecurity{Secret: []byte(testRaftSecret)} }},
		{"mutual TLS", func() RaftSecurity { return ca.configs(t, ca) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 3, func(cfg *Config) { cfg.Security = tc.sec() })
			f := newForger(t)
			for _, n := range c.nodes {
				if resp, err := f.forge(raft.ServerAddress(n.Addr()), "forged"); err == nil {
					t.Errorf("member %s answered the forger: %+v", n.ID(), resp)
				} else {
					t.Logf("member %s: %v", n.ID(), err)
				}
			}
			// A real submit after the attack reaches every member; the forged one none.
			leader := c.waitLeader(nil)
			if err := leader.SubmitJob(testContext(t), "real", []byte("spec"), time.Time{}); err != nil {
				t.Fatal(err)
			}
			eventually(t, 10*time.Second, "the real job on every member", func() error {
				for _, n := range c.nodes {
					if _, err := n.Job("real"); err != nil {
						return fmt.Errorf("%s: %w", n.ID(), err)
					}
				}
				return nil
			})
			for _, n := range c.nodes {
				if j, err := n.Job("forged"); err == nil {
					t.Errorf("member %s holds the forged job: %+v", n.ID(), j)
				}
			}
		})
	}
}

// TestInsecureRaftRefusesMembers: without raft security a node refuses a non-loopback raft
// address, new voters and a restart into a cluster of several members, and a server refuses
// to join a cluster.
func TestInsecureRaftRefusesMembers(t *testing.T) {
	log := testLogger(t)
	cfg := testConfig(t, "plain", log)
	cfg.Security, cfg.Bootstrap = RaftSecurity{}, true
	n := mustOpen(t, cfg)
	waitSelfLeader(t, n)
	if err := n.AddVoter(testContext(t), "other", "127.0.0.1:1"); !errors.Is(err, ErrInsecureRaft) {
		t.Errorf("AddVoter on a plain node: %v, want ErrInsecureRaft", err)
	}

	wide := testConfig(t, "wide", log)
	wide.Security, wide.RaftAddr = RaftSecurity{}, "0.0.0.0:0"
	if _, err := Open(t.Context(), wide); !errors.Is(err, ErrInsecureRaft) {
		t.Errorf("Open on 0.0.0.0 without raft security: %v, want ErrInsecureRaft", err)
	}

	c := newCluster(t, 2, nil)
	restart := c.cfgs[1]
	// The joined member must hold the two-member configuration in its own log before it
	// stops (on a loaded machine it may still be catching up when newCluster returns).
	eventually(t, 10*time.Second, "n1 stores the two-member configuration", func() error {
		ms, err := c.nodes[1].Servers(testContext(t))
		if err != nil {
			return err
		}
		if len(ms) != 2 {
			return fmt.Errorf("n1 knows %d members", len(ms))
		}
		return nil
	})
	if err := c.nodes[1].Close(); err != nil {
		t.Fatal(err)
	}
	restart.Security = RaftSecurity{}
	if _, err := Open(t.Context(), restart); !errors.Is(err, ErrInsecureRaft) {
		t.Errorf("restarting a member of a 2-member cluster without raft security: %v, want ErrInsecureRaft", err)
	}

}
