package store

import (
	"fmt"
	"strconv"
	"sync"
)

// Inspection of a member's storage, for operators' checks and the tests of the packages that
// build on Node.

// BlobDir returns the directory of this member's blob store (a file per model or
// checkpoint, named by its sha256).
func (n *Node) BlobDir() string { return n.fsm.blobs.dir }

// LogIndexes returns the first and last index of this member's raft log and the index of
// its last snapshot (0 if none): compaction keeps first above 1 once snapshots are taken.
func (n *Node) LogIndexes() (first, last, snapshot uint64, err error) {
	if first, err = n.store.FirstIndex(); err != nil {
		return 0, 0, 0, fmt.Errorf("raft log of %s: %w", n.cfg.ID, err)
	}
	if last, err = n.store.LastIndex(); err != nil {
		return 0, 0, 0, fmt.Errorf("raft log of %s: %w", n.cfg.ID, err)
	}
	snapshot, _ = strconv.ParseUint(n.raft.Stats()["last_snapshot_index"], 10, 64)
	return first, last, snapshot, nil
}

// PauseApply makes this member stop applying committed commands (it lags behind the log)
// until resume is called; resume may be called more than once. Tests use it to check what a
// lagging member answers.
func (n *Node) PauseApply() (resume func()) {
	hold := make(chan struct{})
	n.fsm.hold.Store(&hold)
	var once sync.Once
	return func() {
		once.Do(func() {
			n.fsm.hold.Store(nil)
			close(hold)
		})
	}
}
