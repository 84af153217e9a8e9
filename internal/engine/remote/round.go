package remote

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/wire"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// suspectFor is how long a worker that a straggler backup overtook owns no shards (at round
// starts, while another worker is live): a hung worker then costs one straggler deadline per
// suspectFor, not one per round.
const suspectFor = time.Minute

// maxRetryBackoff caps the wait before a shard is retried on a worker that already failed in
// this round (which happens only when every live worker has failed).
const maxRetryBackoff = 2 * time.Second

type shardState int

const (
	pending shardState = iota
	running
	done
)

// attempt is one RunTask call in flight.
type attempt struct {
	id     int
	shard  int
	worker Worker
	blobs  BlobMode
	gens   []uint64 // for BlobsByHash: the generations of the worker's acknowledgements
	cancel context.CancelFunc
	start  time.Time
	// backup attempts are copies of a straggling attempt of the same shard.
	backup bool
	// abandoned attempts were cancelled by the round (their worker failed or left, or another
	// attempt finished the shard); their failures are ignored.
	abandoned bool
}

// outcome is what an attempt's goroutine reports.
type outcome struct {
	id   int
	resp *pb.RunTaskResponse
	err  error
	dur  time.Duration
}

// round is the state of one Gather. Everything but results, rctx and wg belongs to the
// goroutine running run; attempt goroutines only send on results.
type round struct {
	e    *Engine
	num  uint64
	task *pb.Task // in full
	// slim is task naming its broadcast blobs by hash (task itself if blobs is empty).
	slim  *pb.Task
	blobs [][32]byte
	ctx   context.Context // the caller's
	rctx  context.Context // ends when the round ends; parent of every attempt
	log   zerolog.Logger

	out []reduce.Stats
	// merge folds out into fold.Acc in shard order as results arrive (Reduce), so the round
	// holds only the results that arrived early.
	merge bool
	fold  engine.InOrder
	// window is the count bound of a Reduce round (Config.ReduceWindow; 0 for none) and
	// resultBytes the largest encoded result of the round so far (for Config.ReduceMemory);
	// limit combines them.
	window      int
	resultBytes int
	state       []shardState
	waitSince   []time.Time // when the shard began waiting for a usable worker (zero: not waiting)
	notBefore   []time.Time // earliest retry on a worker that already failed this round
	retries     []int
	lastErr     []error
	remaining   int
	// backedUp[s] is the straggling attempt of shard s a backup was started for (nil: none).
	backedUp []*attempt
	// durations of the tasks that completed in this round; median caches their median while
	// medianOK is true.
	durations []time.Duration
	median    time.Duration
	medianOK  bool

	live   map[string]Worker
	sorted []Worker // live, by ID
	failed map[string]bool
	// suspect are the live workers a straggler backup overtook within suspectFor: they own
	// no shards this round and take tasks only when no other worker is healthy.
	suspect  map[string]bool
	load     map[string]int // attempts running per worker ID
	attempts map[int]*attempt
	nextID   int
	// sending counts the attempts carrying the blobs in full running per worker process;
	// while one runs, the worker's other shards wait for it rather than carry them too.
	sending map[Worker]int

	results chan outcome
	wg      sync.WaitGroup
}

func newRound(ctx context.Context, e *Engine, num uint64, task, slim *pb.Task, blobs [][32]byte) *round {
	k := len(e.shards)
	return &round{
		e: e, num: num, task: task, slim: slim, blobs: blobs, ctx: ctx,
		log:       e.cfg.Logger.With().Str("job", e.cfg.JobID).Uint64("round", num).Logger(),
		out:       make([]reduce.Stats, k),
		state:     make([]shardState, k),
		waitSince: make([]time.Time, k),
		notBefore: make([]time.Time, k),
		retries:   make([]int, k),
		lastErr:   make([]error, k),
		backedUp:  make([]*attempt, k),
		remaining: k,
		failed:    map[string]bool{},
		load:      map[string]int{},
		attempts:  map[int]*attempt{},
		sending:   map[Worker]int{},
		results:   make(chan outcome),
	}
}

