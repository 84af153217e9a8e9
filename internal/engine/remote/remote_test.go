package remote

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/testutil"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

func TestReconcile(t *testing.T) {
	ws := func(ids ...string) []Worker {
		out := make([]Worker, len(ids))
		for i, id := range ids {
			out[i] = Worker{ID: id, Addr: id + ":1"}
		}
		return out
	}
	initial := []string{"w1", "w2", "w3", "w1", "w2", "w3", "w1", "w2"}
	tests := []struct {
		name       string
		owners     []string
		live       []Worker
		want       []string
		orphans    int
		rebalanced int
	}{
		{"first round deals shards round robin", make([]string, 8), ws("w1", "w2", "w3"), initial, 8, 0},
		{"balanced pool keeps every owner", initial, ws("w1", "w2", "w3"), initial, 0, 0},
		{"shards of a departed worker go to the least loaded, ties to the smallest ID", initial, ws("w1", "w2"),
			[]string{"w1", "w2", "w1", "w1", "w2", "w2", "w1", "w2"}, 2, 0},
		{"a new worker takes the highest shards of the most loaded", initial, ws("w1", "w2", "w3", "w4"),
			[]string{"w1", "w2", "w3", "w1", "w2", "w3", "w4", "w4"}, 0, 2},
		{"a lopsided pool is evened out", []string{"w1", "w1", "w1", "w1", "w1", "w1", "w1", "w1"}, ws("w1", "w2"),
			[]string{"w1", "w1", "w1", "w1", "w2", "w2", "w2", "w2"}, 0, 4},
		{"departure and arrival at once", initial, ws("w2", "w3", "w9"),
			[]string{"w9", "w2", "w3", "w9", "w2", "w3", "w3", "w2"}, 3, 0},
		{"no live worker changes nothing", initial, nil, initial, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			owners := slices.Clone(tc.owners)
			orphans, rebalanced := reconcile(owners, tc.live)
			if !slices.Equal(owners, tc.want) {
				t.Errorf("owners = %v, want %v", owners, tc.want)
			}
			if len(orphans) != tc.orphans || len(rebalanced) != tc.rebalanced {
				t.Errorf("%d orphan and %d rebalancing moves, want %d and %d", len(orphans), len(rebalanced), tc.orphans, tc.rebalanced)
			}
			again := slices.Clone(tc.owners)
			reconcile(again, tc.live)
			if !slices.Equal(again, owners) {
				t.Errorf("not deterministic: %v then %v", owners, again)
			}
		})
	}
}

