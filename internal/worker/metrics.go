package worker

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the worker's Prometheus metrics, on a registry the worker owns.
type metrics struct {
	reg          *prometheus.Registry
	tasks        *prometheus.CounterVec
	taskSeconds  *prometheus.HistogramVec
	running      prometheus.Gauge
	lookups      *prometheus.CounterVec
	loadFailures prometheus.Counter
	cachedShards prometheus.Gauge
	cacheBytes   prometheus.Gauge
	registered   prometheus.Gauge
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		tasks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpreduce_worker_tasks_total",
			Help: "Map tasks run, by task kind and outcome (ok, data_error, invalid, canceled, error).",
		}, []string{"kind", "outcome"}),
		taskSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gpreduce_worker_task_duration_seconds",
			Help:    "Time to run a map task, including loading its shard, by task kind.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"kind"}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gpreduce_worker_tasks_running",
			Help: "Tasks and shard loads running now (at most the worker's cores).",
		}),
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpreduce_worker_shard_lookups_total",
			Help: "Shards found for tasks and loads, by where they came from (memory, disk, source).",
		}, []string{"from"}),
		loadFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gpreduce_worker_shard_load_failures_total",
			Help: "Shard loads from their source that failed.",
		}),
		cachedShards: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gpreduce_worker_cached_shards",
			Help: "Shards held in the memory cache.",
		}),
		cacheBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gpreduce_worker_cache_bytes",
			Help: "Estimated bytes of the shards in the memory cache (8 per value).",
		}),
		registered: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gpreduce_worker_registered",
			Help: "1 while the worker is registered with a leader, else 0.",
		}),
	}
	m.reg.MustRegister(m.tasks, m.taskSeconds, m.running, m.lookups, m.loadFailures, m.cachedShards, m.cacheBytes,
		m.registered, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
