package e2e

import (
	"bufio"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/test/harness"
)

var plugin struct {
	once sync.Once
	path string
	err  error
}

// kubectlT9k runs the kubectl plugin (docs/kubectl-plugin.md), built once, against the cluster
// under test, with kubectl's own connection flags.
func kubectlT9k(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := kubectlT9kCommand(t, args...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func kubectlT9kCommand(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	if err := buildPlugin(); err != nil {
		t.Fatal(err)
	}
	return exec.Command(plugin.path, append([]string{"--kubeconfig", env.kubeconfig}, args...)...)
}

// buildPlugin builds the plugin once.
func buildPlugin() error {
	plugin.once.Do(func() {
		dir, err := scratchDir("t9k-e2e-plugin-")
		if err != nil {
			plugin.err = err
			return
		}
		plugin.path = filepath.Join(dir, "kubectl-t9k")
		plugin.err = harness.Build(repoRoot, "./cmd/kubectl-t9k", plugin.path)
	})
	return plugin.err
}

// age masks the AGE column, the one thing in a table that changes from run to run.
var age = regexp.MustCompile(`(?m)\b\d+[smhd](\d+[smh])?$`)

// TestKubectlPlugin: kubectl t9k as a user reads it, on the fake nodes: the table of jobs,
// why one is where it is, pause and resume said back as they happened, a watch that shows
// the change, and the errors a person can act on.
func TestKubectlPlugin(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	job := &batch.GenericJob{}
	job.Name = "trainer"
	r := replica("worker", "trainer")
	r.Replicas = ptr.To[int32](2)
	job.Spec.ReplicaSpecs = []batch.GenericReplicaSpec{r}
	createJob(t, ns, job)
	waitJob(t, ns, job.Name, "Running", inPhase(batch.JobRunning))

	out, err := kubectlT9k(t, "-n", ns, "get")
	if err != nil {
		t.Fatalf("kubectl t9k get: %v\n%s", err, out)
	}
	want := `KIND         NAME      PHASE     RUNNING   PROGRESS   RESTARTS   ATTEMPT   QUEUE   AGE
genericjob   trainer   Running   2/2       -          0          1         -       <age>
`
	if got := age.ReplaceAllString(out, "<age>"); got != want {
		t.Errorf("kubectl t9k get:\n%s\nwant:\n%s", got, want)
	}

	out, err = kubectlT9k(t, "-n", ns, "why", "gj/trainer")
	if err != nil || !strings.HasPrefix(out, "genericjob/trainer in namespace "+ns+" is Running: 2 running, 0 succeeded, 0 failed replicas") ||
		!strings.Contains(out, "\n  Running True (") || !strings.Contains(out, "Look further:\n  kubectl describe genericjob trainer -n "+ns+"\n") {
		t.Errorf("kubectl t9k why: %v\n%s", err, out)
	}

	// A watch prints the table, then a line for each change: the pause below.
	watch := kubectlT9kCommand(t, "-n", ns, "get", "trainer", "-w")
	stdout, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = watch.Process.Kill(); _ = watch.Wait() })
	lines := make(chan string, 100)
	go func() {
		scan := bufio.NewScanner(stdout)
		for scan.Scan() {
			lines <- scan.Text()
		}
		close(lines)
	}()
	expectLine := func(what string, match func(string) bool) {
		t.Helper()
		timeout := time.After(jobTimeout)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("kubectl t9k get -w ended before %s", what)
				}
				if match(l) {
					return
				}
			case <-timeout:
				t.Fatalf("kubectl t9k get -w: no line with %s", what)
			}
		}
	}
	expectLine("the job Running", func(l string) bool { return strings.HasPrefix(l, "genericjob   trainer   Running ") })

	out, err = kubectlT9k(t, "-n", ns, "pause", "trainer")
	if err != nil || out != "genericjob/trainer paused: Paused (was Running), 0 replicas running\n" {
		t.Errorf("kubectl t9k pause: %v: %q", err, out)
	}
	expectLine("the job Paused", func(l string) bool { return strings.HasPrefix(l, "genericjob   trainer   Paused ") })
	out, err = kubectlT9k(t, "-n", ns, "pause", "trainer")
	if err != nil || out != "genericjob/trainer is already paused: spec.runMode.pause.enabled is true (phase Paused)\n" {
		t.Errorf("kubectl t9k pause, again: %v: %q", err, out)
	}
	out, err = kubectlT9k(t, "-n", ns, "resume", "trainer")
	if err != nil || !strings.HasPrefix(out, "genericjob/trainer resumed: Running (was Paused), ") {
		t.Errorf("kubectl t9k resume: %v: %q", err, out)
	}

	// restart: every replica again, as attempt 2, through the job's restart-attempt
	// annotation; the pods of attempt 1 went, and their logs with them.
	before := map[types.UID]bool{}
	for _, p := range jobPods(t, ns, "trainer-worker-") {
		before[p.UID] = true
	}
	out, err = kubectlT9k(t, "-n", ns, "restart", "trainer")
	if err != nil || out != "genericjob/trainer restarted: attempt 2 (was 1), Running, 2 replicas running\n" {
		t.Errorf("kubectl t9k restart: %v: %q", err, out)
	}
	after := jobPods(t, ns, "trainer-worker-")
	for _, p := range after {
		if before[p.UID] || p.Labels[batch.LabelAttempt] != "2" {
			t.Errorf("after the restart, pod %s (uid %s, attempt %q): want a new pod of attempt 2", p.Name, p.UID, p.Labels[batch.LabelAttempt])
		}
	}
	if len(after) != 2 {
		t.Errorf("after the restart, %d pods; want 2", len(after))
	}
	if e, _ := jobEventOf(t, ns, job.Name, "RestartingJob", "Restarting every replica together as attempt 2 (annotation batch.tensorstack.dev/restart-attempt): asked to restart attempt 1."); e.Type != corev1.EventTypeNormal {
		t.Errorf("the restart's event is %s, want Normal: nothing failed", e.Type)
	}
	asked := 0.0
	for _, s := range controllerMetrics(t).Samples("t9k_job_restarts_total") {
		if s.Labels["kind"] == "GenericJob" && s.Labels["cause"] == "Request" {
			asked += s.Value
		}
	}
	if asked < 1 {
		t.Errorf("/metrics counts no whole-job restart of a GenericJob caused by a Request")
	}
	out, err = kubectlT9k(t, "-n", ns, "logs", "trainer", "--attempt", "1")
	if err == nil || !strings.Contains(out, "error: genericjob/trainer has no pods of attempt 1 left: a whole-job restart deletes the pods of the attempt it ends") {
		t.Errorf("kubectl t9k logs --attempt 1: %v: %q", err, out)
	}

	// debug: a copy in debug mode, running, whose pods say they run in debug mode.
	out, err = kubectlT9k(t, "-n", ns, "debug", "trainer")
	if err != nil || !strings.HasPrefix(out, "genericjob/trainer-debug runs in debug mode (2 replicas)") ||
		!strings.Contains(out, "kubectl t9k exec genericjob/trainer-debug -n "+ns+" --type worker --rank 0 -it -- sh") {
		t.Errorf("kubectl t9k debug: %v\n%s", err, out)
	}
	for _, p := range jobPods(t, ns, "trainer-debug-") {
		if p.Annotations[batch.AnnotationRunMode] != batch.RunModeDebug {
			t.Errorf("pod %s of the debug copy is not in debug mode: %v", p.Name, p.Annotations)
		}
	}

	for args, want := range map[string]string{
		"get nothere":                `error: no job named "nothere" in namespace "` + ns + `" (of any of the five kinds); ` + "`kubectl t9k get` lists them\n",
		"why pytorchjob/x":           `error: unknown kind "pytorchjob": want one of genericjob (gj), mpijob (mj), colossalaijob (caj), tensorflowtrainingjob (tfj), xgboosttrainingjob (xgbj)` + "\n",
		"scale trainer --replicas 3": "error: genericjob/trainer has no spec.elastic: give it one (its type, minimum and maximum) to resize it (docs/elastic.md)\n",
	} {
		out, err := kubectlT9k(t, append([]string{"-n", ns}, strings.Fields(args)...)...)
		if err == nil || out != want {
			t.Errorf("kubectl t9k %s: %v: %q, want %q", args, err, out, want)
		}
	}
}

