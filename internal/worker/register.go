package worker

import (
	"context"
	"hash/fnv"
	"math/rand/v2"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/gpreduce/gpreduce/internal/auth"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// LeaderTrailer is the trailer metadata key in which a follower names the leader's API
// address.
const LeaderTrailer = "gpreduce-leader"

// Registration timing.
const (
	backoffBase  = 100 * time.Millisecond
	backoffCap   = 10 * time.Second
	rpcTimeout   = 10 * time.Second
	maxRedirects = 3 // followed in a row without backing off
)

// registrar keeps the worker registered with the leader: it registers, heartbeats, and
// on failure finds the leader again. It never gives up while its context lives.
type registrar struct {
	w     *Worker
	log   zerolog.Logger
	conns map[string]*grpc.ClientConn
	rng   *rand.Rand
	next  int // index in Join of the next address to try
	fails int // consecutive failures, for the backoff
}

func newRegistrar(w *Worker) *registrar {
	h := fnv.New64a()
	h.Write([]byte(w.cfg.Name))
	h.Write([]byte(w.AdvertiseAddr()))
	seed := uint64(time.Now().UnixNano())
	return &registrar{w: w, log: w.log, conns: map[string]*grpc.ClientConn{},
		rng: rand.New(rand.NewPCG(seed, h.Sum64()))}
}

// client returns a Coordinator client for addr, dialing it the first time.
func (r *registrar) client(addr string) (pb.CoordinatorClient, error) {
	if c, ok := r.conns[addr]; ok {
		return pb.NewCoordinatorClient(c), nil
	}
	creds := insecure.NewCredentials()
	if r.w.cfg.ClientTLS != nil {
		creds = credentials.NewTLS(r.w.cfg.ClientTLS)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes))}
	if r.w.cfg.JoinToken != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(auth.PerRPC(r.w.cfg.JoinToken, r.w.cfg.ClientTLS != nil)))
	}
	c, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, err
	}
	r.conns[addr] = c
	return pb.NewCoordinatorClient(c), nil
}

// close closes the connections to the coordinators.
func (r *registrar) close() {
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = map[string]*grpc.ClientConn{}
}

// wait sleeps for d or until ctx is done, reporting whether ctx is still live.
func wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// backoff returns the next delay after a failure: exponential from backoffBase, capped
// at backoffCap, with the upper half jittered.
func (r *registrar) backoff() time.Duration {
	d := backoffBase << min(r.fails, 20)
	if d > backoffCap || d <= 0 {
		d = backoffCap
	}
	r.fails++
	return d/2 + time.Duration(r.rng.Int64N(int64(d/2)+1))
}

// leaderFrom returns the leader address a follower named in its trailer, if any.
func leaderFrom(err error, md metadata.MD) string {
	if status.Code(err) != codes.FailedPrecondition {
		return ""
	}
	if v := md.Get(LeaderTrailer); len(v) > 0 {
		return v[0]
	}
	return ""
}

// run registers and heartbeats until ctx is done.
func (r *registrar) run(ctx context.Context) {
	target := ""   // the address to register with next ("" : the next Join address)
	redirects := 0 // redirects followed in a row
	for ctx.Err() == nil {
		if target == "" {
			target = r.w.cfg.Join[r.next%len(r.w.cfg.Join)]
			r.next++
		}
		id, interval, md, err := r.register(ctx, target)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if leader := leaderFrom(err, md); leader != "" && leader != target && redirects < maxRedirects {
				r.log.Debug().Str("follower", target).Str("leader", leader).Msg("following the leader")
				target, redirects = leader, redirects+1
				continue
			}
			d := r.backoff()
			r.log.Warn().Err(err).Str("coordinator", target).Dur("retry_in", d).Msg("cannot register")
			target, redirects = "", 0
			if !wait(ctx, d) {
				return
			}
			continue
		}
		redirects, r.fails = 0, 0
		r.w.setID(id)
		r.w.metrics.registered.Set(1)
		r.log.Info().Str("worker_id", id).Str("leader", target).Str("address", r.w.AdvertiseAddr()).
			Dur("heartbeat", interval).Msg("registered")
		next := r.heartbeat(ctx, target, id, interval)
		r.w.metrics.registered.Set(0)
		target = next
	}
}

// register calls RegisterWorker at addr and returns the ID and heartbeat interval, or the
// error and the call's trailer.
func (r *registrar) register(ctx context.Context, addr string) (string, time.Duration, metadata.MD, error) {
	c, err := r.client(addr)
	if err != nil {
		return "", 0, nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	var md metadata.MD
	resp, err := c.RegisterWorker(cctx, &pb.RegisterWorkerRequest{
		Address: r.w.AdvertiseAddr(), Cores: int32(r.w.cfg.Cores), Name: r.w.cfg.Name,
	}, grpc.Trailer(&md))
	if err != nil {
		return "", 0, md, err
	}
	interval := r.w.cfg.HeartbeatInterval
	if interval <= 0 {
		interval = time.Duration(resp.GetHeartbeatIntervalMs()) * time.Millisecond
	}
	if interval <= 0 {
		interval = DefaultHeartbeatInterval
	}
	return resp.GetWorkerId(), interval, md, nil
}

// heartbeat sends heartbeats to addr every interval until one fails in a way that needs a
// new registration, and returns the address to register with next: addr again when the
// leader forgot the worker, the leader a follower names, or "" to try the next Join
// address.
func (r *registrar) heartbeat(ctx context.Context, addr, id string, interval time.Duration) string {
	c, err := r.client(addr)
	if err != nil {
		return ""
	}
	for wait(ctx, interval) {
		cctx, cancel := context.WithTimeout(ctx, max(2*interval, rpcTimeout))
		var md metadata.MD
		_, err := c.Heartbeat(cctx, &pb.HeartbeatRequest{WorkerId: id}, grpc.Trailer(&md))
		cancel()
		if err == nil {
			r.fails = 0
			continue
		}
		if ctx.Err() != nil {
			return ""
		}
		switch status.Code(err) {
		case codes.NotFound:
			r.log.Info().Str("worker_id", id).Str("leader", addr).Msg("the leader does not know this worker: registering again")
			return addr
		case codes.FailedPrecondition:
			leader := leaderFrom(err, md)
			r.log.Info().Str("coordinator", addr).Str("new_leader", leader).Msg("lost leader: it is no longer the leader")
			return leader
		case codes.Unavailable:
			r.log.Info().Err(err).Str("coordinator", addr).Msg("lost leader: unreachable")
			if !wait(ctx, r.backoff()) {
				return ""
			}
			return ""
		default:
			// Unauthenticated, DeadlineExceeded and the like: keep trying with backoff
			// before looking for another leader.
			d := r.backoff()
			r.log.Warn().Err(err).Str("coordinator", addr).Dur("retry_in", d).Msg("heartbeat failed")
			if r.fails > 3 {
				r.log.Info().Str("coordinator", addr).Msg("lost leader: heartbeats keep failing")
				return ""
			}
			if !wait(ctx, d) {
				return ""
			}
		}
	}
	return ""
}
