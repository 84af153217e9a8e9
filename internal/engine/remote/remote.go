package remote

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/wire"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// Default values of the Config fields left zero.
const (
	// DefaultShardTimeout is the default Config.ShardTimeout.
	DefaultShardTimeout = 5 * time.Minute
	// DefaultTaskTimeout is the default Config.TaskTimeout.
	DefaultTaskTimeout = 30 * time.Minute
	// DefaultMaxInFlight is the default Config.MaxInFlight.
	DefaultMaxInFlight = 2
	// DefaultReduceMemory is the default Config.ReduceMemory: 512 MiB.
	DefaultReduceMemory = 512 << 20
	// DefaultPollInterval is the default Config.PollInterval.
	DefaultPollInterval = 200 * time.Millisecond
	// DefaultStragglerFactor is the default Config.StragglerFactor.
	DefaultStragglerFactor = 3
	// DefaultStragglerFloor is the default Config.StragglerFloor.
	DefaultStragglerFloor = 10 * time.Second
)

// ErrNoLiveWorker is wrapped by the error of a round in which a shard waited ShardTimeout
// without a live worker able to run it.
var ErrNoLiveWorker = errors.New("no live worker")

// Worker is one worker of the pool.
type Worker struct {
	ID   string // stable identity, the key of shard ownership
	Addr string // address of its Worker gRPC service
	// Session is the secret of the worker's registration, sent with every task as
	// wire.SessionKey metadata ("" sends none); a worker registered again has a new one.
	Session Session
}

// Session is a worker's registration secret. It prints as "[session]" so that logging a
// Worker never shows it.
type Session string

// String hides the session.
func (Session) String() string { return "[session]" }

// Pool is the set of live workers (the coordinator's registry implements it). Live returns
// them sorted by ID; it is called at every round start and polled during a round, so it must
// be cheap and safe for concurrent use.
type Pool interface{ Live() []Worker }

// Dialer returns a client for a worker's address. The caller caches connections and sets
// credentials; the engine calls it once per task attempt.
type Dialer func(ctx context.Context, addr string) (pb.WorkerClient, error)

// Config configures a remote Engine. JobID, Shards, Pool and Dial are required.
type Config struct {
	// JobID names the job in every task (a task is keyed by job, round and shard).
	JobID string
	// Source is where the workers read the job's rows from.
	Source shard.Source
	// Shards are the job's fixed shards in shard order: Shards[i].Index must be i.
	Shards []shard.Ref
	// Pool lists the live workers.
	Pool Pool
	// Dial returns a client for a worker address.
	Dial Dialer
	// ShardTimeout is how long a shard may wait with no live worker to run it before the
	// round fails (default DefaultShardTimeout).
	ShardTimeout time.Duration
	// TaskTimeout bounds one RunTask attempt; an attempt that exceeds it counts as a failure
	// of its worker and the shard is retried elsewhere (default DefaultTaskTimeout).
	TaskTimeout time.Duration
	// MaxInFlight is the most tasks of a round running at once on one worker
	// (default DefaultMaxInFlight).
	MaxInFlight int
	// ReduceWindow and ReduceMemory bound the results a Reduce round holds: shard s starts
	// only when s < m + w, m the first shard whose result is not yet merged, so results
	// waiting in memory for their turn (a 4000-eigenfunction GRIEF Gram is 128 MiB per shard)
	// stay few however slow shard m is. w is ReduceWindow (0: 2 x MaxInFlight x the live
	// workers at the round's start, at least 2, room for every worker while shard m finishes;
	// negative: none) and, once a result has arrived, at most max(2, ReduceMemory / its
	// encoded size + 1) (ReduceMemory 0: DefaultReduceMemory; negative: none), so about
	// ReduceMemory bytes wait beyond the tasks already in flight. Gather rounds return every
	// result and are not bounded.
	ReduceWindow int
	ReduceMemory int64
	// PollInterval is how often Pool.Live is polled during a round to notice workers that
	// left or joined (default DefaultPollInterval).
	PollInterval time.Duration
	// Logger receives reassignments and worker failures at warn level. The zero Logger
	// discards everything.
	Logger zerolog.Logger
	// Observe, if set, is called with the outcome of every task attempt that completes while
	// its round runs (for metrics). Calls come one at a time from the round's goroutine, so
	// Observe must return quickly.
	Observe func(TaskEvent)

	// StragglerFactor and StragglerFloor say when a running task is a straggler: once it has
	// run longer than max(StragglerFloor, StragglerFactor x the median duration of the tasks
	// of its round that completed, or of the previous round while none has), a backup copy
	// starts on another worker with room, and the first result wins. Both copies compute the
	// same bits (tasks are deterministic per shard), so backups change only the time. The
	// worker overtaken by a backup gets no more shards in that round, and owns none in the
	// rounds that start within the next minute while another worker is live. Defaults
	// DefaultStragglerFactor and DefaultStragglerFloor; a negative factor turns backups off.
	StragglerFactor float64
	StragglerFloor  time.Duration
	// OnStraggler, if set, is called when a backup starts and when a straggling shard
	// finishes, from the round's goroutine (it must return quickly).
	OnStraggler func(Straggler)
}

