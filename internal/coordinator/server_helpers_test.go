package coordinator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/gpreduce/gpreduce/internal/auth"
	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/train"
	"github.com/gpreduce/gpreduce/internal/worker"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// testServerConfig returns a server config on loopback with fast raft and worker timeouts.
func testServerConfig(t testing.TB, id string, log zerolog.Logger) ServerConfig {
	return ServerConfig{
		ID:               id,
		RaftAddr:         "127.0.0.1:0",
		APIAddr:          "127.0.0.1:0",
		DataDir:          filepath.Join(t.TempDir(), id),
		Logger:           log,
		HeartbeatTimeout: time.Second,
		RaftSecret:       []byte(testRaftSecret),
		Raft: RaftTuning{
			ApplyTimeout: 5 * time.Second,
			// Long enough that a loaded 2-core machine (load average 10 and more, with other
			// packages' tests beside these) does not start elections by itself; at 500 ms a
			// leader stepped down mid-test under that load.
			HeartbeatTimeout:   time.Second,
			ElectionTimeout:    time.Second,
			LeaderLeaseTimeout: 800 * time.Millisecond,
			CommitTimeout:      5 * time.Millisecond,
			TransportTimeout:   2 * time.Second,
		},
	}
}

// runningServer is a Server whose Run goroutine the test owns.
type runningServer struct {
	*Server
	stop    context.CancelFunc
	runDone chan error
}

// close stops Run and closes the server (idempotent).
func (r *runningServer) close() error {
	r.stop()
	err := r.Server.Close()
	if rerr := <-r.runDone; rerr != nil {
		err = errors.Join(err, rerr)
	}
	r.runDone <- nil // for a later close
	return err
}

// startServer opens a server and runs it until the test ends.
func startServer(t testing.TB, cfg ServerConfig) *runningServer {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := OpenServer(ctx, cfg)
	if err != nil {
		t.Fatalf("OpenServer(%s): %v", cfg.ID, err)
	}
	rctx, stop := context.WithCancel(context.Background())
	r := &runningServer{Server: s, stop: stop, runDone: make(chan error, 1)}
	go func() { r.runDone <- s.Run(rctx) }()
	t.Cleanup(func() {
		if err := r.close(); err != nil {
			t.Errorf("close %s: %v", cfg.ID, err)
		}
	})
	return r
}

// startSingle starts a bootstrapped one-member cluster and waits until it leads with its
// API address recorded.
func startSingle(t testing.TB, tweak func(*ServerConfig)) *runningServer {
	t.Helper()
	cfg := testServerConfig(t, "solo", testLogger(t))
	cfg.Bootstrap = true
	if tweak != nil {
		tweak(&cfg)
	}
	s := startServer(t, cfg)
	waitRecorded(t, s.Server)
	return s
}

// waitRecorded waits until s knows a leader and the leader's API address.
func waitRecorded(t testing.TB, s *Server) {
	t.Helper()
	eventually(t, 10*time.Second, s.node.ID()+" knows the leader's API", func() error {
		if s.node.LeaderAPI() == "" {
			return fmt.Errorf("no leader API known")
		}
		return nil
	})
}

// startCluster starts n members: the first bootstraps, the others join through it.
func startCluster(t testing.TB, n int, tweak func(*ServerConfig)) []*runningServer {
	t.Helper()
	log := testLogger(t)
	var out []*runningServer
	for i := range n {
		cfg := testServerConfig(t, fmt.Sprintf("c%d", i), log)
		cfg.Bootstrap = i == 0
		if i > 0 {
			cfg.Join = []string{out[0].APIAddr()}
		}
		if tweak != nil {
			tweak(&cfg)
		}
		s := startServer(t, cfg)
		if i == 0 {
			waitRecorded(t, s.Server)
		}
		out = append(out, s)
	}
	eventually(t, 10*time.Second, "every member knows every API address", func() error {
		for _, s := range out {
			if got := len(s.node.MemberAPIs()); got != n {
				return fmt.Errorf("%s knows %d API addresses", s.node.ID(), got)
			}
			if s.node.LeaderAPI() == "" {
				return fmt.Errorf("%s knows no leader", s.node.ID())
			}
		}
		return nil
	})
	return out
}

// leaderOf returns the member that leads, waiting for one.
func leaderOf(t testing.TB, servers []*runningServer) *runningServer {
	t.Helper()
	var leader *runningServer
	eventually(t, 10*time.Second, "a leader", func() error {
		if leader = currentLeader(servers); leader == nil {
			return fmt.Errorf("no leader")
		}
		return nil
	})
	return leader
}

// currentLeader returns the member that leads now, or nil.
func currentLeader(servers []*runningServer) *runningServer {
	for _, s := range servers {
		if s.node.IsLeader() {
			return s
		}
	}
	return nil
}

// submitToLeader submits req to whichever member leads, waiting out elections: under load (a
// -race run beside training runs) leadership can move between two of a test's submissions.
// A retry after an attempt that was committed finds the job there (AlreadyExists), which
// counts as submitted; any other refusal fails the test.
func submitToLeader(t testing.TB, ctx context.Context, servers []*runningServer, req *pb.SubmitJobRequest) {
	t.Helper()
	clients := map[string]pb.CoordinatorClient{}
	eventually(t, time.Minute, "job "+req.GetId()+" submitted to the leader", func() error {
		leader := currentLeader(servers)
		if leader == nil {
			return fmt.Errorf("no leader")
		}
		c, ok := clients[leader.APIAddr()]
		if !ok {
			c = dial(t, leader.APIAddr(), "")
			clients[leader.APIAddr()] = c
		}
		_, err := c.SubmitJob(ctx, req)
		switch status.Code(err) {
		case codes.OK, codes.AlreadyExists:
			return nil
		case codes.FailedPrecondition, codes.Unavailable:
			return err
		}
		t.Fatalf("submit %s: %v", req.GetId(), err)
		return nil
	})
}

