package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/rs/zerolog"
	"go.etcd.io/bbolt"
)

// Defaults for the zero fields of Config.
//
// The raft log is kept small: models and checkpoints travel through it in chunks of
// ModelChunkBytes but are stored outside it (in the blob store, by content hash), so a
// snapshot compacts them away. A snapshot is taken after SnapshotThreshold entries or
// SnapshotBytes bytes of commands, whichever comes first, and keeps TrailingLogs entries, so
// the log holds at most about SnapshotBytes + TrailingLogs*ModelChunkBytes bytes (24 MiB
// with the defaults; snapshots are cheap, as they hold no model bytes, and a follower more
// than TrailingLogs entries behind installs one and fetches the blobs it lacks). bbolt never shrinks raft.db, so this bound is also its file size. The
// data directory then holds raft.db, the blob store (the models of the jobs kept and the
// checkpoints of the running ones) and the snapshots (job records, events and blob hashes):
// about 24 MiB plus the live blob bytes, which retention bounds.
const (
	DefaultApplyTimeout       = 10 * time.Second
	DefaultMaxCheckpointBytes = 64 << 20
	DefaultMaxModelBytes      = 512 << 20
	DefaultModelChunkBytes    = 1 << 20
	DefaultSnapshotThreshold  = 1024
	DefaultSnapshotBytes      = 8 << 20
	DefaultTrailingLogs       = 16
	DefaultTransportTimeout   = 10 * time.Second
)

// RaftDBFile is the file in Config.DataDir holding the raft log and stable store.
const RaftDBFile = "raft.db"

const (
	snapshotsRetained = 2
	blobDir           = "blobs"
	modelPipeline     = 16 // model chunks in flight at once
	boltOpenTimeout   = 5 * time.Second
	snapshotCheck     = 250 * time.Millisecond // how often the byte-triggered snapshot is considered
)

var (
	// ErrNotLeader means the node is not the raft leader, so it cannot propose changes. The
	// error returned is a *NotLeaderError naming the leader, if one is known.
	ErrNotLeader = errors.New("not the leader")
	// ErrLeadershipLost means leadership was lost while a proposal was in flight; the proposal
	// may or may not have been applied.
	ErrLeadershipLost = errors.New("leadership lost while the proposal was in flight, outcome unknown")
	// ErrClosed means the node has been closed, or its raft has shut down (as a node
	// removing itself from the cluster does).
	ErrClosed = errors.New("node closed")
)

// NotLeaderError is returned by proposals made on a node that is not the leader. It wraps
// ErrNotLeader and carries the leader's raft address and ID ("" if no leader is known), so
// the API layer can redirect or forward the request.
type NotLeaderError struct {
	// Leader is the raft address of the current leader, "" if unknown.
	Leader string
	// LeaderID is the server ID of the current leader, "" if unknown.
	LeaderID string
}

// Error describes the error.
func (e *NotLeaderError) Error() string {
	if e.Leader == "" {
		return "not the leader (no leader known)"
	}
	return fmt.Sprintf("not the leader (leader is %s at %s)", e.LeaderID, e.Leader)
}

// Unwrap returns ErrNotLeader.
func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }

