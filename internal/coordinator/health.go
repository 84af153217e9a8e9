package coordinator

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/gpreduce/gpreduce/internal/coordinator/store"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// healthInterval is how often the gRPC health service's status is brought up to date.
const healthInterval = 500 * time.Millisecond

// Readiness reports whether the server's raft member is ready (see store.Node.Readiness) and the server
// is not closed.
func (s *Server) Readiness() error {
	select {
	case <-s.done:
		return store.ErrClosed
	default:
	}
	return s.node.Readiness()
}

// HealthHandler serves the HTTP endpoints of Run's metrics address: /metrics (Prometheus),
// /healthz (200 while the process serves) and /readyz (200 when Readiness is nil, else 503 with the
// reason).
func (s *Server) HealthHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", s.metrics.handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeProbe(w, nil)
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		writeProbe(w, s.Readiness())
	})
	return mux
}

// writeProbe answers a probe: 200 "ok", or 503 with the error.
func writeProbe(w http.ResponseWriter, err error) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, err)
		return
	}
	fmt.Fprintln(w, "ok")
}

// newHealthServer returns the standard gRPC health service of a coordinator: the overall
// status ("") is SERVING while the API serves, and the Coordinator service's status is
// SERVING while Readiness is nil. watchHealth keeps the latter current.
func newHealthServer() *health.Server {
	h := health.NewServer()
	h.SetServingStatus(pb.Coordinator_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_NOT_SERVING)
	return h
}

// watchHealth brings the gRPC health status up to date every healthInterval until ctx ends,
// then reports NOT_SERVING for every service.
func (s *Server) watchHealth(ctx context.Context) {
	t := time.NewTicker(healthInterval)
	defer t.Stop()
	for {
		st := healthpb.HealthCheckResponse_SERVING
		if s.Readiness() != nil {
			st = healthpb.HealthCheckResponse_NOT_SERVING
		}
		s.health.SetServingStatus(pb.Coordinator_ServiceDesc.ServiceName, st)
		select {
		case <-ctx.Done():
			s.health.Shutdown()
			return
		case <-t.C:
		}
	}
}