// run executes the round and returns the results in shard order.
func (r *round) run() ([]reduce.Stats, error) {
	rctx, cancel := context.WithCancel(r.ctx)
	r.rctx = rctx
	defer r.wg.Wait()
	defer cancel()

	start := time.Now()
	r.setLive(r.e.cfg.Pool.Live())
	if r.merge {
		r.window = r.e.cfg.ReduceWindow
		if r.window == 0 {
			r.window = max(2, 2*r.e.cfg.MaxInFlight*len(r.sorted))
		}
		r.window = max(r.window, 0)
	}
	r.e.pruneHeld(r.sorted)
	r.benchSuspects(start)
	r.reconcile()
	ticker := time.NewTicker(r.e.cfg.PollInterval)
	defer ticker.Stop()
	for r.remaining > 0 {
		if err := r.ctx.Err(); err != nil {
			return nil, err
		}
		if err := r.dispatch(time.Now()); err != nil {
			return nil, err
		}
		select {
		case <-r.ctx.Done():
			return nil, r.ctx.Err()
		case o := <-r.results:
			if err := r.handle(o); err != nil {
				return nil, err
			}
		case <-ticker.C:
			r.poll()
			r.speculate(time.Now())
		}
	}
	if m, ok := r.baseline(); ok {
		r.e.lastMedian = m
	}
	r.log.Debug().Dur("took", time.Since(start)).Int("shards", len(r.out)).Msg("round done")
	return r.out, nil
}

// setLive records a snapshot of the pool.
func (r *round) setLive(ws []Worker) {
	r.sorted = normalize(ws)
	r.live = make(map[string]Worker, len(r.sorted))
	for _, w := range r.sorted {
		r.live[w.ID] = w
	}
}

// reconcile updates the shard owners at the round boundary and logs the moves.
func (r *round) reconcile() {
	eligible := r.sorted
	if len(r.suspect) > 0 {
		eligible = slices.DeleteFunc(slices.Clone(r.sorted), func(w Worker) bool { return r.suspect[w.ID] })
	}
	orphans, rebalanced := reconcile(r.e.owners, eligible)
	for _, m := range orphans {
		if m.from == "" {
			r.log.Debug().Int("shard", m.shard).Str("worker", m.to).Msg("shard assigned")
			continue
		}
		r.log.Warn().Int("shard", m.shard).Str("worker", m.to).Str("from", m.from).
			Msg("shard reassigned: its worker left the pool")
	}
	for _, m := range rebalanced {
		r.log.Info().Int("shard", m.shard).Str("worker", m.to).Str("from", m.from).
			Msg("shard moved to rebalance the pool")
	}
}

// benchSuspects drops the expired suspects of the engine and benches the others for this
// round, unless no other worker is live.
func (r *round) benchSuspects(now time.Time) {
	for id, until := range r.e.suspects {
		if !now.Before(until) {
			delete(r.e.suspects, id)
		}
	}
	bench := map[string]bool{}
	for _, w := range r.sorted {
		if _, ok := r.e.suspects[w.ID]; ok {
			bench[w.ID] = true
		}
	}
	if len(bench) == 0 || len(bench) == len(r.sorted) {
		return
	}
	r.suspect = bench
	for id := range bench {
		r.log.Info().Str("worker", id).Time("until", r.e.suspects[id]).
			Msg("worker benched: a straggler backup overtook it recently; its shards run elsewhere this round")
	}
}

// healthy returns the live workers that have neither failed in this round nor been benched
// for it, by ID.
func (r *round) healthy() []Worker {
	var h []Worker
	for _, w := range r.sorted {
		if !r.failed[w.ID] && !r.suspect[w.ID] {
			h = append(h, w)
		}
	}
	return h
}

