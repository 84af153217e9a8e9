package testutil

import (
	"context"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gpreduce/gpreduce/internal/shard"
)

// logWriter forwards log lines to t.Log until the test's cleanups have run, then drops them
// (raft goroutines may log after a test ends, which t.Log does not allow).
type logWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(string(p))
	}
	return len(p), nil
}

// Logger returns a logger that writes to t.Log at warn level, or at the level the
// environment variable env names (debug, info, ...).
func Logger(t testing.TB, env string) zerolog.Logger {
	w := &logWriter{t: t}
	t.Cleanup(func() { // registered first, so it runs after every other cleanup
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	level := zerolog.WarnLevel
	if s := os.Getenv(env); s != "" {
		if l, err := zerolog.ParseLevel(s); err == nil {
			level = l
		}
	}
	return zerolog.New(zerolog.ConsoleWriter{Out: w, NoColor: true, TimeFormat: "15:04:05.000"}).
		Level(level).With().Timestamp().Logger()
}

// Context returns a context that ends WaitSlack x 30 s after it is made or when the test
// ends: like Eventually's waits, its deadline only bounds a hang (the remote engine's tests
// hang on it when a round does not fail at once). Tests that hold one context across many
// waits take ClusterContext.
func Context(t testing.TB) context.Context {
	return contextFor(t, WaitSlack*30*time.Second)
}

// ClusterContext returns a context that ends ContextWait after it is made or when the test
// ends, for tests that hold it across local training, cluster jobs and many waits.
func ClusterContext(t testing.TB) context.Context {
	return contextFor(t, ContextWait)
}

func contextFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// WaitSlack stretches every wait of Eventually: a deadline only bounds how long a failing
// test hangs, it measures nothing, and a loaded 2-core machine can be many times slower than
// the one a timeout was chosen on. Tests that assert a bound on time measure it themselves.
const WaitSlack = 6

// ContextWait bounds a ClusterContext. A test holds it across all its waits, so it is longer
// than any one of them: under load (a 2-core machine shared with training runs) the 30 s it
// once was did not hold TestServerTrainsGRIEF's two local fits and two jobs, and under -race
// beside training runs 3 minutes did not hold them, nor TestRetentionBoundsState's waves of
// jobs (417 s and 277 s into the tests).
const ContextWait = 15 * time.Minute

// MinWait is the shortest deadline Eventually gives a condition: under heavy load cluster
// waits of 2 minutes have timed out, so no wait for a cluster condition ends sooner.
const MinWait = 3 * time.Minute

// Eventually polls cond every 10 ms until it returns nil, and fails the test when WaitSlack
// times timeout (at least MinWait) passes first, naming what it waited for and cond's last
// error.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	timeout = max(timeout*WaitSlack, MinWait)
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %s: %v", what, timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// FreeAddr returns a loopback address "127.0.0.1:port" whose port was free a moment ago, for
// a server the test starts on a fixed address (raft advertises its address, so port 0 will
// not do). The port is drawn below the kernel's ephemeral range (Linux
// /proc/sys/net/ipv4/ip_local_port_range, 32768-60999 by default): ports handed out for
// port-0 listeners and outgoing connections, by this process or any other test process, come
// from that range, so between FreeAddr closing its probe and the server binding, only another
// FreeAddr can take the port (one in about 12,000 per concurrent draw), not the traffic of the
// rest of the test run. Where the range cannot be read it falls back to a port-0 probe.
func FreeAddr(t testing.TB) string {
	t.Helper()
	lo := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				lo = v
			}
		}
	}
	base := max(lo-12000, 1024)
	for try := 0; try < 200 && lo-base >= 100; try++ {
		port := base + rand.IntN(lo-base)
		lis, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		addr := lis.Addr().String()
		lis.Close()
		return addr
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("no free loopback port: %v", err)
	}
	defer lis.Close()
	return lis.Addr().String()
}

// SharedData returns the shared data directory ../shared/data next to the module root
// (shard.SharedDataDir): a missing directory skips the test, or fails it when CI=true.
func SharedData(t testing.TB) string {
	t.Helper()
	dir, err := shard.SharedDataDir()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return dir
}
