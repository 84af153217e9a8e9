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
	"github.com/gpreduce/gpreduce/internal/wire"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// LeaderTrailer is the trailer metadata key in which a follower names the leader's API
// address.
const LeaderTrailer = "gpreduce-leader"

// Registration timing. A worker must move to a new leader within a few seconds of losing
// the old one, so every call has a short deadline and an unresponsive coordinator is tried
// again only after the others.
const (
	backoffBase = 100 * time.Millisecond
	backoffCap  = 2 * time.Second
	// registerTimeout bounds one RegisterWorker call.
	registerTimeout = 2 * time.Second
	// heartbeatTimeoutMin and heartbeatTimeoutMax clamp a heartbeat's deadline, which is
	// otherwise the heartbeat interval.
	heartbeatTimeoutMin = 250 * time.Millisecond
	heartbeatTimeoutMax = 2 * time.Second
	// heartbeatMisses is how many heartbeats in a row may time out before the worker looks
	// for another leader.
	heartbeatMisses = 2
	// shunFor is how long a coordinator that failed is skipped (while another is left to
	// try) and not followed to when a follower names it as the leader.
	shunFor      = 2 * time.Second
	maxRedirects = 3 // followed in a row without backing off
)

// registrar keeps the worker registered with the leader: it registers, heartbeats, and
// on failure finds the leader again. It never gives up while its context lives.
type registrar struct {
	w      *Worker
	log    zerolog.Logger
	conns  map[string]*grpc.ClientConn
	rng    *rand.Rand
	now    func() time.Time
	next   int                  // index in Join of the next address to try
	fails  int                  // consecutive failures, for the backoff
	failed map[string]time.Time // when each coordinator last failed to answer
}

func newRegistrar(w *Worker) *registrar {
	h := fnv.New64a()
	h.Write([]byte(w.cfg.Name))
	h.Write([]byte(w.AdvertiseAddr()))
	seed := uint64(time.Now().UnixNano())
	return &registrar{w: w, log: w.log, conns: map[string]*grpc.ClientConn{}, now: time.Now,
		rng: rand.New(rand.NewPCG(seed, h.Sum64())), failed: map[string]time.Time{}}
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

// shunned reports whether addr failed within shunFor.
func (r *registrar) shunned(addr string) bool {
	t, ok := r.failed[addr]
	return ok && r.now().Sub(t) < shunFor
}

// pick returns the next Join address to try: in turn, skipping the coordinators that failed
// within shunFor unless all did (then the one that failed longest ago).
func (r *registrar) pick() string {
	join := r.w.cfg.Join
	oldest := -1
	for k := range join {
		i := (r.next + k) % len(join)
		if !r.shunned(join[i]) {
			r.next = i + 1
			return join[i]
		}
		if oldest < 0 || r.failed[join[i]].Before(r.failed[join[oldest]]) {
			oldest = i
		}
	}
	r.next = oldest + 1
	return join[oldest]
}

// run registers and heartbeats until ctx is done.
func (r *registrar) run(ctx context.Context) {
	target := ""   // the address to register with next ("" : pick a Join address)
	redirects := 0 // redirects followed in a row
	for ctx.Err() == nil {
		if target == "" {
			target = r.pick()
		}
		id, session, interval, md, err := r.register(ctx, target)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			leader := leaderFrom(err, md)
			if leader != "" && leader != target && redirects < maxRedirects && !r.shunned(leader) {
				r.log.Debug().Str("follower", target).Str("leader", leader).Msg("following the leader")
				target, redirects = leader, redirects+1
				continue
			}
			if leader == "" {
				r.failed[target] = r.now()
			}
			d := r.backoff()
			r.log.Warn().Err(err).Str("coordinator", target).Str("named_leader", leader).Dur("retry_in", d).Msg("cannot register")
			target, redirects = "", 0
			if !wait(ctx, d) {
				return
			}
			continue
		}
		redirects, r.fails = 0, 0
		delete(r.failed, target)
		r.w.setRegistration(id, session)
		r.w.metrics.registered.Set(1)
		r.log.Info().Str("worker_id", id).Str("leader", target).Str("address", r.w.AdvertiseAddr()).
			Dur("heartbeat", interval).Msg("registered")
		next := r.heartbeat(ctx, target, id, interval)
		r.w.setRegistration("", "")
		r.w.metrics.registered.Set(0)
		target = next
	}
}

// register calls RegisterWorker at addr and returns the ID, the session (from the answer's
// header) and the heartbeat interval, or the error and the call's trailer.
func (r *registrar) register(ctx context.Context, addr string) (string, string, time.Duration, metadata.MD, error) {
	c, err := r.client(addr)
	if err != nil {
		return "", "", 0, nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	var header, trailer metadata.MD
	resp, err := c.RegisterWorker(cctx, &pb.RegisterWorkerRequest{
		Address: r.w.AdvertiseAddr(), Cores: int32(r.w.cfg.Cores), Name: r.w.cfg.Name,
	}, grpc.Header(&header), grpc.Trailer(&trailer))
	if err != nil {
		return "", "", 0, trailer, err
	}
	session := ""
	if v := header.Get(wire.SessionKey); len(v) > 0 {
		session = v[0]
	}
	if session == "" {
		r.log.Warn().Str("coordinator", addr).Msg("the leader sent no task session: this worker will refuse its tasks (a coordinator of an older version?)")
	}
	interval := r.w.cfg.HeartbeatInterval
	if interval <= 0 {
		interval = time.Duration(resp.GetHeartbeatIntervalMs()) * time.Millisecond
	}
	if interval <= 0 {
		interval = DefaultHeartbeatInterval
	}
	return resp.GetWorkerId(), session, interval, trailer, nil
}

// heartbeatTimeout is the deadline of one heartbeat at interval.
func heartbeatTimeout(interval time.Duration) time.Duration {
	return min(max(interval, heartbeatTimeoutMin), heartbeatTimeoutMax)
}

// heartbeat sends heartbeats to addr every interval until one fails in a way that needs a
// new registration, and returns the address to register with next: addr again when the
// leader forgot the worker, the leader a follower names, or "" to try another Join address
// (addr refused the connection, or heartbeatMisses heartbeats in a row timed out).
func (r *registrar) heartbeat(ctx context.Context, addr, id string, interval time.Duration) string {
	c, err := r.client(addr)
	if err != nil {
		return ""
	}
	timeout, misses := heartbeatTimeout(interval), 0
	for wait(ctx, interval) {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		var md metadata.MD
		_, err := c.Heartbeat(cctx, &pb.HeartbeatRequest{WorkerId: id}, grpc.Trailer(&md))
		cancel()
		if err == nil {
			r.fails, misses = 0, 0
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
			r.log.Info().Err(err).Str("coordinator", addr).Msg("lost leader: unreachable; asking the other coordinators")
			r.failed[addr] = r.now()
			return ""
		case codes.DeadlineExceeded:
			if misses++; misses >= heartbeatMisses {
				r.log.Info().Str("coordinator", addr).Int("missed", misses).Dur("timeout", timeout).
					Msg("lost leader: heartbeats time out; asking the other coordinators")
				r.failed[addr] = r.now()
				return ""
			}
		default:
			// Unauthenticated and the like: keep trying with backoff before looking for
			// another leader.
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