// target returns the worker that should run pending shard s, moving the shard if its owner
// is gone or failed. ok is false when no worker is live; usable is false when every live
// worker has failed in this round (the shard is then retried on one of them, with backoff).
func (r *round) target(s int, healthy []Worker) (w Worker, ok, usable bool) {
	owner := r.e.owners[s]
	ow, ownerLive := r.live[owner]
	switch {
	case ownerLive && !r.failed[owner]:
		return ow, true, true
	case len(healthy) > 0:
		return r.moveShard(s, leastLoaded(r.e.owners, healthy)), true, true
	case len(r.sorted) == 0:
		return Worker{}, false, false
	case ownerLive:
		return ow, true, false
	}
	return r.moveShard(s, leastLoaded(r.e.owners, r.sorted)), true, false
}

// moveShard gives shard s to w during the round and logs why.
func (r *round) moveShard(s int, w Worker) Worker {
	from := r.e.owners[s]
	r.e.owners[s] = w.ID
	why := "its worker failed"
	switch _, live := r.live[from]; {
	case from == "":
		why = "it had no worker"
	case !live:
		why = "its worker left the pool"
	}
	r.log.Warn().Int("shard", s).Str("worker", w.ID).Str("from", from).Msg("shard reassigned: " + why)
	return w
}

// dispatch starts every pending shard whose worker has room, and fails the round if a shard
// has waited ShardTimeout for a usable worker.
func (r *round) dispatch(now time.Time) error {
	healthy := r.healthy()
	limit := r.limit()
	for s, st := range r.state {
		if s >= limit {
			break // the results before it come first (Config.ReduceWindow, ReduceMemory)
		}
		if st != pending {
			continue
		}
		w, ok, usable := r.target(s, healthy)
		if usable {
			r.waitSince[s] = time.Time{}
		} else {
			if r.waitSince[s].IsZero() {
				r.waitSince[s] = now
			}
			// A shard queued behind running tasks of its (failed) worker is not stuck.
			if now.Sub(r.waitSince[s]) >= r.e.cfg.ShardTimeout && (!ok || r.load[w.ID] == 0) {
				return r.timeoutError(s)
			}
			if !ok || now.Before(r.notBefore[s]) {
				continue
			}
		}
		if r.load[w.ID] >= r.e.cfg.MaxInFlight {
			continue
		}
		mode, now := r.blobMode(w)
		if !now {
			continue
		}
		r.launch(s, w, mode)
	}
	return nil
}

// limit returns the first shard a Reduce round may not start yet (Config.ReduceWindow and
// ReduceMemory), or the number of shards when nothing bounds it.
func (r *round) limit() int {
	if !r.merge {
		return len(r.state)
	}
	w := r.window
	if mem := r.e.cfg.ReduceMemory; mem > 0 && r.resultBytes > 0 {
		if m := int(max(2, mem/int64(r.resultBytes)+1)); w <= 0 || m < w {
			w = m
		}
	}
	if w <= 0 {
		return len(r.state)
	}
	return min(r.fold.Folded+w, len(r.state))
}

// blobMode returns how a task to w carries the round's blobs, and false if it should wait for
// w to acknowledge the blobs of an attempt carrying them.
func (r *round) blobMode(w Worker) (BlobMode, bool) {
	switch {
	case len(r.blobs) == 0:
		return NoBlobs, true
	case r.e.heldGens(w, r.blobs) != nil:
		return BlobsByHash, true
	case r.sending[w] > 0:
		return BlobsFull, false
	}
	return BlobsFull, true
}

func (r *round) timeoutError(s int) error {
	err := fmt.Errorf("%v: %w for %v", r.e.shards[s], ErrNoLiveWorker, r.e.cfg.ShardTimeout)
	if r.lastErr[s] != nil {
		err = fmt.Errorf("%w (every live worker failed in this round; last error: %w)", err, r.lastErr[s])
	}
	return fmt.Errorf("job %s round %d: %w", r.e.cfg.JobID, r.num, err)
}

