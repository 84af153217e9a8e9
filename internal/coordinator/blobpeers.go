package coordinator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gpreduce/gpreduce/internal/coordinator/store"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// blobPeers is a Server's BlobFetcher: it asks the leader, then the other members, for a
// blob over GetBlob. The node is opened before the server exists, so the server is set
// once it does; until then fetches fail (and are retried).
type blobPeers struct {
	s atomic.Pointer[Server]
}

var errNotReady = errors.New("the coordinator is starting")

func (p *blobPeers) fetch(ctx context.Context, hash string, size int64) ([]byte, error) {
	s := p.s.Load()
	if s == nil {
		return nil, errNotReady
	}
	return s.fetchBlob(ctx, hash, size)
}

// fetchBlob gets blob hash from the leader or another member.
func (s *Server) fetchBlob(ctx context.Context, hash string, size int64) ([]byte, error) {
	var addrs []string
	if l := s.state.LeaderAPI(); l != "" && l != s.advertise {
		addrs = append(addrs, l)
	}
	for id, a := range s.state.MemberAPIs() {
		if id != s.state.ID() && a != s.advertise && (len(addrs) == 0 || a != addrs[0]) {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("blob %s: no other member known", hash)
	}
	var errs []error
	for _, a := range addrs {
		b, err := s.fetchBlobFrom(ctx, a, hash, size)
		if err == nil {
			return b, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", a, err))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("blob %s: %w", hash, errors.Join(errs...))
}

func (s *Server) fetchBlobFrom(ctx context.Context, addr, hash string, size int64) ([]byte, error) {
	c, err := s.peers.coordinator(addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, peerCallTimeout)
	defer cancel()
	st, err := c.GetBlob(ctx, &pb.GetBlobRequest{Sha256: hash})
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 0, size)
	for {
		ch, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if int64(len(buf)+len(ch.GetData())) > size {
			return nil, fmt.Errorf("more than the %d bytes recorded", size)
		}
		buf = append(buf, ch.GetData()...)
	}
	if int64(len(buf)) != size || store.BlobHash(buf) != hash {
		return nil, fmt.Errorf("got %d bytes that do not match the recorded size %d and sha256", len(buf), size)
	}
	return buf, nil
}

// GetBlob streams a model or checkpoint this member holds, by sha256.
func (s *Server) GetBlob(req *pb.GetBlobRequest, stream grpc.ServerStreamingServer[pb.ModelChunk]) error {
	b, err := s.node.Blob(req.GetSha256())
	if err != nil {
		return status.Error(codes.NotFound, err.Error())
	}
	for off := 0; off < len(b); off += modelChunkBytes {
		if err := stream.Send(&pb.ModelChunk{Data: b[off:min(off+modelChunkBytes, len(b))]}); err != nil {
			return err
		}
	}
	return nil
}
