package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpreduce/gpreduce/internal/engine/remote"
	"github.com/gpreduce/gpreduce/internal/testutil"
)

// lockedBuffer is a bytes.Buffer safe for a command writing while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// serveInBackground runs `coordinator serve args` until the returned stop is called, which
// returns the exit code and the log. It returns once the API listens and fails the test if
// serve exits first.
func serveInBackground(t *testing.T, args ...string) (stop func() (int, string)) {
	t.Helper()
	stop, early := startServe(t, args...)
	if early != "" {
		t.Fatalf("serve exited before listening:\n%s", early)
	}
	return stop
}

// serveNode bootstraps a one-member cluster "s0" on fresh loopback addresses with its data
// under dir, plus the extra flags, and returns its API and raft addresses, its data directory
// and its stop. deadAddr frees a port before serve binds it, so another test process can take
// it in between (CI saw "bind: address already in use"); then serve exits at once and
// serveNode tries again with new ports and a new data directory, up to five times.
func serveNode(t *testing.T, dir string, extra ...string) (api, raftAddr, dataDir string, stop func() (int, string)) {
	t.Helper()
	var early string
	for attempt := 0; attempt < 5; attempt++ {
		api, raftAddr = deadAddr(t), deadAddr(t)
		dataDir = filepath.Join(dir, fmt.Sprintf("data%d", attempt))
		args := append([]string{"--id", "s0", "--api-addr", api, "--raft-addr", raftAddr, "--data-dir", dataDir}, extra...)
		stop, early = startServe(t, args...)
		if early == "" {
			return api, raftAddr, dataDir, stop
		}
		if !strings.Contains(early, "address already in use") {
			break
		}
		t.Logf("serve attempt %d lost its port to another process; retrying:\n%s", attempt+1, early)
	}
	t.Fatalf("serve exited before listening:\n%s", early)
	return
}

