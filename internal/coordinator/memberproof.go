package coordinator

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/gpreduce/gpreduce/internal/coordinator/store"
)

// Membership changes through the API (JoinCluster, RemoveMember) change who may speak raft,
// so with a raft secret configured they need more than the API token, which every client
// holds: the caller proves the raft secret with an HMAC-SHA256 over the call's fields and the
// time, in the metadata below. Only members hold the secret.
const (
	memberProofKey  = "gpreduce-member-proof"
	memberProofTime = "gpreduce-member-time"
	memberProofSkew = 5 * time.Minute // proofs older or newer than this are refused (replays)
	memberProofMAC  = "gpreduce member api v1"
)

// memberProof is the proof of the raft secret for a membership call at unix time sec.
func memberProof(secret []byte, method, id, raftAddr, apiAddr string, sec int64) string {
	m := hmac.New(sha256.New, store.LabelledKey(secret, memberProofMAC))
	for _, f := range []string{method, id, raftAddr, apiAddr, strconv.FormatInt(sec, 10)} {
		m.Write([]byte(strconv.Itoa(len(f))))
		m.Write([]byte{':'})
		m.Write([]byte(f))
	}
	return hex.EncodeToString(m.Sum(nil))
}

// withMemberProof adds the proof of secret for a membership call to ctx (nothing without a
// secret).
func withMemberProof(ctx context.Context, secret []byte, method, id, raftAddr, apiAddr string) context.Context {
	if len(secret) == 0 {
		return ctx
	}
	now := time.Now().Unix()
	return metadata.AppendToOutgoingContext(ctx, memberProofKey, memberProof(secret, method, id, raftAddr, apiAddr, now),
		memberProofTime, strconv.FormatInt(now, 10))
}

// checkMemberProof accepts a membership call if this server has no raft secret (the API
// token and, with mutual TLS, the client certificate are then the whole check) or if the
// call proves the secret within memberProofSkew.
func (s *Server) checkMemberProof(ctx context.Context, method, id, raftAddr, apiAddr string) error {
	secret := s.cfg.RaftSecret
	if len(secret) == 0 {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	proofs, times := md.Get(memberProofKey), md.Get(memberProofTime)
	if len(proofs) != 1 || len(times) != 1 {
		return status.Errorf(codes.PermissionDenied, "%s needs a proof of the cluster's raft secret: only a coordinator given the same --raft-secret-file can change the membership", method)
	}
	sec, err := strconv.ParseInt(times[0], 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() > memberProofSkew {
		return status.Errorf(codes.PermissionDenied, "%s: the proof's time %q is missing or more than %s from this coordinator's clock", method, times[0], memberProofSkew)
	}
	want := memberProof(secret, method, id, raftAddr, apiAddr, sec)
	if !hmac.Equal([]byte(proofs[0]), []byte(want)) {
		return status.Errorf(codes.PermissionDenied, "%s: wrong proof of the raft secret: the caller holds another --raft-secret-file", method)
	}
	return nil
}

// WithRemoveMemberProof adds to ctx the proof of the raft secret that RemoveMember of member
// id needs on a cluster with a raft secret (nothing when secret is empty). It is for clients
// that hold the secret, such as `coordinator members remove --raft-secret-file`.
func WithRemoveMemberProof(ctx context.Context, secret []byte, id string) context.Context {
	return withMemberProof(ctx, secret, "RemoveMember", id, "", "")
}
