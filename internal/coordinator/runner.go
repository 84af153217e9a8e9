package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/gpreduce/gpreduce/internal/coordinator/store"
	"github.com/gpreduce/gpreduce/internal/engine/remote"
	"github.com/gpreduce/gpreduce/internal/model"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/train"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// DefaultCheckpointInterval is the least time between two optimizer checkpoints of a job.
const DefaultCheckpointInterval = time.Second

// leadershipRetry is how long a job whose proposal failed on a leadership hiccup waits before
// it resumes, if this node still leads.
const leadershipRetry = time.Second

// errJobCanceled is the cause of a job context canceled by CancelJob.
var errJobCanceled = errors.New("job canceled")

// runner runs the jobs while this node is the leader. Each leadership term starts, after a
// barrier, a job run for every pending and running job (running ones resume from their
// checkpoint); jobs submitted during the term start as soon as they are applied. When the
// term ends the runs are canceled without touching the jobs' states: the next leader resumes
// them.
type runner struct {
	node        store.Store
	pool        *registry
	events      *eventBatcher
	dial        remote.Dialer
	metrics     *metrics
	log         zerolog.Logger
	ckInterval  time.Duration
	taskTimeout time.Duration
	// stragglerFactor and stragglerFloor set the straggler deadline of the remote engines
	// (remote.Config); zero values select its defaults.
	stragglerFactor float64
	stragglerFloor  time.Duration
	reduceMemory    int64         // remote.Config.ReduceMemory; 0 selects its default
	data            shard.Reader  // reads and bounds the jobs' data sources (see planData)
	planTimeout     time.Duration // bound of planning a job's data (default DefaultPlanTimeout)

	mu   sync.Mutex
	term *term // nil while not leading
}

// term is one leadership term of the runner.
type term struct {
	ctx    context.Context
	cancel context.CancelFunc
	ready  bool // the pending and running jobs were started; submissions start directly
	jobs   map[string]context.CancelCauseFunc
	wg     sync.WaitGroup
}

// run follows the node's leadership until ctx ends or the node closes.
func (r *runner) run(ctx context.Context) {
	changes := r.node.LeadershipChanges()
	defer r.stopTerm()
	for {
		select {
		case <-ctx.Done():
			return
		case leader, ok := <-changes:
			if !ok {
				return
			}
			if leader {
				r.startTerm(ctx)
			} else {
				r.stopTerm()
			}
		}
	}
}

func (r *runner) startTerm(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.term != nil {
		return
	}
	t := &term{jobs: map[string]context.CancelCauseFunc{}}
	t.ctx, t.cancel = context.WithCancel(ctx)
	r.term = t
	r.log.Info().Msg("leading: resuming jobs after a barrier")
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		r.resume(t)
	}()
}

// stopTerm cancels the term's job runs and waits for them.
func (r *runner) stopTerm() {
	r.mu.Lock()
	t := r.term
	r.term = nil
	r.mu.Unlock()
	if t == nil {
		return
	}
	t.cancel()
	t.wg.Wait()
	r.pool.clear()
	r.log.Info().Msg("no longer leading: job runs stopped (the next leader resumes them)")
}

// resume waits until every committed command is applied, then starts the pending and
// running jobs.
func (r *runner) resume(t *term) {
	for {
		err := r.node.Barrier(t.ctx)
		if err == nil {
			break
		}
		if t.ctx.Err() != nil {
			return
		}
		r.log.Warn().Err(err).Msg("barrier failed; retrying")
		select {
		case <-t.ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.term != t {
		return
	}
	t.ready = true
	for _, j := range r.node.JobsInState(store.JobPending, store.JobRunning) {
		r.launch(t, j)
	}
}

// leading returns a channel closed when the current leadership term ends, or nil if no
// term is under way (not leading, or the runner has not yet seen this node's election).
func (r *runner) leading() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.term == nil {
		return nil
	}
	return r.term.ctx.Done()
}

// start runs job id if this node leads, the job is pending or running, and no run of it is
// under way. A job submitted before the term is ready is started by resume.
func (r *runner) start(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.term
	if t == nil || !t.ready {
		return
	}
	j, err := r.node.Job(id)
	if err != nil || (j.State != store.JobPending && j.State != store.JobRunning) {
		return
	}
	r.launch(t, j)
}

// cancel stops the run of job id, if there is one.
func (r *runner) cancel(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.term != nil {
		if c := r.term.jobs[id]; c != nil {
			c(errJobCanceled)
		}
	}
}

// launch starts a run of j in t; r.mu is held.
func (r *runner) launch(t *term, j store.Job) {
	if _, running := t.jobs[j.ID]; running {
		return
	}
	ctx, cancel := context.WithCancelCause(t.ctx)
	t.jobs[j.ID] = cancel
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer func() {
			r.mu.Lock()
			delete(t.jobs, j.ID)
			r.mu.Unlock()
			cancel(nil)
		}()
		r.runJob(ctx, t, j)
	}()
}

