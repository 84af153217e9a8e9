package coordinator

import (
	"context"
	"net"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/gpreduce/gpreduce/internal/wire"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// The workers resource: registration, heartbeats and the list of the leader's pool.

// RegisterWorker adds a worker to the leader's pool at the address it calls from (see
// workerAddr) and sends it, in the wire.SessionKey header, the session its tasks carry.
func (s *Server) RegisterWorker(ctx context.Context, req *pb.RegisterWorkerRequest) (*pb.RegisterWorkerResponse, error) {
	if err := s.requireLeader(ctx); err != nil {
		return nil, err
	}
	if req.GetAddress() == "" {
		return nil, status.Error(codes.InvalidArgument, "address: empty; give the worker's gRPC address, reachable from the coordinators")
	}
	addr, err := s.workerAddr(ctx, req.GetAddress())
	if err != nil {
		return nil, err
	}
	id, session, err := s.pool.register(req.GetName(), addr, int(req.GetCores()))
	if err != nil {
		return nil, s.unaryStatus(ctx, err)
	}
	if err := grpc.SetHeader(ctx, metadata.Pairs(wire.SessionKey, session)); err != nil {
		return nil, status.Errorf(codes.Internal, "send the worker's session: %v", err)
	}
	return &pb.RegisterWorkerResponse{WorkerId: id, HeartbeatIntervalMs: s.pool.interval().Milliseconds()}, nil
}

// resolveTimeout bounds the lookup of a worker's advertised host name.
const resolveTimeout = 2 * time.Second

// workerAddr is the address a worker registering with advertised address adv is dialled at:
// adv itself if its host is the IP the call comes from (or a name resolving to it), else that
// IP with adv's port. So a caller holding the join token can register only itself, never
// another host.
func (s *Server) workerAddr(ctx context.Context, adv string) (string, error) {
	host, port, err := net.SplitHostPort(adv)
	if err != nil {
		return "", status.Errorf(codes.InvalidArgument, "address %q: %v; give HOST:PORT", adv, err)
	}
	p, ok := peer.FromContext(ctx)
	var from net.IP
	if ok {
		if a, isTCP := p.Addr.(*net.TCPAddr); isTCP {
			from = a.IP
		}
	}
	if from == nil {
		return "", status.Error(codes.InvalidArgument, "cannot tell the address this worker calls from; workers must call over TCP")
	}
	if ip := net.ParseIP(host); ip != nil {
		if ip.Equal(from) {
			return adv, nil
		}
	} else {
		rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
		ips, err := net.DefaultResolver.LookupIPAddr(rctx, host)
		cancel()
		if err == nil && slices.ContainsFunc(ips, func(a net.IPAddr) bool { return a.IP.Equal(from) }) {
			return adv, nil
		}
	}
	at := net.JoinHostPort(from.String(), port)
	s.log.Warn().Str("advertised", adv).Str("registered", at).
		Msg("worker advertised an address other than the one it calls from; registered at its own address")
	return at, nil
}

// Heartbeat keeps a worker in the pool.
func (s *Server) Heartbeat(ctx context.Context, req *pb.HeartbeatRequest) (*pb.HeartbeatResponse, error) {
	if err := s.requireLeader(ctx); err != nil {
		return nil, err
	}
	if err := s.pool.heartbeat(req.GetWorkerId()); err != nil {
		return nil, status.Errorf(codes.NotFound, "%v: register again", err)
	}
	return &pb.HeartbeatResponse{}, nil
}

// ListWorkers lists the leader's live workers.
func (s *Server) ListWorkers(ctx context.Context, _ *pb.ListWorkersRequest) (*pb.ListWorkersResponse, error) {
	if err := s.requireLeader(ctx); err != nil {
		return nil, err
	}
	out := &pb.ListWorkersResponse{}
	for _, w := range s.pool.list() {
		out.Workers = append(out.Workers, &pb.WorkerInfo{Id: w.id, Address: w.addr, Cores: int32(w.cores), LastHeartbeatUnixNano: w.lastSeen.UnixNano()})
	}
	return out, nil
}