// Straggler describes a straggling task: its backup starting (Winner empty) or the shard
// finishing (Winner is the worker whose copy finished first).
type Straggler struct {
	JobID string
	Round uint64
	Shard int
	// Slow is the worker of the late attempt, Backup the worker running the copy.
	Slow, Backup Worker
	// Running is how long the slow attempt had run when the backup started; Deadline is the
	// straggler deadline of the round then, and Median the median it came from.
	Running, Deadline, Median time.Duration
	// Winner is set when the shard finished: Backup or Slow.
	Winner Worker
}

// TaskEvent is the outcome of one task attempt.
type TaskEvent struct {
	JobID    string
	Round    uint64        // the round, counted from 1 per Engine
	Shard    int           // the shard's index
	Worker   Worker        // the worker the attempt ran on
	Duration time.Duration // from the call to its outcome
	// Blobs says how the attempt carried the task's broadcast blobs (the kernel inputs).
	Blobs BlobMode
	// Err is nil when the worker returned a well-formed result for the shard (a duplicate
	// is reported but not used); otherwise it is the failure, or the cancellation of an
	// attempt the round abandoned. A worker that lacked the blobs of a BlobsByHash attempt
	// answers FAILED_PRECONDITION (wire.MissingBlobOf recognizes it); the engine then sends
	// the task again with the blobs, and counts it neither as a failure of the worker nor
	// as a retry.
	Err error
}

// BlobMode is how a task attempt carried its task's broadcast blobs (wire.Slim).
type BlobMode int

const (
	// NoBlobs: the task has no broadcast blobs.
	NoBlobs BlobMode = iota
	// BlobsFull: the blobs travelled in the task.
	BlobsFull
	// BlobsByHash: the task named the blobs by content hash, the worker having acknowledged
	// them before (a task carrying them in full returned OK).
	BlobsByHash
)

func (m BlobMode) String() string {
	switch m {
	case NoBlobs:
		return "none"
	case BlobsFull:
		return "full"
	case BlobsByHash:
		return "by hash"
	}
	return fmt.Sprintf("BlobMode(%d)", int(m))
}

// TaskError is a failure a worker reported for a shard that retrying on another worker
// cannot fix: bad data (codes.FailedPrecondition, codes.InvalidArgument: a missing source,
// a corrupt row) or rejected credentials (codes.Unauthenticated, codes.PermissionDenied).
// Message is the worker's message verbatim.
type TaskError struct {
	Shard   shard.Ref  // the shard whose task failed
	Worker  Worker     // the worker that reported it
	Code    codes.Code // the gRPC code of the failure
	Message string     // the worker's message (it names the source and row for bad data)
}

// Error names the shard and the worker and carries the worker's message.
func (e *TaskError) Error() string {
	switch e.Code {
	case codes.Unauthenticated, codes.PermissionDenied:
		return fmt.Sprintf("%v: worker %s (%s) refused the task (%v): %s; check the worker join token and TLS settings",
			e.Shard, e.Worker.ID, e.Worker.Addr, e.Code, e.Message)
	}
	return fmt.Sprintf("%v on worker %s: %s", e.Shard, e.Worker.ID, e.Message)
}

