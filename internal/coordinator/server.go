package coordinator

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/gpreduce/gpreduce/internal/auth"
	"github.com/gpreduce/gpreduce/internal/coordinator/store"
	"github.com/gpreduce/gpreduce/internal/shard"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// Timings of the server's background work.
const (
	memberSyncInterval = time.Second      // how often a member checks that its API address is recorded
	joinMaxBackoff     = 5 * time.Second  // longest pause between rounds of join attempts
	peerCallTimeout    = 10 * time.Second // bound of one call to another coordinator
	gracefulStop       = 2 * time.Second  // how long Close lets calls in flight finish
)

// ServerConfig configures a coordinator Server: one raft member with its gRPC API, the job
// runner (active while it leads) and the worker registry. ID, RaftAddr, APIAddr and DataDir
// are required; zero values elsewhere select defaults.
type ServerConfig struct {
	// ID is the member's raft server ID, unique and stable across restarts.
	ID string
	// RaftAddr is the host:port of the raft transport (port 0 picks a free port).
	RaftAddr string
	// RaftAdvertiseAddr is the raft address the other members dial, if it differs from
	// RaftAddr (for example when RaftAddr is 0.0.0.0:7000): host:port with a DNS name or
	// an IP (see store.Config.AdvertiseAddr).
	RaftAdvertiseAddr string
	// APIAddr is the host:port of the gRPC API (port 0 picks a free port; see APIAddr).
	APIAddr string
	// APIAdvertiseAddr is the API address clients, workers and the other members are sent
	// to, if it differs from the listening address. By default it is the listening address,
	// with an unspecified host (0.0.0.0) replaced by the raft advertise host.
	APIAdvertiseAddr string
	// DataDir holds the raft log, stable store and snapshots.
	DataDir string
	// Bootstrap makes a member without raft state bootstrap a single-node cluster.
	Bootstrap bool
	// Join lists API addresses of existing members. A member without raft state (and without
	// Bootstrap) asks them, following redirects to the leader, to add it as a voter, and
	// OpenServer returns once it was added.
	Join []string
	// BootstrapIfEmpty, with Join, makes a member without raft state bootstrap a new
	// cluster only if none of the Join addresses belongs to a cluster; otherwise it joins.
	// Give it to one member (a StatefulSet's ordinal 0): a cold start bootstraps there, and
	// that member rejoins, rather than splitting the cluster, when its data is lost.
	BootstrapIfEmpty bool
	// Token is the API token clients (and the other members) must present; JoinToken the
	// token of workers, also sent to the workers on every task. Empty tokens require nothing.
	Token, JoinToken string
	// ServerTLS, if set, serves the API over TLS; ClientTLS, if set, is used to call
	// workers and the other members. When ServerTLS requires verified client certificates
	// (mutual TLS), the raft traffic uses both too (see store.RaftSecurity).
	ServerTLS, ClientTLS *tls.Config
	// RaftSecret authenticates and encrypts the raft traffic (see store.RaftSecurity). A cluster of
	// more than one member needs it or mutual TLS; without either the member must be alone on
	// a loopback raft address, and OpenServer refuses Join.
	RaftSecret []byte
	// MetricsAddr, if set, is where Run serves Prometheus metrics at /metrics.
	MetricsAddr string
	// HeartbeatTimeout is how long a worker stays in the pool after its last heartbeat
	// (default DefaultHeartbeatTimeout); workers are asked to beat every third of it.
	HeartbeatTimeout time.Duration
	// CheckpointInterval is the least time between two optimizer checkpoints of a job
	// (default DefaultCheckpointInterval); phase checkpoints are always saved.
	CheckpointInterval time.Duration
	// TaskTimeout bounds one task attempt on a worker (default remote.DefaultTaskTimeout).
	TaskTimeout time.Duration
	// StragglerFactor and StragglerFloor set when a task counts as a straggler and is run
	// again on another worker (see remote.Config; defaults remote.DefaultStragglerFactor and
	// remote.DefaultStragglerFloor; a negative factor turns backups off).
	StragglerFactor float64
	StragglerFloor  time.Duration
	// ReduceMemory bounds, in bytes, the task results a job's rounds hold while they wait for
	// the shards before them to be merged (remote.Config.ReduceMemory: 0 selects
	// remote.DefaultReduceMemory, a negative value no bound beyond the task window).
	ReduceMemory int64
	// RetainJobs, if positive, keeps only the newest RetainJobs finished jobs: the leader
	// deletes older ones with their models, checkpoints and events from every member.
	RetainJobs int
	// RetainFor, if positive, deletes finished jobs (as RetainJobs does) once they finished
	// more than RetainFor ago.
	RetainFor time.Duration
	// Logger receives the server's, the runner's and raft's logs.
	Logger zerolog.Logger
	// Raft tunes the raft node (timeouts, snapshots, size limits); see store.Config.
	Raft RaftTuning
	// Data reads the jobs' data sources when the leader plans them: which files and URLs
	// may be read (Data.Access; the zero value allows all, so a served coordinator should
	// be confined with shard.NewAccess) and the bounds of reading them.
	Data shard.Reader
	// PlanTimeout bounds planning one job's data source (default DefaultPlanTimeout).
	PlanTimeout time.Duration
}

