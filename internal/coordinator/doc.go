// Package coordinator is the replicated state layer of the gpreduce coordinator: a
// hashicorp/raft node (TCP transport, raft-boltdb log and stable store on bbolt, file
// snapshots) whose state machine holds the training jobs, their state transitions,
// checkpoints and finished models (stored in chunks). The job runner, the API and the worker
// registry build on Node: only the leader proposes changes, and every member can read its
// local copy of the state.
package coordinator
