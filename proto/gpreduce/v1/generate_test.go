package gpreducev1

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedCodeIsCurrent regenerates the Go code from the .proto files into a temporary
// directory and compares it with the committed files. protoc and its plugins come from
// scripts/install-protoc.sh; without them the test skips, except in CI where it fails.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	for _, tool := range []string{"protoc", "protoc-gen-go", "protoc-gen-go-grpc"} {
		if _, err := exec.LookPath(tool); err != nil {
			if gopath, gerr := exec.Command("go", "env", "GOPATH").Output(); gerr == nil {
				if _, serr := os.Stat(filepath.Join(string(bytes.TrimSpace(gopath)), "bin", tool)); serr == nil {
					t.Setenv("PATH", os.Getenv("PATH")+string(os.PathListSeparator)+filepath.Join(string(bytes.TrimSpace(gopath)), "bin"))
					continue
				}
			}
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s not found: run scripts/install-protoc.sh", tool)
			}
			t.Skipf("%s not found: run scripts/install-protoc.sh", tool)
		}
	}
	out := t.TempDir()
	protos := []string{"gpreduce/v1/types.proto", "gpreduce/v1/worker.proto", "gpreduce/v1/coordinator.proto"}
	args := append([]string{"--go_out=paths=source_relative:" + out, "--go-grpc_out=paths=source_relative:" + out}, protos...)
	cmd := exec.Command("protoc", args...)
	cmd.Dir = filepath.Join("..", "..")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s", err, b)
	}
	gen, err := filepath.Glob(filepath.Join(out, "gpreduce", "v1", "*.go"))
	if err != nil || len(gen) == 0 {
		t.Fatalf("protoc generated nothing (%v)", err)
	}
	for _, g := range gen {
		want, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Base(g))
		if err != nil {
			t.Errorf("%s is generated but not committed: run go generate ./proto/...", filepath.Base(g))
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go generate ./proto/... (scripts/install-protoc.sh installs the tools)", filepath.Base(g))
		}
	}
}
