package remote

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/testutil"
	"github.com/gpreduce/gpreduce/internal/wire"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// stragglers collects the OnStraggler events of an engine.
type stragglers struct {
	mu  sync.Mutex
	evs []Straggler
}

func (s *stragglers) add(ev Straggler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evs = append(s.evs, ev)
}

func (s *stragglers) all() []Straggler {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.evs)
}

// TestStragglerBackup: a worker that stays in the pool (it heartbeats) but whose tasks hang
// holds no round up for long: once its tasks run past max(floor, 3 x the round's median),
// backups run on the other workers and win, the events name the slow worker, the next round
// gives it no shards, and both rounds give the local engine's bits. Without backups the
// rounds would wait for the task timeout (an hour here), so an engine that runs none hangs
// until the test's context ends and fails; the test times nothing.
func TestStragglerBackup(t *testing.T) {
	c := newCluster(t)
	c.start("w1", nil)
	c.start("w2", hang(make(chan struct{})))
	c.start("w3", nil)
	var seen stragglers
	e := c.engine(func(cfg *Config) {
		cfg.TaskTimeout = time.Hour
		cfg.ShardTimeout = time.Hour
		cfg.StragglerFloor = 300 * time.Millisecond
		cfg.OnStraggler = seen.add
	})
	loc := c.local()
	moments, gram := c.tasks()
	ctx := testutil.Context(t) // only bounds the hang of an engine that runs no backup
	start := time.Now()
	for i, tc := range []struct {
		name string
		task engine.Task
	}{{"moments", moments}, {"gram", gram}} {
		got, err := e.Reduce(ctx, tc.task)
		if err != nil {
			t.Fatalf("round %d (%s): %v", i+1, tc.name, err)
		}
		want, err := loc.Reduce(ctx, tc.task)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(statBytes(t, got), statBytes(t, want)) {
			t.Errorf("round %d (%s): the result differs from the local engine's", i+1, tc.name)
		}
	}
	took := time.Since(start)
	t.Logf("two rounds with a hung worker took %s", took.Round(time.Millisecond))
	if got := c.worker("w2").shardsRun(1); len(got) != 0 {
		t.Errorf("the hung worker answered shards %v", got)
	}
	started, won := map[uint64]int{}, map[uint64]int{}
	for _, ev := range seen.all() {
		if ev.Slow.ID != "w2" || ev.Backup.ID == "w2" || ev.Backup.ID == "" || ev.JobID != testJob {
			t.Errorf("straggler event %+v: want w2 slow and another worker as backup", ev)
		}
		if ev.Winner.ID == "" {
			started[ev.Round]++
			if ev.Running < 300*time.Millisecond || ev.Deadline < 300*time.Millisecond || ev.Median <= 0 {
				t.Errorf("backup started early: %+v", ev)
			}
		} else {
			won[ev.Round]++
			if ev.Winner.ID != ev.Backup.ID {
				t.Errorf("the hung worker won: %+v", ev)
			}
		}
	}
	if started[1] == 0 || won[1] != started[1] {
		t.Errorf("round 1: %d backups started, %d won; want at least one, all won", started[1], won[1])
	}
	if started[2] != 0 || won[2] != 0 {
		t.Errorf("round 2: %d backups started, %d won; want none (the hung worker is benched)", started[2], won[2])
	}
	if !strings.Contains(c.logs.String(), "worker benched") {
		t.Error("benching the hung worker in round 2 was not logged")
	}
}

// TestStragglerBackupsOff: with a negative factor a slow task is waited for and runs no
// backup.
func TestStragglerBackupsOff(t *testing.T) {
	c := newCluster(t)
	c.start("w1", nil)
	c.start("w2", func(ctx context.Context, req *pb.RunTaskRequest, _ *pb.RunTaskResponse) error {
		if req.GetShard().GetIndex() == 1 {
			select {
			case <-time.After(600 * time.Millisecond):
			case <-ctx.Done():
				return status.FromContextError(ctx.Err()).Err()
			}
		}
		return nil
	})
	var seen stragglers
	e := c.engine(func(cfg *Config) {
		cfg.StragglerFactor = -1
		cfg.StragglerFloor = time.Millisecond
		cfg.OnStraggler = seen.add
	})
	if _, err := e.Reduce(context.Background(), shard.MomentsTask{}); err != nil {
		t.Fatal(err)
	}
	if evs := seen.all(); len(evs) != 0 {
		t.Errorf("backups with StragglerFactor < 0: %+v", evs)
	}
	if got := c.worker("w2").shardsRun(1); !slices.Contains(got, 1) {
		t.Errorf("w2 ran %v; want its slow shard 1 too", got)
	}
}

