package worker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// healthInterval is how often the gRPC health service's status is brought up to date.
const healthInterval = 500 * time.Millisecond

// ErrNotReady means the worker is not registered with the coordinators' leader, or is
// stopping.
var ErrNotReady = errors.New("worker not ready")

// Registered reports whether the worker is registered with the leader now: it has
// registered and its heartbeats are being accepted.
func (w *Worker) Registered() bool {
	var m dto.Metric
	if err := w.metrics.registered.Write(&m); err != nil {
		return false
	}
	return m.GetGauge().GetValue() == 1
}

// Readiness returns nil while the worker serves tasks and is registered with the leader, and
// an error wrapping ErrNotReady otherwise (before Run, while looking for the leader, and
// once Run is stopping and draining its running tasks).
func (w *Worker) Readiness() error {
	switch {
	case !w.started.Load():
		return fmt.Errorf("%w: not running", ErrNotReady)
	case w.draining.Load():
		return fmt.Errorf("%w: stopping, finishing the running tasks", ErrNotReady)
	case !w.Registered():
		return fmt.Errorf("%w: not registered with the leader of %v", ErrNotReady, w.cfg.Join)
	}
	return nil
}

// httpHandler serves the metrics address: /metrics (Prometheus), /healthz (200 while the
// process serves) and /readyz (200 when Readiness is nil, else 503 with the reason).
func (w *Worker) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(w.metrics.reg, promhttp.HandlerOpts{Registry: w.metrics.reg}))
	mux.HandleFunc("/healthz", func(rw http.ResponseWriter, _ *http.Request) { writeProbe(rw, nil) })
	mux.HandleFunc("/readyz", func(rw http.ResponseWriter, _ *http.Request) { writeProbe(rw, w.Readiness()) })
	return mux
}

// writeProbe answers a probe: 200 "ok", or 503 with the error.
func writeProbe(rw http.ResponseWriter, err error) {
	rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	rw.Header().Set("Cache-Control", "no-store")
	if err != nil {
		rw.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(rw, err)
		return
	}
	fmt.Fprintln(rw, "ok")
}

// newHealthServer returns the standard gRPC health service of a worker: the overall status
// ("") is SERVING while the Worker service serves, the Worker service's status SERVING
// while Readiness is nil.
func newHealthServer() *health.Server {
	h := health.NewServer()
	h.SetServingStatus(pb.Worker_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_NOT_SERVING)
	return h
}

// watchHealth keeps h current every healthInterval until ctx ends, then reports
// NOT_SERVING for every service (the worker is draining).
func (w *Worker) watchHealth(ctx context.Context, h *health.Server) {
	t := time.NewTicker(healthInterval)
	defer t.Stop()
	for {
		st := healthpb.HealthCheckResponse_SERVING
		if w.Readiness() != nil {
			st = healthpb.HealthCheckResponse_NOT_SERVING
		}
		h.SetServingStatus(pb.Worker_ServiceDesc.ServiceName, st)
		select {
		case <-ctx.Done():
			h.Shutdown()
			return
		case <-t.C:
		}
	}
}
