package version

import (
	"runtime/debug"
	"testing"
)

func TestGet(t *testing.T) {
	recorded := func(settings ...debug.BuildSetting) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) { return &debug.BuildInfo{Settings: settings}, true }
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	for _, tc := range []struct {
		name, version, commit string
		read                  func() (*debug.BuildInfo, bool)
		wantVersion, wantCmt  string
	}{
		{"stamped", "v1.2.3", "abc123", recorded(debug.BuildSetting{Key: "vcs.revision", Value: "fff"}), "v1.2.3", "abc123"},
		{"recorded by go build", "", "", recorded(debug.BuildSetting{Key: "vcs.revision", Value: "fff"}), "dev", "fff"},
		{"recorded dirty", "", "", recorded(debug.BuildSetting{Key: "vcs.revision", Value: "fff"},
			debug.BuildSetting{Key: "vcs.modified", Value: "true"}), "dev", "fff-dirty"},
		{"nothing known", "", "", none, "dev", "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := get(tc.version, tc.commit, tc.read)
			if got.Version != tc.wantVersion || got.Commit != tc.wantCmt || got.GoVersion == "" {
				t.Errorf("get(%q, %q) = %+v, want version %q commit %q and a Go version", tc.version, tc.commit, got, tc.wantVersion, tc.wantCmt)
			}
		})
	}
}
