package remote

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/tasks"
	"github.com/gpreduce/gpreduce/internal/wire"
	"github.com/gpreduce/gpreduce/internal/worker"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// kernelJob is the data of a CG-like job: 600 rows of 2 inputs in 7 uneven shards, and the
// tasks of its rounds: products with K at one hyperparameter value, then the products,
// derivative forms and columns at another, as a CG run and a pivoted Cholesky issue them.
type kernelJob struct {
	tab   *shard.Table
	refs  []shard.Ref
	tabs  []*shard.Table
	tasks []engine.Task
}

func newKernelJob(tab *shard.Table, refs []shard.Ref, tabs []*shard.Table) *kernelJob {
	j := &kernelJob{tab: tab, refs: refs, tabs: tabs}
	offsets := []int{0}
	for _, st := range tabs {
		offsets = append(offsets, offsets[len(offsets)-1]+st.N())
	}
	op1 := &tasks.KernelOp{
		Kernel:  kernel.Kernel{Family: kernel.Matern52, Lengthscales: []float64{0.8, 1.9}, SignalVariance: 2.3},
		X:       tab.X,
		Offsets: offsets,
	}
	op2 := &tasks.KernelOp{
		Kernel:  kernel.Kernel{Family: kernel.Matern52, Lengthscales: []float64{0.7, 2.1}, SignalVariance: 1.9},
		X:       tab.X,
		Offsets: offsets,
	}
	n := op1.N()
	vec := func(k int, seed uint64) []float64 {
		r := rand.New(rand.NewPCG(seed, 9))
		v := make([]float64, n*k)
		for i := range v {
			v[i] = r.NormFloat64() * 1e3 // large values make any reordering show in the low bits
		}
		return v
	}
	for it := range 4 {
		j.tasks = append(j.tasks, &tasks.KernelTask{Op: op1, Kind: tasks.KernelMVM, K: 2, V: vec(2, uint64(it))})
	}
	for it := range 3 {
		j.tasks = append(j.tasks, &tasks.KernelTask{Op: op2, Kind: tasks.KernelMVM, K: 3, V: vec(3, uint64(10+it))})
	}
	j.tasks = append(j.tasks,
		&tasks.KernelTask{Op: op2, Kind: tasks.KernelQuad, K: 2, A: vec(2, 20), B: vec(2, 21)},
		&tasks.KernelTask{Op: op2, Kind: tasks.KernelCols, Idx: []int{0, n - 1, 77}},
		&tasks.KernelTask{Op: op2, Kind: tasks.KernelMVM, K: 1, V: vec(1, 22)[:4], Idx: []int{3, n - 100, 3, 9}},
	)
	return j
}

func syntheticKernelJob() *kernelJob {
	rng := rand.New(rand.NewPCG(3, 5))
	tab := &shard.Table{Source: "mem", Columns: []string{"a", "b"}, Target: "y", D: 2}
	for range 600 {
		a, b := rng.NormFloat64(), rng.NormFloat64()
		tab.X = append(tab.X, a, b)
		tab.Y = append(tab.Y, math.Sin(a)+b)
	}
	var refs []shard.Ref
	var tabs []*shard.Table
	lo := 0
	for i, hi := range []int{50, 170, 170, 300, 410, 520, 600} {
		refs = append(refs, shard.Ref{Index: i, Source: "mem", First: lo, Rows: hi - lo})
		tabs = append(tabs, tab.Slice(lo, hi))
		lo = hi
	}
	return newKernelJob(tab, refs, tabs)
}

