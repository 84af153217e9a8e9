package coordinator

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/gpreduce/gpreduce/internal/auth"
	"github.com/gpreduce/gpreduce/internal/model"
	"github.com/gpreduce/gpreduce/internal/wire"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// LeaderTrailer is the trailer metadata key in which a follower names the leader's API
// address when it refuses a call that needs the leader.
const LeaderTrailer = "gpreduce-leader"

// modelChunkBytes is the size of the chunks GetModel streams.
const modelChunkBytes = 1 << 20

// watchRecheck is how often WatchJob checks leadership and the job's state between events.
const watchRecheck = 500 * time.Millisecond

// modelCacheSize is how many decoded models Predict keeps.
const modelCacheSize = 8

// followerCatchUp bounds how long a follower waits for the leader's read index and for its
// state to apply it before it sends a read to the leader.
const followerCatchUp = 3 * time.Second

// validJobID reports whether a client-chosen job ID is 1 to 128 letters, digits, '.', '_'
// or '-', starting with a letter or digit.
func validJobID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i, c := range id {
		alnum := (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		if !alnum && (i == 0 || (c != '.' && c != '_' && c != '-')) {
			return false
		}
	}
	return true
}

var _ pb.CoordinatorServer = (*Server)(nil)

// policy is the API's auth policy: worker calls need the join token, every other call the
// API token; an empty token requires nothing.
func policy(token, joinToken string) auth.Policy {
	api, join := auth.Static(token), auth.Static(joinToken)
	return func(method string) []string {
		switch method {
		case pb.Coordinator_RegisterWorker_FullMethodName, pb.Coordinator_Heartbeat_FullMethodName:
			return join(method)
		}
		return api(method)
	}
}

// notLeader is the answer of a follower to a call that needs the leader: FailedPrecondition
// naming the leader's API address, also set in the LeaderTrailer trailer, or Unavailable
// while no leader is known. setTrailer sets the trailer on the call.
func (s *Server) notLeader(setTrailer func(metadata.MD)) error {
	addr := s.node.LeaderAPI()
	if addr == "" {
		return status.Error(codes.Unavailable, "not the leader, and no leader is known yet (election in progress); retry shortly")
	}
	setTrailer(metadata.Pairs(LeaderTrailer, addr))
	return status.Errorf(codes.FailedPrecondition, "not the leader; leader is %s", addr)
}

func unaryTrailer(ctx context.Context) func(metadata.MD) {
	return func(md metadata.MD) { _ = grpc.SetTrailer(ctx, md) }
}

// requireLeader returns nil on the leader and the redirect otherwise.
func (s *Server) requireLeader(ctx context.Context) error {
	if s.node.IsLeader() {
		return nil
	}
	return s.notLeader(unaryTrailer(ctx))
}

// toStatus maps an error of the node to a gRPC status.
func (s *Server) toStatus(setTrailer func(metadata.MD), err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	code := codes.Internal
	switch {
	case errors.Is(err, ErrNotLeader):
		return s.notLeader(setTrailer)
	case errors.Is(err, ErrJobNotFound), errors.Is(err, ErrWorkerNotFound):
		code = codes.NotFound
	case errors.Is(err, ErrJobExists):
		code = codes.AlreadyExists
	case errors.Is(err, ErrInvalidTransition), errors.Is(err, ErrJobNotRunning), errors.Is(err, ErrNoModel), errors.Is(err, ErrInsecureRaft),
		errors.Is(err, ErrJobActive):
		code = codes.FailedPrecondition
	case errors.Is(err, ErrInvalidArgument):
		code = codes.InvalidArgument
	case errors.Is(err, ErrModelTooLarge), errors.Is(err, ErrCheckpointTooLarge):
		code = codes.ResourceExhausted
	case errors.Is(err, ErrLeadershipLost), errors.Is(err, ErrClosed):
		code = codes.Unavailable
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	}
	return status.Error(code, err.Error())
}

func (s *Server) unaryStatus(ctx context.Context, err error) error {
	return s.toStatus(unaryTrailer(ctx), err)
}

// SubmitJob validates the spec, stores the job and starts it.
func (s *Server) SubmitJob(ctx context.Context, req *pb.SubmitJobRequest) (*pb.Job, error) {
	if err := s.requireLeader(ctx); err != nil {
		return nil, err
	}
	plan, err := planFromSpec(req.GetSpec())
	if err != nil {
		return nil, err
	}
	id := req.GetId()
	if id == "" {
		id = newJobID()
	} else if !validJobID(id) {
		return nil, status.Errorf(codes.InvalidArgument,
			"id: %q is not a valid job ID: use 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit", id)
	}
	spec, err := encodeSpec(specFromPlan(plan))
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := s.node.SubmitJob(ctx, id, spec, time.Time{}); err != nil {
		return nil, s.unaryStatus(ctx, err)
	}
	s.runner.start(id)
	s.log.Info().Str("job", id).Str("method", plan.Spec.Method).Str("data", plan.Source.URI).Msg("job submitted")
	return s.jobMessage(id)
}