// runJob runs j to its end and records the outcome, unless the run stopped because the
// job was canceled, or leadership ended or the node is closing (then the job is left as it
// is for the next leader).
func (r *runner) runJob(ctx context.Context, t *term, j store.Job) {
	log := r.log.With().Str("job", j.ID).Logger()
	for {
		err := r.execute(ctx, log, j)
		switch {
		case err == nil:
			return
		case errors.Is(context.Cause(ctx), errJobCanceled):
			log.Info().Msg("job canceled")
			return
		case t.ctx.Err() != nil:
			log.Info().Err(err).Msg("job run stopped: leadership ended or the node is closing; the next leader resumes it")
			return
		case errors.Is(err, store.ErrNotLeader) || errors.Is(err, store.ErrLeadershipLost) || errors.Is(err, store.ErrClosed):
			// A proposal met a leadership change. If this node still leads after a pause,
			// resume from the last checkpoint; if not, the term ends and the next leader does.
			log.Warn().Err(err).Msg("job run interrupted by a leadership change")
			select {
			case <-ctx.Done():
				return
			case <-time.After(leadershipRetry):
			}
			cur, jerr := r.node.Job(j.ID)
			if jerr != nil || !r.node.IsLeader() || (cur.State != store.JobPending && cur.State != store.JobRunning) {
				return
			}
			j = cur
			continue
		}
		r.fail(t.ctx, log, j.ID, err)
		return
	}
}

// fail marks job id failed with err's text, unless it already finished.
func (r *runner) fail(ctx context.Context, log zerolog.Logger, id string, err error) {
	msg := err.Error()
	if s, ok := status.FromError(err); ok {
		msg = s.Message()
	}
	if cur, jerr := r.node.JobView(id); jerr == nil && cur.State.Finished() {
		log.Info().Err(err).Str("state", cur.State.String()).Msg("job run ended after the job finished")
		return
	}
	log.Warn().Str("error", msg).Msg("job failed")
	r.flushEvents(ctx, log)
	if serr := r.node.SetStateMessage(ctx, id, store.JobFailed, msg, "", time.Time{}); serr != nil {
		log.Error().Err(serr).Msg("could not mark the job failed")
	}
}

// flushEvents records the queued progress events before a state change, so they come
// before it; failing that only loses events.
func (r *runner) flushEvents(ctx context.Context, log zerolog.Logger) {
	if err := r.events.flush(ctx); err != nil {
		log.Debug().Err(err).Msg("job events not recorded")
	}
}