// Config configures a Node. ID, RaftAddr and DataDir are required; zero values elsewhere
// select the defaults.
type Config struct {
	// ID is the node's raft server ID, unique and stable across restarts.
	ID string
	// RaftAddr is the host:port the raft TCP transport listens on. Port 0 picks a free port
	// (see Node.Addr); a restarted node must use the address the cluster knows it by.
	RaftAddr string
	// AdvertiseAddr is the address other members dial, if it differs from RaftAddr (for
	// example when RaftAddr is 0.0.0.0:7000): host:port with a DNS name or an IP. A DNS
	// name is resolved on every dial, so a member keeps its raft address when its IP
	// changes (a Kubernetes StatefulSet pod's stable name).
	AdvertiseAddr string
	// DataDir holds the raft log and stable store (raft.db) and the snapshots.
	DataDir string
	// Bootstrap makes a node without existing raft state bootstrap a single-node cluster
	// with itself as the voter. A node that has state never bootstraps again.
	Bootstrap bool
	// Logger receives the node's and raft's logs.
	Logger zerolog.Logger
	// FetchBlob gets a model or checkpoint this node lacks from another member (the coordinator
	// asks them over gRPC). Snapshots carry blob hashes, not bytes, so a node that installs
	// one from the leader needs it; without it such a node cannot serve those blobs.
	FetchBlob BlobFetcher

	// ApplyTimeout bounds how long a proposal waits to be accepted by raft (default 10 s);
	// the context bounds the whole call.
	ApplyTimeout time.Duration
	// MaxCheckpointBytes is the largest checkpoint SaveCheckpoint accepts (default 64 MiB).
	MaxCheckpointBytes int64
	// MaxModelBytes is the largest model PutModel accepts (default 512 MiB).
	MaxModelBytes int64
	// ModelChunkBytes is the size of the chunks PutModel and SaveCheckpoint write models and
	// checkpoints in (default 1 MiB); it bounds the size of a log entry.
	ModelChunkBytes int

	// SnapshotThreshold is the number of log entries since the last snapshot that triggers
	// a snapshot (default 1024).
	SnapshotThreshold uint64
	// SnapshotBytes is the number of command bytes applied since the last snapshot that
	// triggers one (default 8 MiB), checked every 250 ms.
	SnapshotBytes int64
	// SnapshotInterval is how often raft checks whether to snapshot (raft's default 120 s).
	SnapshotInterval time.Duration
	// TrailingLogs is the number of log entries kept after a snapshot (default 16), so a
	// follower that lags by fewer catches up from the log rather than a snapshot.
	TrailingLogs uint64

	// HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout and CommitTimeout tune raft;
	// zero selects raft's defaults (1 s, 1 s, 500 ms, 50 ms), adjusted to stay consistent
	// with the fields that are set. The tests use 200-250 ms.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	// TransportTimeout is the raft transport's I/O deadline (default 10 s); it also bounds
	// each connection's authentication handshake.
	TransportTimeout time.Duration

	// Security authenticates (and encrypts) the raft traffic; see RaftSecurity. Without it
	// the node must be a single member on a loopback address: Open refuses a non-loopback
	// RaftAddr or AdvertiseAddr and a restart whose configuration has other members, and
	// AddVoter refuses new members (ErrInsecureRaft).
	Security RaftSecurity
}

// raftConfig validates c, fills in defaults and returns the raft configuration.
func (c *Config) raftConfig() (*raft.Config, error) {
	switch {
	case c.ID == "":
		return nil, fmt.Errorf("config: ID is required: %w", ErrInvalidArgument)
	case c.RaftAddr == "":
		return nil, fmt.Errorf("config: RaftAddr is required: %w", ErrInvalidArgument)
	case c.DataDir == "":
		return nil, fmt.Errorf("config: DataDir is required: %w", ErrInvalidArgument)
	case c.MaxCheckpointBytes < 0 || c.MaxModelBytes < 0 || c.ModelChunkBytes < 0 || c.SnapshotBytes < 0:
		return nil, fmt.Errorf("config: negative size limit: %w", ErrInvalidArgument)
	}
	setDefault(&c.ApplyTimeout, DefaultApplyTimeout)
	setDefault(&c.MaxCheckpointBytes, DefaultMaxCheckpointBytes)
	setDefault(&c.MaxModelBytes, DefaultMaxModelBytes)
	setDefault(&c.ModelChunkBytes, DefaultModelChunkBytes)
	setDefault(&c.SnapshotThreshold, DefaultSnapshotThreshold)
	setDefault(&c.SnapshotBytes, DefaultSnapshotBytes)
	setDefault(&c.TrailingLogs, DefaultTrailingLogs)
	setDefault(&c.TransportTimeout, DefaultTransportTimeout)

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.ID)
	rc.SnapshotThreshold = c.SnapshotThreshold
	rc.TrailingLogs = c.TrailingLogs
	rc.NoLegacyTelemetry = true
	setDefault(&c.SnapshotInterval, rc.SnapshotInterval)
	setDefault(&c.HeartbeatTimeout, rc.HeartbeatTimeout)
	setDefault(&c.ElectionTimeout, max(rc.ElectionTimeout, c.HeartbeatTimeout))
	setDefault(&c.LeaderLeaseTimeout, min(rc.LeaderLeaseTimeout, c.HeartbeatTimeout))
	setDefault(&c.CommitTimeout, min(rc.CommitTimeout, c.HeartbeatTimeout))
	rc.SnapshotInterval = c.SnapshotInterval
	rc.HeartbeatTimeout = c.HeartbeatTimeout
	rc.ElectionTimeout = c.ElectionTimeout
	rc.LeaderLeaseTimeout = c.LeaderLeaseTimeout
	rc.CommitTimeout = c.CommitTimeout
	if err := raft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return rc, nil
}

func setDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}

// Node is one coordinator raft member: the raft instance, its stores and transport, and the
// replicated job state. Proposing methods must be called on the leader; reads return this
// member's local copy of the state, which may lag the leader's.
type Node struct {
	cfg   Config
	log   zerolog.Logger
	fsm   *fsm
	raft  *raft.Raft
	trans *raft.NetworkTransport
	store *raftboltdb.BoltStore

	existing bool // the data dir held raft state when the node opened
	// readTerm is the raft term in which a barrier of this node's last committed, so that
	// ReadIndex may answer from the commit index without another one.
	readTerm atomic.Uint64

	mu       sync.Mutex // guards subs, closed
	subs     []chan bool
	closed   bool
	stopCh   chan struct{}
	watchEnd chan struct{}
	snapEnd  chan struct{}
	blobsEnd chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// Open starts a raft member with its state in cfg.DataDir (created if needed): a raft-boltdb
// store holding both the log and the stable store, a file snapshot store keeping the last two
// snapshots, and a TCP transport on cfg.RaftAddr. If cfg.Bootstrap is set and DataDir holds
// no raft state, it bootstraps a single-node cluster. Open does not wait for a leader; see
// WaitLeader.
func Open(ctx context.Context, cfg Config) (_ *Node, err error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("open node: %w", err)
	}
	rc, err := cfg.raftConfig()
	if err != nil {
		return nil, fmt.Errorf("open node: %w", err)
	}
	logger := cfg.Logger.With().Str("node", cfg.ID).Logger()
	hl := newHclogAdapter(logger, "raft")
	rc.Logger = hl

	var cleanup []func() error
	defer func() {
		if err != nil {
			for _, f := range slices.Backward(cleanup) {
				_ = f()
			}
		}
	}()

	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("open node %s: create data dir: %w", cfg.ID, err)
	}
	store, err := raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(cfg.DataDir, RaftDBFile),
		BoltOptions: &bbolt.Options{Timeout: boltOpenTimeout},
	})
	if err != nil {
		return nil, fmt.Errorf("open node %s: open raft store: %w", cfg.ID, err)
	}
	cleanup = append(cleanup, store.Close)

	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, snapshotsRetained, hl.Named("snapshots"))
	if err != nil {
		return nil, fmt.Errorf("open node %s: open snapshot store: %w", cfg.ID, err)
	}

	if !cfg.Security.Enabled() && (!isLoopbackAddr(cfg.RaftAddr) || (cfg.AdvertiseAddr != "" && !isLoopbackAddr(cfg.AdvertiseAddr))) {
		return nil, fmt.Errorf("open node %s: raft address %s is not loopback: %w", cfg.ID, cmp.Or(cfg.AdvertiseAddr, cfg.RaftAddr), ErrInsecureRaft)
	}
	stream, err := newRaftStream(cfg.RaftAddr, cfg.AdvertiseAddr, cfg.ID, cfg.Security, cfg.TransportTimeout,
		logger.With().Str("component", "raft-stream").Logger())
	if err != nil {
		return nil, fmt.Errorf("open node %s: raft transport on %s: %w", cfg.ID, cfg.RaftAddr, err)
	}
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: stream, MaxPool: transportPool, MaxRPCsInFlight: transportInFlight, Timeout: cfg.TransportTimeout, Logger: hl.Named("transport"),
	})
	cleanup = append(cleanup, trans.Close)

	existing, err := raft.HasExistingState(store, store, snaps)
	if err != nil {
		return nil, fmt.Errorf("open node %s: inspect raft state: %w", cfg.ID, err)
	}
	if existing && !cfg.Security.Enabled() {
		if err := singleMember(store, snaps, cfg.ID); err != nil {
			return nil, fmt.Errorf("open node %s: %w", cfg.ID, err)
		}
	}

	f, err := newFSM(logger.With().Str("component", "fsm").Logger(), filepath.Join(cfg.DataDir, blobDir), cfg.FetchBlob)
	if err != nil {
		return nil, fmt.Errorf("open node %s: %w", cfg.ID, err)
	}
	r, err := raft.NewRaft(rc, f, store, store, snaps, trans)
	if err != nil {
		return nil, fmt.Errorf("open node %s: start raft: %w", cfg.ID, err)
	}
	cleanup = append(cleanup, func() error { return r.Shutdown().Error() })

	if cfg.Bootstrap && !existing {
		boot := raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter,
			ID:       raft.ServerID(cfg.ID),
			Address:  trans.LocalAddr(),
		}}}
		if err := r.BootstrapCluster(boot).Error(); err != nil {
			return nil, fmt.Errorf("open node %s: bootstrap: %w", cfg.ID, err)
		}
		logger.Info().Str("addr", string(trans.LocalAddr())).Msg("bootstrapped single-node cluster")
	}

	n := &Node{
		cfg:      cfg,
		log:      logger,
		fsm:      f,
		raft:     r,
		trans:    trans,
		store:    store,
		existing: existing,
		stopCh:   make(chan struct{}),
		watchEnd: make(chan struct{}),
		snapEnd:  make(chan struct{}),
		blobsEnd: make(chan struct{}),
	}
	go n.watchLeadership()
	go n.snapshotBySize()
	go n.keepBlobs()
	logger.Info().Str("addr", string(trans.LocalAddr())).Bool("existing_state", existing).Msg("raft node open")
	return n, nil
}

