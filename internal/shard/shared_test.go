package shard

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSharedDataDir(t *testing.T) {
	dir := sharedData(t)
	if !filepath.IsAbs(dir) {
		t.Errorf("%s is not absolute", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
		t.Errorf("shared data directory without its README: %v", err)
	}
}
