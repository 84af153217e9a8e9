package store

import (
	"context"
	"fmt"

	"github.com/hashicorp/raft"
)

// BootstrapSelf bootstraps a single-node cluster with this node as its voter. It fails if
// the node already has raft state.
func (n *Node) BootstrapSelf(ctx context.Context) error {
	boot := raft.Configuration{Servers: []raft.Server{{
		Suffrage: raft.Voter, ID: raft.ServerID(n.cfg.ID), Address: n.trans.LocalAddr(),
	}}}
	if err := n.await(ctx, n.raft.BootstrapCluster(boot)); err != nil {
		return fmt.Errorf("bootstrap %s: %w", n.cfg.ID, err)
	}
	n.log.Info().Str("addr", n.Addr()).Msg("bootstrapped single-node cluster")
	return nil
}
