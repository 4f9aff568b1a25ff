package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// Debug mode of the launcher kinds, by hand: the job starts everything and runs nothing of
// its own, the Running condition gives the command that starts the run, and that command, run
// as given, does the work over SSH with host keys checked.

const debugHintPrefix = "Start the run with: "

// TestRealDebugMPIJob: the MPIJob example in debug mode. The launcher sleeps; the workers run
// the docs' default debug command, /usr/bin/sshd -D, as the job's sshd (Debian has sshd in
// /usr/sbin: ssh.sshdPath runs instead, and the log says so). The command the Running
// condition gives, run with kubectl exec in the launcher, reaches every worker with the job's
// key and known_hosts (StrictHostKeyChecking yes) and prints the all-reduce of 9 ranks, 3 on
// each worker; the job is still running afterwards.
func TestRealDebugMPIJob(t *testing.T) {
	parallel(t, realNode.all())
	ns := namespace(t)
	needRealNode(t, ns, trainingImage)
	if out, err := kubectl("apply", "-n", ns, "-k", filepath.Join(repoRoot, "examples", "mpi")); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out, err := kubectl("delete", "-n", ns, "mpijob", "mpi-allreduce", "--wait=false"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	job := exampleMPIJob(t, "mpi-debug")
	job.Spec.RunMode = &batch.RunMode{Debug: &batch.DebugMode{Enabled: true}}
	if _, err := env.jobs.BatchV1beta1().MPIJobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hint := debugHint(t, ns, job.Name, mpiStatus(ns, job.Name))
	if want := "kubectl exec -it -n " + ns + " mpi-debug-launcher -- /usr/bin/mpirun --prefix /usr --hostfile /etc/t9k/hostfile " +
		"--mca plm_rsh_args '-F /root/.ssh/config' --mca btl '^openib' -N 3 --enable-recovery --max-restarts 100 " +
		"--allow-run-as-root -bind-to none /usr/bin/python3 /scripts/allreduce.py"; hint != want {
		t.Errorf("the Running condition gives\n%s\nwant\n%s", hint, want)
	}
	if log := containerLogs(ns, "mpi-debug-worker-0", "mpi-worker"); !strings.Contains(log, "/usr/bin/sshd is not in the image: running /usr/sbin/sshd") {
		t.Errorf("worker 0's log does not say which sshd runs:\n%s", log)
	}

	out := runDebugHint(t, hint)
	if n := strings.Count(out, "all-reduce sum 45, want 45"); n != 9 {
		t.Errorf("the launch command printed %d of 9 ranks:\n%s", n, out)
	}
	perHost := ranksPerHost(rankHosts(t, out))
	for i := range 3 {
		worker := fmt.Sprintf("mpi-debug-worker-%d", i)
		if n := perHost[worker]; n != 3 {
			t.Errorf("%d ranks ran on %s, want 3:\n%s", n, worker, out)
		}
	}
	stillRunning(t, mpiStatus(ns, job.Name))
}

// TestRealDebugColossalAIJob: a ColossalAIJob in debug mode with the docs' first example for
// the workers (skipInitContainer, /usr/bin/sshd): the command the Running condition gives,
// run with kubectl exec in the launcher, runs `colossalai run` (test/colossalai's stand-in)
// over both workers through SSH with host keys checked: a gloo all-reduce of 4 processes.
func TestRealDebugColossalAIJob(t *testing.T) {
	parallel(t, realNode.all())
	ns := namespace(t)
	needRealNode(t, ns, trainingImage)
	job := realColossalAIJob(t, ns, "colossal-debug")
	job.Spec.RunMode = &batch.RunMode{Debug: &batch.DebugMode{Enabled: true, ReplicaSpecs: []batch.ReplicaDebugSet{
		{Type: batch.WorkerType, SkipInitContainer: true, Command: []string{"/usr/bin/sshd"}}}}}
	jobs := env.jobs.BatchV1beta1().ColossalAIJobs(ns)
	if _, err := jobs.Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	status := func(ctx context.Context) (*batch.JobStatus, error) {
		j, err := jobs.Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return &j.Status, nil
	}
	hint := debugHint(t, ns, job.Name, status)
	if want := "kubectl exec -it -n " + ns + " colossal-debug-launcher -- colossalai run --hostfile /etc/t9k/hostfile " +
		"--master_addr colossal-debug-worker-0.colossal-debug --master_port 29500 --nproc_per_node 2 " +
		"--extra_launch_args redirects=2,tee=1 allreduce.py"; hint != want {
		t.Errorf("the Running condition gives\n%s\nwant\n%s", hint, want)
	}

	out := runDebugHint(t, hint)
	if n := strings.Count(out, "all-reduce sum 10, want 10"); n != 4 {
		t.Errorf("the launch command printed %d of 4 processes:\n%s", n, out)
	}
	if !strings.Contains(out, "colossal-debug-worker-0.colossal-debug: success") || !strings.Contains(out, "colossal-debug-worker-1.colossal-debug: success") {
		t.Errorf("the launch command does not report both workers:\n%s", out)
	}
	stillRunning(t, status)
}

// debugHint waits until a debug job runs and every worker is Ready (its sshd answers), and
// returns the command its Running condition says starts the run.
func debugHint(t *testing.T, ns, job string, status func(context.Context) (*batch.JobStatus, error)) string {
	t.Helper()
	s := waitStatus(t, "the job running in debug mode", status, func(s *batch.JobStatus) bool {
		return s.Phase == batch.JobRunning || s.Phase == batch.JobFailed
	})
	c := s.Condition(batch.JobConditionRunning)
	_, hint, ok := strings.Cut(c.Message, debugHintPrefix)
	if s.Phase != batch.JobRunning || !ok {
		t.Fatalf("phase %s, Running condition %q: no command to start the run", s.Phase, c.Message)
	}
	waitReal(t, "a DebugMode event with the command", func(ctx context.Context) (bool, error) {
		events, err := env.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + job})
		if err != nil {
			return false, nil
		}
		for _, e := range events.Items {
			if e.Reason == "DebugMode" && e.Message == debugHintPrefix+hint {
				return true, nil
			}
		}
		return false, nil
	})
	waitReal(t, "every worker Ready", func(ctx context.Context) (bool, error) {
		pods, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batch.LabelJobName + "=" + job + "," + batch.LabelReplicaType + "=" + batch.WorkerType})
		if err != nil || len(pods.Items) == 0 {
			return false, nil
		}
		for i := range pods.Items {
			if !podIsReady(&pods.Items[i]) {
				return false, nil
			}
		}
		return true, nil
	})
	return hint
}

// runDebugHint runs a command a debug job gives, as a person would paste it into a shell:
// `kubectl` is this cluster's. It fails the test when the command fails.
func runDebugHint(t *testing.T, hint string) string {
	t.Helper()
	if !strings.HasPrefix(hint, "kubectl exec ") {
		t.Fatalf("not a kubectl exec command: %s", hint)
	}
	cmd := exec.Command("/bin/sh", "-c", `kubectl() { "$T9K_KUBECTL" --kubeconfig "$T9K_KUBECONFIG" "$@"; }; `+hint)
	cmd.Env = append(os.Environ(), "T9K_KUBECTL="+env.kubectl, "T9K_KUBECONFIG="+env.kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", hint, err, out)
	}
	t.Logf("%s:\n%s", hint, out)
	return string(out)
}

// stillRunning checks that a debug job did not end when its run by hand did.
func stillRunning(t *testing.T, status func(context.Context) (*batch.JobStatus, error)) {
	t.Helper()
	s, err := status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.Phase != batch.JobRunning {
		t.Errorf("the debug job is %s after the run by hand, want Running: %+v", s.Phase, s.Conditions)
	}
}