// TestTaskCarriesSession: every task attempt carries the worker's registration session as
// wire.SessionKey metadata, and a worker that refuses it (ABORTED, as after it registered
// again) only moves the shard elsewhere.
func TestTaskCarriesSession(t *testing.T) {
	c := newCluster(t)
	check := func(id string) hookFunc {
		return func(ctx context.Context, _ *pb.RunTaskRequest, _ *pb.RunTaskResponse) error {
			md, _ := metadata.FromIncomingContext(ctx)
			if v := md.Get(wire.SessionKey); len(v) != 1 || v[0] != "session-"+id {
				return status.Errorf(codes.Aborted, "session %q", v)
			}
			return nil
		}
	}
	for _, id := range []string{"w1", "w2"} {
		f := c.serve(id, check(id))
		session := Session("session-" + id)
		if id == "w2" {
			session = "stale"
		}
		c.pool.add(Worker{ID: id, Addr: f.addr, Session: session})
	}
	got, err := c.engine(nil).Reduce(context.Background(), shard.MomentsTask{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := c.local().Reduce(context.Background(), shard.MomentsTask{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(statBytes(t, got), statBytes(t, want)) {
		t.Error("the result differs from the local engine's")
	}
	if got := c.worker("w1").shardsRun(1); len(got) != len(c.refs) {
		t.Errorf("w1 (right session) ran shards %v, want all", got)
	}
	if s := (Worker{ID: "w", Session: "secret"}); strings.Contains(fmt.Sprintf("%v %+v", s, s), "secret") {
		t.Errorf("a Worker prints its session: %+v", s)
	}
}

// TestReduceWindow: while shard 0's task is held back, a Reduce with ReduceWindow 2 starts
// only shard 1 beside it (the results waiting for shard 0 stay bounded); with a memory bound
// below one result's size, the first wave (two tasks on each of the two workers) runs and
// nothing after it; with no bound every other shard runs. Released, every round gives the
// local engine's bits.
func TestReduceWindow(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window int
		memory int64
		want   []int // the shards answered while shard 0 is held
	}{
		{"window 2", 2, -1, []int{1}},
		{"memory below one result", -1, 1, []int{1, 2, 3}},
		{"no bound", -1, -1, []int{1, 2, 3, 4, 5, 6, 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			release := make(chan struct{})
			var mu sync.Mutex
			var seen []int
			hook := func(ctx context.Context, req *pb.RunTaskRequest, _ *pb.RunTaskResponse) error {
				s := wire.DecodeRef(req.GetShard()).Index
				if s == 0 {
					select {
					case <-release:
					case <-ctx.Done():
						return status.FromContextError(ctx.Err()).Err()
					}
					return nil
				}
				mu.Lock()
				seen = append(seen, s)
				mu.Unlock()
				return nil
			}
			answered := func() []int {
				mu.Lock()
				defer mu.Unlock()
				s := slices.Clone(seen)
				slices.Sort(s)
				return s
			}
			c.start("w1", hook)
			c.start("w2", hook)
			e := c.engine(func(cfg *Config) {
				cfg.ReduceWindow = tc.window
				cfg.ReduceMemory = tc.memory
				cfg.StragglerFactor = -1 // no backup of the held shard
				cfg.TaskTimeout = time.Minute
			})
			_, gram := c.tasks()
			type result struct {
				st  reduce.Stats
				err error
			}
			done := make(chan result, 1)
			go func() {
				st, err := e.Reduce(context.Background(), gram)
				done <- result{st, err}
			}()
			// Wait for the shards the window allows, then long enough for others to start if
			// the window let them (a slow machine can only hide a violation, not fake one).
			testutil.Eventually(t, 30*time.Second, fmt.Sprintf("shards %v answered", tc.want), func() error {
				got := answered()
				for _, s := range tc.want {
					if !slices.Contains(got, s) {
						return fmt.Errorf("answered %v", got)
					}
				}
				return nil
			})
			time.Sleep(500 * time.Millisecond)
			if got := answered(); !slices.Equal(got, tc.want) {
				t.Errorf("while shard 0 was held the workers answered shards %v, want %v", got, tc.want)
			}
			close(release)
			r := <-done
			if r.err != nil {
				t.Fatal(r.err)
			}
			want, err := c.local().Reduce(context.Background(), gram)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(statBytes(t, r.st), statBytes(t, want)) {
				t.Error("the result differs from the local engine's")
			}
		})
	}
}
