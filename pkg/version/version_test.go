package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestRevisionMarksADirtyTree(t *testing.T) {
	for _, tc := range []struct {
		settings []debug.BuildSetting
		want     string
	}{
		{nil, "unknown"},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}}, "abc"},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "true"}}, "abc-dirty"},
	} {
		if got := vcsRevision(tc.settings); got != tc.want {
			t.Errorf("vcsRevision(%v) = %q, want %q", tc.settings, got, tc.want)
		}
	}
}

func TestGetNamesAnUnversionedBuildDevel(t *testing.T) {
	info := Get()
	if info.Version != "devel" || !strings.HasPrefix(info.GoVersion, "go") || !strings.HasPrefix(info.String(), "t9k-job-controller devel (revision ") {
		t.Errorf("Get() = %+v, %q", info, info.String())
	}
}
