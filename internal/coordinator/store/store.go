package store

import (
	"context"
	"time"
)

// Store is the replicated state as the application (the coordinator's gRPC API and its job
// runner) uses it: leadership, commands (proposed on the leader), reads of this member's
// copy with read-index semantics, the jobs' events and the cluster's membership. *Node
// implements it; the member's life cycle (Open, Close, snapshots, readiness, blob serving)
// stays on *Node.
//
// A read is as fresh as the caller makes it: on the leader, ReadIndex then reading reflects
// every command committed before the call; on a follower, WaitApplied with the leader's
// ReadIndex does the same.
type Store interface {
	// ID returns this member's raft server ID.
	ID() string
	// IsLeader reports whether this member is the raft leader.
	IsLeader() bool
	// LeadershipChanges returns a channel receiving whether this member leads, now and on
	// every change (see Node.LeadershipChanges).
	LeadershipChanges() <-chan bool
	// LeaderAPI returns the API address of the leader as this member knows it, "" if none.
	LeaderAPI() string

	// Barrier waits until every command committed before it is applied here. Leader only.
	Barrier(ctx context.Context) error
	// ReadIndex returns the index a member's state must apply to reflect every command
	// committed before the call. Leader only.
	ReadIndex(ctx context.Context) (uint64, error)
	// WaitApplied waits until this member's state has applied index.
	WaitApplied(ctx context.Context, index uint64) error

	// Job returns job id with its checkpoint (the read that resumes a job).
	Job(id string) (Job, error)
	// JobView returns job id without its checkpoint.
	JobView(id string) (Job, error)
	// JobViews returns every job without its checkpoint, oldest first.
	JobViews() []Job
	// JobsInState returns the jobs in any of states with their checkpoints, oldest first.
	JobsInState(states ...JobState) []Job
	// Model returns the committed model of job id.
	Model(id string) ([]byte, error)
	// Events returns job id's events from number from on and the number to ask for next.
	Events(id string, from uint64) ([]Event, uint64, error)
	// Updates returns a channel closed when the state applies its next command.
	Updates() <-chan struct{}

	// SubmitJob adds a pending job. Leader only, as are the other commands.
	SubmitJob(ctx context.Context, id string, spec []byte, now time.Time) error
	// SetStateMessage moves a job to a new state, recording msg as the event's text.
	SetStateMessage(ctx context.Context, id string, state JobState, errMsg, msg string, now time.Time) error
	// SaveCheckpoint replaces a running job's checkpoint.
	SaveCheckpoint(ctx context.Context, id string, iteration int, objective float64, checkpoint []byte, now time.Time) error
	// PutModel stores a running job's model with its metrics.
	PutModel(ctx context.Context, id string, model, metrics []byte, now time.Time) error
	// CancelJob cancels a pending or running job.
	CancelJob(ctx context.Context, id string, now time.Time) error
	// DeleteJobs removes finished jobs, failing if any is missing or unfinished.
	DeleteJobs(ctx context.Context, ids []string, now time.Time) error
	// ExpireJobs removes those of the jobs that are still there and finished (retention).
	ExpireJobs(ctx context.Context, ids []string, now time.Time) error
	// AppendEvents records progress events.
	AppendEvents(ctx context.Context, evs []Event) error

	// Servers lists the members of the raft configuration.
	Servers(ctx context.Context) ([]Member, error)
	// AddVoter adds (or re-addresses) a voting member. Leader only.
	AddVoter(ctx context.Context, id, addr string) error
	// RemoveServer removes a member. Leader only.
	RemoveServer(ctx context.Context, id string) error
	// SetMemberAPI records the API address of a member. Leader only.
	SetMemberAPI(ctx context.Context, id, apiAddr string) error
	// ForgetMemberAPI drops the API address of a member. Leader only.
	ForgetMemberAPI(ctx context.Context, id string) error
	// MemberAPI returns the recorded API address of member id, "" if none.
	MemberAPI(id string) string
	// MemberAPIs returns the recorded API addresses by server ID.
	MemberAPIs() map[string]string
}

var _ Store = (*Node)(nil)
