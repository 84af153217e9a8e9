package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// ErrNotReady means a member cannot serve yet: it knows no leader, has lost contact with
// it, or is still applying committed log entries.
var ErrNotReady = errors.New("not ready")

// Readiness returns nil when the node can serve reads and forward writes: it is the leader, or a
// follower that heard from the leader within two heartbeat timeouts; and it has applied
// every log entry it knows to be committed. Otherwise it returns an error wrapping
// ErrNotReady (or ErrClosed) that says why.
//
// "Caught up" is judged from what this member knows: a follower learns the commit index
// from the leader's heartbeats, so a member still receiving a snapshot or a long backlog
// is not ready until it has applied what the leader told it was committed.
func (n *Node) Readiness() error {
	state := n.raft.State()
	switch state {
	case raft.Shutdown:
		return ErrClosed
	case raft.Candidate:
		return fmt.Errorf("%w: election in progress, no leader", ErrNotReady)
	}
	addr, id := n.Leader()
	if addr == "" {
		return fmt.Errorf("%w: no leader known", ErrNotReady)
	}
	if state == raft.Follower {
		bound := 2 * n.cfg.HeartbeatTimeout
		if since := time.Since(n.raft.LastContact()); since > bound {
			return fmt.Errorf("%w: no contact with the leader %s for %s (more than %s)", ErrNotReady, id, since.Round(time.Millisecond), bound)
		}
	}
	if applied, commit := n.raft.AppliedIndex(), n.raft.CommitIndex(); applied < commit {
		return fmt.Errorf("%w: applied the log to index %d of %d committed", ErrNotReady, applied, commit)
	}
	return nil
}
