package cli

import (
	"bytes"
	"context"
	"errors"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpreduce/gpreduce/internal/testutil"
)

// runWorker executes the worker command line and returns exit code, stdout and stderr.
func runWorker(ctx context.Context, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := ExecuteWorker(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestWorkerCommandErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty-token")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"no join", []string{"serve"}, []string{"--join is required", "HOST:PORT"}},
		{"blank join", []string{"serve", "--join", " , "}, []string{"--join is required"}},
		{"empty token file", []string{"serve", "--join", "127.0.0.1:1", "--join-token-file", empty}, []string{"--join-token-file", empty, "empty"}},
		{"missing token file", []string{"serve", "--join", "127.0.0.1:1", "--join-token-file", filepath.Join(dir, "nope")}, []string{"nope"}},
		{"TLS without key", []string{"serve", "--join", "127.0.0.1:1", "--tls-cert", "c.pem"}, []string{"--tls-cert and --tls-key"}},
		{"missing certificate", []string{"serve", "--join", "127.0.0.1:1", "--tls-cert", filepath.Join(dir, "c.pem"), "--tls-key", filepath.Join(dir, "k.pem")}, []string{"c.pem"}},
		{"bad cache size", []string{"serve", "--join", "127.0.0.1:1", "--cache-size", "lots"}, []string{"--cache-size", `"lots"`}},
		{"negative cores", []string{"serve", "--join", "127.0.0.1:1", "--cores", "-2"}, []string{"--cores -2"}},
		{"zero drain timeout", []string{"serve", "--join", "127.0.0.1:1", "--drain-timeout", "0s"}, []string{"--drain-timeout 0s", "positive"}},
		{"bad listen", []string{"serve", "--join", "127.0.0.1:1", "--listen", "nowhere"}, []string{"listen address"}},
		{"bad log level", []string{"serve", "--join", "127.0.0.1:1", "--log-level", "loud"}, []string{"--log-level"}},
		{"stray argument", []string{"serve", "--join", "127.0.0.1:1", "extra"}, []string{"unknown command"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runWorker(context.Background(), tc.args...)
			want := ExitError
			switch tc.name {
			case "missing token file", "missing certificate":
				want = ExitNotFound
			case "bad log level", "stray argument":
				want = ExitUsage
			}
			if code != want {
				t.Fatalf("exit %d; want %d\n%s", code, want, errOut)
			}
			if !strings.HasPrefix(errOut, "worker: ") {
				t.Errorf("stderr %q does not start with the command name", errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q lacks %q", errOut, w)
				}
			}
		})
	}
}

func TestWorkerHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"serve", "--log-level"}},
		{[]string{"serve", "--help"}, []string{"--join", "--listen", "--advertise", "--join-token-file", "GPREDUCE_JOIN_TOKEN",
			"--cores", "--cache-dir", "--tls-cert", "--tls-key", "--tls-ca", "--metrics-addr", "--name"}},
	} {
		code, out, errOut := runWorker(context.Background(), tc.args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.args, code, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: help lacks %q", tc.args, w)
			}
		}
	}
}

// TestWorkerServeStops runs serve against an address where no coordinator listens and
// checks that it keeps running (it logs failed registrations), logs JSON, and exits 0 when
// its context ends.
func TestWorkerServeStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t.Setenv(joinTokenEnv, "from-env")
	var out, logs lockedBuffer
	type result struct{ code int }
	done := make(chan result, 1)
	go func() {
		done <- result{ExecuteWorker(ctx, []string{"serve", "--join", "127.0.0.1:1", "--listen", "127.0.0.1:0", "--name", "cli-test",
			"--cores", "1", "--cache-size", "64MiB"}, &out, &logs)}
	}()
	// Wait (a deadline that only bounds a hang) until serve has tried to register and logged
	// the failure, or has exited, which fails the test below.
	testutil.Eventually(t, 30*time.Second, "a failed registration logged", func() error {
		select {
		case r := <-done:
			done <- r
			return nil // serve exited: reported below
		default:
		}
		if !strings.Contains(logs.String(), "cannot register") {
			return errors.New("not yet")
		}
		return nil
	})
	select {
	case r := <-done:
		t.Fatalf("serve exited (code %d) before its context ended:\n%s", r.code, logs.String())
	default:
	}
	cancel()
	var r result
	select {
	case r = <-done:
	case <-time.After(testutil.MinWait): // only bounds a hang
		t.Fatalf("serve still running after its context ended:\n%s", logs.String())
	}
	errOut := logs.String()
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, errOut)
	}
	for _, w := range []string{`"level":"info"`, "worker serving", "cannot register", "worker stopped"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("logs lack %q:\n%s", w, errOut)
		}
	}
	if strings.Contains(errOut, "no join token") {
		t.Errorf("the token from the environment was not used:\n%s", errOut)
	}
}

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{"1048576", 1 << 20, false},
		{"512MiB", 512 << 20, false},
		{"4GiB", 4 << 30, false},
		{"1.5 GiB", 3 << 29, false},
		{"10KiB", 10 << 10, false},
		{"2TiB", 2 << 40, false},
		{"100B", 100, false},
		{"0", 0, true},
		{"-1GiB", 0, true},
		{"GiB", 0, true},
		{"4GB", 0, true},
	} {
		got, err := parseSize(tc.in)
		if tc.bad != (err != nil) || got != tc.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

// TestWorkerKernelCacheSize: worker serve's --kernel-cache-size reaches the worker's
// configuration: empty for the default (0), none for no cache (-1), a size in bytes; a bad
// value names the flag.
func TestWorkerKernelCacheSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{"", 0, false},
		{"none", -1, false},
		{"0", -1, false},
		{"512MiB", 512 << 20, false},
		{"lots", 0, true},
	} {
		f := &workerServeFlags{join: []string{"127.0.0.1:1"}, cacheSize: "4GiB", blobCacheSize: "2GiB", drainTimeout: time.Second, kernelCacheSize: tc.in}
		f.access.register(&cobra.Command{}) // the data-access flags' defaults
		cfg, err := f.config(zerolog.Nop())
		if tc.bad {
			if err == nil || !strings.Contains(err.Error(), "--kernel-cache-size") {
				t.Errorf("%q: error %v, want one naming --kernel-cache-size", tc.in, err)
			}
			continue
		}
		if err != nil || cfg.KernelCacheBytes != tc.want {
			t.Errorf("%q: KernelCacheBytes %d, %v; want %d", tc.in, cfg.KernelCacheBytes, err, tc.want)
		}
	}
}
