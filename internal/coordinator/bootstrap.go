package coordinator

import (
	"context"
	"fmt"
	"time"

	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// Timing of bootstrapOrJoin.
const (
	// bootstrapProbeWindow is how long a member asks its unreachable peers whether they
	// belong to a cluster before it takes their silence for a cold start.
	bootstrapProbeWindow = 15 * time.Second
	bootstrapProbeEvery  = 500 * time.Millisecond
)

// bootstrapOrJoin starts a member that has no raft state and ServerConfig.BootstrapIfEmpty:
// it asks every Join address for its members. If one belongs to a cluster (it lists
// members), this member joins that cluster. If every peer answers with no members, or the
// peers that do not answer stay unreachable for bootstrapProbeWindow, this is a cold start
// and the member bootstraps a single-node cluster that the others then join.
func (s *Server) bootstrapOrJoin(ctx context.Context) error {
	deadline := time.Now().Add(bootstrapProbeWindow)
	for {
		found, unreachable, err := s.probePeers(ctx)
		switch {
		case found != "":
			s.log.Info().Str("member", found).Msg("a cluster exists: joining it instead of bootstrapping")
			return s.join(ctx)
		case unreachable == 0 || !time.Now().Before(deadline):
			s.log.Info().Int("unreachable_peers", unreachable).Msg("no peer belongs to a cluster: bootstrapping a new one")
			return s.node.BootstrapSelf(ctx)
		}
		s.log.Info().Int("unreachable_peers", unreachable).Err(err).Msg("waiting for the peers to say whether a cluster exists")
		select {
		case <-ctx.Done():
			return fmt.Errorf("bootstrap or join: %w", ctx.Err())
		case <-time.After(bootstrapProbeEvery):
		}
	}
}

// probePeers asks each Join address other than this member's for its members. It returns
// the address of a peer that belongs to a cluster ("" if none does), the number of peers
// that did not answer, and the last error.
func (s *Server) probePeers(ctx context.Context) (found string, unreachable int, lastErr error) {
	for _, addr := range s.cfg.Join {
		if addr == s.advertise || addr == s.APIAddr() {
			continue
		}
		c, err := s.peers.coordinator(addr)
		if err == nil {
			cctx, cancel := context.WithTimeout(ctx, peerCallTimeout)
			var resp *pb.ListMembersResponse
			resp, err = c.ListMembers(cctx, &pb.ListMembersRequest{})
			cancel()
			if err == nil {
				if len(resp.GetMembers()) > 0 {
					return addr, unreachable, nil
				}
				continue
			}
		}
		unreachable++
		lastErr = err
	}
	return "", unreachable, lastErr
}
