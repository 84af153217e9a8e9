package coordinator

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/gpreduce/gpreduce/internal/coordinator/store"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// TestMembershipNeedsRaftSecret: with a raft secret, JoinCluster and RemoveMember need a
// fresh proof of it besides the API token (which every client holds); without one, or with a
// proof of another secret or from long ago, they are refused and the membership stays.
func TestMembershipNeedsRaftSecret(t *testing.T) {
	s := startSingle(t, nil)
	c := dial(t, s.APIAddr(), "")
	ctx := testContext(t)
	join := &pb.JoinClusterRequest{Id: "intruder", RaftAddress: "127.0.0.1:1", ApiAddress: "127.0.0.1:2"}
	stale := metadata.AppendToOutgoingContext(ctx, memberProofKey,
		memberProof([]byte(testRaftSecret), "JoinCluster", join.Id, join.RaftAddress, join.ApiAddress, time.Now().Add(-time.Hour).Unix()),
		memberProofTime, strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10))
	for _, tc := range []struct {
		name string
		ctx  context.Context
	}{
		{"no proof", ctx},
		{"another secret", withMemberProof(ctx, []byte("another raft secret, 32 bytes.."), "JoinCluster", join.Id, join.RaftAddress, join.ApiAddress)},
		{"proof for other fields", withMemberProof(ctx, []byte(testRaftSecret), "JoinCluster", join.Id, "127.0.0.1:3", join.ApiAddress)},
		{"an hour old", stale},
	} {
		if _, err := c.JoinCluster(tc.ctx, join); status.Code(err) != codes.PermissionDenied {
			t.Errorf("JoinCluster with %s: %v, want PermissionDenied", tc.name, err)
		}
	}
	if _, err := c.RemoveMember(ctx, &pb.RemoveMemberRequest{Id: s.node.ID()}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("RemoveMember without a proof: %v, want PermissionDenied", err)
	}
	servers, err := s.node.Servers(ctx)
	if err != nil || len(servers) != 1 {
		t.Errorf("members after the refused calls: %+v, %v", servers, err)
	}
}

// TestInsecureRaftRefusesJoin: without raft security a server refuses to join a cluster
// (see store's TestInsecureRaftRefusesMembers for the node's refusals).
func TestInsecureRaftRefusesJoin(t *testing.T) {
	log := testLogger(t)
	sc := testServerConfig(t, "joiner", log)
	sc.RaftSecret, sc.Join = nil, []string{"127.0.0.1:1"}
	if _, err := OpenServer(t.Context(), sc); !errors.Is(err, store.ErrInsecureRaft) {
		t.Errorf("OpenServer joining without raft security: %v, want store.ErrInsecureRaft", err)
	}
}
