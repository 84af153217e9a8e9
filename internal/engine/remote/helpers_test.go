package remote

import (
	"bytes"
	"cmp"
	"context"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/features"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/tasks"
	"github.com/gpreduce/gpreduce/internal/wire"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

const testJob = "job-1"

// syntheticTable returns n rows of one input and a target with a large offset, so that a
// change in summation order would show in the low bits.
func syntheticTable(n int) *shard.Table {
	rng := rand.New(rand.NewPCG(7, 13))
	t := &shard.Table{Source: "mem", Columns: []string{"x"}, Target: "y", D: 1, X: make([]float64, n), Y: make([]float64, n)}
	for i := range t.Y {
		x := rng.Float64()*20 - 10
		t.X[i] = x
		t.Y[i] = 1e3 + math.Sin(x) + 0.1*rng.NormFloat64()
	}
	return t
}

// hookFunc runs in a fake worker after it computed the reply for a task: it may block, change
// the reply or return an error to send instead.
type hookFunc func(ctx context.Context, req *pb.RunTaskRequest, resp *pb.RunTaskResponse) error

// ranTask records a task a fake worker answered successfully.
type ranTask struct {
	round uint64
	shard int
}

// fakeWorker is an in-test worker: it holds every shard table in memory and runs the
// decoded map step on the requested one. Like the real worker, it answers a task naming a
// blob it does not hold with wire.MissingBlobStatus.
type fakeWorker struct {
	pb.UnimplementedWorkerServer
	id     string
	addr   string
	tables []*shard.Table
	hook   hookFunc
	srv    *grpc.Server
	stop   sync.Once

	mu  sync.Mutex
	dec *wire.Decoder
	ran []ranTask
	// full and slim count the kernel tasks received carrying the inputs X and naming them
	// by hash.
	full, slim int
}

func (f *fakeWorker) RunTask(ctx context.Context, req *pb.RunTaskRequest) (*pb.RunTaskResponse, error) {
	ref := wire.DecodeRef(req.GetShard())
	if ref.Index < 0 || ref.Index >= len(f.tables) {
		return nil, status.Errorf(codes.InvalidArgument, "no shard %d", ref.Index)
	}
	f.mu.Lock()
	dec := f.dec
	if op := req.GetTask().GetKernel().GetOp(); op != nil {
		if len(op.GetX()) > 0 {
			f.full++
		} else {
			f.slim++
		}
	}
	f.mu.Unlock()
	t, err := dec.DecodeTask(req.GetTask())
	if err != nil {
		if st := wire.MissingBlobStatus(err); st != nil {
			return nil, st
		}
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	st, err := t.Map(ctx, ref, f.tables[ref.Index])
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	m, err := wire.EncodeStats(st)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	resp := &pb.RunTaskResponse{JobId: req.GetJobId(), Round: req.GetRound(), Shard: int32(ref.Index), Stats: m}
	if f.hook != nil {
		if err := f.hook(ctx, req, resp); err != nil {
			return nil, err
		}
	}
	if resp.GetJobId() == req.GetJobId() && resp.GetRound() == req.GetRound() {
		f.mu.Lock()
		f.ran = append(f.ran, ranTask{round: req.GetRound(), shard: ref.Index})
		f.mu.Unlock()
	}
	return resp, nil
}

// shardsRun returns the shards this worker answered in a round, sorted.
func (f *fakeWorker) shardsRun(round uint64) []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var s []int
	for _, r := range f.ran {
		if r.round == round {
			s = append(s, r.shard)
		}
	}
	slices.Sort(s)
	return s
}

// restart gives the worker a fresh decoder, as a restarted worker process: it forgets its
// kernel ops and blobs.
func (f *fakeWorker) restart() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dec = wire.NewDecoder()
}

// blobCounts returns the kernel tasks received so far carrying the inputs and naming them by
// hash.
func (f *fakeWorker) blobCounts() (full, slim int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.full, f.slim
}

// kill stops the worker's server, breaking its connections.
func (f *fakeWorker) kill() { f.stop.Do(f.srv.Stop) }

// fakePool is a Pool the test changes at will.
type fakePool struct {
	mu    sync.Mutex
	ws    []Worker
	calls int // Live calls so far
}

