package worker

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/gpreduce/gpreduce/internal/auth"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/wire"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// Defaults of Config.
const (
	// DefaultCacheBytes is the memory budget of the shard cache.
	DefaultCacheBytes = 4 << 30
	// DefaultHeartbeatInterval is used when neither the config nor the leader sets one.
	DefaultHeartbeatInterval = 2 * time.Second
	// MaxMessageBytes bounds gRPC messages both ways: Gram statistics are s^2 doubles.
	MaxMessageBytes = 1 << 30
	// DefaultDrainTimeout is how long Run waits for running calls when it stops, before
	// cutting them off.
	DefaultDrainTimeout = 10 * time.Second
)

// Config configures a worker.
type Config struct {
	// Join lists coordinator API addresses (host:port); any of them will do, since
	// followers point to the leader.
	Join []string
	// Listen is the host:port of the Worker service (port 0 picks a free port).
	Listen string
	// Advertise is the address coordinators dial. Default: the listen address, with the
	// host name in place of an unspecified host (":7000", "0.0.0.0:7000").
	Advertise string
	// Name is a stable name for the worker (default: the host name).
	Name string
	// Cores bounds the tasks and shard loads running at once (default: runtime.NumCPU()).
	Cores int
	// CacheDir, if set, is where shards pushed out of the memory cache are spilled (in a
	// fresh subdirectory removed when Run returns), to be read back instead of loaded from
	// their source again.
	CacheDir string
	// CacheBytes is the memory budget of the shard cache, estimated at 8 bytes per value
	// (default DefaultCacheBytes).
	CacheBytes int64
	// CacheDiskBytes is the budget of the spill directory (default 4 x CacheBytes).
	CacheDiskBytes int64
	// BlobCacheBytes is the memory budget of the broadcast blobs (the kernel inputs X of the
	// conjugate-gradient methods) kept by content hash, so that a job's tasks carry X once per
	// worker (default wire.DefaultBlobCacheBytes). A blob larger than the budget is not kept,
	// and its tasks then carry X more often.
	BlobCacheBytes int64
	// KernelCacheBytes is the memory budget of the kernel blocks of one hyperparameter value
	// of the conjugate-gradient methods (tasks.WithKernelCacheBytes; the decoder keeps at most
	// two such values): 0 takes tasks.DefaultKernelCacheBytes (a share of the machine's or
	// the container's memory), < 0 keeps none. It never changes a task's result.
	KernelCacheBytes int64
	// JoinToken is the bearer token of worker calls: sent to the coordinators and
	// required on every call of the Worker service. Empty: no token either way.
	JoinToken string
	// ClientTLS, if set, secures the connections to the coordinators.
	ClientTLS *tls.Config
	// ServerTLS, if set, secures the Worker service.
	ServerTLS *tls.Config
	// Logger receives the worker's logs.
	Logger zerolog.Logger
	// HeartbeatInterval overrides the interval the leader asks for at registration.
	HeartbeatInterval time.Duration
	// MetricsAddr, if set, is the host:port of an HTTP server with Prometheus metrics at
	// /metrics and the probes /healthz and /readyz.
	MetricsAddr string
	// UnregisteredTasks makes the Worker service run tasks that carry no session of a
	// registration (wire.SessionKey): for tests and benchmarks that drive a worker without a
	// coordinator. Never set it on a worker that a network can reach: by default a worker
	// runs tasks only from the coordinator its latest registration went to.
	UnregisteredTasks bool
	// Interceptor, if set, wraps every unary call of the Worker service after the token
	// check: a hook for tests that delay or fail tasks.
	Interceptor grpc.UnaryServerInterceptor
	// Data reads the shards of the tasks' data sources: which files and URLs may be read
	// (Data.Access; the zero value allows all, so a served worker should be confined with
	// shard.NewAccess) and the bounds of reading them. Every task, the rows task included,
	// loads its shard through it.
	Data shard.Reader
	// DrainTimeout is how long a stopping worker lets its running tasks finish (their
	// results reach the coordinator) before cutting them off (the coordinator then runs
	// them elsewhere); new tasks are refused at once (default DefaultDrainTimeout). Keep it
	// below Kubernetes' terminationGracePeriodSeconds.
	DrainTimeout time.Duration
}

// Worker is a worker process: it serves the Worker gRPC service and keeps itself
// registered with the coordinators' leader. Its methods LoadShard, RunTask and Health
// implement pb.WorkerServer.
type Worker struct {
	pb.UnimplementedWorkerServer

	cfg     Config
	log     zerolog.Logger
	dec     *wire.Decoder
	cache   *shardCache
	sem     chan struct{}
	metrics *metrics

	// running and peak count the tasks and loads holding a core, for tests and metrics.
	running, peak atomic.Int64

	started  atomic.Bool
	draining atomic.Bool // Run is stopping
	ready    chan struct{}

	mu        sync.Mutex
	addr      string
	advertise string
	metricsAt string
	id        string
	session   string // of the latest registration; "" while not registered
}