// execute runs job j: marks it running, plans its shards, trains on the workers (resuming
// from j's checkpoint), stores the model and marks the job succeeded.
func (r *runner) execute(ctx context.Context, log zerolog.Logger, j store.Job) error {
	js, err := decodeSpec(j.Spec)
	if err != nil {
		return err
	}
	plan, err := planFromSpec(js)
	if err != nil {
		return err
	}
	start := time.Now()
	if j.State == store.JobPending {
		if err := r.node.SetStateMessage(ctx, j.ID, store.JobRunning, "", "started by "+r.node.ID(), time.Time{}); err != nil {
			return err
		}
		log.Info().Str("method", plan.Spec.Method).Str("data", plan.Source.URI).Msg("job started")
	} else {
		start = j.CreatedAt
		msg := fmt.Sprintf("resumed by %s from iteration %d", r.node.ID(), j.Iteration)
		if len(j.Checkpoint) == 0 {
			msg = fmt.Sprintf("restarted by %s (no checkpoint)", r.node.ID())
		}
		r.publish(store.Event{JobID: j.ID, State: store.JobRunning, Phase: "state", Iteration: int32(j.Iteration), Objective: j.Objective, Message: msg})
		log.Info().Int("iteration", j.Iteration).Int("checkpoint_bytes", len(j.Checkpoint)).Msg("job resumed")
	}

	layout, err := r.planData(ctx, plan.Source, plan.Shards)
	if err != nil {
		return err // names the data source
	}
	// Record the data's column names in the model exactly as a local run does (those of
	// every shard's table), so the cluster and `coordinator eval` write the same model bytes.
	plan.Spec.Columns, plan.Spec.Target = layout.Columns, layout.Target
	eng, err := remote.New(remote.Config{
		JobID: j.ID, Source: plan.Source, Shards: layout.Refs, Pool: r.pool, Dial: r.dial,
		ShardTimeout: plan.ShardTimeout, TaskTimeout: r.taskTimeout, Logger: log, Observe: r.metrics.observeTask,
		StragglerFactor: r.stragglerFactor, StragglerFloor: r.stragglerFloor, OnStraggler: r.onStraggler,
		ReduceMemory: r.reduceMemory,
	})
	if err != nil {
		return err
	}
	ck := &checkpointer{r: r, log: log, id: j.ID, every: r.ckInterval}
	m, err := train.Run(ctx, countingEngine{Engine: eng, rounds: r.metrics.rounds}, plan.Spec, train.Hooks{
		Resume:   j.Checkpoint,
		Save:     ck.save,
		Observer: r.observer(j.ID, log),
	})
	if err != nil {
		return err
	}
	if err := ck.flush(ctx); err != nil {
		return err
	}
	b, err := m.Bytes()
	if err != nil {
		return fmt.Errorf("encode model: %w", err)
	}
	metricsJSON, err := encodeMetrics(jobMetrics(m, len(b), time.Since(start)))
	if err != nil {
		return err
	}
	if err := r.node.PutModel(ctx, j.ID, b, metricsJSON, time.Time{}); err != nil {
		return err
	}
	r.flushEvents(ctx, log)
	if err := r.node.SetStateMessage(ctx, j.ID, store.JobSucceeded, "", fmt.Sprintf("model stored (%d bytes)", len(b)), time.Time{}); err != nil {
		return err
	}
	log.Info().Int("model_bytes", len(b)).Int("iterations", m.Iterations).Float64("log_likelihood", m.LogLik).Msg("job succeeded")
	return nil
}

// jobMetrics are the figures of job's trained model m, encoded in modelBytes bytes, trained
// in took: the one shape of a job's metrics from here to the CLI (pb.JobMetrics).
func jobMetrics(m *model.Model, modelBytes int, took time.Duration) *pb.JobMetrics {
	h := m.Original()
	jm := &pb.JobMetrics{
		Hyperparameters: &pb.Hyperparameters{Lengthscales: h.Lengthscales, SignalVariance: h.SignalVariance, NoiseVariance: h.NoiseVariance},
		NTrain:          int64(m.NTrain), LogLikelihood: m.LogLik, Iterations: int32(m.Iterations),
		TrainSeconds: took.Seconds(), ModelBytes: int64(modelBytes),
		Kernel: m.Kernel, KernelReason: m.KernelReason,
	}
	if m.Choice != nil {
		jm.MethodChoice = &pb.MethodChoice{Method: m.Method, Reason: m.Choice.Reason}
	}
	for _, w := range m.Warnings {
		jm.Warnings = append(jm.Warnings, &pb.Warning{Code: w.Code, Message: w.Message})
	}
	return jm
}

// encodeMetrics is the form of metrics stored with the model (store.Job.Metrics): JSON
// with the proto field names, which are the names of the JSON records of earlier versions,
// so decodeMetrics reads both.
func encodeMetrics(m *pb.JobMetrics) ([]byte, error) {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode model metrics: %w", err)
	}
	return b, nil
}

// decodeMetrics reads the metrics stored with a model.
func decodeMetrics(b []byte) (*pb.JobMetrics, error) {
	m := &pb.JobMetrics{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("decode model metrics: %w", err)
	}
	return m, nil
}

