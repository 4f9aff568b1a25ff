// Package version tells which build of the controller is running: the release version given
// at link time (`make image` and `make release` set it), the source revision Go records in
// the binary, and the Go version it was built with.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set at link time: -ldflags "-X github.com/t9k-jobs/t9k-jobs/pkg/version.version=v1.2.3".
var version = ""

// Info describes a build.
type Info struct {
	Version   string // the release version, or "devel" for a build that was given none
	Revision  string // the source's commit, with "-dirty" when the tree had changes; "unknown" without VCS data
	GoVersion string
	Platform  string // os/arch
}

// Get returns the running binary's build.
func Get() Info {
	info := Info{Version: version, Revision: "unknown", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if info.Version == "" {
		info.Version = "devel"
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		info.Revision = revision(bi.Settings)
	}
	return info
}

// revision reads the commit go build stamped into the binary (-buildvcs).
func revision(settings []debug.BuildSetting) string {
	rev, dirty := "", false
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

// String is the build in one line, as --version prints it.
func (i Info) String() string {
	return fmt.Sprintf("t9k-job-controller %s (revision %s, %s, %s)", i.Version, i.Revision, i.GoVersion, i.Platform)
}