// Defaults of the RaftTuning size limits (those of store.Config).
const (
	DefaultMaxCheckpointBytes = store.DefaultMaxCheckpointBytes
	DefaultMaxModelBytes      = store.DefaultMaxModelBytes
)

// RaftTuning holds the store.Config fields that tune raft; zero values select its defaults.
type RaftTuning struct {
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	TransportTimeout   time.Duration
	ApplyTimeout       time.Duration
	SnapshotThreshold  uint64
	SnapshotBytes      int64
	SnapshotInterval   time.Duration
	TrailingLogs       uint64
	MaxCheckpointBytes int64
	MaxModelBytes      int64
	ModelChunkBytes    int
}

func (c *ServerConfig) nodeConfig() store.Config {
	r := c.Raft
	sec := store.RaftSecurity{Secret: c.RaftSecret}
	if m := (store.RaftSecurity{ServerTLS: c.ServerTLS, ClientTLS: c.ClientTLS}); m.MutualTLS() {
		sec.ServerTLS, sec.ClientTLS = m.ServerTLS, m.ClientTLS
	}
	return store.Config{
		ID: c.ID, RaftAddr: c.RaftAddr, AdvertiseAddr: c.RaftAdvertiseAddr, DataDir: c.DataDir,
		Bootstrap: c.Bootstrap, Logger: c.Logger, Security: sec,
		ApplyTimeout: r.ApplyTimeout, MaxCheckpointBytes: r.MaxCheckpointBytes, MaxModelBytes: r.MaxModelBytes,
		ModelChunkBytes: r.ModelChunkBytes, SnapshotThreshold: r.SnapshotThreshold, SnapshotBytes: r.SnapshotBytes,
		SnapshotInterval: r.SnapshotInterval, TrailingLogs: r.TrailingLogs,
		HeartbeatTimeout: r.HeartbeatTimeout, ElectionTimeout: r.ElectionTimeout,
		LeaderLeaseTimeout: r.LeaderLeaseTimeout, CommitTimeout: r.CommitTimeout, TransportTimeout: r.TransportTimeout,
	}
}

// Server is a coordinator: a raft member serving the Coordinator gRPC API, running the jobs
// while it leads, and keeping the worker pool.
type Server struct {
	pb.UnimplementedCoordinatorServer

	cfg ServerConfig
	log zerolog.Logger
	// node is this member's raft node, used only for its life cycle (bootstrap, readiness,
	// close) and to serve its blobs; state is the same node as everything else (the API, the
	// runner, the member sync) uses it, through the narrow store.Store interface.
	node      *store.Node
	state     store.Store
	pool      *registry
	events    *eventBatcher
	runner    *runner
	metrics   *metrics
	models    modelCache
	workers   *connCache // to the workers, with the join token
	peers     *connCache // to the other members, with the API token
	grpc      *grpc.Server
	health    *health.Server // the standard gRPC health service
	lis       net.Listener
	advertise string // this member's API address as recorded for the others

	bgCtx    context.Context
	bgCancel context.CancelFunc
	done     <-chan struct{} // closed when Close starts
	bg       sync.WaitGroup  // background goroutines started by OpenServer
	serveErr chan error

	mu      sync.Mutex // guards closed, running, runs.Add
	closed  bool
	running bool
	runs    sync.WaitGroup
	closeMu sync.Once
	closeEr error
}