// newJobID returns a random job ID.
func newJobID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "job-" + hex.EncodeToString(b)
}

func (s *Server) jobMessage(id string) (*pb.Job, error) {
	j, err := s.node.fsm.jobView(id)
	if err != nil {
		return nil, status.Error(codes.NotFound, err.Error())
	}
	out := jobProto(j)
	// The status names the slow workers: the replicated straggler events become warnings.
	if evs, _, err := s.node.fsm.events(id, 0); err == nil {
		for _, ev := range evs {
			if ev.Phase == stragglerPhase {
				out.Warnings = append(out.Warnings, &pb.Warning{Code: stragglerPhase, Message: ev.Message})
			}
		}
	}
	return out, nil
}

// jobProto is the API form of j.
func jobProto(j Job) *pb.Job {
	out := &pb.Job{
		Id: j.ID, State: stateProto(j.State), Error: j.Error,
		CreatedUnixNano: j.CreatedAt.UnixNano(), UpdatedUnixNano: j.UpdatedAt.UnixNano(),
		Iteration: int32(j.Iteration), Objective: j.Objective, ModelBytes: j.ModelSize,
	}
	if js, err := decodeSpec(j.Spec); err == nil {
		out.Spec = js
	}
	var m jobMetrics
	if len(j.Metrics) > 0 && json.Unmarshal(j.Metrics, &m) == nil {
		out.Hyperparameters = &pb.Hyperparameters{
			Lengthscales: m.Hyperparameters.Lengthscales, SignalVariance: m.Hyperparameters.SignalVariance,
			NoiseVariance: m.Hyperparameters.NoiseVariance,
		}
		out.NTrain, out.LogLikelihood, out.TrainSeconds = int64(m.NTrain), m.LogLikelihood, m.TrainSeconds
		out.Iteration = int32(m.Iterations)
		if c := m.MethodChoice; c != nil {
			out.MethodChoice = &pb.MethodChoice{Method: c.Method, Reason: c.Reason}
		}
		for _, w := range m.Warnings {
			out.Warnings = append(out.Warnings, &pb.Warning{Code: w.Code, Message: w.Message})
		}
	}
	return out
}

func stateProto(s JobState) pb.JobState {
	switch s {
	case JobPending:
		return pb.JobState_JOB_STATE_PENDING
	case JobRunning:
		return pb.JobState_JOB_STATE_RUNNING
	case JobSucceeded:
		return pb.JobState_JOB_STATE_SUCCEEDED
	case JobFailed:
		return pb.JobState_JOB_STATE_FAILED
	case JobCanceled:
		return pb.JobState_JOB_STATE_CANCELED
	}
	return pb.JobState_JOB_STATE_UNSPECIFIED
}

// GetJob returns a job from this member's state, once it reflects every change committed
// before the call (see readBarrier).
func (s *Server) GetJob(ctx context.Context, req *pb.GetJobRequest) (*pb.Job, error) {
	if err := s.readBarrier(ctx, unaryTrailer(ctx)); err != nil {
		return nil, err
	}
	return s.jobMessage(req.GetId())
}

// ListJobs lists the jobs in this member's state, oldest first, once it reflects every
// change committed before the call.
func (s *Server) ListJobs(ctx context.Context, _ *pb.ListJobsRequest) (*pb.ListJobsResponse, error) {
	if err := s.readBarrier(ctx, unaryTrailer(ctx)); err != nil {
		return nil, err
	}
	views := s.node.fsm.jobViews()
	out := &pb.ListJobsResponse{Jobs: make([]*pb.Job, len(views))}
	for i, j := range views {
		out.Jobs[i] = jobProto(j)
	}
	return out, nil
}

// CancelJob cancels a pending or running job and stops its run.
func (s *Server) CancelJob(ctx context.Context, req *pb.CancelJobRequest) (*pb.Job, error) {
	if err := s.requireLeader(ctx); err != nil {
		return nil, err
	}
	id := req.GetId()
	if err := s.node.CancelJob(ctx, id, time.Time{}); err != nil {
		if errors.Is(err, ErrInvalidTransition) {
			if j, jerr := s.node.fsm.jobView(id); jerr == nil {
				return nil, status.Errorf(codes.FailedPrecondition, "job %s already %s: only pending or running jobs can be canceled", id, j.State)
			}
		}
		return nil, s.unaryStatus(ctx, err)
	}
	s.runner.cancel(id)
	s.log.Info().Str("job", id).Msg("job canceled")
	return s.jobMessage(id)
}

