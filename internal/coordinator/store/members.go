package store

import (
	"context"
	"fmt"
)

// The coordinators' API addresses, replicated beside the jobs so that every member can name
// the leader's API (raft only knows its raft address) when it redirects a call.

// SetMemberAPI records apiAddr as the API address of coordinator id. Leader only.
func (n *Node) SetMemberAPI(ctx context.Context, id, apiAddr string) error {
	if _, err := n.propose(ctx, opMember, memberCmd{ID: id, APIAddr: apiAddr}); err != nil {
		return fmt.Errorf("record API address %s of member %s: %w", apiAddr, id, err)
	}
	return nil
}

// ForgetMemberAPI drops the API address of coordinator id (after it left the cluster).
// Leader only.
func (n *Node) ForgetMemberAPI(ctx context.Context, id string) error {
	if _, err := n.propose(ctx, opMember, memberCmd{ID: id, Remove: true}); err != nil {
		return fmt.Errorf("forget API address of member %s: %w", id, err)
	}
	return nil
}

// MemberAPIs returns the API addresses by server ID from this node's state.
func (n *Node) MemberAPIs() map[string]string { return n.fsm.members() }

// LeaderAPI returns the API address of the leader as this node knows it, or "" if it knows
// no leader or not its API address.
func (n *Node) LeaderAPI() string {
	_, id := n.Leader()
	if id == "" {
		return ""
	}
	return n.fsm.memberAPI(id)
}