// startWorkers runs n real workers that join through the given API addresses.
func startWorkers(t testing.TB, n int, join []string, joinToken string) {
	t.Helper()
	log := testLogger(t)
	for i := range n {
		runWorker(t, worker.Config{
			Join: join, Listen: "127.0.0.1:0", JoinToken: joinToken, Cores: 2,
			Name: fmt.Sprintf("worker-%d", i), Logger: log, CacheBytes: 64 << 20,
		})
	}
}

// runWorker runs a real worker with cfg until the test ends.
func runWorker(t testing.TB, cfg worker.Config) {
	t.Helper()
	w, err := worker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := w.Run(ctx); err != nil {
			t.Errorf("worker %s: %v", cfg.Name, err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// waitWorkers waits until the leader s has n live workers.
func waitWorkers(t testing.TB, s *Server, n int) {
	t.Helper()
	eventually(t, 10*time.Second, "workers registered", func() error {
		if got := len(s.pool.Live()); got != n {
			return fmt.Errorf("%d live workers, want %d", got, n)
		}
		return nil
	})
}

// dial returns a Coordinator client for addr sending token (if any).
func dial(t testing.TB, addr, token string) pb.CoordinatorClient {
	t.Helper()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(auth.PerRPC(token, false)))
	}
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return pb.NewCoordinatorClient(cc)
}

// writeCSV writes n rows of y = sin(a) + cos(2b) + noise with a header.
func writeCSV(t testing.TB, dir, name string, n int, seed uint64) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 99))
	var b strings.Builder
	b.WriteString("a,b,y\n")
	for range n {
		x1, x2 := rng.Float64()*6, rng.Float64()*6
		fmt.Fprintf(&b, "%g,%g,%g\n", x1, x2, math.Sin(x1)+math.Cos(2*x2)+0.1*rng.NormFloat64())
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// glSpec is a small Gauss-Legendre job over the CSV at path.
func glSpec(path string, nodes int32, shards int32) *pb.JobSpec {
	return &pb.JobSpec{
		Method: "gl", Seed: 7, NodesPerDim: []int32{nodes, nodes}, Shards: shards,
		Data: &pb.DataSource{Uri: path, Header: true, Target: "y"},
	}
}

// localModel trains js with the local engine on the same shard plan and returns the model
// bytes: what every cluster run must reproduce bit for bit.
func localModel(t testing.TB, js *pb.JobSpec) []byte {
	t.Helper()
	ctx := testContext(t)
	plan, err := planFromSpec(js)
	if err != nil {
		t.Fatal(err)
	}
	refs, err := shard.Plan(ctx, plan.Source, plan.Shards)
	if err != nil {
		t.Fatal(err)
	}
	tabs := make([]*shard.Table, len(refs))
	for i, r := range refs {
		if tabs[i], err = shard.Load(ctx, plan.Source, r); err != nil {
			t.Fatal(err)
		}
	}
	eng, err := engine.NewLocal(refs, tabs, 3)
	if err != nil {
		t.Fatal(err)
	}
	// As `coordinator eval` does: the model records the table's column names.
	plan.Spec.Columns, plan.Spec.Target = tabs[0].Columns, tabs[0].Target
	m, err := train.Run(ctx, eng, plan.Spec, train.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// waitState polls GetJob until the job reaches want (failing on any other finished state).
func waitState(t testing.TB, c pb.CoordinatorClient, id string, want pb.JobState, timeout time.Duration) *pb.Job {
	t.Helper()
	var job *pb.Job
	eventually(t, timeout, "job "+id+" "+want.String(), func() error {
		j, err := c.GetJob(t.Context(), &pb.GetJobRequest{Id: id})
		if err != nil {
			return err
		}
		job = j
		if j.GetState() == want {
			return nil
		}
		if j.GetState().Finished() {
			t.Fatalf("job %s ended %s (error %q), want %s", id, j.GetState(), j.GetError(), want)
		}
		return fmt.Errorf("state %s", j.GetState())
	})
	return job
}

// fetchModel reads a model with GetModel.
func fetchModel(t testing.TB, c pb.CoordinatorClient, id string) []byte {
	t.Helper()
	stream, err := c.GetModel(t.Context(), &pb.GetModelRequest{JobId: id})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for {
		chunk, err := stream.Recv()
		if err == io.EOF {
			return b.Bytes()
		}
		if err != nil {
			t.Fatalf("GetModel(%s): %v", id, err)
		}
		if len(chunk.GetData()) > modelChunkBytes {
			t.Fatalf("chunk of %d bytes", len(chunk.GetData()))
		}
		b.Write(chunk.GetData())
	}
}

// watch collects a job's events with WatchJob until the stream ends.
func watch(t testing.TB, c pb.CoordinatorClient, id string) ([]*pb.JobEvent, error) {
	t.Helper()
	stream, err := c.WatchJob(t.Context(), &pb.WatchJobRequest{Id: id})
	if err != nil {
		return nil, err
	}
	var evs []*pb.JobEvent
	for {
		ev, err := stream.Recv()
		if err == io.EOF {
			return evs, nil
		}
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

// logBuffer is a log sink safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
