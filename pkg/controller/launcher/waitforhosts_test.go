package launcher

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runWaitForHosts runs the launcher's command wrapper with the hostfile at hostfile and PATH
// path, around `echo ran`, and returns its output.
func runWaitForHosts(t *testing.T, hostfile, path string) string {
	t.Helper()
	argv := WaitForHosts([]string{"echo", "ran"})
	argv[2] = strings.Replace(argv[2], HostfilePath, hostfile, 1)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=" + path}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return string(out)
}

// The launcher's command runs once every host of the hostfile resolves: a name that does not
// resolve yet is asked again each second (here a getent that answers on its third call).
func TestLauncherWaitsForItsHostsToResolve(t *testing.T) {
	dir := t.TempDir()
	hostfile := filepath.Join(dir, "hostfile")
	if err := os.WriteFile(hostfile, []byte("job-worker-0.job slots=2\njob-worker-1.job slots=2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin")
	calls := filepath.Join(dir, "calls")
	// getent fails twice for job-worker-0.job, as before its DNS record is published.
	getent := `#!/bin/sh
echo "$2" >>` + calls + `
[ "$2" != job-worker-0.job ] || [ "` + "`grep -c job-worker-0 " + calls + "`" + `" -ge 3 ]
`
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "getent"), []byte(getent), 0o755); err != nil {
		t.Fatal(err)
	}
	if out := runWaitForHosts(t, hostfile, bin+":/usr/bin:/bin"); out != "ran\n" {
		t.Errorf("output %q, want the command's own", out)
	}
	asked, _ := os.ReadFile(calls)
	if got, want := string(asked), "job-worker-0.job\njob-worker-0.job\njob-worker-0.job\njob-worker-1.job\n"; got != want {
		t.Errorf("getent was asked for:\n%s\nwant:\n%s", got, want)
	}

	// An image without getent runs the command at once.
	bare := filepath.Join(dir, "bare")
	echo, err := exec.LookPath("echo")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(bare, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(echo, filepath.Join(bare, "echo")); err != nil {
		t.Fatal(err)
	}
	if out := runWaitForHosts(t, hostfile, bare); out != "ran\n" {
		t.Errorf("without getent: output %q, want the command's own", out)
	}
}