// DeleteJob removes finished jobs with their models, checkpoints and events from every
// member.
func (s *Server) DeleteJob(ctx context.Context, req *pb.DeleteJobRequest) (*pb.DeleteJobResponse, error) {
	if err := s.requireLeader(ctx); err != nil {
		return nil, err
	}
	ids := req.GetIds()
	if len(ids) == 0 {
		return nil, status.Error(codes.InvalidArgument, "ids: empty; give the IDs of the finished jobs to delete")
	}
	if err := s.node.DeleteJobs(ctx, ids, time.Time{}); err != nil {
		if errors.Is(err, ErrJobActive) {
			return nil, status.Errorf(codes.FailedPrecondition, "%v (coordinator cancel ID, then delete)", err)
		}
		return nil, s.unaryStatus(ctx, err)
	}
	s.log.Info().Strs("jobs", ids).Msg("jobs deleted")
	return &pb.DeleteJobResponse{}, nil
}

// ReadIndex returns the leader's read index (see Node.ReadIndex).
func (s *Server) ReadIndex(ctx context.Context, _ *pb.ReadIndexRequest) (*pb.ReadIndexResponse, error) {
	if err := s.requireLeader(ctx); err != nil {
		return nil, err
	}
	idx, err := s.node.ReadIndex(ctx)
	if err != nil {
		return nil, s.unaryStatus(ctx, err)
	}
	return &pb.ReadIndexResponse{Index: idx}, nil
}

// readBarrier returns once this member's state reflects every change committed before the
// call, so a read never answers "not found" for a job that exists or "running" for one that
// finished. The leader runs a barrier; a follower asks the leader for its read index
// (ReadIndex) and waits until its own state has applied it. A follower that knows no
// leader answers Unavailable; one that cannot reach the leader, or does not catch up within
// followerCatchUp, points the caller to the leader (FailedPrecondition with the trailer).
func (s *Server) readBarrier(ctx context.Context, setTrailer func(metadata.MD)) error {
	if s.node.IsLeader() {
		_, err := s.node.ReadIndex(ctx)
		return s.toStatus(setTrailer, err)
	}
	leader := s.node.LeaderAPI()
	if leader == "" || leader == s.advertise {
		return s.notLeader(setTrailer)
	}
	c, err := s.peers.coordinator(leader)
	if err != nil {
		return s.notLeader(setTrailer)
	}
	cctx, cancel := context.WithTimeout(ctx, followerCatchUp)
	defer cancel()
	resp, err := c.ReadIndex(cctx, &pb.ReadIndexRequest{})
	if err != nil {
		s.log.Debug().Err(err).Str("leader", leader).Msg("read index from the leader failed; redirecting the read")
		return s.notLeader(setTrailer)
	}
	if err := s.node.WaitApplied(cctx, resp.GetIndex()); err != nil {
		s.log.Debug().Err(err).Msg("not caught up with the leader; redirecting the read")
		return s.notLeader(setTrailer)
	}
	return nil
}

// WatchJob streams the job's recorded events (replicated, so they include those of earlier
// leaders) and then new ones until the job finishes. The leader serves it; the stream ends
// with the redirect if leadership moves.
func (s *Server) WatchJob(req *pb.WatchJobRequest, stream grpc.ServerStreamingServer[pb.JobEvent]) error {
	ctx := stream.Context()
	trailer := func(md metadata.MD) { stream.SetTrailer(md) }
	if !s.node.IsLeader() {
		return s.notLeader(trailer)
	}
	if err := s.readBarrier(ctx, trailer); err != nil {
		return err
	}
	id := req.GetId()
	if _, err := s.node.fsm.jobView(id); err != nil {
		return s.toStatus(trailer, err)
	}
	tick := time.NewTicker(watchRecheck)
	defer tick.Stop()
	var from uint64
	for {
		changed := s.node.fsm.updates()
		evs, next, err := s.node.fsm.events(id, from)
		if err != nil {
			return s.toStatus(trailer, err)
		}
		from = next
		for _, ev := range evs {
			if err := stream.Send(ev.proto()); err != nil {
				return err
			}
			if ev.State.Finished() {
				return nil
			}
		}
		// The job may have finished without an event here (under another leader).
		j, err := s.node.fsm.jobView(id)
		if err != nil {
			return s.toStatus(trailer, err)
		}
		if j.State.Finished() {
			return stream.Send(&pb.JobEvent{JobId: id, State: stateProto(j.State), Phase: "state",
				Iteration: int32(j.Iteration), Objective: j.Objective, Message: j.Error, UnixNano: j.UpdatedAt.UnixNano()})
		}
		if !s.node.IsLeader() {
			return s.notLeader(trailer)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-s.done:
			return status.Error(codes.Unavailable, "the coordinator is shutting down; watch again at another member")
		case <-s.runner.leading(): // nil (blocking) until the runner's term starts
			return s.notLeader(trailer)
		case <-tick.C:
		}
	}
}

