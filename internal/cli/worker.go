package cli

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/gpreduce/gpreduce/internal/auth"
	"github.com/gpreduce/gpreduce/internal/tasks"
	"github.com/gpreduce/gpreduce/internal/worker"
)

// Defaults and environment of the worker command.
const (
	defaultWorkerListen = "127.0.0.1:7200"
	joinTokenEnv        = "GPREDUCE_JOIN_TOKEN"
)

// ExecuteWorker runs the worker command line with args and returns the process exit code.
func ExecuteWorker(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	tty := isTerminal(stderr)
	var lf logFlags
	log := zerolog.Nop()
	root := &cobra.Command{
		Use:   "worker",
		Short: "A gpreduce worker: registers with the coordinators, loads shards and runs map tasks",
		Long: `worker runs one gpreduce worker (worker serve): it registers with the coordinators, loads
shards of the jobs' data and runs their map tasks.

` + exitCodesHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			warnDeprecated(cmd, stderr)
			l, err := lf.logger(stderr, tty)
			log = l
			return err
		},
	}
	lf.register(root, "info")
	root.AddCommand(newWorkerServeCmd(&log))
	addVersion(root)
	return runRoot(ctx, root, args, stdout, stderr)
}

// workerServeFlags are the flags of `worker serve`.
type workerServeFlags struct {
	join                    []string
	listen, advertise, name string
	cacheDir, cacheSize     string
	blobCacheSize           string
	kernelCacheSize         string
	joinTokenFile           string
	cores                   int
	tlsCert, tlsKey, tlsCA  string
	metricsAddr             string
	heartbeat, drainTimeout time.Duration
	access                  accessFlags
}

func newWorkerServeCmd(log *zerolog.Logger) *cobra.Command {
	var f workerServeFlags
	cmd := &cobra.Command{
		Use:   "serve --join API_ADDR[,API_ADDR...] [--listen HOST:PORT]",
		Short: "Serve the Worker service and keep registered with the coordinators' leader",
		Long: `Serve runs a worker until interrupted: it registers with the leader of the coordinators
(any coordinator API address will do: followers point to the leader), heartbeats, and serves
the Worker gRPC service on --listen, which loads shards and runs map tasks on at most --cores
of them at once. Coordinators dial --advertise (default: the listen address).

The join token (--join-token-file, or env ` + joinTokenEnv + `) is sent to the coordinators
and required on every call to the worker. TLS is on with --tls-cert and --tls-key: the
worker's certificate serves its own service and is presented to coordinators that ask for
one; --tls-ca verifies the coordinators and, on the worker's service, requires a client
certificate signed by it.

On SIGTERM the worker stops heartbeating, refuses new tasks (the coordinator sends them to
other workers), lets the running ones finish for up to --drain-timeout and exits. The
metrics address also serves /healthz and /readyz (ready: registered with the leader), and
the gRPC address the standard grpc.health.v1.Health service.

` + dataAccessHelp,
		Example: `  worker serve --join 10.0.0.5:7100,10.0.0.6:7100 --listen 0.0.0.0:7200 --advertise $(hostname -i):7200
  GPREDUCE_JOIN_TOKEN=$(cat /etc/gpreduce/join-token) worker serve --join coordinator:7100 --metrics-addr :9200`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.config(*log)
			if err != nil {
				return err
			}
			w, err := worker.New(cfg)
			if err != nil {
				return err
			}
			return w.Run(cmd.Context())
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&f.join, "join", nil, "coordinator API addresses HOST:PORT, comma-separated or repeated (required)")
	fl.StringVar(&f.listen, "listen", defaultWorkerListen, "HOST:PORT of the Worker service (port 0: any free port)")
	fl.StringVar(&f.advertise, "advertise", "", "HOST:PORT coordinators dial (default: the listen address, with the host name for 0.0.0.0)")
	fl.StringVar(&f.name, "name", "", "a stable name for this worker (default: the host name)")
	fl.IntVar(&f.cores, "cores", 0, "tasks run at once (default: the number of CPUs)")
	fl.StringVar(&f.cacheSize, "cache-size", "4GiB", "memory for cached shards (bytes, or with a KiB, MiB, GiB or TiB suffix)")
	fl.StringVar(&f.blobCacheSize, "blob-cache-size", "2GiB", "memory for broadcast data kept by content hash (the training inputs of cg and kmcg jobs)")
	fl.StringVar(&f.kernelCacheSize, "kernel-cache-size", "", fmt.Sprintf(
		"cg, kmcg: memory for the kernel blocks of one hyperparameter value (bytes, or with a KiB, MiB, GiB or TiB suffix; none: form them for every product; default: 1/%d of the machine's or the container's memory, now %s; the worker keeps at most two such values); never changes the result",
		tasks.KernelCacheMemoryShare, fmtSize(tasks.DefaultKernelCacheBytes())))
	fl.StringVar(&f.cacheDir, "cache-dir", "", "spill shards pushed out of memory to this directory instead of reloading them")
	fl.StringVar(&f.joinTokenFile, "join-token-file", "", "read the join token from this file (default: env "+joinTokenEnv+")")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate (PEM) of the worker; turns TLS on")
	fl.StringVar(&f.tlsKey, "tls-key", "", "TLS key (PEM) of the worker")
	fl.StringVar(&f.tlsCA, "tls-ca", "", "CA certificates (PEM) that sign the coordinators' certificates; also required of clients")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "HOST:PORT of an HTTP server with Prometheus metrics at /metrics")
	fl.DurationVar(&f.heartbeat, "heartbeat", 0, "heartbeat interval (default: what the leader asks for)")
	fl.DurationVar(&f.drainTimeout, "drain-timeout", worker.DefaultDrainTimeout,
		"on SIGTERM, how long running tasks may finish before they are cut off and run elsewhere (keep below the pod's terminationGracePeriodSeconds)")
	f.access.register(cmd)
	return cmd
}

