package worker

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/gpreduce/gpreduce/internal/wire"
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

// newMetrics returns the worker's metrics, reading the blob cache's counters when scraped.
func newMetrics(blobs *wire.BlobCache) *metrics {
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
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "gpreduce_worker_blob_cache_hits_total",
			Help: "Tasks naming a broadcast blob (kernel inputs) by hash that found it held.",
		}, func() float64 { return float64(blobs.Stats().Hits) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "gpreduce_worker_blob_cache_misses_total",
			Help: "Tasks naming a broadcast blob by hash that did not find it (answered FAILED_PRECONDITION; resent in full).",
		}, func() float64 { return float64(blobs.Stats().Misses) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "gpreduce_worker_blob_cache_evictions_total",
			Help: "Broadcast blobs evicted from the blob cache to stay within its budget.",
		}, func() float64 { return float64(blobs.Stats().Evictions) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gpreduce_worker_blob_cache_bytes",
			Help: "Bytes of the broadcast blobs held in the blob cache (8 per value).",
		}, func() float64 { return float64(blobs.Stats().Bytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gpreduce_worker_blob_cache_blobs",
			Help: "Broadcast blobs held in the blob cache.",
		}, func() float64 { return float64(blobs.Stats().Blobs) }),
	)
	return m
}
