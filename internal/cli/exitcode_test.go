package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// TestExitCode maps gRPC status codes (bare, wrapped, and as the client reports them) and
// local errors to exit codes.
func TestExitCode(t *testing.T) {
	_, notExist := os.Open(filepath.Join(t.TempDir(), "missing.gpm"))
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, ExitOK},
		{"plain error", errors.New("job j-1 failed: boom"), ExitError},
		{"usage", usageErrorf("--out is required"), ExitUsage},
		{"wrapped usage", fmt.Errorf("submit: %w", usageErrorf("bad")), ExitUsage},
		{"explicit code wins over the status", withCode(ExitError, status.Error(codes.NotFound, "x")), ExitError},
		{"missing file", notExist, ExitNotFound},
		{"wrapped missing file", fmt.Errorf("open model: %w", notExist), ExitNotFound},
		{"interrupted", context.Canceled, ExitInterrupted},
		{"wrapped interrupted", fmt.Errorf("job j-1: %w", context.Canceled), ExitInterrupted},
		{"no leader", fmt.Errorf("%w after 30s", errNoLeader), ExitUnreachable},
		{"cobra unknown command", errors.New(`unknown command "sumbit" for "coordinator"`), ExitUsage},
		{"client auth error", withCode(ExitAuth, errors.New("the coordinator rejected the token")), ExitAuth},
		{"client unreachable error", withCode(ExitUnreachable, errors.New("cannot reach a coordinator")), ExitUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := exitCode(tc.err); got != tc.want {
				t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		code codes.Code
		want int
	}{
		{codes.NotFound, ExitNotFound},
		{codes.Unauthenticated, ExitAuth},
		{codes.PermissionDenied, ExitAuth},
		{codes.Unavailable, ExitUnreachable},
		{codes.DeadlineExceeded, ExitUnreachable},
		{codes.InvalidArgument, ExitError},
		{codes.FailedPrecondition, ExitError},
		{codes.AlreadyExists, ExitError},
		{codes.Internal, ExitError},
		{codes.Unknown, ExitError},
		{codes.ResourceExhausted, ExitError},
	} {
		err := status.Error(tc.code, "message")
		for _, form := range []struct {
			name string
			err  error
		}{{"status", err}, {"wrapped", fmt.Errorf("get job: %w", err)}, {"client", plainError(err)}, {"wrapped client", fmt.Errorf("job x: %w", plainError(err))}} {
			t.Run(tc.code.String()+" "+form.name, func(t *testing.T) {
				if got := exitCode(form.err); got != tc.want {
					t.Errorf("exitCode(%v) = %d, want %d", form.err, got, tc.want)
				}
			})
		}
	}
}

// TestExitCodesOfCommands runs commands that fail in each way and checks the process exit
// code and that stderr names the problem.
func TestExitCodesOfCommands(t *testing.T) {
	f := startFake(t, nil)
	f.jobs["j-1"] = &pb.Job{Id: "j-1", State: pb.JobState_JOB_STATE_RUNNING, Spec: &pb.JobSpec{Method: "gl", MaxIter: 10}}
	dir := t.TempDir()
	down := "127.0.0.1:1" // nothing listens on port 1
	for _, tc := range []struct {
		name string
		args []string
		want int
		msg  string
	}{
		{"ok", []string{"status", "j-1", "--addr", f.addr, "--token", testToken}, ExitOK, ""},
		{"unknown flag", []string{"status", "j-1", "--bogus"}, ExitUsage, "unknown flag"},
		{"bad flag value", []string{"eval", "--max-iter", "many"}, ExitUsage, "invalid argument"},
		{"missing argument", []string{"status"}, ExitUsage, "accepts 1 arg"},
		{"unknown command", []string{"sumbit"}, ExitUsage, "unknown command"},
		{"bad -o", []string{"version", "-o", "xml"}, ExitUsage, "-o \"xml\""},
		{"--json and -o yaml", []string{"version", "--json", "-o", "yaml"}, ExitUsage, "disagree"},
		{"bad --log-format", []string{"version", "--log-format", "xml"}, ExitUsage, "--log-format"},
		{"predict without --out", []string{"predict", "--model", "m.gpm", "--data", "x.csv"}, ExitUsage, "--out"},
		{"job not found", []string{"status", "j-404", "--addr", f.addr, "--token", testToken}, ExitNotFound, "not found"},
		{"model file not found", []string{"predict", "--model", filepath.Join(dir, "none.gpm"), "--data", "x.csv", "--out", "-"}, ExitNotFound, "none.gpm"},
		{"model show of a missing file", []string{"model", "show", filepath.Join(dir, "none.gpm")}, ExitNotFound, "none.gpm"},
		{"wrong token", []string{"status", "j-1", "--addr", f.addr, "--token", "wrong"}, ExitAuth, "rejected the token"},
		{"unreachable", []string{"status", "j-1", "--addr", down, "--token", testToken, "--leader-wait", "100ms"}, ExitUnreachable, "cannot reach"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := run(t, tc.args...)
			if code != tc.want {
				t.Fatalf("%v: exit %d, want %d; stderr: %s", tc.args, code, tc.want, errOut)
			}
			if !strings.Contains(errOut, tc.msg) {
				t.Errorf("%v: stderr %q does not say %q", tc.args, errOut, tc.msg)
			}
		})
	}
}