// runAndCompare runs task on rem and loc and fails unless the merged results are the same bits.
func runAndCompare(t *testing.T, rem *Engine, loc engine.Engine, task engine.Task, what string) {
	t.Helper()
	ctx := context.Background()
	want, err := loc.Reduce(ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	got, err := rem.Reduce(ctx, task)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !bytes.Equal(statBytes(t, got), statBytes(t, want)) {
		t.Fatalf("%s: the remote engine's result differs from the local one", what)
	}
}

// blobTallies sums the observed attempts per worker ID: by how they carried the blobs, and the
// missing-blob answers.
type blobTally struct{ none, full, byHash, missing, otherErr int }

func (c *cluster) blobTallies() map[string]*blobTally {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]*blobTally{}
	for _, ev := range c.events {
		b := out[ev.Worker.ID]
		if b == nil {
			b = &blobTally{}
			out[ev.Worker.ID] = b
		}
		switch ev.Blobs {
		case NoBlobs:
			b.none++
		case BlobsFull:
			b.full++
		case BlobsByHash:
			b.byHash++
		}
		if _, ok := wire.MissingBlobOf(ev.Err); ok {
			b.missing++
		} else if ev.Err != nil {
			b.otherErr++
		}
	}
	return out
}

// TestKernelBlobsSentOnce: over the rounds of a job, each worker gets the kernel inputs X once
// (its first task carries them; until it returns, the worker's other shards wait) and every
// other task names them by hash, however many tasks run at once per worker; the results are
// bitwise the local engine's. Tasks without blobs are unaffected.
func TestKernelBlobsSentOnce(t *testing.T) {
	job := syntheticKernelJob()
	for _, workers := range []int{2, 3} {
		for _, inFlight := range []int{1, 2, 4} {
			t.Run(fmt.Sprintf("%d workers, %d in flight", workers, inFlight), func(t *testing.T) {
				c := newCluster(t)
				c.tab, c.refs, c.tabs = job.tab, job.refs, job.tabs
				for i := 1; i <= workers; i++ {
					c.start(fmt.Sprintf("w%d", i), nil)
				}
				rem := c.engine(func(cfg *Config) { cfg.MaxInFlight = inFlight })
				loc, err := engine.NewLocal(job.refs, job.tabs, 3)
				if err != nil {
					t.Fatal(err)
				}
				runAndCompare(t, rem, loc, shard.MomentsTask{}, "moments")
				for i, task := range job.tasks {
					runAndCompare(t, rem, loc, task, fmt.Sprintf("task %d", i))
				}
				tally := c.blobTallies()
				for i := 1; i <= workers; i++ {
					id := fmt.Sprintf("w%d", i)
					full, slim := c.worker(id).blobCounts()
					b := tally[id]
					if full != 1 || slim < 1 {
						t.Errorf("%s received %d tasks with the inputs and %d naming them, want 1 and some", id, full, slim)
					}
					if b == nil || b.full != full || b.byHash != slim || b.missing+b.otherErr != 0 {
						t.Errorf("%s: observed %+v, received %d full and %d slim", id, b, full, slim)
					}
					if b != nil && b.none != len(c.worker(id).shardsRun(1)) {
						t.Errorf("%s: %d attempts without blobs, but ran %d shards of the moments round", id, b.none, len(c.worker(id).shardsRun(1)))
					}
				}
				if logs := c.logs.String(); strings.Contains(logs, "failed") || strings.Contains(logs, "reassigned") {
					t.Errorf("unexpected failures or moves:\n%s", logs)
				}
			})
		}
	}
}

