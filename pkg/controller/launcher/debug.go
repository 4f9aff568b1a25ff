package launcher

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

// DebugMode readies a plan in debug mode for a run started by hand; call it after
// plan.SetRunMode, with the command the launcher runs outside debug mode. Debug mode keeps
// the docs' commands (the launcher's `sleep inf`, the workers' `/usr/bin/sshd -D` or
// runMode.debug's), but a worker debug command that is sshd runs as the job's sshd: with
// the job's host key and authorized keys, on the SSH port, in the foreground, so that the
// launcher reaches it with host keys checked. Any other debug command is left as it is.
// The plan's DebugHint is the exact command that starts the run: the launch command, run
// in the launcher with kubectl exec.
func (j Layout) DebugMode(plan *engine.Plan, namespace string, launch []string) {
	if !plan.Debug {
		return
	}
	workersRunSSHD := true
	for i := range plan.Groups {
		g := &plan.Groups[i]
		if g.Type != batch.WorkerType || g.Debug == nil {
			continue
		}
		if !IsSSHD(g.Debug.Command) {
			workersRunSSHD = false
			continue
		}
		d := *g.Debug // the job's own setting stays as it is
		d.Command = j.debugSSHDCommand(d.Command)
		g.Debug = &d
	}
	run := fmt.Sprintf("kubectl exec -it -n %s %s-%s -- %s", ShellQuote(namespace), j.Name, batch.LauncherType, ShellJoin(launch))
	if workersRunSSHD {
		plan.DebugHint = "Start the run with: " + run
		return
	}
	plan.DebugHint = "The workers' debug command is not sshd, so the launcher cannot reach them; with sshd running on every worker, start the run with: " + run
}

// IsSSHD reports whether a command runs sshd: its program's base name is sshd.
func IsSSHD(command []string) bool {
	return len(command) > 0 && path.Base(command[0]) == "sshd"
}

// debugSSHDCommand runs a debug command that is sshd (its program and arguments kept) as the
// job's sshd: sshdCommand's options that the command does not set itself are added after
// its own arguments (sshd takes the first value of an option it is given twice). The
// docs' default program, /usr/bin/sshd, is not where Debian-based images have it: when the
// command's program is not in the image, ssh.sshdPath runs instead, and the container's log
// says so.
func (j Layout) debugSSHDCommand(command []string) []string {
	program, args := command[0], command[1:]
	script := `mkdir -p /run/sshd && s=$1 && shift && ` +
		`if ! { [ -x "$s" ] || command -v "$s" >/dev/null 2>&1; }; then echo "$s is not in the image: running $1 (ssh.sshdPath) instead" >&2; s=$1; fi && ` +
		`shift && exec "$s" "$@"`
	out := []string{"/bin/sh", "-c", script, "sshd", program, j.SSH.SshdPath}
	out = append(out, args...)
	return append(out, j.sshdOptions(args)...)
}

// ShellJoin writes a command as a POSIX shell reads it back: each word quoted when it needs
// to be.
func ShellJoin(words []string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = ShellQuote(w)
	}
	return strings.Join(quoted, " ")
}

var plainWord = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// ShellQuote quotes one word for a POSIX shell: as it is when nothing in it is special,
// else in single quotes.
func ShellQuote(w string) string {
	if plainWord.MatchString(w) {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}
