package worker

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/wire"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// getProbe GETs path on the worker's metrics address.
func getProbe(t *testing.T, w *Worker, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + w.MetricsAddr() + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// workerHealth asks the worker's standard gRPC health service, without a token.
func workerHealth(t *testing.T, addr string) (healthpb.HealthCheckResponse_ServingStatus, error) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: pb.Worker_ServiceDesc.ServiceName})
	return resp.GetStatus(), err
}

// TestReadyz checks the worker's probes: /healthz answers at once, /readyz and the gRPC
// health service say not ready while the worker knows no leader and ready once it is
// registered; the health service needs no join token although the Worker service does.
func TestReadyz(t *testing.T) {
	for _, tc := range []struct {
		name      string
		leader    bool
		wantCode  int
		wantGRPC  healthpb.HealthCheckResponse_ServingStatus
		wantInMsg string
	}{
		{"no coordinator", false, http.StatusServiceUnavailable, healthpb.HealthCheckResponse_NOT_SERVING, "not registered"},
		{"registered", true, http.StatusOK, healthpb.HealthCheckResponse_SERVING, "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{MetricsAddr: "127.0.0.1:0", JoinToken: "join-secret"}
			if tc.leader {
				cfg.Join = []string{startCoordinator(t, "join-secret").addr}
			}
			w := startWorker(t, cfg)
			if code, body := getProbe(t, w, "/healthz"); code != http.StatusOK || body != "ok\n" {
				t.Errorf("/healthz: %d %q", code, body)
			}
			var code int
			var body string
			var st healthpb.HealthCheckResponse_ServingStatus
			var err error
			eventually(t, "the probes agree with the expected state", func() bool {
				code, body = getProbe(t, w, "/readyz")
				st, err = workerHealth(t, w.Addr())
				return code == tc.wantCode && err == nil && st == tc.wantGRPC
			})
			if code != tc.wantCode || !strings.Contains(body, tc.wantInMsg) {
				t.Errorf("/readyz: %d %q, want %d with %q", code, body, tc.wantCode, tc.wantInMsg)
			}
			if err != nil || st != tc.wantGRPC {
				t.Errorf("grpc health: %v, %v; want %v", st, err, tc.wantGRPC)
			}
		})
	}
}

// TestDrainOnStop stops a worker (as SIGTERM does) while a task is running on it: the
// running task still completes and its result reaches the caller, a task sent after the
// stop is refused with Unavailable (so the coordinator runs it on another worker), and the
// worker reports itself not ready while it drains. The running task reads its shard over
// HTTP from a server that holds the answer back until the test releases it.
func TestDrainOnStop(t *testing.T) {
	const data = "x,y\n1,2\n3,5\n"
	release := make(chan struct{})
	requested := make(chan struct{}, 16)
	web := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		requested <- struct{}{}
		<-release
		http.ServeContent(rw, r, "data.csv", time.Time{}, strings.NewReader(data))
	}))
	defer web.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	w, err := New(Config{Join: []string{startCoordinator(t, "").addr}, Listen: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", Cores: 2,
		UnregisteredTasks: true}) // the test sends the task itself, as no leader does
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	<-w.Ready()
	eventually(t, "registered", func() bool { return w.Readiness() == nil })
	c := workerClient(t, w.Addr(), "")
	task, _ := wire.EncodeTask(shard.MomentsTask{})
	req := &pb.RunTaskRequest{JobId: "j", Round: 1, Source: &pb.DataSource{Uri: web.URL + "/data.csv", Header: true},
		Shard: &pb.ShardRef{Offset: 0, Length: int64(len(data))}, Task: task}
	type result struct {
		resp *pb.RunTaskResponse
		err  error
	}
	running := make(chan result, 1)
	go func() {
		resp, err := c.RunTask(context.Background(), req)
		running <- result{resp, err}
	}()
	select {
	case <-requested:
	case r := <-running:
		t.Fatalf("the task ended before reading its shard: %v", r.err)
	case <-time.After(waitLimit):
		t.Fatal("the task never asked for its shard")
	}

	stop() // SIGTERM
	eventually(t, "the worker reports itself not ready", func() bool {
		code, body := getProbe(t, w, "/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "stopping")
	})
	eventually(t, "a task sent to the stopping worker is refused", func() bool {
		_, err := c.RunTask(context.Background(), req)
		return status.Code(err) == codes.Unavailable
	})
	select {
	case r := <-running:
		t.Fatalf("the running task ended before its data arrived: %v", r.err)
	case err := <-done:
		t.Fatalf("Run returned with a task running: %v", err)
	default:
	}

	close(release) // the data arrives: the running task finishes and its result is delivered
	r := <-running
	if r.err != nil {
		t.Fatalf("the running task failed during the drain: %v", r.err)
	}
	st, err := wire.DecodeStats(r.resp.GetStats())
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := st.(*reduce.Moments); !ok || m.N != 2 {
		t.Errorf("result %#v, want the moments of 2 rows", st)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitLimit):
		t.Fatal("Run did not return after the drain")
	}
}