// startServe runs `coordinator serve args` in the background and waits until its API
// listens. If serve exits before that, early holds its exit code and log (and stop still
// returns them).
func startServe(t *testing.T, args ...string) (stop func() (int, string), early string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut lockedBuffer
	done := make(chan int, 1)
	go func() { done <- Execute(ctx, append([]string{"serve"}, args...), &out, &errOut) }()
	var once sync.Once
	var code int
	stop = func() (int, string) {
		once.Do(func() {
			cancel()
			select {
			case code = <-done:
			case <-time.After(testutil.MinWait): // only bounds a hang
				t.Fatal("serve did not stop within 3 minutes of its context ending")
			}
		})
		return code, errOut.String()
	}
	t.Cleanup(func() { stop() })
	// Return once the API listens, so that callers do not race the server's start (a
	// refused connection is exit 5 at once, whatever --leader-wait says).
	for i, a := range args {
		if a != "--api-addr" || i+1 == len(args) {
			continue
		}
		deadline := time.Now().Add(testutil.MinWait) // only bounds a hang
		for {
			c, err := net.DialTimeout("tcp", args[i+1], time.Second)
			if err == nil {
				c.Close()
				break
			}
			select {
			case c := <-done:
				done <- c // for stop
				return stop, fmt.Sprintf("exit %d\n%s", c, errOut.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("serve is not listening on %s after 3 minutes: %v\n%s", args[i+1], err, errOut.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return stop, ""
}

// TestServeRestart: serve bootstraps a one-member cluster, stops cleanly on its context (the
// signal), and a restart with the same data directory needs neither --bootstrap nor --join.
func TestServeRestart(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte(testToken+"\n"), 0o600)
	common := []string{"--token-file", tokenFile, "--raft-heartbeat-timeout", "200ms", "--raft-election-timeout", "200ms"}
	api, raftAddr, dataDir, stop := serveNode(t, dir, append(common, "--bootstrap")...)
	members := func() []map[string]any {
		t.Helper()
		var ms []map[string]any
		deadline := time.Now().Add(testutil.MinWait) // only bounds a hang
		for {
			code, out, errOut := run(t, "members", "--json", "--addr", api, "--token", testToken, "--leader-wait", "1s")
			if code == 0 {
				if err := json.Unmarshal([]byte(out), &ms); err != nil {
					t.Fatalf("members --json: %v: %s", err, out)
				}
				if len(ms) == 1 && ms[0]["leader"] == true && ms[0]["api_address"] == api {
					return ms
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no leader: exit %d: %s %s", code, out, errOut)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	members()
	code, log := stop()
	if code != 0 {
		t.Fatalf("serve exit %d:\n%s", code, log)
	}
	if !strings.Contains(log, "coordinator listening") || !strings.Contains(log, api) {
		t.Errorf("serve did not log its API address:\n%s", log)
	}
	stop = serveInBackground(t, append([]string{"--id", "s0", "--api-addr", api, "--raft-addr", raftAddr, "--data-dir", dataDir}, common...)...)
	if ms := members(); ms[0]["id"] != "s0" {
		t.Errorf("members after the restart: %v", ms)
	}
	code, log = stop()
	if code != 0 || !strings.Contains(log, `"restarted":true`) {
		t.Errorf("restart: exit %d:\n%s", code, log)
	}
}

func TestServeFlagErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty-token")
	os.WriteFile(empty, nil, 0o600)
	short := filepath.Join(dir, "short-secret")
	os.WriteFile(short, []byte("too short\n"), 0o600)
	t.Setenv(raftSecretEnv, "")
	t.Setenv(joinTokenEnv, "")
	base := []string{"serve", "--api-addr", deadAddr(t), "--raft-addr", deadAddr(t)}
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"no id", []string{"--data-dir", filepath.Join(dir, "a"), "--bootstrap"}, []string{"--id is required"}},
		{"no data dir", []string{"--id", "x", "--bootstrap"}, []string{"--data-dir is required"}},
		{"bootstrap and join", []string{"--id", "x", "--data-dir", filepath.Join(dir, "b"), "--bootstrap", "--join", "127.0.0.1:1"}, []string{"not both"}},
		{"new member without a way in", []string{"--id", "x", "--data-dir", filepath.Join(dir, "c")}, []string{"no raft state", "--bootstrap", "--join"}},
		{"empty token file", []string{"--id", "x", "--data-dir", filepath.Join(dir, "d"), "--bootstrap", "--token-file", empty}, []string{"--token-file", "empty"}},
		{"half TLS", []string{"--id", "x", "--data-dir", filepath.Join(dir, "e"), "--bootstrap", "--tls-cert", "c.pem"}, []string{"--tls-key"}},
		{"join without raft security", []string{"--id", "x", "--data-dir", filepath.Join(dir, "f"), "--join", "127.0.0.1:1"},
			[]string{"--join needs authenticated raft traffic", "--raft-secret-file", "--tls-ca"}},
		{"wide raft address without raft security", []string{"--id", "x", "--data-dir", filepath.Join(dir, "g"), "--bootstrap", "--raft-addr", "0.0.0.0:0"},
			[]string{"--raft-addr 0.0.0.0:0", "unauthenticated", "--raft-secret-file"}},
		{"short raft secret", []string{"--id", "x", "--data-dir", filepath.Join(dir, "h"), "--join", "127.0.0.1:1", "--raft-secret-file", short},
			[]string{"raft secret", "at least 16"}},
		{"bootstrap-id without join", []string{"--id", "x", "--data-dir", filepath.Join(dir, "f"), "--bootstrap-id", "x"}, []string{"--bootstrap-id", "--join"}},
		{"negative reduce memory", []string{"--id", "x", "--data-dir", filepath.Join(dir, "i"), "--bootstrap", "--reduce-memory", "-1"}, []string{"--reduce-memory -1", "must not be negative"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, errOut := run(t, append(base, c.args...)...)
			if code != 1 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			for _, w := range c.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("%q does not mention %q", errOut, w)
				}
			}
		})
	}
}

// TestDemoClusterMatchesLocal: the demo through the in-process cluster (raft coordinator, two
// workers over gRPC) writes the same model, byte for byte, as the demo's --local engine.
func TestDemoClusterMatchesLocal(t *testing.T) {
	dir := t.TempDir()
	var models [][]byte
	for _, mode := range [][]string{nil, {"--local"}} {
		p := filepath.Join(dir, "m.gpm")
		code, out, errOut := run(t, append([]string{"demo", "--out", p}, mode...)...)
		if code != 0 {
			t.Fatalf("demo %v: exit %d: %s", mode, code, errOut)
		}
		if mode == nil && !strings.Contains(out, "one-member cluster") {
			t.Errorf("demo output does not say it ran on the cluster:\n%s", out)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		models = append(models, b)
	}
	if !bytes.Equal(models[0], models[1]) {
		t.Errorf("the cluster demo's model (%d bytes) differs from the local one (%d bytes)", len(models[0]), len(models[1]))
	}
}

// TestReduceMemoryFlag: --reduce-memory's 0 (no bound) becomes the engine's negative value
// (its 0 selects the default); other values pass through.
func TestReduceMemoryFlag(t *testing.T) {
	for _, c := range []struct{ flag, want int64 }{{0, -1}, {remote.DefaultReduceMemory, remote.DefaultReduceMemory}, {1000, 1000}} {
		if got := reduceMemory(c.flag); got != c.want {
			t.Errorf("reduceMemory(%d) = %d, want %d", c.flag, got, c.want)
		}
	}
}