// New checks cfg, fills in its defaults and returns a worker ready to Run.
func New(cfg Config) (*Worker, error) {
	var join []string
	for _, a := range cfg.Join {
		if a != "" {
			join = append(join, a)
		}
	}
	if len(join) == 0 {
		return nil, fmt.Errorf("worker: no coordinator address to join: give at least one API address (host:port)")
	}
	cfg.Join = join
	if cfg.Listen == "" {
		return nil, fmt.Errorf("worker: no listen address: give host:port for the Worker service")
	}
	if _, _, err := net.SplitHostPort(cfg.Listen); err != nil {
		return nil, fmt.Errorf("worker: listen address %q: %w", cfg.Listen, err)
	}
	if cfg.Cores < 0 {
		return nil, fmt.Errorf("worker: %d cores: must be positive", cfg.Cores)
	}
	if cfg.Cores == 0 {
		cfg.Cores = runtime.NumCPU()
	}
	if cfg.Name == "" {
		cfg.Name, _ = os.Hostname()
	}
	if cfg.CacheBytes < 0 || cfg.CacheDiskBytes < 0 || cfg.BlobCacheBytes < 0 {
		return nil, fmt.Errorf("worker: negative cache budget")
	}
	if cfg.CacheBytes == 0 {
		cfg.CacheBytes = DefaultCacheBytes
	}
	if cfg.CacheDiskBytes == 0 {
		cfg.CacheDiskBytes = 4 * cfg.CacheBytes
	}
	if cfg.DrainTimeout < 0 {
		return nil, fmt.Errorf("worker: negative drain timeout %v", cfg.DrainTimeout)
	}
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = DefaultDrainTimeout
	}
	if cfg.HeartbeatInterval < 0 {
		return nil, fmt.Errorf("worker: negative heartbeat interval %v", cfg.HeartbeatInterval)
	}
	if cfg.CacheDir != "" {
		if err := os.MkdirAll(cfg.CacheDir, 0o755); err != nil {
			return nil, fmt.Errorf("worker: cache directory: %w", err)
		}
	}
	if cfg.BlobCacheBytes == 0 {
		cfg.BlobCacheBytes = wire.DefaultBlobCacheBytes
	}
	dec := wire.NewDecoderWithBlobs(wire.NewBlobCache(cfg.BlobCacheBytes))
	w := &Worker{
		cfg:     cfg,
		log:     cfg.Logger.With().Str("component", "worker").Logger(),
		dec:     dec,
		sem:     make(chan struct{}, cfg.Cores),
		metrics: newMetrics(dec.Blobs()),
		ready:   make(chan struct{}),
	}
	w.cache = newShardCache(cfg.CacheBytes, cfg.CacheDiskBytes, "", w.log, func(n int, b int64) {
		w.metrics.cachedShards.Set(float64(n))
		w.metrics.cacheBytes.Set(float64(b))
	})
	return w, nil
}

// Ready is closed once Run listens, after which Addr, AdvertiseAddr and MetricsAddr are
// set. It is never closed if Run fails before that.
func (w *Worker) Ready() <-chan struct{} { return w.ready }

// Addr returns the address the Worker service listens on ("" before Ready).
func (w *Worker) Addr() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.addr
}

// AdvertiseAddr returns the address the worker registers with ("" before Ready).
func (w *Worker) AdvertiseAddr() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.advertise
}

// MetricsAddr returns the address of the metrics server ("" before Ready or without one).
func (w *Worker) MetricsAddr() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.metricsAt
}

// ID returns the worker ID the leader assigned at the last registration ("" before).
func (w *Worker) ID() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.id
}

// setRegistration records the ID and session of a registration ("" for both: the worker
// lost its leader and takes no task until it registers again).
func (w *Worker) setRegistration(id, session string) {
	w.mu.Lock()
	if id != "" {
		w.id = id
	}
	w.session = session
	w.mu.Unlock()
}

// checkSession accepts a task call only if it carries the session of the worker's latest
// registration. It answers ABORTED otherwise, which the remote engine treats as a failure of
// this worker for the call (the shard runs elsewhere) and not as a failure of the job: a
// leader's task racing the worker's registration with a new leader is refused this way.
func (w *Worker) checkSession(ctx context.Context, method string) error {
	if w.cfg.UnregisteredTasks {
		return nil
	}
	w.mu.Lock()
	want := w.session
	w.mu.Unlock()
	var got string
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(wire.SessionKey); len(v) > 0 {
			got = v[0]
		}
	}
	caller := "unknown"
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		caller = p.Addr.String()
	}
	switch {
	case want == "":
		w.log.Warn().Str("method", method).Str("peer", caller).Msg("refused a task: not registered with a leader")
		return status.Error(codes.Aborted, "this worker is not registered with a leader; it takes tasks only from the coordinator it registers with")
	case subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1:
		w.log.Warn().Str("method", method).Str("peer", caller).Bool("session_given", got != "").
			Msg("refused a task: not from the coordinator this worker registered with")
		return status.Error(codes.Aborted, "task from a coordinator this worker is not registered with (not the current leader, or the registration was replaced); tasks come only from the leader it registered with")
	}
	return nil
}

