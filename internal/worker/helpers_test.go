package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/gpreduce/gpreduce/internal/auth"
	"github.com/gpreduce/gpreduce/internal/testutil"
	"github.com/gpreduce/gpreduce/internal/wire"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// syncBuffer collects logs written from several goroutines.
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

// registration is one RegisterWorker call a fake coordinator answered.
type registration struct {
	address, name string
	cores         int32
}

// fakeCoordinator implements the worker half of the Coordinator service. As a follower it
// redirects to leader; as the leader it hands out IDs w1, w2, ... and counts heartbeats.
type fakeCoordinator struct {
	pb.UnimplementedCoordinatorServer
	addr     string
	interval time.Duration

	mu         sync.Mutex
	leader     string // non-empty: a follower pointing there
	regs       []registration
	heartbeats map[string]int
	known      map[string]bool
	forget     int    // answer this many heartbeats NOT_FOUND (forgetting the worker)
	demoteTo   string // non-empty: answer heartbeats FAILED_PRECONDITION naming this leader
	stalled    bool   // black-holed: every call hangs until its deadline
	// stalledBeats counts the heartbeats that hung because the coordinator was stalled.
	stalledBeats int
}

// stall makes the coordinator hang every call until the caller gives up, like a
// SIGSTOPped process whose kernel still accepts connections.
func (f *fakeCoordinator) stall() {
	f.mu.Lock()
	f.stalled = true
	f.mu.Unlock()
}

// hang blocks until ctx ends if the coordinator is stalled, and reports whether it did. A
// non-nil count is incremented (under mu) before a stalled call blocks.
func (f *fakeCoordinator) hang(ctx context.Context, count *int) bool {
	f.mu.Lock()
	stalled := f.stalled
	if stalled && count != nil {
		*count++
	}
	f.mu.Unlock()
	if stalled {
		<-ctx.Done()
	}
	return stalled
}

func (f *fakeCoordinator) RegisterWorker(ctx context.Context, req *pb.RegisterWorkerRequest) (*pb.RegisterWorkerResponse, error) {
	if f.hang(ctx, nil) {
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.leader != "" {
		grpc.SetTrailer(ctx, metadata.Pairs(LeaderTrailer, f.leader))
		return nil, status.Error(codes.FailedPrecondition, "not the leader")
	}
	f.regs = append(f.regs, registration{address: req.Address, name: req.Name, cores: req.Cores})
	id := fmt.Sprintf("w%d", len(f.regs))
	f.known[id] = true
	grpc.SetHeader(ctx, metadata.Pairs(wire.SessionKey, fakeSession(len(f.regs))))
	return &pb.RegisterWorkerResponse{WorkerId: id, HeartbeatIntervalMs: f.interval.Milliseconds()}, nil
}

// fakeSession is the session the fake coordinator hands out at its n-th registration.
func fakeSession(n int) string { return fmt.Sprintf("session-%d", n) }

func (f *fakeCoordinator) Heartbeat(ctx context.Context, req *pb.HeartbeatRequest) (*pb.HeartbeatResponse, error) {
	if f.hang(ctx, &f.stalledBeats) {
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.demoteTo != "" {
		grpc.SetTrailer(ctx, metadata.Pairs(LeaderTrailer, f.demoteTo))
		return nil, status.Error(codes.FailedPrecondition, "not the leader")
	}
	if !f.known[req.WorkerId] {
		return nil, status.Errorf(codes.NotFound, "unknown worker %q", req.WorkerId)
	}
	if f.forget > 0 {
		f.forget--
		delete(f.known, req.WorkerId)
		return nil, status.Errorf(codes.NotFound, "unknown worker %q", req.WorkerId)
	}
	f.heartbeats[req.WorkerId]++
	return &pb.HeartbeatResponse{}, nil
}

func (f *fakeCoordinator) registrations() []registration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]registration(nil), f.regs...)
}

func (f *fakeCoordinator) beats(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.heartbeats[id]
}

// stalledHeartbeats returns how many heartbeats hung on the stalled coordinator.
func (f *fakeCoordinator) stalledHeartbeats() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stalledBeats
}

// startCoordinator serves a fake coordinator on 127.0.0.1 requiring token.
func startCoordinator(t *testing.T, token string) *fakeCoordinator {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeCoordinator{addr: lis.Addr().String(), interval: 20 * time.Millisecond,
		heartbeats: map[string]int{}, known: map[string]bool{}}
	srv := grpc.NewServer(grpc.UnaryInterceptor(auth.UnaryServerInterceptor(auth.Static(token), zerolog.Nop())))
	pb.RegisterCoordinatorServer(srv, f)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return f
}

// startWorker runs a worker with cfg (listening on 127.0.0.1:0 unless set) until the test
// ends, and returns it once it listens.
func startWorker(t *testing.T, cfg Config) *Worker {
	t.Helper()
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if len(cfg.Join) == 0 {
		cfg.Join = []string{"127.0.0.1:1"} // nothing there: the worker keeps retrying
	}
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(waitLimit):
			t.Error("Run did not return after cancel")
		}
	})
	select {
	case <-w.Ready():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-time.After(waitLimit):
		t.Fatal("worker not ready")
	}
	return w
}

// workerClient dials a worker's service with token (none if empty).
func workerClient(t *testing.T, addr, token string) pb.WorkerClient {
	t.Helper()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes))}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(auth.PerRPC(token, false)))
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewWorkerClient(conn)
}

// waitLimit bounds the tests' waits on a worker or a fake coordinator. It only bounds a hang:
// a loaded machine may take long, and no test measures time with it.
const waitLimit = testutil.MinWait

// eventually polls cond until it holds (testutil.Eventually: a deadline of at least
// testutil.MinWait that only bounds a hang).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, what, func() error {
		if cond() {
			return nil
		}
		return errors.New("not yet")
	})
}

func testLogger(buf *syncBuffer) zerolog.Logger {
	if buf == nil {
		return zerolog.Nop()
	}
	return zerolog.New(buf).Level(zerolog.DebugLevel)
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}
