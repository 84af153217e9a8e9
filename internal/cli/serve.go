package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/gpreduce/gpreduce/internal/auth"
	"github.com/gpreduce/gpreduce/internal/coordinator"
	"github.com/gpreduce/gpreduce/internal/engine/remote"
)

// joinTokenEnv (GPREDUCE_JOIN_TOKEN) is shared with the worker command.

// raftSecretEnv holds the raft secret when --raft-secret-file is not given.
const raftSecretEnv = "GPREDUCE_RAFT_SECRET"

// serveFlags are the flags of `coordinator serve`.
type serveFlags struct {
	id, raftAddr, apiAddr, dataDir  string
	raftAdvertise, apiAdvertise     string
	bootstrapID                     string
	bootstrap                       bool
	join                            []string
	tokenFile, joinTokenFile        string
	raftSecretFile                  string
	tlsCert, tlsKey, tlsCA          string
	metricsAddr                     string
	workerTimeout, checkpointEvery  time.Duration
	raftHeartbeat, raftElection     time.Duration
	raftLeaderLease, raftSnapEvery  time.Duration
	taskTimeout, stragglerFloor     time.Duration
	stragglerFactor                 float64
	planTimeout                     time.Duration
	raftSnapThreshold, raftTrailing uint64
	access                          accessFlags
	raftSnapBytes                   int64
	retainJobs                      int
	retainFor                       time.Duration
	maxModelBytes, maxCkBytes       int64
	reduceMemory                    int64
}

