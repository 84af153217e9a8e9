// Package coordinator is the gpreduce coordinator application: the Coordinator gRPC API (one
// file per resource: api_jobs.go, api_events.go, api_models.go, api_workers.go,
// api_members.go), the job runner that trains the jobs on the workers while this member
// leads, the worker registry, retention, health and metrics. The replicated state (the raft
// node, its FSM, state views, snapshots and blob store) is package store; the API and the
// runner use it through the narrow store.Store interface.
package coordinator
