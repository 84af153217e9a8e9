// Package version reports the build's version and git commit, as stamped by the linker:
//
//	go build -ldflags "-X github.com/gpreduce/gpreduce/internal/version.version=v1.2.3 \
//	    -X github.com/gpreduce/gpreduce/internal/version.commit=$(git rev-parse HEAD)"
//
// scripts/images.sh and the Dockerfile stamp both. An unstamped build reports version "dev"
// and the commit Go recorded from the checkout (go build -buildvcs), if any.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version and commit are set by the linker (-X); they are never written at run time.
var (
	version = ""
	commit  = ""
)

// Info is what a binary knows of its build.
type Info struct {
	// Version is the release version ("dev" when not stamped).
	Version string
	// Commit is the git commit the binary was built from ("unknown" when neither stamped
	// nor recorded by the Go toolchain); a "-dirty" suffix marks uncommitted changes.
	Commit string
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string
}

// Get returns the build information: the linker-stamped version and commit, else what the
// Go toolchain recorded in the binary.
func Get() Info {
	return get(version, commit, readBuildInfo)
}

func readBuildInfo() (*debug.BuildInfo, bool) { return debug.ReadBuildInfo() }

func get(v, c string, read func() (*debug.BuildInfo, bool)) Info {
	info := Info{Version: v, Commit: c, GoVersion: runtime.Version()}
	if info.Commit == "" {
		if bi, ok := read(); ok {
			var rev, dirty string
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.modified":
					if s.Value == "true" {
						dirty = "-dirty"
					}
				}
			}
			if rev != "" {
				info.Commit = rev + dirty
			}
		}
	}
	if info.Version == "" {
		info.Version = "dev"
	}
	if info.Commit == "" {
		info.Commit = "unknown"
	}
	return info
}

// String formats the information on one line: "v1.2.3 (commit 0123abc, go1.26.8)".
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, %s)", i.Version, i.Commit, i.GoVersion)
}