// launch starts an attempt of shard s on w, carrying the blobs as mode says.
func (r *round) launch(s int, w Worker, mode BlobMode) *attempt {
	ctx, cancel := context.WithTimeout(r.rctx, r.e.cfg.TaskTimeout)
	id := r.nextID
	r.nextID++
	a := &attempt{id: id, shard: s, worker: w, blobs: mode, cancel: cancel, start: time.Now()}
	r.attempts[id] = a
	r.load[w.ID]++
	r.state[s] = running
	task := r.task
	switch mode {
	case BlobsFull:
		r.sending[w]++
	case BlobsByHash:
		task = r.slim
		a.gens = r.e.heldGens(w, r.blobs)
	}
	req := &pb.RunTaskRequest{JobId: r.e.cfg.JobID, Round: r.num, Source: r.e.source, Shard: r.e.refs[s], Task: task}
	results, done := r.results, r.rctx.Done()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer cancel()
		start := time.Now()
		resp, err := r.e.call(ctx, w, req)
		select {
		case results <- outcome{id: id, resp: resp, err: err, dur: time.Since(start)}:
		case <-done:
		}
	}()
	return a
}

// inFlight reports whether an attempt of shard s runs that the round has not abandoned.
func (r *round) inFlight(s int) bool {
	for _, b := range r.attempts {
		if b.shard == s && !b.abandoned {
			return true
		}
	}
	return false
}

// baseline returns the median duration of the round's completed tasks, or of the previous
// round's while none has completed; false if there is neither.
func (r *round) baseline() (time.Duration, bool) {
	if len(r.durations) == 0 {
		return r.e.lastMedian, r.e.lastMedian > 0
	}
	if !r.medianOK {
		slices.Sort(r.durations)
		n := len(r.durations)
		r.median = (r.durations[(n-1)/2] + r.durations[n/2]) / 2
		r.medianOK = true
	}
	return r.median, true
}

// speculate starts a backup of every running attempt that has run longer than the round's
// straggler deadline, on the least loaded other healthy worker with room (one backup per
// shard).
func (r *round) speculate(now time.Time) {
	if r.e.cfg.StragglerFactor < 0 {
		return
	}
	median, ok := r.baseline()
	if !ok {
		return
	}
	deadline := max(r.e.cfg.StragglerFloor, time.Duration(r.e.cfg.StragglerFactor*float64(median)))
	var late []*attempt
	for _, a := range r.attempts {
		if !a.abandoned && !a.backup && r.state[a.shard] == running && r.backedUp[a.shard] == nil && now.Sub(a.start) > deadline {
			late = append(late, a)
		}
	}
	slices.SortFunc(late, func(a, b *attempt) int { return a.id - b.id })
	for _, a := range late {
		w, ok := r.backupWorker(a.worker)
		if !ok {
			return // every other worker is busy: try again at the next poll
		}
		mode, ready := r.blobMode(w)
		if !ready {
			continue
		}
		b := r.launch(a.shard, w, mode)
		b.backup = true
		r.backedUp[a.shard] = a
		ev := Straggler{JobID: r.e.cfg.JobID, Round: r.num, Shard: a.shard, Slow: a.worker, Backup: w,
			Running: now.Sub(a.start), Deadline: deadline, Median: median}
		r.log.Warn().Int("shard", a.shard).Str("slow_worker", a.worker.ID).Str("backup_worker", w.ID).
			Dur("running", ev.Running).Dur("deadline", deadline).Dur("median", median).
			Msg("straggler: task running past the round's deadline; running a backup copy on another worker")
		if f := r.e.cfg.OnStraggler; f != nil {
			f(ev)
		}
	}
}

// backupWorker returns the healthy worker other than slow with room for a task and the
// fewest running (ties: smallest ID).
func (r *round) backupWorker(slow Worker) (Worker, bool) {
	var best Worker
	found := false
	for _, w := range r.healthy() {
		if w.ID == slow.ID || r.load[w.ID] >= r.e.cfg.MaxInFlight {
			continue
		}
		if !found || r.load[w.ID] < r.load[best.ID] {
			best, found = w, true
		}
	}
	return best, found
}