// OpenServer opens the raft node in cfg.DataDir, starts the gRPC API on cfg.APIAddr and,
// for a new member with cfg.Join set, joins the cluster (returning once added, or with an
// error when ctx ends first). A bootstrapping or restarted member records its API address
// in the replicated state in the background. Call Run to run jobs and Close to stop.
func OpenServer(ctx context.Context, cfg ServerConfig) (_ *Server, err error) {
	if cfg.APIAddr == "" {
		return nil, fmt.Errorf("open server: APIAddr is required: %w", store.ErrInvalidArgument)
	}
	log := cfg.Logger.With().Str("node", cfg.ID).Logger()
	nodeCfg := cfg.nodeConfig()
	if len(cfg.Join) > 0 && !cfg.Bootstrap && !nodeCfg.Security.Enabled() {
		return nil, fmt.Errorf("open server %s: cannot join a cluster: %w", cfg.ID, store.ErrInsecureRaft)
	}
	lis, err := net.Listen("tcp", cfg.APIAddr)
	if err != nil {
		return nil, fmt.Errorf("open server %s: API listener: %w", cfg.ID, err)
	}
	peers := &blobPeers{}
	nodeCfg.FetchBlob = peers.fetch
	node, err := store.Open(ctx, nodeCfg)
	if err != nil {
		_ = lis.Close()
		return nil, fmt.Errorf("open server: %w", err)
	}
	s := &Server{
		cfg: cfg, log: log, node: node, state: node, lis: lis,
		workers:  newConnCache(cfg.JoinToken, cfg.ClientTLS),
		peers:    newConnCache(cfg.Token, cfg.ClientTLS),
		serveErr: make(chan error, 1),
	}
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())
	s.done = s.bgCtx.Done()
	s.advertise = advertiseAPI(cfg.APIAdvertiseAddr, lis.Addr().String(), node.Addr())
	peers.s.Store(s)
	s.events = newEventBatcher(s.state, log.With().Str("component", "events").Logger())
	s.pool = newRegistry(cfg.HeartbeatTimeout, log.With().Str("component", "registry").Logger())
	s.pool.onDrop = s.workers.forget
	s.metrics = newMetrics(node, s.pool)
	if err := exportRaftMetrics(s.metrics.reg); err != nil {
		log.Warn().Err(err).Msg("raft metrics are not exported")
	}
	ckInterval := cfg.CheckpointInterval
	if ckInterval <= 0 {
		ckInterval = DefaultCheckpointInterval
	}
	s.runner = &runner{
		node: s.state, pool: s.pool, events: s.events, dial: s.workers.worker, metrics: s.metrics,
		log: log.With().Str("component", "runner").Logger(), ckInterval: ckInterval, taskTimeout: cfg.TaskTimeout,
		stragglerFactor: cfg.StragglerFactor, stragglerFloor: cfg.StragglerFloor, reduceMemory: cfg.ReduceMemory,
		data: cfg.Data, planTimeout: cfg.PlanTimeout,
	}
	s.warnSecurity()

	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(maxMessageBytes), grpc.MaxSendMsgSize(maxMessageBytes),
		grpc.ChainUnaryInterceptor(s.metrics.grpc.unary, auth.UnaryServerInterceptor(auth.OpenHealth(policy(cfg.Token, cfg.JoinToken)), log)),
		grpc.ChainStreamInterceptor(s.metrics.grpc.stream, auth.StreamServerInterceptor(auth.OpenHealth(policy(cfg.Token, cfg.JoinToken)), log)),
	}
	if cfg.ServerTLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg.ServerTLS)))
	}
	s.grpc = grpc.NewServer(opts...)
	pb.RegisterCoordinatorServer(s.grpc, s)
	s.health = newHealthServer()
	healthpb.RegisterHealthServer(s.grpc, s.health)
	s.bg.Go(func() {
		if err := s.grpc.Serve(lis); err != nil {
			s.serveErr <- err
		}
	})
	s.bg.Go(func() { s.syncMember(s.bgCtx) })
	s.bg.Go(func() { s.watchHealth(s.bgCtx) })
	log.Info().Str("api_addr", s.APIAddr()).Str("advertise", s.advertise).Str("raft_addr", node.Addr()).
		Bool("tls", cfg.ServerTLS != nil).Msg("coordinator API serving")

	if len(cfg.Join) > 0 && !cfg.Bootstrap && !node.HadState() {
		join := s.join
		if cfg.BootstrapIfEmpty {
			join = s.bootstrapOrJoin
		}
		if err := join(ctx); err != nil {
			return nil, errors.Join(err, s.Close())
		}
	}
	return s, nil
}