func TestNormalize(t *testing.T) {
	tests := []struct {
		name string
		in   []Worker
		want []Worker
	}{
		{"empty", nil, []Worker{}},
		{"sorted by ID", []Worker{{ID: "b", Addr: "2"}, {ID: "a", Addr: "1"}}, []Worker{{ID: "a", Addr: "1"}, {ID: "b", Addr: "2"}}},
		{"duplicates and empty IDs dropped", []Worker{{ID: "b", Addr: "2"}, {ID: "", Addr: "0"}, {ID: "b", Addr: "3"}, {ID: "a", Addr: "1"}}, []Worker{{ID: "a", Addr: "1"}, {ID: "b", Addr: "2"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := normalize(tc.in); !slices.Equal(got, tc.want) {
				t.Errorf("normalize(%v) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	refs := []shard.Ref{{Index: 0, Source: "mem", Rows: 5}, {Index: 1, Source: "mem", First: 5, Rows: 5}}
	pool := &fakePool{}
	dial := func(context.Context, string) (pb.WorkerClient, error) { return nil, errors.New("unused") }
	valid := Config{JobID: "j", Shards: refs, Pool: pool, Dial: dial}
	tests := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"no job id", func(c *Config) { c.JobID = "" }, "no job id"},
		{"no shards", func(c *Config) { c.Shards = nil }, "no shards"},
		{"no pool", func(c *Config) { c.Pool = nil }, "no worker pool"},
		{"no dialer", func(c *Config) { c.Dial = nil }, "no dialer"},
		{"negative timeout", func(c *Config) { c.ShardTimeout = -time.Second }, "negative"},
		{"shards out of order", func(c *Config) { c.Shards = []shard.Ref{refs[1], refs[0]} }, "shard 1 (mem rows 5-10) is at position 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := valid
			tc.mod(&cfg)
			_, err := New(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: error %v, want one containing %q", err, tc.want)
			}
		})
	}
	e, err := New(valid)
	if err != nil {
		t.Fatal(err)
	}
	if e.cfg.ShardTimeout != DefaultShardTimeout || e.cfg.TaskTimeout != DefaultTaskTimeout ||
		e.cfg.MaxInFlight != DefaultMaxInFlight || e.cfg.PollInterval != DefaultPollInterval {
		t.Errorf("defaults not applied: %+v", e.cfg)
	}
	if got := e.Shards(); !slices.Equal(got, refs) {
		t.Errorf("Shards() = %v, want %v", got, refs)
	}
}

// unencodable is a task without a wire form.
type unencodable struct{}

func (unencodable) Map(context.Context, shard.Ref, *shard.Table) (reduce.Stats, error) {
	return nil, nil
}

func TestGatherRejectsTaskWithoutWireForm(t *testing.T) {
	c := newCluster(t)
	c.start("w1", nil)
	e := c.engine(nil)
	if _, err := e.Gather(context.Background(), unencodable{}); err == nil || !strings.Contains(err.Error(), "no wire form") {
		t.Fatalf("Gather: error %v, want one saying the task has no wire form", err)
	}
	if got := c.worker("w1").shardsRun(1); len(got) != 0 {
		t.Errorf("worker ran shards %v for a task that cannot be sent", got)
	}
}

// TestReduceMatchesLocal runs the moments pass (round 1) and a Gauss-Legendre Gram pass
// (round 2) on fake workers while the pool changes, and checks both are bitwise identical to
// the local engine.
func TestReduceMatchesLocal(t *testing.T) {
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	tests := []struct {
		name string
		// setup starts the workers and returns what to do while round 1 runs (may be nil).
		setup   func(c *cluster) (during func())
		between func(c *cluster)
		check   func(t *testing.T, c *cluster)
	}{
		{
			name: "three workers keep their shards across rounds",
			setup: func(c *cluster) func() {
				for _, id := range []string{"w1", "w2", "w3"} {
					c.start(id, nil)
				}
				return nil
			},
			check: func(t *testing.T, c *cluster) {
				want := map[string][]int{"w1": {0, 3, 6}, "w2": {1, 4, 7}, "w3": {2, 5}}
				for id, shards := range want {
					for round := uint64(1); round <= 2; round++ {
						if got := c.worker(id).shardsRun(round); !slices.Equal(got, shards) {
							t.Errorf("round %d: %s ran %v, want %v", round, id, got, shards)
						}
					}
				}
				if len(c.events) != 16 {
					t.Errorf("observed %d task events, want 16", len(c.events))
				}
				for _, ev := range c.events {
					if ev.Err != nil || ev.JobID != testJob || ev.Worker.ID == "" {
						t.Errorf("unexpected event %+v", ev)
					}
				}
			},
		},
		{
			name: "worker killed mid-round",
			setup: func(c *cluster) func() {
				started := make(chan struct{})
				c.start("w1", nil)
				c.start("w2", hang(started))
				c.start("w3", nil)
				return func() {
					waitFor(c.t, started, waitLimit, "a task in flight on w2")
					c.worker("w2").kill() // the registry has not noticed: w2 stays in the pool
				}
			},
			check: func(t *testing.T, c *cluster) {
				for round := uint64(1); round <= 2; round++ {
					if got := c.worker("w2").shardsRun(round); len(got) != 0 {
						t.Errorf("round %d: dead w2 answered %v", round, got)
					}
					got := append(c.worker("w1").shardsRun(round), c.worker("w3").shardsRun(round)...)
					if slices.Sort(got); !slices.Equal(got, all) {
						t.Errorf("round %d: w1 and w3 ran %v, want every shard once", round, got)
					}
				}
				logs := c.logs.String()
				for _, want := range []string{`"level":"warn"`, `"job":"job-1"`, `"round":1`, `"worker":"w2"`, `"shard":`, "worker failed", "shard reassigned"} {
					if !strings.Contains(logs, want) {
						t.Errorf("logs lack %s:\n%s", want, logs)
					}
				}
			},
		},
		{
			name: "worker leaves the pool mid-round",
			setup: func(c *cluster) func() {
				started := make(chan struct{})
				c.start("w1", nil)
				c.start("w2", nil)
				c.start("w3", hang(started))
				return func() {
					waitFor(c.t, started, waitLimit, "a task in flight on w3")
					c.pool.remove("w3")
				}
			},
			check: func(t *testing.T, c *cluster) {
				if got := c.worker("w3").shardsRun(1); len(got) != 0 {
					t.Errorf("w3 answered %v after leaving", got)
				}
				if !strings.Contains(c.logs.String(), "worker left the pool") {
					t.Errorf("no warning about w3 leaving:\n%s", c.logs.String())
				}
			},
		},
		{
			name: "worker removed between rounds",
			setup: func(c *cluster) func() {
				for _, id := range []string{"w1", "w2", "w3"} {
					c.start(id, nil)
				}
				return nil
			},
			between: func(c *cluster) { c.pool.remove("w3") },
			check: func(t *testing.T, c *cluster) {
				if got := c.worker("w3").shardsRun(2); len(got) != 0 {
					t.Errorf("removed w3 ran %v in round 2", got)
				}
				want := map[string][]int{"w1": {0, 2, 3, 6}, "w2": {1, 4, 5, 7}}
				for id, shards := range want {
					if got := c.worker(id).shardsRun(2); !slices.Equal(got, shards) {
						t.Errorf("round 2: %s ran %v, want %v", id, got, shards)
					}
				}
			},
		},
		{
			name: "worker added between rounds gets shards at the next round",
			setup: func(c *cluster) func() {
				for _, id := range []string{"w1", "w2", "w3"} {
					c.start(id, nil)
				}
				return nil
			},
			between: func(c *cluster) { c.start("w4", nil) },
			check: func(t *testing.T, c *cluster) {
				want := map[string][]int{"w1": {0, 3}, "w2": {1, 4}, "w3": {2, 5}, "w4": {6, 7}}
				for id, shards := range want {
					if got := c.worker(id).shardsRun(2); !slices.Equal(got, shards) {
						t.Errorf("round 2: %s ran %v, want %v", id, got, shards)
					}
				}
			},
		},
		{
			name: "mismatched reply is not accepted",
			setup: func(c *cluster) func() {
				var calls atomic.Int32
				c.start("w1", func(_ context.Context, _ *pb.RunTaskRequest, resp *pb.RunTaskResponse) error {
					if calls.Add(1) == 1 {
						resp.Round += 100
					}
					return nil
				})
				c.start("w2", nil)
				return nil
			},
			check: func(t *testing.T, c *cluster) {
				var mismatched int
				for _, ev := range c.events {
					if ev.Err != nil && strings.Contains(ev.Err.Error(), "reply for job") {
						mismatched++
					}
				}
				if mismatched != 1 {
					t.Errorf("%d mismatched replies observed, want 1", mismatched)
				}
			},
		},
		{
			name: "transient unavailability is retried",
			setup: func(c *cluster) func() {
				var calls atomic.Int32
				c.start("w1", nil)
				c.start("w2", func(context.Context, *pb.RunTaskRequest, *pb.RunTaskResponse) error {
					if calls.Add(1) <= 2 {
						return status.Error(codes.Unavailable, "connection reset")
					}
					return nil
				})
				return nil
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			during := tc.setup(c)
			e := c.engine(nil)
			momentsTask, gramTask := c.tasks()
			loc := c.local()
			ctx := context.Background()
			var wg sync.WaitGroup
			if during != nil {
				wg.Go(during)
			}
			for i, task := range []engine.Task{momentsTask, gramTask} {
				if i == 1 && tc.between != nil {
					tc.between(c)
				}
				want, err := loc.Reduce(ctx, task)
				if err != nil {
					t.Fatal(err)
				}
				got, err := e.Reduce(ctx, task)
				if err != nil {
					t.Fatalf("round %d: %v", i+1, err)
				}
				if !bytes.Equal(statBytes(t, got), statBytes(t, want)) {
					t.Errorf("round %d (%T): remote result differs from the local engine", i+1, task)
				}
				wg.Wait()
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

func TestRoundFailsAtOnce(t *testing.T) {
	const dataMsg = `source "/data/train.csv" line 17 column "x": non-numeric value "abc"`
	tests := []struct {
		name string
		code codes.Code
		msg  string
		want []string
	}{
		{"missing source", codes.FailedPrecondition, `open /data/train.csv: no such file or directory`,
			[]string{"shard 4 (mem rows 2000-2500) on worker w2: open /data/train.csv: no such file or directory"}},
		{"corrupt row", codes.InvalidArgument, dataMsg, []string{"shard 4 (mem rows 2000-2500) on worker w2: " + dataMsg}},
		{"bad token", codes.Unauthenticated, "invalid join token",
			[]string{"shard 4 (mem rows 2000-2500)", "worker w2", "refused the task", "Unauthenticated", "invalid join token"}},
		{"forbidden", codes.PermissionDenied, "token lacks the worker role",
			[]string{"shard 4", "refused the task", "token lacks the worker role"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			// Every other task hangs until cancelled, so the round can only end by failing at once.
			c.start("w1", hang(make(chan struct{})))
			c.start("w2", func(ctx context.Context, req *pb.RunTaskRequest, _ *pb.RunTaskResponse) error {
				if req.GetShard().GetIndex() == 4 {
					return status.Error(tc.code, tc.msg)
				}
				<-ctx.Done()
				return status.FromContextError(ctx.Err()).Err()
			})
			c.start("w3", hang(make(chan struct{})))
			// The hung tasks never time out, so an engine that waits for them instead of
			// failing at once hangs until the test's context ends (a deadline that only bounds
			// that hang) and fails below; the test times nothing.
			e := c.engine(func(cfg *Config) {
				cfg.TaskTimeout = time.Hour
				cfg.ShardTimeout = time.Hour
			})
			_, err := e.Reduce(testutil.Context(t), shard.MomentsTask{})
			if err == nil {
				t.Fatal("round succeeded, want it to fail")
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("round did not fail at once: it ran until the test's deadline (%v)", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			var te *TaskError
			if !errors.As(err, &te) || te.Code != tc.code || te.Message != tc.msg || te.Shard.Index != 4 || te.Worker.ID != "w2" {
				t.Errorf("error %v does not carry the worker's failure (%v)", err, te)
			}
			var tries int
			for _, ev := range c.events {
				if ev.Shard == 4 {
					tries++
				}
			}
			if tries != 1 {
				t.Errorf("shard 4 was tried %d times, want once", tries)
			}
		})
	}
}

func TestNoLiveWorker(t *testing.T) {
	tests := []struct {
		name string
		// setup prepares the pool and returns what to do while the round runs (may be nil).
		setup func(c *cluster) func()
		want  []string // error substrings; none: the round must succeed
		// shardTimeout is the engine's ShardTimeout (200ms if zero).
		shardTimeout time.Duration
		minTook      time.Duration
	}{
		{
			name:    "empty pool fails after the shard timeout",
			setup:   func(c *cluster) func() { return nil },
			want:    []string{"job job-1 round 1: shard 0 (mem rows 0-500): no live worker for 200ms"},
			minTook: 200 * time.Millisecond,
		},
		{
			name: "a worker appearing before the timeout lets the round finish",
			setup: func(c *cluster) func() {
				f := c.serve("w1", nil)
				return func() {
					// The worker joins once the engine has found the pool empty at the round's
					// start and polled it again, well inside a ShardTimeout that no slow machine
					// reaches. (This runs beside the test goroutine, so it reports with Errorf.)
					for deadline := time.Now().Add(waitLimit); c.pool.liveCalls() < 2; time.Sleep(time.Millisecond) {
						if time.Now().After(deadline) {
							c.t.Errorf("the engine did not poll the empty pool within %v", waitLimit)
							return
						}
					}
					c.pool.add(Worker{ID: "w1", Addr: f.addr})
				}
			},
			shardTimeout: 2 * time.Minute,
		},
		{
			name: "a pool whose only worker keeps failing times out with its error",
			setup: func(c *cluster) func() {
				c.start("w1", func(context.Context, *pb.RunTaskRequest, *pb.RunTaskResponse) error {
					return status.Error(codes.Unavailable, "worker is draining")
				})
				return nil
			},
			want:    []string{"job job-1 round 1: shard ", "no live worker for 200ms", "last error", "worker is draining"},
			minTook: 200 * time.Millisecond,
		},
		{
			name: "a dead worker still listed in the pool times out",
			setup: func(c *cluster) func() {
				c.start("w1", nil).kill()
				return nil
			},
			want:    []string{"no live worker for 200ms", "Unavailable"},
			minTook: 200 * time.Millisecond,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			during := tc.setup(c)
			e := c.engine(func(cfg *Config) {
				cfg.ShardTimeout = cmp.Or(tc.shardTimeout, 200*time.Millisecond)
			})
			var wg sync.WaitGroup
			if during != nil {
				wg.Go(during)
			}
			// The context only bounds the hang of an engine that never ends the round.
			start := time.Now()
			got, err := e.Reduce(testutil.Context(t), shard.MomentsTask{})
			took := time.Since(start)
			wg.Wait()
			t.Logf("round took %v", took)
			if took < tc.minTook {
				t.Errorf("round took %v, want at least the shard timeout %v", took, tc.minTook)
			}
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("round failed: %v", err)
				}
				want, err := c.local().Reduce(context.Background(), shard.MomentsTask{})
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(statBytes(t, got), statBytes(t, want)) {
					t.Error("remote result differs from the local engine")
				}
				return
			}
			if !errors.Is(err, ErrNoLiveWorker) {
				t.Fatalf("error %v, want ErrNoLiveWorker", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestContextEndsRound(t *testing.T) {
	tests := []struct {
		name string
		ctx  func(started <-chan struct{}) (context.Context, context.CancelFunc)
		want error
	}{
		{
			name: "cancel",
			ctx: func(started <-chan struct{}) (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				go func() {
					<-started
					cancel()
				}()
				return ctx, cancel
			},
			want: context.Canceled,
		},
		{
			name: "deadline",
			ctx: func(<-chan struct{}) (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 300*time.Millisecond)
			},
			want: context.DeadlineExceeded,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			var hanging atomic.Bool
			started := make(chan struct{})
			var once sync.Once
			hook := func(ctx context.Context, _ *pb.RunTaskRequest, _ *pb.RunTaskResponse) error {
				if !hanging.Load() {
					return nil
				}
				once.Do(func() { close(started) })
				<-ctx.Done()
				return status.FromContextError(ctx.Err()).Err()
			}
			for _, id := range []string{"w1", "w2", "w3"} {
				c.start(id, hook)
			}
			// The hung tasks never time out on their own: only the context ends them.
			e := c.engine(func(cfg *Config) {
				cfg.TaskTimeout = time.Hour
				cfg.ShardTimeout = time.Hour
			})
			// A first round opens the connections, so that the baseline counts their goroutines.
			if _, err := e.Reduce(context.Background(), shard.MomentsTask{}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
			baseline := runtime.NumGoroutine()

			hanging.Store(true)
			ctx, cancel := tc.ctx(started)
			defer cancel()
			doneAt := make(chan time.Time, 1)
			go func() {
				<-ctx.Done()
				doneAt <- time.Now()
			}()
			// An engine that ignores the context hangs (its tasks never time out); the
			// deadline only bounds that hang.
			reduced := make(chan error, 1)
			go func() {
				_, err := e.Reduce(ctx, shard.MomentsTask{})
				reduced <- err
			}()
			var err error
			select {
			case err = <-reduced:
			case <-time.After(waitLimit):
				t.Fatalf("Reduce still running %v after the round started: the context did not end it", waitLimit)
			}
			ended := time.Now()
			if !errors.Is(err, tc.want) {
				t.Fatalf("Reduce: error %v, want %v", err, tc.want)
			}
			t.Logf("Reduce returned %v after the context ended", ended.Sub(<-doneAt))
			waitGoroutines(t, baseline)

			// The engine is still usable for the next round.
			hanging.Store(false)
			if _, err := e.Reduce(context.Background(), shard.MomentsTask{}); err != nil {
				t.Fatalf("round after the cancelled one: %v", err)
			}
		})
	}
}

// waitLimit bounds the tests' waits: it only bounds a hang, and no test measures time with it.
const waitLimit = testutil.MinWait

// waitGoroutines waits (up to waitLimit) for the goroutine count to fall back to baseline.
func waitGoroutines(t *testing.T, baseline int) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		n := runtime.NumGoroutine()
		if n <= baseline {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines, baseline %d:\n%s", n, baseline, buf)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTaskErrorMessage(t *testing.T) {
	ref := shard.Ref{Index: 3, Source: "src", Rows: 100}
	w := Worker{ID: "w7", Addr: "10.0.0.7:7070"}
	tests := []struct {
		code codes.Code
		want string
	}{
		{codes.FailedPrecondition, "shard 3 (src rows 0-100) on worker w7: open src: no such file"},
		{codes.Unauthenticated, "shard 3 (src rows 0-100): worker w7 (10.0.0.7:7070) refused the task (Unauthenticated): open src: no such file; check the worker join token and TLS settings"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.code), func(t *testing.T) {
			err := &TaskError{Shard: ref, Worker: w, Code: tc.code, Message: "open src: no such file"}
			if err.Error() != tc.want {
				t.Errorf("Error() = %q, want %q", err.Error(), tc.want)
			}
		})
	}
}