// settleStraggler reports how a backed-up shard s finished, won by attempt a, and keeps a
// slow worker that a backup overtook out of the rest of the round.
func (r *round) settleStraggler(s int, a *attempt) {
	slow := r.backedUp[s]
	if slow == nil {
		return
	}
	ev := Straggler{JobID: r.e.cfg.JobID, Round: r.num, Shard: s, Slow: slow.worker, Winner: a.worker}
	if a.backup {
		ev.Backup = a.worker
		r.log.Warn().Int("shard", s).Str("slow_worker", slow.worker.ID).Str("backup_worker", a.worker.ID).
			Dur("slow_running", time.Since(slow.start)).Msg("straggler: the backup finished first; the slow worker gets no more shards this round")
		if len(r.healthy()) > 1 {
			r.failed[slow.worker.ID] = true
		}
		r.e.suspects[slow.worker.ID] = time.Now().Add(suspectFor)
	} else {
		r.log.Info().Int("shard", s).Str("slow_worker", slow.worker.ID).Msg("straggler: the slow task finished first after all")
	}
	if f := r.e.cfg.OnStraggler; f != nil {
		f(ev)
	}
}

// abandon cancels a running attempt and puts its shard back to pending.
func (r *round) abandon(a *attempt) {
	a.abandoned = true
	a.cancel()
	if r.state[a.shard] == running && !r.inFlight(a.shard) {
		r.state[a.shard] = pending
	}
}

// poll refreshes the pool and abandons attempts on workers that left it.
func (r *round) poll() {
	r.setLive(r.e.cfg.Pool.Live())
	for _, a := range r.attempts {
		if _, ok := r.live[a.worker.ID]; !ok && !a.abandoned {
			r.log.Warn().Int("shard", a.shard).Str("worker", a.worker.ID).
				Msg("worker left the pool with a task in flight; cancelling it")
			r.abandon(a)
		}
	}
}

// handle processes the outcome of an attempt.
func (r *round) handle(o outcome) error {
	a := r.attempts[o.id]
	delete(r.attempts, o.id)
	r.load[a.worker.ID]--
	if a.blobs == BlobsFull {
		r.sending[a.worker]--
	}
	if err := r.ctx.Err(); err != nil {
		return err
	}
	s := a.shard
	var st reduce.Stats
	err := o.err
	if err == nil {
		st, err = r.accept(s, o.resp)
	}
	missing := false
	switch {
	case err == nil && a.blobs == BlobsFull:
		r.e.markHeld(a.worker, r.blobs)
	case err != nil && a.blobs == BlobsByHash:
		if h, ok := wire.MissingBlobOf(err); ok && slices.Contains(r.blobs, h) {
			missing = true
			r.e.forgetHeld(a.worker, r.blobs, a.gens)
		}
	}
	if obs := r.e.cfg.Observe; obs != nil {
		obs(TaskEvent{JobID: r.e.cfg.JobID, Round: r.num, Shard: s, Worker: a.worker, Duration: o.dur, Blobs: a.blobs, Err: err})
	}
	switch {
	case r.state[s] == done:
		return nil // a duplicate: the shard's result was already accepted
	case err == nil:
		r.out[s], r.state[s] = st, done
		r.remaining--
		r.resultBytes = max(r.resultBytes, proto.Size(o.resp.GetStats()))
		if r.merge {
			if err := r.fold.Fold(r.out); err != nil {
				return err
			}
		}
		r.durations, r.medianOK = append(r.durations, o.dur), false
		r.settleStraggler(s, a)
		if len(r.healthy()) == 0 {
			// Every live worker has failed in this round and this one just worked: use it
			// normally again rather than let the other shards time out waiting for it.
			delete(r.failed, a.worker.ID)
		}
		for _, b := range r.attempts {
			if b.shard == s && !b.abandoned {
				r.abandon(b)
			}
		}
		return nil
	case a.abandoned:
		return nil // the round already moved this shard on
	case missing && r.inFlight(s):
		return nil // the shard's other attempt (a straggler's backup or original) runs on
	case missing:
		// The worker restarted or evicted the blobs: send it the task in full now (or, if
		// another attempt is carrying them there, as soon as that returns; or by hash again
		// if one already has since this attempt left). Neither a failure of the worker nor a
		// retry.
		r.state[s] = pending
		w := a.worker
		mode, now := r.blobMode(w)
		if now && r.live[w.ID] == w && !r.failed[w.ID] && r.e.owners[s] == w.ID && r.load[w.ID] < r.e.cfg.MaxInFlight {
			r.launch(s, w, mode)
		}
		r.log.Info().Int("shard", s).Str("worker", w.ID).Str("addr", w.Addr).Stringer("blobs", mode).
			Msg("worker lacks the task's broadcast data (restarted or evicted it); resending the task")
		return nil
	}

	if gs, ok := grpcStatus(err); ok {
		switch gs.Code() {
		case codes.FailedPrecondition, codes.InvalidArgument, codes.Unauthenticated, codes.PermissionDenied:
			return fmt.Errorf("job %s round %d: %w", r.e.cfg.JobID, r.num,
				&TaskError{Shard: r.e.shards[s], Worker: a.worker, Code: gs.Code(), Message: gs.Message()})
		}
	}
	// Anything else is a failure of the worker or the connection to it: retry elsewhere,
	// unless another attempt of the shard (a straggler's backup or original) still runs.
	if !r.inFlight(s) {
		r.state[s] = pending
	}
	r.retries[s]++
	r.lastErr[s] = err
	r.notBefore[s] = time.Now().Add(min(maxRetryBackoff, r.e.cfg.PollInterval<<min(r.retries[s]-1, 8)))
	if wire.DrainingOf(err) {
		r.workerDraining(a)
	} else {
		r.workerFailed(a, err)
	}
	return nil
}