// TestInterruptedExitCode: a command ended by its context (SIGINT) exits 130.
func TestInterruptedExitCode(t *testing.T) {
	f := startFake(t, nil)
	f.jobs["j-1"] = &pb.Job{Id: "j-1", State: pb.JobState_JOB_STATE_RUNNING, Spec: &pb.JobSpec{Method: "gl", MaxIter: 10}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errOut strings.Builder
	code := Execute(ctx, []string{"logs", "j-1", "--addr", f.addr, "--token", testToken}, &out, &errOut)
	if code != ExitInterrupted || !strings.Contains(errOut.String(), "interrupted") {
		t.Errorf("exit %d (want %d), stderr %q", code, ExitInterrupted, errOut.String())
	}
}

// TestWorkerExitCodes: the worker program maps errors the same way.
func TestWorkerExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"version"}, ExitOK},
		{[]string{"serve", "--bogus"}, ExitUsage},
		{[]string{"serve", "--join", "127.0.0.1:1", "--join-token-file", filepath.Join(t.TempDir(), "none")}, ExitNotFound},
	} {
		var out, errOut strings.Builder
		if code := ExecuteWorker(context.Background(), tc.args, &out, &errOut); code != tc.want {
			t.Errorf("worker %v: exit %d, want %d; stderr: %s", tc.args, code, tc.want, errOut.String())
		}
	}
}

// TestMembersRemoveProvesRaftSecret: on a cluster with a raft secret, members remove without
// the secret is an authentication failure (exit 4); with --raft-secret-file the coordinator
// accepts the proof and answers the request itself.
func TestMembersRemoveProvesRaftSecret(t *testing.T) {
	dir := t.TempDir()
	tokenFile, secretFile := filepath.Join(dir, "token"), filepath.Join(dir, "raft.secret")
	if err := os.WriteFile(tokenFile, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secretFile, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	api, _, _, _ := serveNode(t, dir, "--token-file", tokenFile, "--raft-secret-file", secretFile, "--bootstrap",
		"--raft-heartbeat-timeout", "200ms", "--raft-election-timeout", "200ms")
	conn := []string{"--addr", api, "--token", testToken, "--leader-wait", "3m"}
	if code, _, errOut := run(t, append([]string{"members"}, conn...)...); code != 0 {
		t.Fatalf("members: exit %d: %s", code, errOut)
	}
	code, _, errOut := run(t, append([]string{"members", "remove", "ghost"}, conn...)...)
	if code != ExitAuth || !strings.Contains(errOut, "raft secret") {
		t.Errorf("members remove without the secret: exit %d (want %d): %s", code, ExitAuth, errOut)
	}
	code, _, errOut = run(t, append([]string{"members", "remove", "ghost", "--raft-secret-file", secretFile}, conn...)...)
	t.Logf("members remove ghost with the secret: exit %d: %s", code, errOut)
	if code == ExitAuth || strings.Contains(errOut, "proof") {
		t.Errorf("members remove with the secret: exit %d: %s", code, errOut)
	}
}
