package tasks_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/gpreduce/gpreduce/"

// TestImportDirection: the executors and the worker depend on the task registry, not on the
// method loops: `go list -deps` of internal/worker and internal/engine/remote (and of this
// package and internal/wire, which they import) contains no internal/train, and this package
// does not import the wire codec that imports it. The test needs the go tool; without it, it
// is skipped, except in CI (CI=true), where it fails.
func TestImportDirection(t *testing.T) {
	gotool, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the go tool is needed to list imports: %v", err)
		}
		t.Skipf("the go tool is not on PATH: %v", err)
	}
	tests := []struct {
		pkg       string
		forbidden []string
	}{
		{"internal/worker", []string{"internal/train"}},
		{"internal/engine/remote", []string{"internal/train"}},
		{"internal/wire", []string{"internal/train"}},
		{"internal/tasks", []string{"internal/train", "internal/wire", "internal/worker", "internal/coordinator"}},
	}
	for _, tc := range tests {
		t.Run(tc.pkg, func(t *testing.T) {
			out, err := exec.Command(gotool, "list", "-deps", module+tc.pkg).Output()
			if err != nil {
				var stderr string
				if ee, ok := err.(*exec.ExitError); ok {
					stderr = string(ee.Stderr)
				}
				t.Fatalf("go list -deps %s: %v\n%s", tc.pkg, err, stderr)
			}
			deps := strings.Fields(string(out))
			if !contains(deps, module+tc.pkg) {
				t.Fatalf("go list -deps %s does not list the package itself: %q", tc.pkg, out)
			}
			for _, f := range tc.forbidden {
				if contains(deps, module+f) {
					t.Errorf("%s depends on %s", tc.pkg, f)
				}
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
