package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/gpreduce/gpreduce/internal/version"
)

// TestVersion checks that `version` and `--version` of both programs print the program
// name, the version and the commit.
func TestVersion(t *testing.T) {
	info := version.Get()
	for _, tc := range []struct {
		name string
		run  func(ctx context.Context, args []string, stdout, stderr *bytes.Buffer) int
		args []string
	}{
		{"coordinator", func(ctx context.Context, a []string, o, e *bytes.Buffer) int { return Execute(ctx, a, o, e) }, []string{"version"}},
		{"coordinator", func(ctx context.Context, a []string, o, e *bytes.Buffer) int { return Execute(ctx, a, o, e) }, []string{"--version"}},
		{"worker", func(ctx context.Context, a []string, o, e *bytes.Buffer) int { return ExecuteWorker(ctx, a, o, e) }, []string{"version"}},
		{"worker", func(ctx context.Context, a []string, o, e *bytes.Buffer) int { return ExecuteWorker(ctx, a, o, e) }, []string{"--version"}},
	} {
		t.Run(tc.name+" "+tc.args[0], func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := tc.run(t.Context(), tc.args, &out, &errOut); code != 0 {
				t.Fatalf("exit %d: %s", code, errOut.String())
			}
			want := tc.name + " " + info.Version + " (commit " + info.Commit + ", " + info.GoVersion + ")\n"
			if out.String() != want {
				t.Errorf("printed %q, want %q", out.String(), want)
			}
			if !strings.Contains(out.String(), info.Commit) {
				t.Errorf("no commit in %q", out.String())
			}
		})
	}
}