// observer turns training events into job events (and debug log lines).
func (r *runner) observer(id string, log zerolog.Logger) train.Observer {
	return func(ev train.Event) {
		log.Debug().Str("phase", ev.Phase).Int("iteration", ev.Iteration).Float64("objective", ev.Objective).Msg(ev.Message)
		r.publish(store.Event{JobID: id, State: store.JobRunning, Phase: ev.Phase, Iteration: int32(ev.Iteration),
			MaxIter: int32(ev.MaxIter), Objective: ev.Objective, Message: ev.Message})
	}
}

// onStraggler names the slow worker of a straggling task in the job's events and metrics.
func (r *runner) onStraggler(ev remote.Straggler) {
	var msg string
	if ev.Winner.ID == "" {
		r.metrics.stragglers.WithLabelValues(ev.Slow.ID).Inc()
		msg = fmt.Sprintf("round %d shard %d: worker %s (%s) is slow: running %s, past the straggler deadline %s (median task %s); running a backup on worker %s",
			ev.Round, ev.Shard, ev.Slow.ID, ev.Slow.Addr, ev.Running.Round(time.Millisecond), ev.Deadline.Round(time.Millisecond),
			ev.Median.Round(time.Millisecond), ev.Backup.ID)
	} else if ev.Winner.ID == ev.Backup.ID {
		msg = fmt.Sprintf("round %d shard %d: the backup on worker %s finished first; worker %s (%s) was slow",
			ev.Round, ev.Shard, ev.Winner.ID, ev.Slow.ID, ev.Slow.Addr)
	} else {
		msg = fmt.Sprintf("round %d shard %d: slow worker %s finished first after all", ev.Round, ev.Shard, ev.Slow.ID)
	}
	r.publish(store.Event{JobID: ev.JobID, State: store.JobRunning, Phase: stragglerPhase, Message: msg})
}

// stragglerPhase is the phase of the events that name a slow worker, and the code of the
// job-status warnings made from them.
const stragglerPhase = "straggler"

// publish queues a progress event, stamped now, for replication.
func (r *runner) publish(ev store.Event) {
	ev.UnixNano = time.Now().UnixNano()
	r.events.add(ev)
}

// checkpointer is a run's train.Hooks.Save: it saves the first checkpoint after each phase
// change (the phase checkpoints before the optimizer, which all have iteration 0, and the
// optimizer's first) and then at most one every interval; flush saves the last one held back.
type checkpointer struct {
	r     *runner
	log   zerolog.Logger
	id    string
	every time.Duration

	last     time.Time // when the last checkpoint was saved
	lastIter int       // its iteration
	held     *heldCheckpoint
}

type heldCheckpoint struct {
	iteration int
	objective float64
	data      []byte
}

func (c *checkpointer) save(ctx context.Context, iteration int, objective float64, data []byte) error {
	if iteration > 0 && c.lastIter > 0 && time.Since(c.last) < c.every {
		c.held = &heldCheckpoint{iteration, objective, data}
		c.r.metrics.checkpoints.WithLabelValues("throttled").Inc()
		return nil
	}
	return c.write(ctx, iteration, objective, data)
}

func (c *checkpointer) flush(ctx context.Context) error {
	if h := c.held; h != nil {
		return c.write(ctx, h.iteration, h.objective, h.data)
	}
	return nil
}

func (c *checkpointer) write(ctx context.Context, iteration int, objective float64, data []byte) error {
	c.held = nil
	err := c.r.node.SaveCheckpoint(ctx, c.id, iteration, objective, data, time.Time{})
	switch {
	case errors.Is(err, store.ErrCheckpointTooLarge):
		// A resumed run redoes the work since the last checkpoint that fit, deterministically.
		c.log.Warn().Err(err).Int("iteration", iteration).Msg("checkpoint not saved")
		c.r.metrics.checkpoints.WithLabelValues("too_large").Inc()
		return nil
	case err != nil:
		return err
	}
	c.last, c.lastIter = time.Now(), iteration
	c.r.metrics.checkpoints.WithLabelValues("saved").Inc()
	return nil
}
