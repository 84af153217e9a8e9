package coordinator

import (
	"context"
	"fmt"
	"strings"
	"time"

	gometrics "github.com/armon/go-metrics"
	gometricsprom "github.com/armon/go-metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// raftMetricsExpiry is how long the raft metrics sink keeps a series that raft stopped
// updating.
const raftMetricsExpiry = 5 * time.Minute

// exportRaftMetrics sends hashicorp/raft's metrics (commit and apply times, log and
// snapshot sizes, elections, ...) to reg as gpreduce_raft_* series. Raft reports through the
// process-wide go-metrics sink, so in a process with several coordinators (tests) the last
// one opened gets them.
func exportRaftMetrics(reg prometheus.Registerer) error {
	sink, err := gometricsprom.NewPrometheusSinkFrom(gometricsprom.PrometheusOpts{
		Registerer: reg, Expiration: raftMetricsExpiry, Name: "gpreduce_raft_metrics_sink",
	})
	if err != nil {
		return fmt.Errorf("raft metrics: %w", err)
	}
	cfg := gometrics.DefaultConfig("gpreduce")
	cfg.EnableHostname = false
	cfg.EnableRuntimeMetrics = false // the Go collector reports those
	if _, err := gometrics.NewGlobal(cfg, sink); err != nil {
		return fmt.Errorf("raft metrics: %w", err)
	}
	return nil
}

// grpcMetrics count and time the calls a gRPC server handles, with the names and labels of
// go-grpc-prometheus (grpc_server_handled_total, grpc_server_handling_seconds).
type grpcMetrics struct {
	handled *prometheus.CounterVec
	seconds *prometheus.HistogramVec
}

func newGRPCMetrics(reg prometheus.Registerer) *grpcMetrics {
	m := &grpcMetrics{
		handled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "grpc_server_handled_total", Help: "gRPC calls completed by the server, by method and status code."},
			[]string{"grpc_type", "grpc_service", "grpc_method", "grpc_code"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "grpc_server_handling_seconds", Help: "Time the server took to handle gRPC calls, by method.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)},
			[]string{"grpc_type", "grpc_service", "grpc_method"}),
	}
	reg.MustRegister(m.handled, m.seconds)
	return m
}

func (m *grpcMetrics) observe(kind, fullMethod string, start time.Time, err error) {
	service, method := splitMethod(fullMethod)
	m.handled.WithLabelValues(kind, service, method, status.Code(err).String()).Inc()
	m.seconds.WithLabelValues(kind, service, method).Observe(time.Since(start).Seconds())
}

// unary is a grpc.UnaryServerInterceptor recording each call.
func (m *grpcMetrics) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	m.observe("unary", info.FullMethod, start, err)
	return resp, err
}

// stream is a grpc.StreamServerInterceptor recording each call.
func (m *grpcMetrics) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	start := time.Now()
	err := handler(srv, ss)
	m.observe("server_stream", info.FullMethod, start, err)
	return err
}

// splitMethod splits "/package.Service/Method".
func splitMethod(full string) (service, method string) {
	full = strings.TrimPrefix(full, "/")
	if i := strings.LastIndex(full, "/"); i >= 0 {
		return full[:i], full[i+1:]
	}
	return "unknown", full
}
