package coordinator

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// probe GETs path on srv and returns the status code and body.
func probe(t testing.TB, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(body)
}

// grpcHealth asks the standard health service at addr, without any token, for service.
func grpcHealth(t testing.TB, addr, service string) (healthpb.HealthCheckResponse_ServingStatus, error) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	return resp.GetStatus(), err
}

// waitProbe waits until /readyz answers want and the gRPC health status of the
// Coordinator service agrees, and returns the /readyz body.
func waitProbe(t testing.TB, s *Server, srv *httptest.Server, want int) string {
	t.Helper()
	wantGRPC := healthpb.HealthCheckResponse_SERVING
	if want != http.StatusOK {
		wantGRPC = healthpb.HealthCheckResponse_NOT_SERVING
	}
	var body string
	eventually(t, time.Minute, fmt.Sprintf("%s: /readyz answers %d", s.node.ID(), want), func() error {
		code, b := probe(t, srv, "/readyz")
		body = b
		if code != want {
			return fmt.Errorf("/readyz: %d %q", code, b)
		}
		st, err := grpcHealth(t, s.APIAddr(), pb.Coordinator_ServiceDesc.ServiceName)
		if err != nil || st != wantGRPC {
			return fmt.Errorf("grpc health: %v, %v", st, err)
		}
		return nil
	})
	return body
}

// TestReadyz checks /healthz, /readyz and the gRPC health service in each state: a member
// with no leader (never bootstrapped) is alive but not ready (503); a bootstrapped member is
// ready (200); a leader whose two followers stopped loses its leadership and is not ready.
// The health service needs no token although the API does.
func TestReadyz(t *testing.T) {
	t.Run("no leader", func(t *testing.T) {
		cfg := testServerConfig(t, "lonely", testLogger(t))
		cfg.Token, cfg.JoinToken = "api-token", "join-token"
		s := startServer(t, cfg)
		srv := httptest.NewServer(s.HealthHandler())
		defer srv.Close()
		if code, body := probe(t, srv, "/healthz"); code != http.StatusOK || body != "ok\n" {
			t.Errorf("/healthz: %d %q, want 200 ok", code, body)
		}
		// Give raft several election timeouts: a member that was never bootstrapped or
		// joined stays without a leader however long it waits.
		time.Sleep(5 * cfg.Raft.ElectionTimeout)
		code, body := probe(t, srv, "/readyz")
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "no leader") {
			t.Errorf("/readyz: %d %q, want 503 naming the missing leader", code, body)
		}
		if st, err := grpcHealth(t, s.APIAddr(), pb.Coordinator_ServiceDesc.ServiceName); err != nil || st != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Errorf("grpc health of the Coordinator service: %v, %v; want NOT_SERVING", st, err)
		}
		if st, err := grpcHealth(t, s.APIAddr(), ""); err != nil || st != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("grpc health of the server: %v, %v; want SERVING", st, err)
		}
	})

	t.Run("leader", func(t *testing.T) {
		s := startSingle(t, func(c *ServerConfig) { c.Token = "api-token" })
		srv := httptest.NewServer(s.HealthHandler())
		defer srv.Close()
		if body := waitProbe(t, s.Server, srv, http.StatusOK); body != "ok\n" {
			t.Errorf("/readyz body %q, want ok", body)
		}
		if code, _ := probe(t, srv, "/metrics"); code != http.StatusOK {
			t.Errorf("/metrics: %d", code)
		}
	})

	t.Run("leader loses its followers", func(t *testing.T) {
		servers := startCluster(t, 3, nil)
		leader := leaderOf(t, servers)
		srvs := map[*runningServer]*httptest.Server{}
		for _, s := range servers {
			srvs[s] = httptest.NewServer(s.HealthHandler())
			defer srvs[s].Close()
			waitProbe(t, s.Server, srvs[s], http.StatusOK)
		}
		for _, s := range servers {
			if s != leader {
				if err := s.close(); err != nil {
					t.Fatal(err)
				}
			}
		}
		body := waitProbe(t, leader.Server, srvs[leader], http.StatusServiceUnavailable)
		if !strings.Contains(body, "not ready") {
			t.Errorf("/readyz body %q does not say why", body)
		}
	})
}