// Run serves the Worker service and keeps the worker registered until ctx is done, then
// stops gracefully (running calls get a grace period) and returns nil. It returns an error
// if it cannot listen or serve. Run may be called once.
func (w *Worker) Run(ctx context.Context) error {
	if !w.started.CompareAndSwap(false, true) {
		return fmt.Errorf("worker: Run called twice")
	}
	lis, err := net.Listen("tcp", w.cfg.Listen)
	if err != nil {
		return fmt.Errorf("worker: listen: %w", err)
	}
	defer lis.Close()
	var mlis net.Listener
	if w.cfg.MetricsAddr != "" {
		if mlis, err = net.Listen("tcp", w.cfg.MetricsAddr); err != nil {
			return fmt.Errorf("worker: metrics listen: %w", err)
		}
		defer mlis.Close()
	}
	if w.cfg.CacheDir != "" {
		dir, err := os.MkdirTemp(w.cfg.CacheDir, "shards-")
		if err != nil {
			return fmt.Errorf("worker: spill directory: %w", err)
		}
		defer os.RemoveAll(dir)
		w.cache.spillDir = dir
	}
	advertise, err := advertiseAddr(w.cfg.Advertise, lis.Addr().String())
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.addr, w.advertise = lis.Addr().String(), advertise
	if mlis != nil {
		w.metricsAt = mlis.Addr().String()
	}
	w.mu.Unlock()

	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes),
		grpc.ChainUnaryInterceptor(w.interceptors()...),
		grpc.StreamInterceptor(auth.StreamServerInterceptor(auth.OpenHealth(auth.Static(w.cfg.JoinToken)), w.log)),
	}
	if w.cfg.ServerTLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(w.cfg.ServerTLS)))
	}
	srv := grpc.NewServer(opts...)
	pb.RegisterWorkerServer(srv, w)
	hs := newHealthServer()
	healthpb.RegisterHealthServer(srv, hs)
	if w.cfg.JoinToken == "" {
		w.log.Warn().Msg("no join token: the Worker service accepts calls from anyone who can reach it")
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := srv.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			errc <- fmt.Errorf("worker: serve: %w", err)
		}
	}()
	var msrv *http.Server
	if mlis != nil {
		msrv = &http.Server{Handler: w.httpHandler(), ReadHeaderTimeout: 10 * time.Second}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := msrv.Serve(mlis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("worker: metrics: %w", err)
			}
		}()
	}
	reg := newRegistrar(w)
	wg.Add(1)
	go func() {
		defer wg.Done()
		reg.run(ctx)
	}()
	wg.Go(func() { w.watchHealth(ctx, hs) })
	w.log.Info().Str("listen", w.Addr()).Str("advertise", advertise).Int("cores", w.cfg.Cores).
		Str("metrics", w.MetricsAddr()).Msg("worker serving")
	close(w.ready)

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	w.draining.Store(true)
	cancel()
	w.log.Info().Dur("drain_timeout", w.cfg.DrainTimeout).Msg("stopping: refusing new tasks, finishing the running ones")
	stopped := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(w.cfg.DrainTimeout):
		w.log.Warn().Dur("drain_timeout", w.cfg.DrainTimeout).Msg("calls still running after the drain timeout: cutting them off (the coordinator runs them elsewhere)")
		srv.Stop()
		<-stopped
	}
	if msrv != nil {
		sctx, scancel := context.WithTimeout(context.Background(), time.Second)
		msrv.Shutdown(sctx)
		scancel()
	}
	wg.Wait()
	reg.close()
	w.log.Info().Msg("worker stopped")
	return runErr
}

// interceptors are the Worker service's unary interceptors: the token check, then
// Config.Interceptor.
func (w *Worker) interceptors() []grpc.UnaryServerInterceptor {
	out := []grpc.UnaryServerInterceptor{auth.UnaryServerInterceptor(auth.OpenHealth(auth.Static(w.cfg.JoinToken)), w.log)}
	if w.cfg.Interceptor != nil {
		out = append(out, w.cfg.Interceptor)
	}
	return out
}

// advertiseAddr returns the address to register: advertise if given, else the listen
// address with the host name for an unspecified host.
func advertiseAddr(advertise, listen string) (string, error) {
	if advertise != "" {
		if _, _, err := net.SplitHostPort(advertise); err != nil {
			return "", fmt.Errorf("worker: advertise address %q: %w", advertise, err)
		}
		return advertise, nil
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("worker: listen address %q: %w", listen, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		h, err := os.Hostname()
		if err != nil {
			return "", fmt.Errorf("worker: listening on all interfaces and the host name is unknown (%w): pass an advertise address", err)
		}
		host = h
	}
	return net.JoinHostPort(host, port), nil
}
