// Package version tells which build of the controller is running: the release version given
// at link time (`make image` and `make release` set it), the source revision Go records in
// the binary, and the Go version it was built with.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version and revision are set at link time (hack/image does):
// -ldflags "-X github.com/t9k-jobs/t9k-jobs/pkg/version.version=v1.2.3 -X ...revision=<commit>".
// Without a revision, the one go build stamped (-buildvcs) is read.
var version, revision = "", ""

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
	if revision != "" {
		info.Revision = revision
	} else if bi, ok := debug.ReadBuildInfo(); ok {
		info.Revision = vcsRevision(bi.Settings)
	}
	return info
}

// vcsRevision reads the commit go build stamped into the binary (-buildvcs).
func vcsRevision(settings []debug.BuildSetting) string {
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
