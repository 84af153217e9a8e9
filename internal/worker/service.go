package worker

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/tasks"
	"github.com/gpreduce/gpreduce/internal/wire"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// Outcomes of a task, for metrics.
const (
	outcomeOK          = "ok"
	outcomeData        = "data_error"
	outcomeInvalid     = "invalid"
	outcomeCanceled    = "canceled"
	outcomeError       = "error"
	outcomeMissingBlob = "missing_blob"
)

// taskKindUnknown names, for metrics and messages, a task message whose oneof kind is not set
// to a registered kind (the others are named by their kind, tasks.Kinds).
const taskKindUnknown = "unknown"

// LoadShard reads a shard into the cache (or finds it there) and returns its row count.
// A shard that cannot be read (missing or changed source, bad data) is FAILED_PRECONDITION
// with the error naming the source and line.
func (w *Worker) LoadShard(ctx context.Context, req *pb.LoadShardRequest) (*pb.LoadShardResponse, error) {
	if err := w.checkSession(ctx, "LoadShard"); err != nil {
		return nil, err
	}
	if err := checkData(req.GetSource(), req.GetShard()); err != nil {
		return nil, err
	}
	release, err := w.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	tab, err := w.table(ctx, req.GetSource(), req.GetShard())
	if err != nil {
		return nil, err
	}
	return &pb.LoadShardResponse{Rows: int64(tab.N())}, nil
}

// RunTask runs one map step on one shard, loading the shard first if it is not cached,
// and returns the statistic. At most Cores tasks and loads run at once; the others wait.
//
// The call must carry the session of the worker's latest registration (wire.SessionKey),
// else it is ABORTED (see checkSession).
//
// A task is keyed by (job, round, shard) and deterministic, so a duplicate or retried
// task is simply computed again: the worker keeps no results, and the caller accepts one.
// Errors: UNAVAILABLE with a pb.WorkerDraining detail once Run is stopping (wire.DrainingStatus:
// a new task is refused at once, even on a connection the draining server has not closed
// yet; the caller runs it elsewhere and lets the running ones finish),
// INVALID_ARGUMENT for a malformed request or a task that does not fit the shard,
// FAILED_PRECONDITION when the shard cannot be read (naming the source and line) or when the
// task names a broadcast blob by hash that the worker does not hold (wire.MissingBlobStatus:
// a pb.MissingBlob detail and "missing blob sha256:<hex>" in the message; the caller resends
// the task in full), CANCELED or DEADLINE_EXCEEDED when the caller leaves, INTERNAL when the
// task fails.
func (w *Worker) RunTask(ctx context.Context, req *pb.RunTaskRequest) (resp *pb.RunTaskResponse, err error) {
	kind := taskKind(req.GetTask())
	start := time.Now()
	defer func() {
		w.metrics.tasks.WithLabelValues(kind, outcomeOf(err)).Inc()
		w.metrics.taskSeconds.WithLabelValues(kind).Observe(time.Since(start).Seconds())
	}()
	if w.draining.Load() {
		return nil, wire.DrainingStatus()
	}
	if err := w.checkSession(ctx, "RunTask"); err != nil {
		return nil, err
	}
	if err := checkData(req.GetSource(), req.GetShard()); err != nil {
		return nil, err
	}
	if req.GetTask() == nil {
		return nil, status.Error(codes.InvalidArgument, "run task: the request has no task")
	}
	task, err := w.dec.DecodeTask(req.GetTask())
	if err != nil {
		if st := wire.MissingBlobStatus(err); st != nil {
			w.log.Debug().Err(err).Str("job", req.GetJobId()).Uint64("round", req.GetRound()).
				Msg("task names a blob this worker does not hold; the coordinator resends it in full")
			return nil, st
		}
		return nil, status.Errorf(codes.InvalidArgument, "run task: %v", err)
	}
	release, err := w.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	tab, err := w.table(ctx, req.GetSource(), req.GetShard())
	if err != nil {
		return nil, err
	}
	ref := wire.DecodeRef(req.GetShard())
	if err := fits(kind, task, tab); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "run %s task on %v: %v", kind, ref, err)
	}
	if b := w.cfg.KernelCacheBytes; b != 0 {
		ctx = tasks.WithKernelCacheBytes(ctx, b)
	}
	st, err := runMap(ctx, task, ref, tab)
	if err != nil {
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		if isContextErr(err) {
			return nil, status.FromContextError(err).Err()
		}
		w.log.Error().Err(err).Str("job", req.GetJobId()).Uint64("round", req.GetRound()).Str("shard", ref.String()).
			Str("kind", kind).Msg("task failed")
		return nil, status.Errorf(codes.Internal, "run %s task on %v: %v", kind, ref, err)
	}
	msg, err := wire.EncodeStats(st)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "run %s task on %v: %v", kind, ref, err)
	}
	return &pb.RunTaskResponse{JobId: req.GetJobId(), Round: req.GetRound(), Shard: req.GetShard().GetIndex(), Stats: msg}, nil
}