// singleMember fails with ErrInsecureRaft when the stored raft configuration of a restarted
// node names members other than id.
func singleMember(logs raft.LogStore, snaps raft.SnapshotStore, id string) error {
	servers, err := storedServers(logs, snaps)
	if err != nil {
		return fmt.Errorf("read the stored raft configuration: %w", err)
	}
	for _, s := range servers {
		if string(s.ID) != id {
			return fmt.Errorf("the stored raft configuration has other members (%s at %s): %w", s.ID, s.Address, ErrInsecureRaft)
		}
	}
	return nil
}

// storedServers returns the latest raft configuration: the last configuration entry of the
// log after the latest snapshot, or else the snapshot's.
func storedServers(logs raft.LogStore, snaps raft.SnapshotStore) ([]raft.Server, error) {
	metas, err := snaps.List()
	if err != nil {
		return nil, err
	}
	from := uint64(1)
	if len(metas) > 0 {
		from = metas[0].Index + 1
	}
	first, err := logs.FirstIndex()
	if err != nil {
		return nil, err
	}
	last, err := logs.LastIndex()
	if err != nil {
		return nil, err
	}
	for i := last; i >= max(from, first) && i > 0; i-- {
		var l raft.Log
		if err := logs.GetLog(i, &l); err != nil {
			return nil, err
		}
		if l.Type == raft.LogConfiguration {
			return raft.DecodeConfiguration(l.Data).Servers, nil
		}
	}
	if len(metas) > 0 {
		return metas[0].Configuration.Servers, nil
	}
	return nil, nil
}

// ID returns the node's raft server ID.
func (n *Node) ID() string { return n.cfg.ID }

// HadState reports whether the node opened with raft state from an earlier run (so it is
// already a member of a cluster and must neither bootstrap nor join again).
func (n *Node) HadState() bool { return n.existing }