func (p *fakePool) Live() []Worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	out := slices.Clone(p.ws)
	slices.SortFunc(out, func(a, b Worker) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// liveCalls returns how many times Live was called.
func (p *fakePool) liveCalls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

func (p *fakePool) add(w Worker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ws = append(p.ws, w)
}

func (p *fakePool) remove(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ws = slices.DeleteFunc(p.ws, func(w Worker) bool { return w.ID == id })
}

// syncBuffer is a log sink safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// cluster is a set of fake workers on loopback, their pool, a connection cache and the
// shards they serve.
type cluster struct {
	t       testing.TB
	tab     *shard.Table
	refs    []shard.Ref
	tabs    []*shard.Table
	pool    *fakePool
	logs    *syncBuffer
	mu      sync.Mutex
	workers map[string]*fakeWorker
	conns   map[string]*grpc.ClientConn
	events  []TaskEvent
}

func newCluster(t testing.TB) *cluster {
	tab := syntheticTable(4000)
	refs, tabs := shard.PartitionCount(tab, 8)
	c := &cluster{t: t, tab: tab, refs: refs, tabs: tabs, pool: &fakePool{}, logs: &syncBuffer{},
		workers: map[string]*fakeWorker{}, conns: map[string]*grpc.ClientConn{}}
	t.Cleanup(c.close)
	return c
}

// start runs a fake worker on loopback and adds it to the pool.
func (c *cluster) start(id string, hook hookFunc) *fakeWorker {
	c.t.Helper()
	f := c.serve(id, hook)
	c.pool.add(Worker{ID: id, Addr: f.addr})
	return f
}

// serve runs a fake worker on loopback without adding it to the pool.
func (c *cluster) serve(id string, hook hookFunc) *fakeWorker {
	c.t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.t.Fatal(err)
	}
	f := &fakeWorker{id: id, addr: lis.Addr().String(), tables: c.tabs, dec: wire.NewDecoder(), hook: hook, srv: grpc.NewServer()}
	pb.RegisterWorkerServer(f.srv, f)
	go func() { _ = f.srv.Serve(lis) }()
	c.mu.Lock()
	c.workers[id] = f
	c.mu.Unlock()
	return f
}

func (c *cluster) worker(id string) *fakeWorker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.workers[id]
}

// dial is the Dialer: one cached client connection per address.
func (c *cluster) dial(_ context.Context, addr string) (pb.WorkerClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cc, ok := c.conns[addr]
	if !ok {
		var err error
		cc, err = grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		c.conns[addr] = cc
	}
	return pb.NewWorkerClient(cc), nil
}

func (c *cluster) observe(ev TaskEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, ev)
}

// close stops every worker and closes every connection.
func (c *cluster) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cc := range c.conns {
		_ = cc.Close()
	}
	for _, f := range c.workers {
		f.kill()
	}
	c.conns, c.workers = map[string]*grpc.ClientConn{}, map[string]*fakeWorker{}
}

// engine returns a remote engine over the cluster with fast test timings.
func (c *cluster) engine(mod func(*Config)) *Engine {
	c.t.Helper()
	cfg := Config{
		JobID:        testJob,
		Source:       shard.Source{URI: "mem", Format: "csv"},
		Shards:       c.refs,
		Pool:         c.pool,
		Dial:         c.dial,
		ShardTimeout: 5 * time.Second,
		TaskTimeout:  5 * time.Second,
		PollInterval: 10 * time.Millisecond,
		Logger:       zerolog.New(c.logs),
		Observe:      c.observe,
	}
	if mod != nil {
		mod(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	return e
}

// tasks returns the two tasks of the bitwise tests, built from the local engine: the moments
// pass and a Gauss-Legendre Gram pass using the transform the moments give.
func (c *cluster) tasks() (engine.Task, engine.Task) {
	c.t.Helper()
	loc := c.local()
	st, err := loc.Reduce(context.Background(), shard.MomentsTask{})
	if err != nil {
		c.t.Fatal(err)
	}
	tf, err := shard.NewTransform(st.(*reduce.Moments), c.tab)
	if err != nil {
		c.t.Fatal(err)
	}
	gl, err := features.NewGL(kernel.RBF, []float64{5}, []int{24})
	if err != nil {
		c.t.Fatal(err)
	}
	return shard.MomentsTask{}, &tasks.GramTask{Features: gl, Transform: tf}
}

func (c *cluster) local() *engine.Local {
	c.t.Helper()
	loc, err := engine.NewLocal(c.refs, c.tabs, 3)
	if err != nil {
		c.t.Fatal(err)
	}
	return loc
}

// statBytes is the deterministic encoding of a statistic: equal bytes mean equal bits.
func statBytes(t *testing.T, s reduce.Stats) []byte {
	t.Helper()
	m, err := wire.EncodeStats(s)
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// hang is a hook that blocks every task until its call ends, closing started (once) when
// the first task arrives.
func hang(started chan struct{}) hookFunc {
	var once sync.Once
	return func(ctx context.Context, _ *pb.RunTaskRequest, _ *pb.RunTaskResponse) error {
		once.Do(func() { close(started) })
		<-ctx.Done()
		return status.FromContextError(ctx.Err()).Err()
	}
}

// waitFor fails the test if ch is not closed within d.
func waitFor(t testing.TB, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("timed out waiting for %s", what)
	}
}
