package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/gpreduce/gpreduce/internal/auth"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// leaderTrailer is the trailer in which a follower names the leader's API address.
const leaderTrailer = "gpreduce-leader"

// Defaults of the client and of serve.
const (
	defaultAPIAddr  = "127.0.0.1:7100"
	defaultRaftAddr = "127.0.0.1:7000"
	tokenEnv        = "GPREDUCE_TOKEN"
	addrEnv         = "GPREDUCE_ADDR"
)

// clientFlags select the coordinators a command talks to and how it authenticates.
type clientFlags struct {
	addr, token, tokenFile string
	tlsCA, tlsCert, tlsKey string
	leaderWait             time.Duration
}

func (f *clientFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	def := os.Getenv(addrEnv)
	if def == "" {
		def = defaultAPIAddr
	}
	fl.StringVar(&f.addr, "addr", def, "coordinator API addresses, comma-separated; any member will do (env "+addrEnv+")")
	fl.StringVar(&f.token, "token", "", "API token (default: env "+tokenEnv+")")
	fl.StringVar(&f.tokenFile, "token-file", "", "read the API token from this file")
	fl.StringVar(&f.tlsCA, "tls-ca", "", "use TLS, trusting the CA certificates in this PEM file")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "with TLS: client certificate (PEM), for coordinators that require one")
	fl.StringVar(&f.tlsKey, "tls-key", "", "with TLS: client key (PEM)")
	fl.DurationVar(&f.leaderWait, "leader-wait", 30*time.Second, "how long to wait for the cluster to elect a leader")
}

// connect returns a client for the flags' coordinators. It does not dial yet.
func (f *clientFlags) connect(log zerolog.Logger) (*client, error) {
	var addrs []string
	for _, a := range strings.Split(f.addr, ",") {
		if a = strings.TrimSpace(a); a != "" && !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("--addr: give at least one coordinator API address HOST:PORT")
	}
	token := f.token
	if f.tokenFile != "" {
		if token != "" {
			return nil, fmt.Errorf("give --token or --token-file, not both")
		}
		t, err := auth.ReadTokenFile(f.tokenFile)
		if err != nil {
			return nil, err
		}
		token = t
	}
	if token == "" {
		token = strings.TrimSpace(os.Getenv(tokenEnv))
	}
	var tlsCfg *tls.Config
	if f.tlsCA != "" || f.tlsCert != "" || f.tlsKey != "" {
		var err error
		if tlsCfg, err = auth.ClientTLS(f.tlsCA, f.tlsCert, f.tlsKey); err != nil {
			return nil, err
		}
	}
	c := newClient(addrs, dialOptions(token, tlsCfg), f.leaderWait, log)
	c.tls = tlsCfg != nil
	return c, nil
}

// dialOptions are the options of connections to coordinators: TLS with tlsCfg (plain text
// when nil), the bearer token when one is given (over TLS only, when TLS is on).
func dialOptions(token string, tlsCfg *tls.Config) []grpc.DialOption {
	opts := []grpc.DialOption{
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{
			BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second,
		}, MinConnectTimeout: 5 * time.Second}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64 << 20)),
	}
	if tlsCfg != nil {
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg)))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(auth.PerRPC(token, tlsCfg != nil)))
	}
	return opts
}

// client calls the coordinators' API. It remembers the member that last answered and
// follows the "gpreduce-leader" trailer to the leader, so every call ends up at the leader
// whichever member it was given.
type client struct {
	addrs      []string
	opts       []grpc.DialOption
	leaderWait time.Duration
	log        zerolog.Logger
	tls        bool // the connections use TLS

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
	cur   string // the member that answered last
}

func newClient(addrs []string, opts []grpc.DialOption, leaderWait time.Duration, log zerolog.Logger) *client {
	return &client{addrs: addrs, opts: opts, leaderWait: leaderWait, log: log, conns: map[string]*grpc.ClientConn{}}
}

// Close closes every connection.
func (c *client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for a, cc := range c.conns {
		errs = append(errs, cc.Close())
		delete(c.conns, a)
	}
	return errors.Join(errs...)
}

func (c *client) conn(addr string) (pb.CoordinatorClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cc, ok := c.conns[addr]
	if !ok {
		var err error
		if cc, err = grpc.NewClient(addr, c.opts...); err != nil {
			return nil, fmt.Errorf("coordinator address %q: %w", addr, err)
		}
		c.conns[addr] = cc
	}
	return pb.NewCoordinatorClient(cc), nil
}

