package launcher

import (
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

// TestShellJoin: a shell reads the joined command back word for word, and plain words stay
// unquoted.
func TestShellJoin(t *testing.T) {
	words := []string{"mpirun", "--mca", "plm_rsh_args", "-F /root/.ssh/config", "--mca", "btl", "^openib",
		"it's", `"$HOME"`, "a\tb", "*", "", "-x", "NCCL_DEBUG=INFO", "/usr/bin/python3", "a,b:c@d%e+f"}
	joined := ShellJoin(words)
	if want := "mpirun --mca plm_rsh_args '-F /root/.ssh/config' --mca btl '^openib' 'it'\\''s' '\"$HOME\"' 'a\tb' '*' '' " +
		"-x NCCL_DEBUG=INFO /usr/bin/python3 a,b:c@d%e+f"; joined != want {
		t.Errorf("ShellJoin = %s\nwant       %s", joined, want)
	}
	out, err := exec.Command("/bin/sh", "-c", `printf '%s\0' `+joined).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00"); !reflect.DeepEqual(got, words) {
		t.Errorf("the shell read %q, want %q", got, words)
	}
}
