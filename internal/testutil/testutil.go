package testutil

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
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
// ends. Tests hold it across local training and cluster jobs, so, like Eventually's waits, its
// deadline only bounds a hang: under load (a 2-core machine shared with training runs)
// TestServerTrainsGRIEF's two local fits and two jobs outlasted a plain 30 s.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), WaitSlack*30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// WaitSlack stretches every wait of Eventually: a deadline only bounds how long a failing
// test hangs, it measures nothing, and a loaded 2-core machine can be many times slower than
// the one a timeout was chosen on. Tests that assert a bound on time measure it themselves.
const WaitSlack = 6

// Eventually polls cond every 10 ms until it returns nil, and fails the test when WaitSlack
// times timeout passes first, naming what it waited for and cond's last error.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	timeout *= WaitSlack
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
