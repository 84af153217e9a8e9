package coordinator

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/gpreduce/gpreduce/internal/auth"
	"github.com/gpreduce/gpreduce/internal/coordinator/store"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// The Coordinator gRPC API: what every resource shares (auth policy, redirects to the
// leader, the mapping of store errors to gRPC statuses, consistent reads). Each resource
// has its file: api_jobs.go, api_events.go, api_models.go, api_workers.go, api_members.go.

// LeaderTrailer is the trailer metadata key in which a follower names the leader's API
// address when it refuses a call that needs the leader.
const LeaderTrailer = "gpreduce-leader"

// followerCatchUp bounds how long a follower waits for the leader's read index and for its
// state to apply it before it sends a read to the leader.
const followerCatchUp = 3 * time.Second

var _ pb.CoordinatorServer = (*Server)(nil)

// policy is the API's auth policy: worker calls need the join token, every other call the
// API token; an empty token requires nothing.
func policy(token, joinToken string) auth.Policy {
	api, join := auth.Static(token), auth.Static(joinToken)
	return func(method string) []string {
		switch method {
		case pb.Coordinator_RegisterWorker_FullMethodName, pb.Coordinator_Heartbeat_FullMethodName:
			return join(method)
		}
		return api(method)
	}
}

// notLeader is the answer of a follower to a call that needs the leader: FailedPrecondition
// naming the leader's API address, also set in the LeaderTrailer trailer, or Unavailable
// while no leader is known. setTrailer sets the trailer on the call.
func (s *Server) notLeader(setTrailer func(metadata.MD)) error {
	addr := s.state.LeaderAPI()
	if addr == "" {
		return status.Error(codes.Unavailable, "not the leader, and no leader is known yet (election in progress); retry shortly")
	}
	setTrailer(metadata.Pairs(LeaderTrailer, addr))
	return status.Errorf(codes.FailedPrecondition, "not the leader; leader is %s", addr)
}

func unaryTrailer(ctx context.Context) func(metadata.MD) {
	return func(md metadata.MD) { _ = grpc.SetTrailer(ctx, md) }
}

// requireLeader returns nil on the leader and the redirect otherwise.
func (s *Server) requireLeader(ctx context.Context) error {
	if s.state.IsLeader() {
		return nil
	}
	return s.notLeader(unaryTrailer(ctx))
}

// toStatus maps an error of the node to a gRPC status.
func (s *Server) toStatus(setTrailer func(metadata.MD), err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	code := codes.Internal
	switch {
	case errors.Is(err, store.ErrNotLeader):
		return s.notLeader(setTrailer)
	case errors.Is(err, store.ErrJobNotFound), errors.Is(err, ErrWorkerNotFound):
		code = codes.NotFound
	case errors.Is(err, store.ErrJobExists):
		code = codes.AlreadyExists
	case errors.Is(err, store.ErrInvalidTransition), errors.Is(err, store.ErrJobNotRunning), errors.Is(err, store.ErrNoModel), errors.Is(err, store.ErrInsecureRaft),
		errors.Is(err, store.ErrJobActive):
		code = codes.FailedPrecondition
	case errors.Is(err, store.ErrInvalidArgument):
		code = codes.InvalidArgument
	case errors.Is(err, store.ErrModelTooLarge), errors.Is(err, store.ErrCheckpointTooLarge):
		code = codes.ResourceExhausted
	case errors.Is(err, store.ErrLeadershipLost), errors.Is(err, store.ErrClosed):
		code = codes.Unavailable
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	}
	return status.Error(code, err.Error())
}

func (s *Server) unaryStatus(ctx context.Context, err error) error {
	return s.toStatus(unaryTrailer(ctx), err)
}

// ReadIndex returns the leader's read index (see store.Node.ReadIndex).
func (s *Server) ReadIndex(ctx context.Context, _ *pb.ReadIndexRequest) (*pb.ReadIndexResponse, error) {
	if err := s.requireLeader(ctx); err != nil {
		return nil, err
	}
	idx, err := s.state.ReadIndex(ctx)
	if err != nil {
		return nil, s.unaryStatus(ctx, err)
	}
	return &pb.ReadIndexResponse{Index: idx}, nil
}

// readBarrier returns once this member's state reflects every change committed before the
// call, so a read never answers "not found" for a job that exists or "running" for one that
// finished. The leader runs a barrier; a follower asks the leader for its read index
// (ReadIndex) and waits until its own state has applied it. A follower that knows no
// leader answers Unavailable; one that cannot reach the leader, or does not catch up within
// followerCatchUp, points the caller to the leader (FailedPrecondition with the trailer).
func (s *Server) readBarrier(ctx context.Context, setTrailer func(metadata.MD)) error {
	if s.state.IsLeader() {
		_, err := s.state.ReadIndex(ctx)
		return s.toStatus(setTrailer, err)
	}
	leader := s.state.LeaderAPI()
	if leader == "" || leader == s.advertise {
		return s.notLeader(setTrailer)
	}
	c, err := s.peers.coordinator(leader)
	if err != nil {
		return s.notLeader(setTrailer)
	}
	cctx, cancel := context.WithTimeout(ctx, followerCatchUp)
	defer cancel()
	resp, err := c.ReadIndex(cctx, &pb.ReadIndexRequest{})
	if err != nil {
		s.log.Debug().Err(err).Str("leader", leader).Msg("read index from the leader failed; redirecting the read")
		return s.notLeader(setTrailer)
	}
	if err := s.state.WaitApplied(cctx, resp.GetIndex()); err != nil {
		s.log.Debug().Err(err).Msg("not caught up with the leader; redirecting the read")
		return s.notLeader(setTrailer)
	}
	return nil
}
