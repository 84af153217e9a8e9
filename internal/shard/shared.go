package shard

import (
	"fmt"
	"os"
	"path/filepath"
)

// SharedDataDir returns the shared data directory, <module root>/../shared/data, where the
// module root is the nearest directory at or above the working directory that holds a
// go.mod file. It is meant for tests, whose working directory is their package's directory.
// It returns an error if there is no module root or no such directory.
//
// Tests that need the data should skip when it is missing, except in CI, where a missing
// directory is a failure. A helper to copy into a package's tests:
//
//	func sharedData(t testing.TB) string {
//		t.Helper()
//		dir, err := shard.SharedDataDir()
//		if err != nil {
//			if os.Getenv("CI") == "true" {
//				t.Fatal(err)
//			}
//			t.Skip(err)
//		}
//		return dir
//	}
func SharedDataDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find shared data: %w", err)
	}
	root := wd
	for {
		if fi, err := os.Stat(filepath.Join(root, "go.mod")); err == nil && !fi.IsDir() {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			return "", fmt.Errorf("find shared data: no go.mod in %s or any directory above it", wd)
		}
		root = parent
	}
	dir := filepath.Join(filepath.Dir(root), "shared", "data")
	fi, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("find shared data: %w (expected it next to the module root %s)", err, root)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("find shared data: %s is not a directory", dir)
	}
	return dir, nil
}
