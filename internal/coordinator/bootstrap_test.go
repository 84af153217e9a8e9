package coordinator

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/gpreduce/gpreduce/internal/testutil"
)

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) string {
	t.Helper()
	_, port, _ := net.SplitHostPort(testutil.FreeAddr(t))
	return port
}

// statefulSet is three members configured as deploy/k8s configures its pods: the same
// --join list of every member's API address, raft and API addresses advertised by DNS name
// ("localhost"), and BootstrapIfEmpty on member 0 only.
type statefulSet struct {
	t    *testing.T
	cfgs []ServerConfig
	srvs []*runningServer
}

func newStatefulSet(t *testing.T) *statefulSet {
	log := testLogger(t)
	ss := &statefulSet{t: t}
	var join []string
	for i := range 3 {
		cfg := testServerConfig(t, fmt.Sprintf("coordinator-%d", i), log)
		raftPort, apiPort := freePort(t), freePort(t)
		cfg.RaftAddr, cfg.RaftAdvertiseAddr = "127.0.0.1:"+raftPort, "localhost:"+raftPort
		cfg.APIAddr, cfg.APIAdvertiseAddr = "127.0.0.1:"+apiPort, "localhost:"+apiPort
		cfg.BootstrapIfEmpty = i == 0
		join = append(join, cfg.APIAdvertiseAddr)
		ss.cfgs = append(ss.cfgs, cfg)
	}
	for i := range ss.cfgs {
		ss.cfgs[i].Join = join
	}
	ss.srvs = make([]*runningServer, 3)
	return ss
}

// start starts the given members at once, as a StatefulSet with parallel pod management
// does, and waits until each has opened (joined, bootstrapped or restarted).
func (ss *statefulSet) start(members ...int) {
	ss.t.Helper()
	var wg sync.WaitGroup
	for _, i := range members {
		wg.Go(func() { ss.srvs[i] = startServerNoFatal(ss.t, ss.cfgs[i]) })
	}
	wg.Wait()
	for _, i := range members {
		if ss.srvs[i] == nil {
			ss.t.FailNow()
		}
	}
}

// startServerNoFatal is startServer for use off the test goroutine.
func startServerNoFatal(t *testing.T, cfg ServerConfig) *runningServer {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s, err := OpenServer(ctx, cfg)
	if err != nil {
		t.Errorf("OpenServer(%s): %v", cfg.ID, err)
		return nil
	}
	rctx, stop := context.WithCancel(context.Background())
	r := &runningServer{Server: s, stop: stop, runDone: make(chan error, 1)}
	go func() { r.runDone <- s.Run(rctx) }()
	t.Cleanup(func() { _ = r.close() })
	return r
}

// waitOneCluster waits until every running member is ready and they all list the same three
// members with raft addresses by DNS name, and returns the ID of the leader.
func (ss *statefulSet) waitOneCluster() string {
	ss.t.Helper()
	raftAddrs := map[string]string{}
	for _, c := range ss.cfgs {
		raftAddrs[c.ID] = c.RaftAdvertiseAddr
	}
	var leader string
	eventually(ss.t, 2*time.Minute, "one cluster of three ready members", func() error {
		leader = ""
		for _, s := range ss.srvs {
			if err := s.Readiness(); err != nil {
				return fmt.Errorf("%s: %w", s.node.ID(), err)
			}
			ms, err := s.node.Servers(ss.t.Context())
			if err != nil {
				return err
			}
			if len(ms) != 3 {
				return fmt.Errorf("%s lists %d members: %+v", s.node.ID(), len(ms), ms)
			}
			for _, m := range ms {
				if want := raftAddrs[m.ID]; m.Addr != want {
					return fmt.Errorf("%s lists %s at %s, want %q", s.node.ID(), m.ID, m.Addr, want)
				}
			}
			_, id := s.node.Leader()
			if leader != "" && id != leader {
				return fmt.Errorf("members disagree on the leader: %s and %s", leader, id)
			}
			leader = id
		}
		return nil
	})
	return leader
}

// TestBootstrapIfEmpty runs the StatefulSet's start-up from a cold start (all three members
// start at once with empty data: member 0 bootstraps, the others join), a restart of every
// member with its data (they find each other by DNS name and elect a leader), and the loss
// of member 0's data (it joins the existing cluster instead of bootstrapping a second one,
// and receives the replicated state).
func TestBootstrapIfEmpty(t *testing.T) {
	ss := newStatefulSet(t)
	ss.start(0, 1, 2)
	ss.waitOneCluster()
	for _, s := range ss.srvs {
		if s.node.HadState() {
			t.Errorf("%s had state on a cold start", s.node.ID())
		}
	}
	// Something replicated to find after the restarts: the members' API addresses.
	if got := len(ss.srvs[0].node.MemberAPIs()); got != 3 {
		eventually(t, time.Minute, "API addresses recorded", func() error {
			if got := len(ss.srvs[0].node.MemberAPIs()); got != 3 {
				return fmt.Errorf("%d recorded", got)
			}
			return nil
		})
	}

	// Restart every member with its data, all at once.
	for _, s := range ss.srvs {
		if err := s.close(); err != nil {
			t.Fatal(err)
		}
	}
	ss.start(0, 1, 2)
	ss.waitOneCluster()
	for _, s := range ss.srvs {
		if !s.node.HadState() {
			t.Errorf("%s restarted without its state", s.node.ID())
		}
	}

	// Member 0 loses its data: it must join the cluster of 1 and 2, not bootstrap its own.
	if err := ss.srvs[0].close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(ss.cfgs[0].DataDir); err != nil {
		t.Fatal(err)
	}
	ss.start(0)
	if ss.srvs[0].node.HadState() {
		t.Fatal("member 0 found state in a wiped data dir")
	}
	ss.waitOneCluster()
	eventually(t, time.Minute, "member 0 has the replicated state again", func() error {
		if got := len(ss.srvs[0].node.MemberAPIs()); got != 3 {
			return fmt.Errorf("member 0 knows %d API addresses", got)
		}
		return nil
	})
}