// warnSecurity logs what is left open.
func (s *Server) warnSecurity() {
	switch {
	case s.cfg.Token == "" && s.cfg.JoinToken == "":
		s.log.Warn().Msg("no API token and no join token configured: anyone who can reach the API can submit, cancel and read models, and join as a worker")
	case s.cfg.Token == "":
		s.log.Warn().Msg("no API token configured: anyone who can reach the API can submit, cancel and read models")
	case s.cfg.JoinToken == "":
		s.log.Warn().Msg("no join token configured: anyone who can reach the API can join as a worker")
	}
	if s.cfg.ServerTLS == nil && (s.cfg.Token != "" || s.cfg.JoinToken != "") {
		s.log.Warn().Msg("tokens configured without TLS: they travel in clear text")
	}
}

// advertiseAPI is the API address recorded for the other members: adv if set, else the
// listening address with an unspecified host replaced by the raft advertise host (or the
// host name).
func advertiseAPI(adv, listen, raftAddr string) string {
	if adv != "" {
		return adv
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
		return listen
	}
	if rh, _, err := net.SplitHostPort(raftAddr); err == nil {
		if ip := net.ParseIP(rh); ip != nil && !ip.IsUnspecified() {
			return net.JoinHostPort(rh, port)
		}
	}
	if h, err := os.Hostname(); err == nil {
		return net.JoinHostPort(h, port)
	}
	return listen
}

// APIAddr returns the address the API listens on (with the real port when APIAddr had
// port 0).
func (s *Server) APIAddr() string { return s.lis.Addr().String() }

// Node returns the server's raft node (the replicated state).
func (s *Server) Node() *store.Node { return s.node }

// MetricsHandler serves the server's Prometheus metrics (as Run does on MetricsAddr).
func (s *Server) MetricsHandler() http.Handler { return s.metrics.handler() }

// Run runs the job runner (active while this member leads), the worker registry's sweep and,
// if MetricsAddr is set, the metrics endpoint, until ctx ends or Close is called. It
// returns nil then, or the error that stopped it (the metrics listener or the API server
// failing).
func (s *Server) Run(ctx context.Context) error {
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return fmt.Errorf("run server %s: %w", s.cfg.ID, store.ErrClosed)
	case s.running:
		s.mu.Unlock()
		return fmt.Errorf("run server %s: already running", s.cfg.ID)
	}
	s.running = true
	s.runs.Add(1)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.running = false
		s.mu.Unlock()
		s.runs.Done()
	}()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.bgCtx, cancel)()

	var mlis net.Listener
	if s.cfg.MetricsAddr != "" {
		var err error
		if mlis, err = net.Listen("tcp", s.cfg.MetricsAddr); err != nil {
			return fmt.Errorf("run server %s: metrics listener: %w", s.cfg.ID, err)
		}
		s.log.Info().Str("addr", mlis.Addr().String()).Msg("serving /metrics, /healthz and /readyz")
	}
	errc := make(chan error, 2)
	var wg sync.WaitGroup
	wg.Go(func() { s.runner.run(ctx) })
	wg.Go(func() { s.pool.runSweeper(ctx) })
	wg.Go(func() { s.events.run(ctx) })
	wg.Go(func() { s.runRetention(ctx) })
	if mlis != nil {
		wg.Go(func() {
			if err := serveHTTP(ctx, mlis, s.HealthHandler()); err != nil {
				errc <- fmt.Errorf("metrics: %w", err)
				cancel()
			}
		})
	}
	select {
	case <-ctx.Done():
	case err := <-s.serveErr:
		errc <- fmt.Errorf("API server: %w", err)
		cancel()
	}
	wg.Wait()
	select {
	case err := <-errc:
		return fmt.Errorf("run server %s: %w", s.cfg.ID, err)
	default:
		return nil
	}
}