// TestKernelBlobsWorkerLosesCache: a worker that restarts (losing its blobs and kernel ops)
// between or during rounds answers the next task naming X by hash with a missing blob; the
// engine resends that task with X to the same worker at once, without counting a failure or
// moving a shard, and the round gives the local engine's bits. A worker that rejoins at
// another address gets X in full without a missing-blob round trip.
func TestKernelBlobsWorkerLosesCache(t *testing.T) {
	job := syntheticKernelJob()
	const restartRound = 4 // rounds 1-3 run normally
	tests := []struct {
		name     string
		inFlight int
		// midRound: w1 restarts after answering its first task of restartRound; else it
		// restarts before the round.
		midRound bool
	}{
		{"between rounds, one task at a time", 1, false},
		{"between rounds, two at a time", 2, false},
		{"mid-round, one task at a time", 1, true},
		{"mid-round, two at a time", 2, true},
		{"mid-round, four at a time", 4, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			c.tab, c.refs, c.tabs = job.tab, job.refs, job.tabs
			var w1 *fakeWorker
			var once sync.Once
			w1 = c.start("w1", func(_ context.Context, req *pb.RunTaskRequest, _ *pb.RunTaskResponse) error {
				if tc.midRound && req.GetRound() == restartRound {
					once.Do(w1.restart)
				}
				return nil
			})
			c.start("w2", nil)
			rem := c.engine(func(cfg *Config) { cfg.MaxInFlight = tc.inFlight })
			loc, err := engine.NewLocal(job.refs, job.tabs, 3)
			if err != nil {
				t.Fatal(err)
			}
			for round := 1; round <= len(job.tasks); round++ {
				if round == restartRound && !tc.midRound {
					w1.restart()
				}
				runAndCompare(t, rem, loc, job.tasks[round-1], fmt.Sprintf("round %d", round))
				if round == restartRound {
					// No shard moved for the restart.
					for _, id := range []string{"w1", "w2"} {
						if got, want := c.worker(id).shardsRun(uint64(round)), c.worker(id).shardsRun(uint64(round-1)); !slices.Equal(got, want) {
							t.Errorf("%s ran shards %v in round %d, %v in the round before", id, got, round, want)
						}
					}
				}
			}
			tally := c.blobTallies()
			full1, _ := w1.blobCounts()
			full2, _ := c.worker("w2").blobCounts()
			if full1 != 2 || full2 != 1 {
				t.Errorf("tasks with the inputs: w1 %d (want 2: one more after its restart), w2 %d (want 1)", full1, full2)
			}
			b1, b2 := tally["w1"], tally["w2"]
			if b1.missing < 1 || b1.missing > tc.inFlight || b1.otherErr != 0 {
				t.Errorf("w1: %d missing-blob answers (want 1 to %d) and %d other errors", b1.missing, tc.inFlight, b1.otherErr)
			}
			if b2.missing+b2.otherErr != 0 {
				t.Errorf("w2: %+v", b2)
			}
			c.mu.Lock()
			for _, ev := range c.events {
				if _, ok := wire.MissingBlobOf(ev.Err); ok && (ev.Blobs != BlobsByHash || ev.Round != restartRound || ev.Worker.ID != "w1") {
					t.Errorf("missing-blob answer in %+v", ev)
				}
			}
			c.mu.Unlock()
			logs := c.logs.String()
			if !strings.Contains(logs, "resending the task") {
				t.Errorf("no resend logged:\n%s", logs)
			}
			if strings.Contains(logs, "worker failed") || strings.Contains(logs, "reassigned") {
				t.Errorf("the missing blob counted as a failure or moved a shard:\n%s", logs)
			}
		})
	}

	t.Run("rejoin at another address", func(t *testing.T) {
		c := newCluster(t)
		c.tab, c.refs, c.tabs = job.tab, job.refs, job.tabs
		c.start("w1", nil)
		old := c.start("w2", nil)
		rem := c.engine(nil)
		loc, err := engine.NewLocal(job.refs, job.tabs, 3)
		if err != nil {
			t.Fatal(err)
		}
		runAndCompare(t, rem, loc, job.tasks[0], "round 1")
		old.kill()
		c.pool.remove("w2")
		fresh := c.serve("w2", nil) // the same ID, a new process at a new address
		c.pool.add(Worker{ID: "w2", Addr: fresh.addr})
		for i, task := range job.tasks[1:4] {
			runAndCompare(t, rem, loc, task, fmt.Sprintf("round %d", i+2))
		}
		if full, slim := fresh.blobCounts(); full != 1 || slim < 1 {
			t.Errorf("the rejoined w2 received %d tasks with the inputs and %d naming them", full, slim)
		}
		for id, b := range c.blobTallies() {
			if b.missing != 0 {
				t.Errorf("%s answered %d missing blobs", id, b.missing)
			}
		}
	})
}