// config turns the flags into a worker configuration.
func (f *workerServeFlags) config(log zerolog.Logger) (worker.Config, error) {
	var join []string
	for _, a := range f.join {
		if a = strings.TrimSpace(a); a != "" && !slices.Contains(join, a) {
			join = append(join, a)
		}
	}
	if len(join) == 0 {
		return worker.Config{}, fmt.Errorf("--join is required: give the API address of at least one coordinator (HOST:PORT, e.g. --join 10.0.0.5:7100)")
	}
	if f.drainTimeout <= 0 {
		return worker.Config{}, fmt.Errorf("--drain-timeout %s: must be positive", f.drainTimeout)
	}
	if f.cores < 0 {
		return worker.Config{}, fmt.Errorf("--cores %d: must be positive (0: the number of CPUs)", f.cores)
	}
	cacheBytes, err := parseSize(f.cacheSize)
	if err != nil {
		return worker.Config{}, fmt.Errorf("--cache-size: %w", err)
	}
	blobBytes, err := parseSize(f.blobCacheSize)
	if err != nil {
		return worker.Config{}, fmt.Errorf("--blob-cache-size: %w", err)
	}
	kernelBytes, err := parseKernelCache(f.kernelCacheSize)
	if err != nil {
		return worker.Config{}, err
	}
	token := strings.TrimSpace(os.Getenv(joinTokenEnv))
	if f.joinTokenFile != "" {
		if token, err = auth.ReadTokenFile(f.joinTokenFile); err != nil {
			return worker.Config{}, fmt.Errorf("--join-token-file: %w", err)
		}
	}
	data, err := f.access.reader()
	if err != nil {
		return worker.Config{}, err
	}
	var clientTLS, serverTLS *tls.Config
	switch {
	case f.tlsCert != "" && f.tlsKey != "":
		if serverTLS, err = auth.ServerTLS(f.tlsCert, f.tlsKey, f.tlsCA); err != nil {
			return worker.Config{}, err
		}
		if clientTLS, err = auth.ClientTLS(f.tlsCA, f.tlsCert, f.tlsKey); err != nil {
			return worker.Config{}, err
		}
	case f.tlsCert != "" || f.tlsKey != "" || f.tlsCA != "":
		return worker.Config{}, fmt.Errorf("TLS needs both --tls-cert and --tls-key (and optionally --tls-ca)")
	}
	return worker.Config{
		Join: join, Listen: f.listen, Advertise: f.advertise, Name: f.name, Cores: f.cores,
		CacheDir: f.cacheDir, CacheBytes: cacheBytes, BlobCacheBytes: blobBytes, KernelCacheBytes: kernelBytes, JoinToken: token,
		ClientTLS: clientTLS, ServerTLS: serverTLS, Logger: log,
		HeartbeatInterval: f.heartbeat, MetricsAddr: f.metricsAddr, Data: data, DrainTimeout: f.drainTimeout,
	}, nil
}

// parseSize parses a byte count with an optional binary suffix: 1048576, 512MiB, 4GiB.
func parseSize(size string) (int64, error) {
	s := strings.TrimSpace(size)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"B", 1}} {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v > 0) || v*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("%q is not a positive size: write bytes or a number with KiB, MiB, GiB or TiB", size)
	}
	return int64(v * float64(mult)), nil
}
