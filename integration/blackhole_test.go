package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// signal sends sig to the process.
func (p *proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("%s was not started", p.name)
	}
	return cmd.Process.Signal(sig)
}

// clientAt runs the command line against the coordinators at addrs only (a stopped member
// answers nothing, so the client must not wait on it) and decodes its --json output into v.
func (c *cluster) clientAt(addrs []string, v any, args ...string) error {
	// A `submit --wait` lasts as long as its job: on a loaded machine with leader changes a
	// 40-iteration gl job on yacht outlived a 30 s limit (CI, 2026-11-28).
	ctx, cancel := context.WithTimeout(context.Background(), clientLimit(args, 30*time.Second))
	defer cancel()
	args = append(append(args, "--json", "--leader-wait", "1s"), c.clientFlags...)
	args = append(args, "--addr", strings.Join(addrs, ","))
	cmd := exec.CommandContext(ctx, bins.coordinator, args...)
	cmd.Env = append(os.Environ(), "GPREDUCE_ADDR=", "GPREDUCE_TOKEN="+c.token)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	return json.Unmarshal(out.Bytes(), v)
}

// TestBlackholedLeader: the leader is SIGSTOPped (it keeps its sockets, answers nothing),
// the other two members elect a new leader, and every worker serves the new leader within
// 5 s of the election; a job submitted then runs to success on them. The waits are generous
// (minutes); the 5 s bound is on the measured time.
func TestBlackholedLeader(t *testing.T) {
	c := newCluster(t, 3)
	c.startWorkers(2)
	old := c.leader()
	var live []string
	for i, co := range c.coords {
		if i != old {
			live = append(live, co.apiAddr)
		}
	}
	stopped := c.coords[old].proc
	if err := stopped.signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stopped.signal(syscall.SIGCONT) })
	stoppedAt := time.Now()

	var leader string
	eventually(t, 2*time.Minute, "a new leader among the other members", func() error {
		var ms []member
		if err := c.clientAt(live, &ms, "members"); err != nil {
			return err
		}
		for _, m := range ms {
			if m.Leader && m.ID != c.coords[old].id {
				leader = m.ID
				return nil
			}
		}
		return fmt.Errorf("no new leader in %+v", ms)
	})
	electedAt := time.Now()
	eventually(t, 2*time.Minute, "both workers registered with the new leader", func() error {
		var ws []workerInfo
		if err := c.clientAt(live, &ws, "workers"); err != nil {
			return err
		}
		if len(ws) != len(c.workers) {
			return fmt.Errorf("%d workers: %+v", len(ws), ws)
		}
		return nil
	})
	servedAt := time.Now()
	took := servedAt.Sub(electedAt)
	t.Logf("leader %s stopped; new leader %s seen after %s; workers serve it %s after that (%s after the stop)",
		c.coords[old].id, leader, electedAt.Sub(stoppedAt).Round(time.Millisecond), took.Round(time.Millisecond),
		servedAt.Sub(stoppedAt).Round(time.Millisecond))
	if took > 5*time.Second {
		t.Errorf("the workers took %s to serve the new leader, want under 5 s", took)
	}

	y := yacht(t)
	var sub struct {
		ID    string `json:"id"`
		State string `json:"state"`
		Error string `json:"error"`
	}
	if err := c.clientAt(live, &sub, append([]string{"submit", "--wait"}, y.submitArgs()...)...); err != nil {
		t.Fatal(err)
	}
	if sub.State != "succeeded" {
		t.Fatalf("job on the new leader: %+v", sub)
	}
}