func newServeCmd(e *env) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve --id ID --data-dir DIR (--bootstrap | --join API_ADDR[,...])",
		Short: "Run one coordinator: a raft member serving the API, running jobs while it leads",
		Long: `serve runs one coordinator until SIGTERM or SIGINT: a raft member with its state in
--data-dir, the gRPC API on --api-addr (clients, workers and the other members), the job
runner while it is the leader, and the worker registry.

A new cluster starts with one member given --bootstrap; the others are given --join with
the API address of any member (followers point to the leader) and are added as voters.
A member whose --data-dir already holds raft state is simply restarted: --bootstrap and
--join are then ignored, so the same command line serves the first start and every restart.

For a fixed set of members started alike (a Kubernetes StatefulSet), give every member the
same --join list of all members' API addresses and --bootstrap-id naming one of them: that
member, when its --data-dir is empty, bootstraps a new cluster only if no peer belongs to
one (a cold start), and otherwise joins it (its data was lost); the others join.

Clients need the API token (--token-file, or env GPREDUCE_TOKEN), workers the join token
(--join-token-file, or env GPREDUCE_JOIN_TOKEN); the members call each other with the API
token, so all members need the same tokens. TLS is on with --tls-cert and --tls-key; with
--tls-ca, clients and workers must present a certificate signed by it, and the members and
workers are verified against it.

The raft port carries the replicated state, so the members authenticate each other there:
with the raft secret (--raft-secret-file, or env ` + raftSecretEnv + `; by default the join
token) every raft connection is TLS 1.3 keyed by the secret plus an HMAC handshake, and with
--tls-ca as well the raft connections use mutual TLS with the members' certificates (and the
secret's handshake inside). A member with neither may only run alone on a loopback
--raft-addr: --join, or a --raft-addr other hosts can reach, is refused.

` + dataAccessHelp,
		Example: `  coordinator serve --id c0 --data-dir /var/lib/gpreduce --bootstrap --token-file token --join-token-file join-token
  coordinator serve --id c1 --raft-addr 10.0.0.6:7000 --api-addr 10.0.0.6:7100 --data-dir /var/lib/gpreduce \
      --join 10.0.0.5:7100 --token-file token --join-token-file join-token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := e.log
			if !cmd.Flags().Changed("log-level") {
				log = log.Level(zerolog.InfoLevel)
			}
			cfg, err := f.config(log)
			if err != nil {
				return err
			}
			return serve(cmd.Context(), cfg, f.bootstrap || len(f.join) > 0, log)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.id, "id", "", "this member's raft ID, unique in the cluster and stable across restarts (required)")
	fl.StringVar(&f.raftAddr, "raft-addr", defaultRaftAddr, "HOST:PORT of the raft transport")
	fl.StringVar(&f.apiAddr, "api-addr", defaultAPIAddr, "HOST:PORT of the gRPC API")
	fl.StringVar(&f.raftAdvertise, "raft-advertise", "", "raft address the other members dial, if not --raft-addr (host:port, a DNS name or an IP)")
	fl.StringVar(&f.apiAdvertise, "api-advertise", "", "API address given to clients, workers and the other members, if not --api-addr")
	fl.StringVar(&f.dataDir, "data-dir", "", "directory of the raft log, stable store and snapshots (required)")
	fl.BoolVar(&f.bootstrap, "bootstrap", false, "start a new cluster with this member as its only voter")
	fl.StringSliceVar(&f.join, "join", nil, "join the cluster through these API addresses (any member), comma-separated")
	fl.StringVar(&f.bootstrapID, "bootstrap-id", "", "with --join: the member with this --id bootstraps a new cluster if its data dir is empty and no --join peer belongs to a cluster")
	fl.StringVar(&f.tokenFile, "token-file", "", "file holding the API token (default: env "+tokenEnv+")")
	fl.StringVar(&f.joinTokenFile, "join-token-file", "", "file holding the workers' join token (default: env "+joinTokenEnv+")")
	fl.StringVar(&f.raftSecretFile, "raft-secret-file", "", "file holding the secret the members authenticate and encrypt raft traffic with, the same on every member (default: env "+raftSecretEnv+", else the join token)")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate (PEM); turns TLS on")
	fl.StringVar(&f.tlsKey, "tls-key", "", "TLS key (PEM)")
	fl.StringVar(&f.tlsCA, "tls-ca", "", "CA certificates (PEM): required of clients and workers, and used to verify members and workers")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "HOST:PORT of an HTTP server with Prometheus metrics at /metrics")
	fl.DurationVar(&f.workerTimeout, "worker-timeout", coordinator.DefaultHeartbeatTimeout, "drop a worker this long after its last heartbeat")
	fl.DurationVar(&f.checkpointEvery, "checkpoint-interval", coordinator.DefaultCheckpointInterval, "least time between two optimizer checkpoints of a job")
	fl.Float64Var(&f.stragglerFactor, "straggler-factor", remote.DefaultStragglerFactor,
		"run a task again on another worker once it has run this many times the median task time of its round (negative: never)")
	fl.DurationVar(&f.stragglerFloor, "straggler-floor", remote.DefaultStragglerFloor, "least time a task runs before it counts as a straggler")
	fl.Int64Var(&f.reduceMemory, "reduce-memory", remote.DefaultReduceMemory,
		"bytes of task results a job's leader holds waiting for the shards before them to be merged; new tasks wait instead (0: no bound beyond 2 x 2 tasks per worker)")
	fl.IntVar(&f.retainJobs, "retain-jobs", 0, "keep only the newest N finished jobs: older ones are deleted with their models (0: keep all)")
	fl.DurationVar(&f.retainFor, "retain-for", 0, "delete finished jobs with their models this long after they finished, e.g. 168h (0: never)")
	fl.Int64Var(&f.maxModelBytes, "max-model-bytes", coordinator.DefaultMaxModelBytes, "largest model a job may store; a larger one fails its job")
	fl.Int64Var(&f.maxCkBytes, "max-checkpoint-bytes", coordinator.DefaultMaxCheckpointBytes, "largest checkpoint saved; a job with larger ones resumes from its last smaller one (or the start)")
	// Tuning for tests and unusual networks; raft's defaults suit a LAN.
	fl.DurationVar(&f.raftHeartbeat, "raft-heartbeat-timeout", 0, "raft heartbeat timeout (default: raft's, 1s)")
	fl.DurationVar(&f.raftElection, "raft-election-timeout", 0, "raft election timeout (default: raft's, 1s)")
	fl.DurationVar(&f.raftLeaderLease, "raft-leader-lease-timeout", 0, "raft leader lease timeout (default: raft's, 500ms)")
	fl.DurationVar(&f.raftSnapEvery, "raft-snapshot-interval", 0, "how often raft checks whether to snapshot (default: raft's, 120s)")
	fl.Uint64Var(&f.raftSnapThreshold, "raft-snapshot-threshold", 0, "log entries since the last snapshot that trigger one (default 1024)")
	fl.Uint64Var(&f.raftTrailing, "raft-trailing-logs", 0, "log entries kept after a snapshot (default 16)")
	fl.Int64Var(&f.raftSnapBytes, "raft-snapshot-bytes", 0, "command bytes since the last snapshot that trigger one (default 8 MiB)")
	fl.DurationVar(&f.taskTimeout, "task-timeout", 0, "bound of one task attempt on a worker (default: the remote engine's)")
	fl.DurationVar(&f.planTimeout, "plan-timeout", coordinator.DefaultPlanTimeout,
		"bound of planning a job's data on the leader (a gzipped CSV or UCI split is read whole to count its rows)")
	f.access.register(cmd)
	for _, n := range []string{"raft-heartbeat-timeout", "raft-election-timeout", "raft-leader-lease-timeout", "raft-snapshot-interval",
		"raft-snapshot-threshold", "raft-trailing-logs", "raft-snapshot-bytes", "task-timeout"} {
		_ = fl.MarkHidden(n)
	}
	return cmd
}

// config checks the flags and returns the server configuration.
func (f *serveFlags) config(log zerolog.Logger) (coordinator.ServerConfig, error) {
	var cfg coordinator.ServerConfig
	if strings.TrimSpace(f.id) == "" {
		return cfg, fmt.Errorf("--id is required: a name for this member, unique in the cluster and the same on every restart")
	}
	if f.dataDir == "" {
		return cfg, fmt.Errorf("--data-dir is required: where this member keeps its raft state")
	}
	var join []string
	for _, a := range f.join {
		if a = strings.TrimSpace(a); a != "" && !slices.Contains(join, a) {
			join = append(join, a)
		}
	}
	if f.bootstrap && len(join) > 0 {
		return cfg, fmt.Errorf("give --bootstrap (start a new cluster) or --join (join an existing one), not both")
	}
	if f.bootstrapID != "" && len(join) == 0 {
		return cfg, fmt.Errorf("--bootstrap-id %s needs --join with the API addresses of the members to ask whether a cluster exists", f.bootstrapID)
	}
	token, err := tokenFrom(f.tokenFile, tokenEnv, "--token-file")
	if err != nil {
		return cfg, err
	}
	joinToken, err := tokenFrom(f.joinTokenFile, joinTokenEnv, "--join-token-file")
	if err != nil {
		return cfg, err
	}
	data, err := f.access.reader()
	if err != nil {
		return cfg, err
	}
	var serverTLS, clientTLS *tls.Config
	switch {
	case f.tlsCert != "" && f.tlsKey != "":
		if serverTLS, err = auth.ServerTLS(f.tlsCert, f.tlsKey, f.tlsCA); err != nil {
			return cfg, err
		}
		if clientTLS, err = auth.ClientTLS(f.tlsCA, f.tlsCert, f.tlsKey); err != nil {
			return cfg, err
		}
	case f.tlsCert != "" || f.tlsKey != "" || f.tlsCA != "":
		return cfg, fmt.Errorf("TLS needs both --tls-cert and --tls-key (and optionally --tls-ca)")
	}
	raftSecret, err := tokenFrom(f.raftSecretFile, raftSecretEnv, "--raft-secret-file")
	if err != nil {
		return cfg, err
	}
	if raftSecret == "" && joinToken != "" {
		raftSecret = joinToken
		log.Warn().Msg("raft secret: using the join token, which the workers hold too; give the members a separate --raft-secret-file")
	}
	mutualTLS := serverTLS != nil && f.tlsCA != ""
	if raftSecret != "" && len(raftSecret) < 16 {
		return cfg, fmt.Errorf("the raft secret (--raft-secret-file, %s or the join token) has %d bytes: use at least 16, e.g. head -c 32 /dev/urandom | base64 > raft.secret",
			raftSecretEnv, len(raftSecret))
	}
	if raftSecret == "" && !mutualTLS {
		switch {
		case len(join) > 0:
			return cfg, fmt.Errorf("--join needs authenticated raft traffic: give every member the same --raft-secret-file (or --join-token-file), or --tls-cert, --tls-key and --tls-ca")
		case !loopback(f.raftAddr) || (f.raftAdvertise != "" && !loopback(f.raftAdvertise)):
			return cfg, fmt.Errorf("--raft-addr %s is reachable from other hosts but raft traffic would be unauthenticated: give --raft-secret-file (or --join-token-file), or --tls-cert, --tls-key and --tls-ca, or use a loopback --raft-addr for a single member",
				f.raftAddr)
		}
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--worker-timeout", f.workerTimeout}, {"--checkpoint-interval", f.checkpointEvery}, {"--raft-heartbeat-timeout", f.raftHeartbeat},
		{"--raft-election-timeout", f.raftElection}, {"--raft-leader-lease-timeout", f.raftLeaderLease},
		{"--raft-snapshot-interval", f.raftSnapEvery}, {"--task-timeout", f.taskTimeout}, {"--straggler-floor", f.stragglerFloor},
		{"--plan-timeout", f.planTimeout}} {
		if d.v < 0 {
			return cfg, fmt.Errorf("%s %s: must not be negative", d.flag, d.v)
		}
	}
	for _, n := range []struct {
		flag string
		v    int64
	}{{"--retain-jobs", int64(f.retainJobs)}, {"--max-model-bytes", f.maxModelBytes}, {"--max-checkpoint-bytes", f.maxCkBytes},
		{"--raft-snapshot-bytes", f.raftSnapBytes}, {"--reduce-memory", f.reduceMemory}} {
		if n.v < 0 {
			return cfg, fmt.Errorf("%s %d: must not be negative", n.flag, n.v)
		}
	}
	return coordinator.ServerConfig{
		ID: f.id, RaftAddr: f.raftAddr, RaftAdvertiseAddr: f.raftAdvertise, APIAddr: f.apiAddr, APIAdvertiseAddr: f.apiAdvertise,
		DataDir: f.dataDir, Bootstrap: f.bootstrap, Join: join, BootstrapIfEmpty: f.bootstrapID != "" && f.bootstrapID == f.id,
		Token: token, JoinToken: joinToken, ServerTLS: serverTLS, ClientTLS: clientTLS, RaftSecret: []byte(raftSecret),
		MetricsAddr: f.metricsAddr, HeartbeatTimeout: f.workerTimeout, CheckpointInterval: f.checkpointEvery,
		TaskTimeout: f.taskTimeout, StragglerFactor: f.stragglerFactor, StragglerFloor: f.stragglerFloor, Logger: log,
		Data: data, PlanTimeout: f.planTimeout, RetainJobs: f.retainJobs, RetainFor: f.retainFor, ReduceMemory: reduceMemory(f.reduceMemory),
		Raft: coordinator.RaftTuning{
			HeartbeatTimeout: f.raftHeartbeat, ElectionTimeout: f.raftElection, LeaderLeaseTimeout: f.raftLeaderLease,
			SnapshotInterval: f.raftSnapEvery, SnapshotThreshold: f.raftSnapThreshold, TrailingLogs: f.raftTrailing,
			SnapshotBytes: f.raftSnapBytes, MaxModelBytes: f.maxModelBytes, MaxCheckpointBytes: f.maxCkBytes,
		},
	}, nil
}

// loopback reports whether HOST:PORT names a loopback host.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// tokenFrom reads a token from file, or else from the environment variable env.
func tokenFrom(file, env, flag string) (string, error) {
	if file != "" {
		t, err := auth.ReadTokenFile(file)
		if err != nil {
			return "", fmt.Errorf("%s: %w", flag, err)
		}
		return t, nil
	}
	return strings.TrimSpace(os.Getenv(env)), nil
}

// serve opens the coordinator, runs it until ctx ends (SIGTERM, SIGINT) and closes it.
// starts says whether --bootstrap or --join was given; without either, the data directory
// must hold the state of an earlier run.
func serve(ctx context.Context, cfg coordinator.ServerConfig, starts bool, log zerolog.Logger) error {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("--data-dir: %w", err)
	}
	srv, err := coordinator.OpenServer(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return nil // interrupted while joining
		}
		return err
	}
	restarted := srv.Node().HadState()
	if !restarted && !starts {
		closeErr := srv.Close()
		return errors.Join(fmt.Errorf("%s holds no raft state: give --bootstrap to start a new cluster, or --join API_ADDR to join one", cfg.DataDir), closeErr)
	}
	log.Info().Str("id", cfg.ID).Str("api_addr", srv.APIAddr()).Str("raft_addr", srv.Node().Addr()).
		Str("data_dir", cfg.DataDir).Bool("restarted", restarted).Msg("coordinator listening")
	runErr := srv.Run(ctx)
	log.Info().Msg("shutting down")
	closeErr := srv.Close()
	if runErr != nil {
		return errors.Join(runErr, closeErr)
	}
	return closeErr
}

// reduceMemory maps --reduce-memory to remote.Config.ReduceMemory: 0 (no bound) is negative
// there, where 0 selects the default.
func reduceMemory(v int64) int64 {
	if v == 0 {
		return -1
	}
	return v
}
