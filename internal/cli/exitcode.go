package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Exit codes of the coordinator and worker commands. Scripts can tell a missing job or file,
// a rejected token and an unreachable cluster apart from other failures.
const (
	// ExitOK: the command did what was asked.
	ExitOK = 0
	// ExitError: any failure without a more specific code (a failed job, bad data, ...).
	ExitError = 1
	// ExitUsage: the command line is wrong (an unknown flag, a bad flag value, missing or
	// extra arguments).
	ExitUsage = 2
	// ExitNotFound: the job, model or file named does not exist.
	ExitNotFound = 3
	// ExitAuth: the coordinator rejected the credentials (Unauthenticated, PermissionDenied).
	ExitAuth = 4
	// ExitUnreachable: no coordinator answered (Unavailable, DeadlineExceeded, no leader).
	ExitUnreachable = 5
	// ExitInterrupted: SIGINT or SIGTERM ended the command (128 + SIGINT).
	ExitInterrupted = 130
)

// exitCodesHelp documents the exit codes in --help.
const exitCodesHelp = `Exit codes: 0 ok, 1 other errors, 2 usage errors (bad flags or arguments), 3 not found
(job, model or file), 4 authentication failed (token or certificate rejected), 5 coordinator
unreachable (or no leader), 130 interrupted.`

// exitError is an error that carries the exit code it should end the process with.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// withCode gives err the exit code code (nil stays nil).
func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

// usageErrorf is a usage error: exit code 2.
func usageErrorf(format string, args ...any) error {
	return withCode(ExitUsage, fmt.Errorf(format, args...))
}

// exitCode maps the error a command returned to the process exit code. It is the one place
// that does: an explicit code (withCode), then interruption, gRPC status codes and missing
// files.
func exitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	if ee := (*exitError)(nil); errors.As(err, &ee) {
		return ee.code
	}
	if errors.Is(err, context.Canceled) {
		return ExitInterrupted
	}
	if errors.Is(err, errNoLeader) {
		return ExitUnreachable
	}
	switch status.Code(err) {
	case codes.NotFound:
		return ExitNotFound
	case codes.Unauthenticated, codes.PermissionDenied:
		return ExitAuth
	case codes.Unavailable, codes.DeadlineExceeded:
		return ExitUnreachable
	}
	if errors.Is(err, fs.ErrNotExist) {
		return ExitNotFound
	}
	if strings.HasPrefix(err.Error(), "unknown command ") {
		return ExitUsage // cobra's error for a mistyped subcommand
	}
	return ExitError
}

// markUsageErrors makes the argument-count errors of cmd and its subcommands usage errors
// (exit code 2), as flag errors are through SetFlagErrorFunc.
func markUsageErrors(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return withCode(ExitUsage, err) })
	if args := cmd.Args; args != nil {
		cmd.Args = func(c *cobra.Command, a []string) error { return withCode(ExitUsage, args(c, a)) }
	}
	for _, c := range cmd.Commands() {
		markUsageErrors(c)
	}
}