// workerDraining marks a's worker, which is stopping (wire.DrainingStatus), failed for the rest
// of the round, so that its pending shards move elsewhere, but leaves its running attempts
// alone: the worker finishes them, and their results are accepted as any other.
func (r *round) workerDraining(a *attempt) {
	w := a.worker
	r.failed[w.ID] = true
	r.log.Info().Int("shard", a.shard).Str("worker", w.ID).Str("addr", w.Addr).
		Msg("worker draining: it finishes its running tasks; moving its other shards")
}

// accept checks a reply and decodes its statistic.
func (r *round) accept(s int, resp *pb.RunTaskResponse) (reduce.Stats, error) {
	if resp.GetJobId() != r.e.cfg.JobID || resp.GetRound() != r.num || int(resp.GetShard()) != s {
		return nil, fmt.Errorf("reply for job %q round %d shard %d to task job %q round %d shard %d",
			resp.GetJobId(), resp.GetRound(), resp.GetShard(), r.e.cfg.JobID, r.num, s)
	}
	st, err := wire.DecodeStats(resp.GetStats())
	if err != nil {
		return nil, fmt.Errorf("reply for shard %d: %w", s, err)
	}
	return st, nil
}

// workerFailed marks a's worker failed for the rest of the round and, if another worker can
// take over, cancels its other attempts so that dispatch moves all its shards.
func (r *round) workerFailed(a *attempt, err error) {
	w := a.worker
	r.failed[w.ID] = true
	r.log.Warn().Int("shard", a.shard).Str("worker", w.ID).Str("addr", w.Addr).Err(err).
		Msg("worker failed; moving its shards")
	if len(r.healthy()) == 0 {
		return
	}
	for _, b := range r.attempts {
		if b.worker.ID == w.ID && !b.abandoned {
			r.abandon(b)
		}
	}
}

// grpcStatus returns the gRPC status err carries, if any, with the worker's own message.
func grpcStatus(err error) (*status.Status, bool) {
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		return se.GRPCStatus(), true
	}
	return nil, false
}
