package coordinator

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/gpreduce/gpreduce/internal/coordinator/store"
	"github.com/gpreduce/gpreduce/internal/model"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// The models resource: predict with a job's model and download it.

// modelChunkBytes is the size of the chunks GetModel streams.
const modelChunkBytes = 1 << 20

// modelCacheSize is how many decoded models Predict keeps.
const modelCacheSize = 8

// Predict predicts with a job's model.
func (s *Server) Predict(ctx context.Context, req *pb.PredictRequest) (*pb.PredictResponse, error) {
	if err := s.readBarrier(ctx, unaryTrailer(ctx)); err != nil {
		return nil, err
	}
	m, err := s.models.get(s.state, req.GetJobId())
	if err != nil {
		return nil, s.unaryStatus(ctx, err)
	}
	d, x := int(req.GetD()), req.GetX()
	switch {
	case d != m.D:
		return nil, status.Errorf(codes.InvalidArgument, "d: %d, but the model was trained on %d input columns; send rows of %d values", d, m.D, m.D)
	case len(x) == 0:
		return nil, status.Error(codes.InvalidArgument, "x: empty; send the input rows, row-major")
	case len(x)%d != 0:
		return nil, status.Errorf(codes.InvalidArgument, "x: %d values are not whole rows of d = %d", len(x), d)
	}
	p, err := m.Predict(x, len(x)/d)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return &pb.PredictResponse{Mean: p.Mean, LatentVar: p.LatentVar, NoisyVar: p.NoisyVar, OutsideDomain: p.Outside, Extrapolated: p.Extrapolated}, nil
}

// GetModel streams a job's encoded model in chunks of 1 MiB.
func (s *Server) GetModel(req *pb.GetModelRequest, stream grpc.ServerStreamingServer[pb.ModelChunk]) error {
	trailer := func(md metadata.MD) { stream.SetTrailer(md) }
	if err := s.readBarrier(stream.Context(), trailer); err != nil {
		return err
	}
	b, err := s.state.Model(req.GetJobId())
	if err != nil {
		return s.toStatus(trailer, err)
	}
	for off := 0; off < len(b); off += modelChunkBytes {
		if err := stream.Send(&pb.ModelChunk{Data: b[off:min(off+modelChunkBytes, len(b))]}); err != nil {
			return err
		}
	}
	return nil
}

// modelCache keeps the last few decoded models by job ID and model hash.
type modelCache struct {
	mu      sync.Mutex
	entries map[string]cachedModel
	order   []string // job IDs, least recently added first
}

type cachedModel struct {
	hash  string
	model *model.Model
}

// get returns the decoded model of job id from n's state.
func (c *modelCache) get(n store.Store, id string) (*model.Model, error) {
	j, err := n.JobView(id)
	if err != nil {
		return nil, err
	}
	if j.ModelHash == "" {
		return nil, fmt.Errorf("job %s is %s and has no model yet: %w", id, j.State, store.ErrNoModel)
	}
	c.mu.Lock()
	e, ok := c.entries[id]
	c.mu.Unlock()
	if ok && e.hash == j.ModelHash {
		return e.model, nil
	}
	b, err := n.Model(id)
	if err != nil {
		return nil, err
	}
	m, err := model.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", id, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]cachedModel{}
	}
	if _, ok := c.entries[id]; !ok {
		c.order = append(c.order, id)
	}
	c.entries[id] = cachedModel{hash: j.ModelHash, model: m}
	for len(c.order) > modelCacheSize {
		delete(c.entries, c.order[0])
		c.order = c.order[1:]
	}
	return m, nil
}