// order returns the addresses to try: the one that answered last, then the others.
func (c *client) order() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.addrs)+1)
	if c.cur != "" {
		out = append(out, c.cur)
	}
	for _, a := range c.addrs {
		if a != c.cur {
			out = append(out, a)
		}
	}
	return out
}

func (c *client) setCurrent(addr string) {
	c.mu.Lock()
	c.cur = addr
	c.mu.Unlock()
}

// callFunc is one attempt of an operation against one coordinator. It must pass opts to its
// RPC (they collect the trailer) and may be run again from the start, at another member.
type callFunc func(ctx context.Context, cl pb.CoordinatorClient, opts ...grpc.CallOption) error

// errNoLeader is the cause while the cluster has no leader.
var errNoLeader = errors.New("the cluster has no leader yet")

// do runs fn at the leader. It tries the member that answered last, then the others in
// order; it follows redirects to the leader, and while no leader is known, or members are
// unreachable but some member is up, it keeps trying for up to leaderWait. Errors say what
// went wrong in words: a rejected token, unreachable addresses, no leader.
func (c *client) do(ctx context.Context, fn callFunc) error {
	deadline := time.Now().Add(c.leaderWait)
	pause := 100 * time.Millisecond
	for {
		err, retry := c.pass(ctx, fn)
		if !retry {
			return err
		}
		if time.Now().After(deadline) {
			if errors.Is(err, errNoLeader) {
				return withCode(ExitUnreachable, fmt.Errorf("%w after %s: check that a majority of the coordinators is up (coordinator members)", err, c.leaderWait))
			}
			return err
		}
		c.log.Debug().Err(err).Msg("no leader answered; trying again")
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

// pass tries every member once (following redirects). It returns fn's outcome when a member
// answered it, and retry when the call should be tried again later.
func (c *client) pass(ctx context.Context, fn callFunc) (err error, retry bool) {
	var unreachable []string
	var unreachableErr error
	sawNoLeader := false
	tried := map[string]bool{}
	queue := c.order()
	for len(queue) > 0 {
		addr := queue[0]
		queue = queue[1:]
		if tried[addr] {
			continue
		}
		tried[addr] = true
		cl, err := c.conn(addr)
		if err != nil {
			return err, false
		}
		var tr metadata.MD
		err = fn(ctx, cl, grpc.Trailer(&tr))
		if err == nil {
			c.setCurrent(addr)
			return nil, false
		}
		if ctx.Err() != nil {
			return ctx.Err(), false
		}
		st, _ := status.FromError(err)
		switch st.Code() {
		case codes.Unauthenticated:
			return withCode(ExitAuth, fmt.Errorf("the coordinator rejected the token: pass --token or set %s (%s: %s)", tokenEnv, addr, st.Message())), false
		case codes.Unavailable:
			c.log.Debug().Str("addr", addr).Str("error", st.Message()).Msg("coordinator unavailable")
			if answered(st.Message()) {
				// A member that is up but knows no leader (an election), or is shutting down.
				sawNoLeader = true
				continue
			}
			// Down or restarting, or a broken stream. Try the others.
			unreachable = append(unreachable, addr)
			unreachableErr = err
			continue
		case codes.FailedPrecondition:
			leaders, redirect := tr[leaderTrailer]
			if !redirect {
				c.setCurrent(addr)
				return plainError(err), false
			}
			leader := ""
			if len(leaders) > 0 {
				leader = strings.TrimSpace(leaders[0])
			}
			if leader == "" || leader == addr {
				sawNoLeader = true
				continue
			}
			c.log.Debug().Str("from", addr).Str("leader", leader).Msg("redirected to the leader")
			if tried[leader] {
				sawNoLeader = true // a stale redirect: the leader does not think it leads
				continue
			}
			queue = append([]string{leader}, queue...)
			continue
		}
		c.setCurrent(addr)
		return plainError(err), false
	}
	if sawNoLeader {
		return errNoLeader, true
	}
	err, retry = c.unreachableError(unreachable, unreachableErr)
	return withCode(ExitUnreachable, err), retry
}

// unreachableError says why no coordinator at the addresses unreachable could be reached,
// err being the last transport error, and whether to try again.
func (c *client) unreachableError(unreachable []string, unreachableErr error) (error, bool) {
	msg := "unreachable"
	if st, ok := status.FromError(unreachableErr); ok {
		msg = shortTransportError(st.Message())
	}
	at := strings.Join(unreachable, ", ")
	switch {
	case strings.Contains(msg, "tls:") || strings.Contains(msg, "x509") || strings.Contains(msg, "certificate"):
		return fmt.Errorf("TLS with the coordinator at %s failed (%s): check --tls-ca, --tls-cert and --tls-key", at, msg), false
	case c.tls && (strings.Contains(msg, "broken pipe") || strings.Contains(msg, "connection reset")):
		return fmt.Errorf("the coordinator at %s dropped the TLS connection (%s): it may require a client certificate "+
			"(--tls-cert and --tls-key) signed by its CA", at, msg), false
	case !c.tls && strings.Contains(msg, "server preface") && (strings.Contains(msg, "EOF") || strings.Contains(msg, "connection reset")),
		strings.Contains(msg, "does not look like a TLS handshake"):
		// A TLS server answers a plain-text HTTP/2 preface by closing or resetting the
		// connection; which one the client sees depends on timing.
		return fmt.Errorf("cannot talk to the coordinator at %s (%s): it may require TLS (--tls-ca, and --tls-cert and --tls-key "+
			"if it asks for client certificates), or not use it", at, msg), false
	}
	return fmt.Errorf("cannot reach a coordinator at %s (%s): check --addr and that `coordinator serve` runs there",
		at, msg), c.addrsUp(unreachable)
}

// answered reports whether an Unavailable status came from a coordinator (one that knows no
// leader yet, or is shutting down) rather than from the transport (nothing listening, a
// broken connection).
func answered(msg string) bool {
	for _, s := range []string{"no leader", "not the leader", "shutting down", "leadership"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// addrsUp reports whether some configured member was not among the unreachable ones: then a
// pass that reached no leader is worth repeating (the members answering may be waiting for an
// election). When every member is unreachable, a call fails at once.
func (c *client) addrsUp(unreachable []string) bool {
	for _, a := range c.addrs {
		if !slices.Contains(unreachable, a) {
			return true
		}
	}
	return false
}

// shortTransportError keeps the gist of a gRPC transport error: "connection refused" of a
// failed dial, the description of others.
func shortTransportError(msg string) string {
	if _, desc, ok := strings.Cut(msg, "desc = "); ok {
		msg = desc
	}
	msg = strings.Trim(msg, `"`)
	if i := strings.LastIndex(msg, ": "); i >= 0 && strings.Contains(msg, "dial") {
		msg = msg[i+2:]
	}
	return msg
}

// rpcError is a gRPC error with a message for people: the status message, prefixed by the
// code where the message alone would be unclear. status.Code still sees the code.
type rpcError struct {
	msg string
	st  *status.Status
}

func (e *rpcError) Error() string              { return e.msg }
func (e *rpcError) GRPCStatus() *status.Status { return e.st }

// plainError turns a gRPC status error into an rpcError.
func plainError(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	msg := st.Message()
	switch st.Code() {
	case codes.NotFound, codes.InvalidArgument, codes.AlreadyExists, codes.FailedPrecondition, codes.Unknown:
	case codes.DeadlineExceeded:
		msg = "timed out: " + msg
	default:
		msg = strings.ToLower(strings.ReplaceAll(st.Code().String(), "_", " ")) + ": " + msg
	}
	return &rpcError{msg: msg, st: st}
}

// retryable reports whether a streaming operation that failed with err is worth resuming
// (a leader change, a broken connection or an election in progress).
func retryable(err error) bool {
	if errors.Is(err, errNoLeader) {
		return true
	}
	st, ok := status.FromError(err)
	if !ok {
		return strings.Contains(err.Error(), "cannot reach a coordinator") || strings.Contains(err.Error(), errNoLeader.Error())
	}
	switch st.Code() {
	case codes.Unavailable, codes.Aborted:
		return true
	}
	return false
}

// call runs one RPC through c.do (following the leader, retrying while there is none) and
// returns its response.
func call[T any](ctx context.Context, c *client, rpc func(context.Context, pb.CoordinatorClient, ...grpc.CallOption) (T, error)) (T, error) {
	var resp T
	err := c.do(ctx, func(ctx context.Context, cl pb.CoordinatorClient, opts ...grpc.CallOption) error {
		var err error
		resp, err = rpc(ctx, cl, opts...)
		return err
	})
	return resp, err
}