// Health reports the worker's ID, cores and cached shard count.
func (w *Worker) Health(context.Context, *pb.HealthRequest) (*pb.HealthResponse, error) {
	return &pb.HealthResponse{WorkerId: w.ID(), Cores: int32(w.cfg.Cores), CachedShards: int32(w.cache.len())}, nil
}

// acquire takes one of the worker's cores, waiting until one is free or ctx is done.
func (w *Worker) acquire(ctx context.Context) (func(), error) {
	select {
	case w.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	n := w.running.Add(1)
	for {
		p := w.peak.Load()
		if n <= p || w.peak.CompareAndSwap(p, n) {
			break
		}
	}
	w.metrics.running.Inc()
	return func() {
		w.metrics.running.Dec()
		w.running.Add(-1)
		<-w.sem
	}, nil
}

// table returns a shard from the cache, loading it if needed, with gRPC status errors.
func (w *Worker) table(ctx context.Context, src *pb.DataSource, ref *pb.ShardRef) (*shard.Table, error) {
	key, err := keyOf(src, ref)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	s, r := wire.DecodeSource(src), wire.DecodeRef(ref)
	tab, from, err := w.cache.get(ctx, key, stampOf(s), func(ctx context.Context) (*shard.Table, error) {
		start := time.Now()
		tab, err := w.cfg.Data.Load(ctx, s, r)
		if err != nil {
			if !isContextErr(err) {
				w.metrics.loadFailures.Inc()
			}
			return nil, err
		}
		w.log.Debug().Str("shard", r.String()).Int("rows", tab.N()).Dur("took", time.Since(start)).Msg("loaded shard")
		return tab, nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		if isContextErr(err) {
			return nil, status.FromContextError(err).Err()
		}
		w.log.Warn().Err(err).Str("shard", r.String()).Msg("cannot load shard")
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	w.metrics.lookups.WithLabelValues(from).Inc()
	return tab, nil
}

// checkData checks that a request names its data.
func checkData(src *pb.DataSource, ref *pb.ShardRef) error {
	switch {
	case src == nil || src.GetUri() == "":
		return status.Error(codes.InvalidArgument, "the request has no data source")
	case ref == nil:
		return status.Error(codes.InvalidArgument, "the request has no shard")
	}
	return nil
}

// fits checks that a task's input dimensions (its kind's tasks.Kind.Inputs) are the shard's.
func fits(kind string, task engine.Task, tab *shard.Table) error {
	k, ok := tasks.Lookup(kind)
	if !ok || k.Inputs == nil {
		return nil
	}
	for _, d := range k.Inputs(task) {
		if d != tab.D {
			return fmt.Errorf("the task is for %d inputs but the shard has %d: check the job's columns", d, tab.D)
		}
	}
	return nil
}

// runMap runs a task, turning a panic into an error.
func runMap(ctx context.Context, task engine.Task, ref shard.Ref, tab *shard.Table) (st reduce.Stats, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("task panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return task.Map(ctx, ref, tab)
}

// taskKind names a task message's kind (the field set in its oneof) for metrics and messages.
func taskKind(t *pb.Task) string {
	name, _ := tasks.Unwrap(t)
	if _, ok := tasks.Lookup(name); !ok {
		return taskKindUnknown
	}
	return name
}

// outcomeOf classifies a RunTask error for metrics.
func outcomeOf(err error) string {
	if err == nil {
		return outcomeOK
	}
	if _, ok := wire.MissingBlobOf(err); ok {
		return outcomeMissingBlob
	}
	var code codes.Code
	if s, ok := status.FromError(err); ok {
		code = s.Code()
	} else if errors.Is(err, context.Canceled) {
		code = codes.Canceled
	}
	switch code {
	case codes.FailedPrecondition:
		return outcomeData
	case codes.InvalidArgument:
		return outcomeInvalid
	case codes.Canceled, codes.DeadlineExceeded:
		return outcomeCanceled
	}
	return outcomeError
}
