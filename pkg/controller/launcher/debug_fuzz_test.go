package launcher

import (
	"fmt"
	"hash/crc32"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/t9k-jobs/t9k-jobs/examples"
	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

// shellSplit reads a command line the way a POSIX shell splits it into words, for the subset
// ShellJoin writes: words apart by blanks, single quotes that keep everything up to the next
// single quote, and, outside quotes, only characters that mean nothing to the shell. Any
// other character outside quotes is an error: the shell would read it as syntax (a
// redirection, a variable, a pattern, a comment, ...).
func shellSplit(line string) ([]string, error) {
	var words []string
	var word strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case c == ' ':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		case c == '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unterminated quote at %d in %q", i, line)
			}
			word.WriteString(line[i+1 : i+1+end])
			i += 1 + end
			inWord = true
		case c == '\\' && i+1 < len(line) && line[i+1] == '\'':
			word.WriteByte('\'')
			i++
			inWord = true
		case plainWord.MatchString(string(c)):
			word.WriteByte(c)
			inWord = true
		default:
			return nil, fmt.Errorf("%q at %d in %q is shell syntax outside quotes", c, i, line)
		}
	}
	if inWord {
		words = append(words, word.String())
	}
	return words, nil
}

// launchSeeds are commands of the documented examples as the launcher kinds run them.
func launchSeeds(f *testing.F) []string {
	mpi := &batch.MPIJob{}
	if err := examples.Decode("mpi-example.yaml", mpi); err != nil {
		f.Fatal(err)
	}
	colossal := &batch.ColossalAIJob{}
	if err := examples.Decode("colossalai-example.yaml", colossal); err != nil {
		f.Fatal(err)
	}
	return []string{
		strings.Join(append(mpi.Spec.Worker.ExtraMPIArgs, mpi.Spec.Worker.Cmd...), "\x00"),
		strings.Join(colossal.Spec.Worker.Command, "\x00"),
		strings.Join([]string{"mpirun", "--mca", "plm_rsh_args", "-F /root/.ssh/config", "--mca", "btl", "^openib",
			"it's", `"$HOME"`, "a\tb", "*", "", "-x", "NCCL_DEBUG=INFO"}, "\x00"),
		"python\x00-c\x00import os; print(os.environ['RANK'])\n",
	}
}

// FuzzShellJoin joins any words (NUL separates them in the input: a NUL cannot be in an
// argument) and, as the debug hint of the launcher kinds, any launch command.
// What the code promises (debug.go, ShellJoin and DebugMode):
//   - a POSIX shell reads the joined words back word for word, every word exactly once and
//     in order, with nothing outside quotes that the shell would interpret; /bin/sh agrees
//     (asked for one input in eight);
//   - a plain word stays unquoted;
//   - the debug hint ends in "kubectl exec -it -n <namespace> <job>-launcher -- " and the
//     joined launch command, for any namespace.
func FuzzShellJoin(f *testing.F) {
	for _, s := range launchSeeds(f) {
		f.Add(s, "default")
	}
	sh, shErr := exec.LookPath("sh")
	f.Fuzz(func(t *testing.T, joined, namespace string) {
		words := strings.Split(joined, "\x00")
		line := ShellJoin(words)
		got, err := shellSplit(line)
		if err != nil || !reflect.DeepEqual(got, words) {
			t.Fatalf("ShellJoin(%q) = %s, which a shell splits into %q (%v)", words, line, got, err)
		}
		for _, w := range words {
			if plainWord.MatchString(w) && ShellQuote(w) != w {
				t.Fatalf("the plain word %q was quoted: %s", w, ShellQuote(w))
			}
		}
		// /bin/sh costs a process per input: it checks one input in eight (by a hash of the
		// input, so a failure reproduces), shellSplit every one.
		if shErr == nil && crc32.ChecksumIEEE([]byte(joined))%8 == 0 {
			out, err := exec.Command(sh, "-c", `printf '%s\0' `+line).Output()
			if err != nil {
				t.Fatalf("sh -c on %s: %v", line, err)
			}
			if got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00"); !reflect.DeepEqual(got, words) {
				t.Fatalf("ShellJoin(%q) = %s, which sh reads as %q", words, line, got)
			}
		}

		if strings.ContainsRune(namespace, 0) {
			return
		}
		j := Layout{Name: "job", SSH: batch.SSHConfig{AuthMountPath: "/root/.ssh", SshdPath: "/usr/sbin/sshd"}}
		plan := &engine.Plan{Debug: true, Groups: []engine.Group{{Type: batch.WorkerType, Debug: &batch.ReplicaDebugSet{Command: []string{"/usr/sbin/sshd", "-D"}}}}}
		j.DebugMode(plan, namespace, words)
		const prefix = "Start the run with: "
		hint, ok := strings.CutPrefix(plan.DebugHint, prefix)
		if !ok {
			t.Fatalf("debug hint %q", plan.DebugHint)
		}
		got, err = shellSplit(hint)
		want := append([]string{"kubectl", "exec", "-it", "-n", namespace, "job-launcher", "--"}, words...)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("debug hint %s splits into %q (%v), want %q", hint, got, err, want)
		}
	})
}