// Addr returns the raft address the node advertises to other members.
func (n *Node) Addr() string { return string(n.trans.LocalAddr()) }

// watchLeadership forwards raft's leadership signals to the LeadershipChanges subscribers.
func (n *Node) watchLeadership() {
	defer close(n.watchEnd)
	for {
		select {
		case <-n.stopCh:
			return
		case leader := <-n.raft.LeaderCh():
			n.log.Info().Bool("leader", leader).Msg("leadership changed")
			n.mu.Lock()
			for _, ch := range n.subs {
				sendLatest(ch, leader)
			}
			n.mu.Unlock()
		}
	}
}

// sendLatest replaces any unread value in ch (capacity 1) by v. Only the node sends on ch.
func sendLatest(ch chan bool, v bool) {
	select {
	case <-ch:
	default:
	}
	select {
	case ch <- v:
	default:
	}
}

// LeadershipChanges returns a new channel that first receives whether this node is the leader
// now and then every change of that. A slow receiver only sees the latest value, so treat
// each value as "the current state is": start the job runner on true (if not running), stop
// it on false. The channel receives false and is closed when the node closes.
func (n *Node) LeadershipChanges() <-chan bool {
	ch := make(chan bool, 1)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		ch <- false
		close(ch)
		return ch
	}
	// raft changes its state before it signals the change, so reading the state under mu
	// cannot miss a change: a later one is forwarded after this value.
	ch <- n.IsLeader()
	n.subs = append(n.subs, ch)
	return ch
}

// IsLeader reports whether this node is the raft leader.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Leader returns the raft address and server ID of the current leader as this node knows it,
// or empty strings if there is none.
func (n *Node) Leader() (addr, id string) {
	a, i := n.raft.LeaderWithID()
	return string(a), string(i)
}

// WaitLeader waits until the cluster has a leader known to this node.
func (n *Node) WaitLeader(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if addr, _ := n.Leader(); addr != "" {
			return nil
		}
		if n.raft.State() == raft.Shutdown {
			return fmt.Errorf("wait for leader: %w", ErrClosed)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for leader on node %s: %w", n.cfg.ID, ctx.Err())
		case <-t.C:
		}
	}
}

// Member is one member of the raft configuration.
type Member struct {
	// ID is the member's server ID.
	ID string
	// Addr is the member's raft address.
	Addr string
	// Voter is false for non-voting members.
	Voter bool
	// Leader is true for the current leader as this node knows it.
	Leader bool
}

// Servers returns the members of the latest raft configuration this node knows.
func (n *Node) Servers(ctx context.Context) ([]Member, error) {
	f := n.raft.GetConfiguration()
	if err := n.await(ctx, f); err != nil {
		return nil, fmt.Errorf("list servers: %w", err)
	}
	_, leaderID := n.Leader()
	var out []Member
	for _, s := range f.Configuration().Servers {
		out = append(out, Member{
			ID:     string(s.ID),
			Addr:   string(s.Address),
			Voter:  s.Suffrage == raft.Voter,
			Leader: string(s.ID) == leaderID,
		})
	}
	return out, nil
}

// AddVoter adds (or re-addresses) a voting member. It must be called on the leader and
// returns when the new configuration is committed.
func (n *Node) AddVoter(ctx context.Context, id, addr string) error {
	if !n.cfg.Security.Enabled() {
		return fmt.Errorf("add voter %s at %s: %w", id, addr, ErrInsecureRaft)
	}
	if err := n.checkLeader(); err != nil {
		return fmt.Errorf("add voter %s at %s: %w", id, addr, err)
	}
	f := n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, n.timeout(ctx))
	if err := n.await(ctx, f); err != nil {
		return fmt.Errorf("add voter %s at %s: %w", id, addr, err)
	}
	n.log.Info().Str("id", id).Str("addr", addr).Msg("voter added")
	return nil
}