// swapWorker serves the Worker service of whichever worker.Worker it currently holds, so a
// test can restart the worker process behind a stable address.
type swapWorker struct {
	pb.UnimplementedWorkerServer
	mu  sync.Mutex
	cur *worker.Worker
}

func (s *swapWorker) get() *worker.Worker {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

func (s *swapWorker) restart(t *testing.T) {
	t.Helper()
	w, err := worker.New(worker.Config{Join: []string{"127.0.0.1:1"}, Listen: "127.0.0.1:0", Cores: 2, UnregisteredTasks: true})
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.cur = w
	s.mu.Unlock()
}

func (s *swapWorker) RunTask(ctx context.Context, req *pb.RunTaskRequest) (*pb.RunTaskResponse, error) {
	return s.get().RunTask(ctx, req)
}

func (s *swapWorker) LoadShard(ctx context.Context, req *pb.LoadShardRequest) (*pb.LoadShardResponse, error) {
	return s.get().LoadShard(ctx, req)
}

// TestKernelBlobsRealWorkers: the same through the real worker service reading CSV shards:
// X travels once per worker process, a restarted worker's FAILED_PRECONDITION for the missing
// blob makes the engine resend the task in full, and every round matches the local engine.
func TestKernelBlobsRealWorkers(t *testing.T) {
	ctx := context.Background()
	var b strings.Builder
	b.WriteString("a,b,y\n")
	rng := rand.New(rand.NewPCG(11, 12))
	for range 400 {
		x1, x2 := rng.NormFloat64(), rng.NormFloat64()
		fmt.Fprintf(&b, "%.17g,%.17g,%.17g\n", x1, x2, math.Sin(x1)*x2)
	}
	path := filepath.Join(t.TempDir(), "data.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	src := shard.Source{URI: path, Format: "csv", Header: true, Target: "y"}
	refs, err := shard.Plan(ctx, src, 5)
	if err != nil {
		t.Fatal(err)
	}
	tab := &shard.Table{D: 2}
	var tabs []*shard.Table
	for _, r := range refs {
		st, err := shard.Load(ctx, src, r)
		if err != nil {
			t.Fatal(err)
		}
		tabs = append(tabs, st)
		tab.X = append(tab.X, st.X...)
	}
	job := newKernelJob(tab, refs, tabs)

	c := newCluster(t)
	c.tab, c.refs, c.tabs = tab, refs, tabs
	swaps := map[string]*swapWorker{}
	for _, id := range []string{"w1", "w2"} {
		s := &swapWorker{}
		s.restart(t)
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer()
		pb.RegisterWorkerServer(srv, s)
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
		c.pool.add(Worker{ID: id, Addr: lis.Addr().String()})
		swaps[id] = s
	}
	rem := c.engine(func(cfg *Config) { cfg.Source = src })
	loc, err := engine.NewLocal(refs, tabs, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i, task := range job.tasks {
		if i == 5 {
			swaps["w2"].restart(t)
		}
		runAndCompare(t, rem, loc, task, fmt.Sprintf("round %d", i+1))
	}
	tally := c.blobTallies()
	if b := tally["w1"]; b.full != 1 || b.missing != 0 || b.otherErr != 0 {
		t.Errorf("w1 attempts: %+v, want one with the inputs and no errors", b)
	}
	if b := tally["w2"]; b.full != 2 || b.missing < 1 || b.otherErr != 0 {
		t.Errorf("w2 attempts: %+v, want two with the inputs (one after its restart), a missing blob and no other errors", b)
	}
	if logs := c.logs.String(); strings.Contains(logs, "worker failed") || strings.Contains(logs, "reassigned") {
		t.Errorf("unexpected failures or moves:\n%s", logs)
	}
}
