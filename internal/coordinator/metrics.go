package coordinator

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gpreduce/gpreduce/internal/coordinator/store"
	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/engine/remote"
	"github.com/gpreduce/gpreduce/internal/reduce"
)

// metrics are a Server's Prometheus metrics, in a registry of its own.
type metrics struct {
	reg         *prometheus.Registry
	rounds      prometheus.Counter
	tasks       *prometheus.CounterVec
	taskSeconds prometheus.Histogram
	checkpoints *prometheus.CounterVec
	stragglers  *prometheus.CounterVec
	grpc        *grpcMetrics
}

func newMetrics(node *store.Node, pool *registry) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		rounds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gpreduce_rounds_total", Help: "Map-reduce rounds run by this coordinator's jobs."}),
		tasks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpreduce_tasks_total", Help: "Task attempts on workers, by result (ok or error)."}, []string{"result"}),
		taskSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gpreduce_task_duration_seconds", Help: "Duration of task attempts on workers.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}),
		checkpoints: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpreduce_checkpoints_total",
			Help: "Checkpoints offered by training runs, by outcome (saved, throttled, too_large)."}, []string{"outcome"}),
		stragglers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpreduce_straggler_backups_total",
			Help: "Backup copies started for tasks running past their round's straggler deadline, by the slow worker's ID."}, []string{"slow_worker"}),
	}
	m.reg.MustRegister(
		m.rounds, m.tasks, m.taskSeconds, m.checkpoints, m.stragglers,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gpreduce_live_workers", Help: "Workers in the pool (non-zero only on the leader)."},
			func() float64 { return float64(len(pool.Live())) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gpreduce_raft_leader", Help: "1 if this coordinator is the raft leader, else 0."},
			func() float64 {
				if node.IsLeader() {
					return 1
				}
				return 0
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gpreduce_raft_term", Help: "This coordinator's current raft term; it grows with every election."},
			func() float64 { return float64(node.Term()) }),
		node.Collector(),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m.grpc = newGRPCMetrics(m.reg)
	for _, r := range []string{"ok", "error"} {
		m.tasks.WithLabelValues(r)
	}
	for _, o := range []string{"saved", "throttled", "too_large"} {
		m.checkpoints.WithLabelValues(o)
	}
	return m
}

// observeTask records a task attempt (remote.Config.Observe).
func (m *metrics) observeTask(ev remote.TaskEvent) {
	result := "ok"
	if ev.Err != nil {
		result = "error"
	}
	m.tasks.WithLabelValues(result).Inc()
	m.taskSeconds.Observe(ev.Duration.Seconds())
}

// handler serves the registry in the Prometheus text format.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// serveHTTP serves h on lis until ctx ends.
func serveHTTP(ctx context.Context, lis net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
	defer stop()
	if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// countingEngine counts the rounds an engine runs.
type countingEngine struct {
	engine.Engine
	rounds prometheus.Counter
}

// Gather counts a round and runs it.
func (c countingEngine) Gather(ctx context.Context, t engine.Task) ([]reduce.Stats, error) {
	c.rounds.Inc()
	return c.Engine.Gather(ctx, t)
}

// Reduce counts a round and runs it.
func (c countingEngine) Reduce(ctx context.Context, t engine.Task) (reduce.Stats, error) {
	c.rounds.Inc()
	return c.Engine.Reduce(ctx, t)
}