// Predict predicts with a job's model.
func (s *Server) Predict(ctx context.Context, req *pb.PredictRequest) (*pb.PredictResponse, error) {
	if err := s.readBarrier(ctx, unaryTrailer(ctx)); err != nil {
		return nil, err
	}
	m, err := s.models.get(s.node, req.GetJobId())
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
	return &pb.PredictResponse{Mean: p.Mean, LatentVar: p.LatentVar, NoisyVar: p.NoisyVar, OutsideDomain: p.Outside}, nil
}

// GetModel streams a job's encoded model in chunks of 1 MiB.
func (s *Server) GetModel(req *pb.GetModelRequest, stream grpc.ServerStreamingServer[pb.ModelChunk]) error {
	trailer := func(md metadata.MD) { stream.SetTrailer(md) }
	if err := s.readBarrier(stream.Context(), trailer); err != nil {
		return err
	}
	b, err := s.node.Model(req.GetJobId())
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

// JoinCluster adds a coordinator as a voter and records its API address. With a raft secret
// configured, the caller must prove it (see checkMemberProof).
func (s *Server) JoinCluster(ctx context.Context, req *pb.JoinClusterRequest) (*pb.JoinClusterResponse, error) {
	if err := s.requireLeader(ctx); err != nil {
		return nil, err
	}
	id, raftAddr, apiAddr := req.GetId(), req.GetRaftAddress(), req.GetApiAddress()
	if id == "" || raftAddr == "" || apiAddr == "" {
		return nil, status.Error(codes.InvalidArgument, "id, raft_address and api_address are all required")
	}
	if err := s.checkMemberProof(ctx, "JoinCluster", id, raftAddr, apiAddr); err != nil {
		return nil, err
	}
	if err := s.node.AddVoter(ctx, id, raftAddr); err != nil {
		return nil, s.unaryStatus(ctx, err)
	}
	if err := s.node.SetMemberAPI(ctx, id, apiAddr); err != nil {
		return nil, s.unaryStatus(ctx, err)
	}
	s.log.Info().Str("member", id).Str("raft_addr", raftAddr).Str("api_addr", apiAddr).Msg("member joined")
	return &pb.JoinClusterResponse{}, nil
}

// RemoveMember removes a coordinator from the raft configuration. With a raft secret
// configured, the caller must prove it (see checkMemberProof).
func (s *Server) RemoveMember(ctx context.Context, req *pb.RemoveMemberRequest) (*pb.RemoveMemberResponse, error) {
	if err := s.requireLeader(ctx); err != nil {
		return nil, err
	}
	id := req.GetId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "id: empty; give the server ID of the member to remove")
	}
	if err := s.checkMemberProof(ctx, "RemoveMember", id, "", ""); err != nil {
		return nil, err
	}
	if id == s.node.ID() {
		// The leader steps down once its removal commits, so forget its address first.
		if err := s.node.ForgetMemberAPI(ctx, id); err != nil {
			return nil, s.unaryStatus(ctx, err)
		}
		if err := s.node.RemoveServer(ctx, id); err != nil {
			return nil, s.unaryStatus(ctx, err)
		}
		return &pb.RemoveMemberResponse{}, nil
	}
	if err := s.node.RemoveServer(ctx, id); err != nil {
		return nil, s.unaryStatus(ctx, err)
	}
	if err := s.node.ForgetMemberAPI(ctx, id); err != nil {
		return nil, s.unaryStatus(ctx, err)
	}
	s.log.Info().Str("member", id).Msg("member removed")
	return &pb.RemoveMemberResponse{}, nil
}

// ListMembers lists the raft members with their API addresses.
func (s *Server) ListMembers(ctx context.Context, _ *pb.ListMembersRequest) (*pb.ListMembersResponse, error) {
	servers, err := s.node.Servers(ctx)
	if err != nil {
		return nil, s.unaryStatus(ctx, err)
	}
	apis := s.node.MemberAPIs()
	out := &pb.ListMembersResponse{}
	for _, m := range servers {
		out.Members = append(out.Members, &pb.Member{Id: m.ID, RaftAddress: m.Addr, ApiAddress: apis[m.ID], Leader: m.Leader})
	}
	return out, nil
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
func (c *modelCache) get(n *Node, id string) (*model.Model, error) {
	j, err := n.fsm.jobView(id)
	if err != nil {
		return nil, err
	}
	if j.ModelHash == "" {
		return nil, fmt.Errorf("job %s is %s and has no model yet: %w", id, j.State, ErrNoModel)
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
