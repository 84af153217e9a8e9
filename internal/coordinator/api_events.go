package coordinator

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// The events resource: a job's replicated events, streamed (coordinator logs / watch).

// watchRecheck is how often WatchJob checks leadership and the job's state between events.
const watchRecheck = 500 * time.Millisecond

// WatchJob streams the job's recorded events (replicated, so they include those of earlier
// leaders) and then new ones until the job finishes. The leader serves it; the stream ends
// with the redirect if leadership moves.
func (s *Server) WatchJob(req *pb.WatchJobRequest, stream grpc.ServerStreamingServer[pb.JobEvent]) error {
	ctx := stream.Context()
	trailer := func(md metadata.MD) { stream.SetTrailer(md) }
	if !s.state.IsLeader() {
		return s.notLeader(trailer)
	}
	if err := s.readBarrier(ctx, trailer); err != nil {
		return err
	}
	id := req.GetId()
	if _, err := s.state.JobView(id); err != nil {
		return s.toStatus(trailer, err)
	}
	tick := time.NewTicker(watchRecheck)
	defer tick.Stop()
	var from uint64
	for {
		changed := s.state.Updates()
		evs, next, err := s.state.Events(id, from)
		if err != nil {
			return s.toStatus(trailer, err)
		}
		from = next
		for _, ev := range evs {
			if err := stream.Send(ev.Proto()); err != nil {
				return err
			}
			if ev.State.Finished() {
				return nil
			}
		}
		// The job may have finished without an event here (under another leader).
		j, err := s.state.JobView(id)
		if err != nil {
			return s.toStatus(trailer, err)
		}
		if j.State.Finished() {
			return stream.Send(&pb.JobEvent{JobId: id, State: j.State.Proto(), Phase: "state",
				Iteration: int32(j.Iteration), Objective: j.Objective, Message: j.Error, UnixNano: j.UpdatedAt.UnixNano()})
		}
		if !s.state.IsLeader() {
			return s.notLeader(trailer)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-s.done:
			return status.Error(codes.Unavailable, "the coordinator is shutting down; watch again at another member")
		case <-s.runner.leading(): // nil (blocking) until the runner's term starts
			return s.notLeader(trailer)
		case <-tick.C:
		}
	}
}
