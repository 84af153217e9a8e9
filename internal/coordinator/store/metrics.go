package store

import (
	"strings"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// Collector returns a Prometheus collector of this member's replicated state, read when
// scraped: the jobs by state (gpreduce_jobs), the raft state and applied index, and the
// blobs stored.
func (n *Node) Collector() prometheus.Collector { return newStateCollector(n) }

// Term returns this member's current raft term; it grows with every election.
func (n *Node) Term() uint64 { return n.raft.CurrentTerm() }

// stateCollector reports the jobs by state and the raft state, read when scraped.
type stateCollector struct {
	node      *Node
	jobs      *prometheus.Desc
	raftState *prometheus.Desc
	applied   *prometheus.Desc
	blobs     *prometheus.Desc
	blobBytes *prometheus.Desc
}

func newStateCollector(node *Node) *stateCollector {
	return &stateCollector{
		node: node,
		jobs: prometheus.NewDesc("gpreduce_jobs", "Jobs in this coordinator's replicated state, by state.",
			[]string{"state"}, nil),
		raftState: prometheus.NewDesc("gpreduce_raft_state",
			"Raft state of this coordinator: 1 for the current state (leader, follower, candidate, shutdown).",
			[]string{"state"}, nil),
		applied: prometheus.NewDesc("gpreduce_raft_applied_index",
			"Index of the last raft command applied to this coordinator's state.", nil, nil),
		blobs: prometheus.NewDesc("gpreduce_stored_blobs",
			"Models and checkpoints in this coordinator's blob store.", nil, nil),
		blobBytes: prometheus.NewDesc("gpreduce_stored_blob_bytes",
			"Bytes of the models and checkpoints in this coordinator's blob store.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.jobs
	ch <- c.raftState
	ch <- c.applied
	ch <- c.blobs
	ch <- c.blobBytes
}

// Collect implements prometheus.Collector.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	counts := c.node.fsm.stateCounts()
	for _, s := range []JobState{JobPending, JobRunning, JobSucceeded, JobFailed, JobCanceled} {
		ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, float64(counts[s]), s.String())
	}
	ch <- prometheus.MustNewConstMetric(c.applied, prometheus.GaugeValue, float64(c.node.AppliedIndex()))
	n, size := c.node.fsm.blobUsage()
	ch <- prometheus.MustNewConstMetric(c.blobs, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(c.blobBytes, prometheus.GaugeValue, float64(size))
	cur := c.node.raft.State()
	for _, s := range []raft.RaftState{raft.Leader, raft.Follower, raft.Candidate, raft.Shutdown} {
		v := 0.0
		if s == cur {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.raftState, prometheus.GaugeValue, v, strings.ToLower(s.String()))
	}
}