// Close stops the server: the job runs (without failing them; the next leader resumes
// them), the background work, the raft node (a leader hands leadership over first) and the
// API.
func (s *Server) Close() error {
	s.closeMu.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.bgCancel()
		s.runs.Wait()
		var errs []error
		if err := s.node.Close(); err != nil {
			errs = append(errs, err)
		}
		stopped := make(chan struct{})
		go func() {
			s.grpc.GracefulStop()
			close(stopped)
		}()
		select {
		case <-stopped:
		case <-time.After(gracefulStop):
			s.grpc.Stop()
			<-stopped
		}
		s.bg.Wait()
		s.workers.close()
		s.peers.close()
		if err := errors.Join(errs...); err != nil {
			s.closeEr = fmt.Errorf("close server %s: %w", s.cfg.ID, err)
		}
		s.log.Info().Msg("coordinator closed")
	})
	return s.closeEr
}

// syncMember keeps this member's API address recorded in the replicated state: the leader
// records its own, a follower whose address is missing or stale asks the leader to (by
// joining again, which for a member is a no-op besides that).
func (s *Server) syncMember(ctx context.Context) {
	changes := s.state.LeadershipChanges()
	t := time.NewTicker(memberSyncInterval)
	defer t.Stop()
	for {
		if s.state.MemberAPI(s.state.ID()) != s.advertise {
			if err := s.recordSelf(ctx); err != nil && ctx.Err() == nil {
				s.log.Debug().Err(err).Msg("recording this member's API address failed; will retry")
			}
		}
		select {
		case <-ctx.Done():
			return
		case _, ok := <-changes:
			if !ok {
				changes = nil
			}
		case <-t.C:
		}
	}
}

func (s *Server) recordSelf(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, peerCallTimeout)
	defer cancel()
	if s.state.IsLeader() {
		return s.state.SetMemberAPI(ctx, s.state.ID(), s.advertise)
	}
	leader := s.state.LeaderAPI()
	if leader == "" || leader == s.advertise {
		return nil
	}
	servers, err := s.state.Servers(ctx)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(servers, func(m store.Member) bool { return m.ID == s.state.ID() }) {
		return nil // not (or no longer) a member: never re-add ourselves
	}
	return s.joinVia(ctx, leader)
}

// join asks the members in cfg.Join to add this node, until one does or ctx ends.
func (s *Server) join(ctx context.Context) error {
	delay := 100 * time.Millisecond
	for {
		var lastErr error
		for _, addr := range s.cfg.Join {
			if addr == s.advertise || addr == s.APIAddr() {
				continue
			}
			err := s.joinVia(ctx, addr)
			if err == nil {
				s.log.Info().Str("via", addr).Msg("joined the cluster")
				return nil
			}
			lastErr = err
		}
		if lastErr == nil {
			return fmt.Errorf("join: no member to join through besides this one in %v", s.cfg.Join)
		}
		s.log.Warn().Err(lastErr).Dur("retry_in", delay).Msg("joining the cluster failed")
		select {
		case <-ctx.Done():
			return fmt.Errorf("join the cluster through %v: %w (last error: %w)", s.cfg.Join, ctx.Err(), lastErr)
		case <-time.After(delay):
		}
		delay = min(2*delay, joinMaxBackoff)
	}
}

// joinVia calls JoinCluster at addr, following redirects to the leader.
func (s *Server) joinVia(ctx context.Context, addr string) error {
	req := &pb.JoinClusterRequest{Id: s.node.ID(), RaftAddress: s.node.Addr(), ApiAddress: s.advertise}
	for hop := 0; ; hop++ {
		c, err := s.peers.coordinator(addr)
		if err != nil {
			return err
		}
		var trailer metadata.MD
		cctx, cancel := context.WithTimeout(ctx, peerCallTimeout)
		cctx = withMemberProof(cctx, s.cfg.RaftSecret, "JoinCluster", req.Id, req.RaftAddress, req.ApiAddress)
		_, err = c.JoinCluster(cctx, req, grpc.Trailer(&trailer))
		cancel()
		if err == nil {
			return nil
		}
		if leader := trailer.Get(LeaderTrailer); status.Code(err) == codes.FailedPrecondition && len(leader) > 0 && leader[0] != addr && hop < 3 {
			addr = leader[0]
			continue
		}
		return fmt.Errorf("join through %s: %w", addr, err)
	}
}