// RemoveServer removes a member. It must be called on the leader and returns when the new
// configuration is committed. Raft does not tell a removed follower that it was removed (it
// just stops hearing from the leader, and the members ignore its vote requests), so Close
// the removed node too. Removing the leader itself makes it step down once committed.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	if err := n.checkLeader(); err != nil {
		return fmt.Errorf("remove server %s: %w", id, err)
	}
	f := n.raft.RemoveServer(raft.ServerID(id), 0, n.timeout(ctx))
	if err := n.await(ctx, f); err != nil {
		return fmt.Errorf("remove server %s: %w", id, err)
	}
	n.log.Info().Str("id", id).Msg("server removed")
	return nil
}

// Barrier waits until every command committed before it has been applied to this node's
// state. A new leader should call it before reading the jobs to resume. Leader only.
func (n *Node) Barrier(ctx context.Context) error {
	if err := n.checkLeader(); err != nil {
		return fmt.Errorf("barrier: %w", err)
	}
	if err := n.await(ctx, n.raft.Barrier(n.timeout(ctx))); err != nil {
		return fmt.Errorf("barrier: %w", err)
	}
	return nil
}

// snapshotBySize takes a snapshot whenever Config.SnapshotBytes of commands were applied
// since the last one: raft's own trigger counts entries, and entries (model and checkpoint
// chunks) can be large.
func (n *Node) snapshotBySize() {
	defer close(n.snapEnd)
	t := time.NewTicker(snapshotCheck)
	defer t.Stop()
	for {
		select {
		case <-n.stopCh:
			return
		case <-t.C:
		}
		if n.fsm.sinceSnap.Load() < n.cfg.SnapshotBytes {
			continue
		}
		err := n.raft.Snapshot().Error()
		switch {
		case err == nil:
			n.log.Debug().Msg("snapshot taken: the log grew past the byte threshold")
		case errors.Is(err, raft.ErrNothingNewToSnapshot), errors.Is(err, raft.ErrRaftShutdown):
		default:
			n.log.Warn().Err(err).Msg("size-triggered snapshot failed; will retry")
		}
	}
}

// blobRepairEvery is how often a node looks for blobs it lacks or no longer needs.
const blobRepairEvery = time.Second

// keepBlobs fetches the blobs the state references that this node lacks and deletes the
// ones nothing references, every blobRepairEvery, until the node closes.
func (n *Node) keepBlobs() {
	defer close(n.blobsEnd)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-n.stopCh:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := time.NewTicker(blobRepairEvery)
	defer t.Stop()
	for {
		select {
		case <-n.stopCh:
			return
		case <-t.C:
		}
		if missing := n.fsm.repairBlobs(ctx); missing > 0 && ctx.Err() == nil {
			n.log.Debug().Int("missing", missing).Msg("blobs still missing on this member; will retry")
		}
	}
}

// Blob returns the model or checkpoint with sha256 hash from this node's store, without
// fetching it elsewhere (ErrNoModel if it is not here).
func (n *Node) Blob(hash string) ([]byte, error) { return n.fsm.localBlob(hash) }

// ReadIndex returns an index such that a member whose state has applied it (see
// WaitApplied) reflects every command committed before the call, once this node's own state
// does. Leader only. It is raft's read-index protocol (Ongaro, "Consensus: Bridging Theory
// and Practice", §6.4): the first read of a term runs a barrier, an entry of the term whose
// commit covers every earlier entry; later reads confirm leadership with a heartbeat round
// (VerifyLeader, no log write), take the commit index and wait until the state has applied
// every command up to it.
func (n *Node) ReadIndex(ctx context.Context) (uint64, error) {
	if err := n.checkLeader(); err != nil {
		return 0, fmt.Errorf("read index: %w", err)
	}
	term := n.raft.CurrentTerm()
	if n.readTerm.Load() != term {
		if err := n.Barrier(ctx); err != nil {
			return 0, fmt.Errorf("read index: %w", err)
		}
		n.readTerm.Store(term)
		return n.fsm.appliedIndex(), nil
	}
	if err := n.await(ctx, n.raft.VerifyLeader()); err != nil {
		return 0, fmt.Errorf("read index: %w", err)
	}
	if err := n.waitCommandsApplied(ctx, n.raft.CommitIndex()); err != nil {
		return 0, fmt.Errorf("read index: %w", err)
	}
	return n.fsm.appliedIndex(), nil
}

