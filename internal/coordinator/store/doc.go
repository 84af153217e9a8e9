// Package store is the replicated state of the gpreduce coordinator, apart from the
// application that uses it: a hashicorp/raft node (an authenticated TCP transport, a
// raft-boltdb log and stable store on bbolt, file snapshots) whose state machine holds the
// training jobs, their state transitions, checkpoints and events, the finished models, and
// the members' API addresses. Models and checkpoints live in a content-addressed blob store
// beside the raft log, which carries them in chunks and which snapshots compact away.
//
// The FSM applies each command through a table of one function per command type
// (commands.go); the state's methods are the deterministic effects of the commands. The
// coordinator's API and job runner use the narrow Store interface, which *Node implements:
// only the leader proposes commands, and every member reads its local copy, made as fresh as
// the caller needs with the raft read-index protocol (Node.ReadIndex, Node.WaitApplied).
// This package knows nothing of jobs' specs, models or metrics, which it keeps as opaque
// bytes.
package store
