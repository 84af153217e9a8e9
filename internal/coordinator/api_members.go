package coordinator

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// The members resource: coordinators joining, leaving and listed.

// JoinCluster adds a coordinator as a voter and records its API address. With a raft secret
// configured, the caller must prove it (see checkMemberProof).
func (s *Server) JoinCluster(ctx context.Context, req *pb.JoinClusterRequest) (*pb.JoinClusterResponse, error) {
	if err := s.requireLeader(ctx); err != nil {
		return nil, err
	}
	id, raftAddr, apiAddr := req.GetId(), req.GetRaftAddress(), req.GetApiAddress()
	if id == "" || raftAddr == "" || apiAddr == "" {
		return nil, status.Error(codes.InvalidArgument, "id, raft_address and api_address are all required")
	}
	if err := s.checkMemberProof(ctx, "JoinCluster", id, raftAddr, apiAddr); err != nil {
		return nil, err
	}
	if err := s.state.AddVoter(ctx, id, raftAddr); err != nil {
		return nil, s.unaryStatus(ctx, err)
	}
	if err := s.state.SetMemberAPI(ctx, id, apiAddr); err != nil {
		return nil, s.unaryStatus(ctx, err)
	}
	s.log.Info().Str("member", id).Str("raft_addr", raftAddr).Str("api_addr", apiAddr).Msg("member joined")
	return &pb.JoinClusterResponse{}, nil
}

// RemoveMember removes a coordinator from the raft configuration. With a raft secret
// configured, the caller must prove it (see checkMemberProof).
func (s *Server) RemoveMember(ctx context.Context, req *pb.RemoveMemberRequest) (*pb.RemoveMemberResponse, error) {
	if err := s.requireLeader(ctx); err != nil {
		return nil, err
	}
	id := req.GetId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "id: empty; give the server ID of the member to remove")
	}
	if err := s.checkMemberProof(ctx, "RemoveMember", id, "", ""); err != nil {
		return nil, err
	}
	if id == s.state.ID() {
		// The leader steps down once its removal commits, so forget its address first.
		if err := s.state.ForgetMemberAPI(ctx, id); err != nil {
			return nil, s.unaryStatus(ctx, err)
		}
		if err := s.state.RemoveServer(ctx, id); err != nil {
			return nil, s.unaryStatus(ctx, err)
		}
		return &pb.RemoveMemberResponse{}, nil
	}
	if err := s.state.RemoveServer(ctx, id); err != nil {
		return nil, s.unaryStatus(ctx, err)
	}
	if err := s.state.ForgetMemberAPI(ctx, id); err != nil {
		return nil, s.unaryStatus(ctx, err)
	}
	s.log.Info().Str("member", id).Msg("member removed")
	return &pb.RemoveMemberResponse{}, nil
}

// ListMembers lists the raft members with their API addresses.
func (s *Server) ListMembers(ctx context.Context, _ *pb.ListMembersRequest) (*pb.ListMembersResponse, error) {
	servers, err := s.state.Servers(ctx)
	if err != nil {
		return nil, s.unaryStatus(ctx, err)
	}
	apis := s.state.MemberAPIs()
	out := &pb.ListMembersResponse{}
	for _, m := range servers {
		out.Members = append(out.Members, &pb.Member{Id: m.ID, RaftAddress: m.Addr, ApiAddress: apis[m.ID], Leader: m.Leader})
	}
	return out, nil
}