// TestKubectlPluginLogs: kubectl t9k logs on the real node: -f follows both replicas from
// before they start until the job has ended, each line prefixed with its replica; without -f
// the lines are merged in time order; --rank chooses one replica; --all reads its init
// container too, each line naming its container.
func TestKubectlPluginLogs(t *testing.T) {
	parallel(t, realNode.one())
	ns := namespace(t)
	needRealNode(t, ns, trainingImage)
	job := realNodeJob("talk", "sh", "-c", `echo "$(type) $(rank) first"; sleep 2; echo "$(type) $(rank) second"`)
	job.Spec.ReplicaSpecs[0].Replicas = ptr.To[int32](2)
	job.Spec.ReplicaSpecs[0].Template.Spec.InitContainers = []corev1.Container{{Name: "hello", Image: trainingImage,
		Command: []string{"sh", "-c", `echo "$(type) $(rank) init"`}}}
	main := job.Spec.ReplicaSpecs[0].Template.Spec.Containers[0].Name

	// -f from before the job exists would fail to find it: it starts right after.
	createJob(t, ns, job)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	follow := kubectlT9kCommand(t, "-n", ns, "logs", "talk", "-f")
	followed := make(chan string, 1)
	go func() {
		out, err := follow.CombinedOutput()
		if err != nil {
			out = append(out, []byte("\nexit: "+err.Error())...)
		}
		followed <- string(out)
	}()
	waitGenericPhase(t, ns, "talk", batch.JobSucceeded)
	var out string
	select {
	case out = <-followed:
	case <-ctx.Done():
		_ = follow.Process.Kill()
		t.Fatal("kubectl t9k logs -f did not end after the job had ended")
	}
	got := strings.Split(strings.TrimSpace(out), "\n")
	sort.Strings(got)
	want := []string{"worker-0| worker 0 first", "worker-0| worker 0 second", "worker-1| worker 1 first", "worker-1| worker 1 second"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("kubectl t9k logs -f printed:\n%s\nwant, in some order:\n%s", out, strings.Join(want, "\n"))
	}

	out, err := kubectlT9k(t, "-n", ns, "logs", "talk", "--timestamps")
	if err != nil {
		t.Fatalf("kubectl t9k logs: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var stamps []string
	for _, l := range lines {
		_, rest, _ := strings.Cut(l, "| ")
		stamp, _, _ := strings.Cut(rest, " ")
		stamps = append(stamps, stamp)
	}
	if len(lines) != 4 || !sort.SliceIsSorted(stamps, func(a, b int) bool {
		ta, _ := time.Parse(time.RFC3339Nano, stamps[a])
		tb, _ := time.Parse(time.RFC3339Nano, stamps[b])
		return ta.Before(tb)
	}) {
		t.Errorf("kubectl t9k logs --timestamps: want the 4 lines in time order:\n%s", out)
	}
	out, err = kubectlT9k(t, "-n", ns, "logs", "talk", "--rank", "1")
	if err != nil || out != "worker-1| worker 1 first\nworker-1| worker 1 second\n" {
		t.Errorf("kubectl t9k logs --rank 1: %v: %q", err, out)
	}
	out, err = kubectlT9k(t, "-n", ns, "logs", "talk", "--rank", "0", "--all")
	if want := "worker-0/hello| worker 0 init\nworker-0/" + main + "| worker 0 first\nworker-0/" + main + "| worker 0 second\n"; err != nil || out != want {
		t.Errorf("kubectl t9k logs --rank 0 --all: %v: %q, want %q", err, out, want)
	}

	// exec runs in the replica named by type and rank; its output and exit code come back.
	shell := realNodeJob("shell", "sleep", "600")
	shell.Spec.ReplicaSpecs[0].Replicas = ptr.To[int32](2)
	createJob(t, ns, shell)
	waitGenericPhase(t, ns, "shell", batch.JobRunning)
	out, err = kubectlT9k(t, "-n", ns, "exec", "shell", "--rank", "1", "--", "sh", "-c", "cat /etc/hostname; exit 3")
	var exit *exec.ExitError
	if out != "shell-worker-1\n" || !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Errorf("kubectl t9k exec shell --rank 1: %v: %q, want the pod's host name and the command's exit code 3", err, out)
	}
	out, err = kubectlT9k(t, "-n", ns, "exec", "shell", "--rank", "7", "--", "true")
	if err == nil || !strings.Contains(out, "genericjob/shell has no pod of type worker and rank 7 now (ranks there: 0, 1)") {
		t.Errorf("kubectl t9k exec to a rank that is not there: %v: %q", err, out)
	}
}