// Engine runs tasks over a job's fixed shards on remote workers. Each Gather is one round,
// numbered from 1; rounds of one Engine run one at a time.
type Engine struct {
	cfg    Config
	shards []shard.Ref
	refs   []*pb.ShardRef
	source *pb.DataSource

	// sem holds one token while a round runs; round, owners and held belong to the round
	// holding it.
	sem    chan struct{}
	round  uint64
	owners []string // owners[i] is the ID of the worker that owns shard i ("" before the first round)
	// held[w] are the broadcast blobs worker process w (ID and address) acknowledged: a task
	// carrying them returned OK there. Tasks to w name those by hash only. The value is the
	// acknowledgement's generation (from heldGen), so that a missing-blob answer to a task
	// sent before a newer acknowledgement does not undo it.
	held    map[Worker]map[[32]byte]uint64
	heldGen uint64
	// lastMedian is the median task duration of the last round (0: none yet), the straggler
	// baseline of a round until one of its own tasks completes.
	lastMedian time.Duration
	// suspects maps the IDs of the workers a straggler backup overtook to when they may own
	// shards again (see suspectFor).
	suspects map[string]time.Time
}

var _ engine.Engine = (*Engine)(nil)

// New checks cfg, fills in its defaults and returns an Engine.
func New(cfg Config) (*Engine, error) {
	switch {
	case cfg.JobID == "":
		return nil, fmt.Errorf("remote engine: no job id")
	case len(cfg.Shards) == 0:
		return nil, fmt.Errorf("remote engine: job %s: no shards", cfg.JobID)
	case cfg.Pool == nil:
		return nil, fmt.Errorf("remote engine: job %s: no worker pool", cfg.JobID)
	case cfg.Dial == nil:
		return nil, fmt.Errorf("remote engine: job %s: no dialer", cfg.JobID)
	case cfg.ShardTimeout < 0 || cfg.TaskTimeout < 0 || cfg.PollInterval < 0 || cfg.MaxInFlight < 0 || cfg.StragglerFloor < 0:
		return nil, fmt.Errorf("remote engine: job %s: negative timeout, poll interval, in-flight limit or straggler floor", cfg.JobID)
	}
	for i, r := range cfg.Shards {
		if r.Index != i {
			return nil, fmt.Errorf("remote engine: job %s: %v is at position %d of the shard list", cfg.JobID, r, i)
		}
	}
	if cfg.ShardTimeout == 0 {
		cfg.ShardTimeout = DefaultShardTimeout
	}
	if cfg.TaskTimeout == 0 {
		cfg.TaskTimeout = DefaultTaskTimeout
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.ReduceMemory == 0 {
		cfg.ReduceMemory = DefaultReduceMemory
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.StragglerFactor == 0 {
		cfg.StragglerFactor = DefaultStragglerFactor
	}
	if cfg.StragglerFloor == 0 {
		cfg.StragglerFloor = DefaultStragglerFloor
	}
	e := &Engine{
		cfg:      cfg,
		shards:   append([]shard.Ref(nil), cfg.Shards...),
		refs:     make([]*pb.ShardRef, len(cfg.Shards)),
		source:   wire.EncodeSource(cfg.Source),
		sem:      make(chan struct{}, 1),
		owners:   make([]string, len(cfg.Shards)),
		held:     map[Worker]map[[32]byte]uint64{},
		suspects: map[string]time.Time{},
	}
	for i, r := range e.shards {
		e.refs[i] = wire.EncodeRef(r)
	}
	return e, nil
}

// Shards lists the job's shards in shard order.
func (e *Engine) Shards() []shard.Ref { return append([]shard.Ref(nil), e.shards...) }

// Reduce runs t on every shard and merges the results in shard order.
// Results are folded in as soon as those of the shards before them are in (the order and
// bits of engine.MergeInOrder), so the coordinator holds only the results that arrived early,
// not one per shard (a 4000-eigenfunction GRIEF Gram is 128 MiB per shard).
func (e *Engine) Reduce(ctx context.Context, t engine.Task) (reduce.Stats, error) {
	r, err := e.newRoundFor(ctx, t)
	if err != nil {
		return nil, err
	}
	defer func() { <-e.sem }()
	r.merge = true
	if _, err := r.run(); err != nil {
		return nil, err
	}
	return r.fold.Acc, nil
}

// Gather runs t on every shard as one round and returns the per-shard results in shard
// order. It fails when a worker reports bad data or rejects the credentials for a shard, or
// when a shard has no live worker for ShardTimeout; the error names the shard. If ctx ends,
// Gather stops the round's tasks and returns ctx.Err().
//
// A task with broadcast blobs (the inputs X of a kernel task) carries them to each worker
// process once: until the worker has acknowledged them, it gets one task at a time in full,
// and afterwards the slim task that names them by hash (wire.Slim). A worker that answers a
// slim task with a missing blob (it restarted or evicted it) gets the same task in full at
// once. The blobs change only the transport: the results are the same bits.
func (e *Engine) Gather(ctx context.Context, t engine.Task) ([]reduce.Stats, error) {
	r, err := e.newRoundFor(ctx, t)
	if err != nil {
		return nil, err
	}
	defer func() { <-e.sem }()
	return r.run()
}

// newRoundFor encodes t and takes the engine's round slot for it; the caller runs the round
// and then releases the slot (<-e.sem).
func (e *Engine) newRoundFor(ctx context.Context, t engine.Task) (*round, error) {
	task, err := wire.EncodeTask(t)
	if err != nil {
		return nil, fmt.Errorf("remote engine: job %s: %w", e.cfg.JobID, err)
	}
	slim, blobs := wire.Slim(task)
	select {
	case e.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err := ctx.Err(); err != nil {
		<-e.sem
		return nil, err
	}
	e.round++
	return newRound(ctx, e, e.round, task, slim, blobs), nil
}

// heldGens returns the generations of worker w's acknowledgements of the blobs, or nil if it
// has not acknowledged them all.
func (e *Engine) heldGens(w Worker, blobs [][32]byte) []uint64 {
	gens := make([]uint64, len(blobs))
	for i, b := range blobs {
		if gens[i] = e.held[w][b]; gens[i] == 0 {
			return nil
		}
	}
	return gens
}

// markHeld records that worker w acknowledged the blobs, as a new generation.
func (e *Engine) markHeld(w Worker, blobs [][32]byte) {
	m := e.held[w]
	if m == nil {
		m = map[[32]byte]uint64{}
		e.held[w] = m
	}
	e.heldGen++
	for _, b := range blobs {
		m[b] = e.heldGen
	}
}

// forgetHeld records that worker w may not hold the blobs any more, unless it acknowledged
// them again after the generations gens (those an attempt relied on).
func (e *Engine) forgetHeld(w Worker, blobs [][32]byte, gens []uint64) {
	for i, b := range blobs {
		if g, ok := e.held[w][b]; ok && g == gens[i] {
			delete(e.held[w], b)
		}
	}
	if len(e.held[w]) == 0 {
		delete(e.held, w)
	}
}

// pruneHeld forgets the blobs of the workers not in live: one that comes back may be a new
// process.
func (e *Engine) pruneHeld(live []Worker) {
	keep := make(map[Worker]bool, len(live))
	for _, w := range live {
		keep[w] = true
	}
	for w := range e.held {
		if !keep[w] {
			delete(e.held, w)
		}
	}
}

// call runs one task attempt on w.
func (e *Engine) call(ctx context.Context, w Worker, req *pb.RunTaskRequest) (*pb.RunTaskResponse, error) {
	c, err := e.cfg.Dial(ctx, w.Addr)
	if err != nil {
		return nil, fmt.Errorf("dial worker %s at %s: %w", w.ID, w.Addr, err)
	}
	if w.Session != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, wire.SessionKey, string(w.Session))
	}
	resp, err := c.RunTask(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("worker %s at %s: %w", w.ID, w.Addr, err)
	}
	return resp, nil
}