// waitCommandsApplied waits until the state has applied every command at or below raft
// index commit. Barriers, no-ops and configuration changes never reach the state, so it
// looks at the log entries after the last command applied.
func (n *Node) waitCommandsApplied(ctx context.Context, commit uint64) error {
	for {
		changed := n.fsm.updates()
		pending := false
		for i := n.fsm.appliedIndex() + 1; i <= commit; i++ {
			var l raft.Log
			if err := n.store.GetLog(i, &l); err != nil {
				continue // compacted into a snapshot, hence applied
			}
			if l.Type == raft.LogCommand {
				pending = true
				break
			}
		}
		if !pending {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// WaitApplied waits until this node's state has applied index (from ReadIndex), or ctx ends.
func (n *Node) WaitApplied(ctx context.Context, index uint64) error {
	if err := n.fsm.waitApplied(ctx, index); err != nil {
		return fmt.Errorf("node %s catching up: %w", n.cfg.ID, err)
	}
	return nil
}

// AppliedIndex returns the index of the last command applied to this node's state.
func (n *Node) AppliedIndex() uint64 { return n.fsm.appliedIndex() }

// Snapshot takes a raft snapshot now and compacts the log down to Config.TrailingLogs
// entries. It is not an error if there is nothing to snapshot yet.
func (n *Node) Snapshot(ctx context.Context) error {
	err := n.await(ctx, n.raft.Snapshot())
	if err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return fmt.Errorf("snapshot on node %s: %w", n.cfg.ID, err)
	}
	return nil
}

// Close shuts the node down gracefully: a leader first hands leadership to another voter (so
// the cluster does not wait out an election timeout), then raft stops and the transport and
// store are closed. The node stays a member of the cluster configuration; reopen it from the
// same DataDir and RaftAddr to rejoin, or remove it with RemoveServer.
func (n *Node) Close() error { return n.close(true) }

func (n *Node) close(graceful bool) error {
	n.closeOnce.Do(func() {
		var errs []error
		if graceful && n.IsLeader() && n.hasOtherVoters() {
			if err := n.raft.LeadershipTransfer().Error(); err != nil {
				n.log.Warn().Err(err).Msg("leadership transfer before close failed")
			}
		}
		if err := n.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("shut down raft: %w", err))
		}
		close(n.stopCh)
		<-n.watchEnd
		<-n.snapEnd
		<-n.blobsEnd
		n.mu.Lock()
		n.closed = true
		for _, ch := range n.subs {
			sendLatest(ch, false)
			close(ch)
		}
		n.subs = nil
		n.mu.Unlock()
		if err := n.trans.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close transport: %w", err))
		}
		if err := n.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close raft store: %w", err))
		}
		if err := errors.Join(errs...); err != nil {
			n.closeErr = fmt.Errorf("close node %s: %w", n.cfg.ID, err)
		}
		n.log.Info().Msg("raft node closed")
	})
	return n.closeErr
}

func (n *Node) hasOtherVoters() bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != n.cfg.ID {
			return true
		}
	}
	return false
}

// timeout is the raft enqueue timeout for a call under ctx.
func (n *Node) timeout(ctx context.Context) time.Duration {
	t := n.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		t = max(min(t, time.Until(dl)), time.Millisecond)
	}
	return t
}

func (n *Node) checkLeader() error {
	switch n.raft.State() {
	case raft.Leader:
		return nil
	case raft.Shutdown:
		return ErrClosed
	}
	addr, id := n.Leader()
	return &NotLeaderError{Leader: addr, LeaderID: id}
}

// await waits for f or ctx, translating raft's errors. If ctx ends first the operation may
// still complete.
func (n *Node) await(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader):
		addr, id := n.Leader()
		return &NotLeaderError{Leader: addr, LeaderID: id}
	case errors.Is(err, raft.ErrLeadershipLost):
		return fmt.Errorf("%w: %w", ErrLeadershipLost, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrClosed
	}
	return err
}
