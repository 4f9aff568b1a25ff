package colossalaijob

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/t9k-jobs/t9k-jobs/examples"
	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
	jobinformers "github.com/t9k-jobs/t9k-jobs/pkg/client/informers/externalversions"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/enginetest"
)

const ns = "ns"

func newAdapter(c versioned.Interface, f jobinformers.SharedInformerFactory) engine.Adapter {
	return New(c, f.Batch().V1beta1().ColossalAIJobs())
}

func seed(t *testing.T) *batch.ColossalAIJob {
	t.Helper()
	job := &batch.ColossalAIJob{}
	if err := examples.Decode("colossalai-example.yaml", job); err != nil {
		t.Fatal(err)
	}
	job.Namespace, job.UID = ns, "caj-uid"
	return job
}

func jobOf(t *testing.T, h *enginetest.Harness) *batch.ColossalAIJob {
	t.Helper()
	job, err := h.Jobs.BatchV1beta1().ColossalAIJobs(ns).Get(context.Background(), "colossalai-example", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return job
}

// TestSeedExample: the documented example's launcher and workers as golden objects, and its
// outcomes from the launcher's exit code; workers are never restarted.
func TestSeedExample(t *testing.T) {
	for _, code := range []int32{0, 1} {
		t.Run(fmt.Sprintf("launcher exits %d", code), func(t *testing.T) {
			h := enginetest.Start(t, newAdapter, []runtime.Object{seed(t)})
			h.WaitFor(t, "2 workers", func(context.Context) bool { return len(h.Pods(t, ns)) == 2 })
			for i := range 2 {
				h.SetPod(t, ns, fmt.Sprintf("colossalai-example-worker-%d", i), corev1.PodRunning, true, 0)
			}
			var launcher *corev1.Pod
			h.WaitFor(t, "the launcher", func(ctx context.Context) bool {
				p, err := h.Kube.CoreV1().Pods(ns).Get(ctx, "colossalai-example-launcher", metav1.GetOptions{})
				launcher = p
				return err == nil
			})
			if code == 0 {
				worker, err := h.Kube.CoreV1().Pods(ns).Get(context.Background(), "colossalai-example-worker-1", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				hostfile, _ := h.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "colossalai-example-hostfile", metav1.GetOptions{})
				worker.Status, launcher.Status = corev1.PodStatus{}, corev1.PodStatus{}
				enginetest.Golden(t, "seed", launcher.DeepCopy(), worker, hostfile)
			}
			phase := map[int32]corev1.PodPhase{0: corev1.PodSucceeded, 1: corev1.PodFailed}[code]
			h.SetPod(t, ns, "colossalai-example-launcher", phase, false, code)
			want := map[int32]batch.JobPhase{0: batch.JobSucceeded, 1: batch.JobFailed}[code]
			h.WaitFor(t, "the outcome", func(context.Context) bool { return jobOf(t, h).Status.Phase == want })
			if n := len(h.Pods(t, ns)); n != 3 {
				t.Errorf("%d pods left: cleanUpWorkers is off, every pod is kept", n)
			}
		})
	}
}

// TestWorkerFailureIsFinal: a worker that fails is not restarted and fails the job, naming it.
func TestWorkerFailureIsFinal(t *testing.T) {
	h := enginetest.Start(t, newAdapter, []runtime.Object{seed(t)})
	h.WaitFor(t, "2 workers", func(context.Context) bool { return len(h.Pods(t, ns)) == 2 })
	h.SetPod(t, ns, "colossalai-example-worker-1", corev1.PodFailed, false, 137)
	h.WaitFor(t, "the job failed", func(context.Context) bool { return jobOf(t, h).Status.Phase == batch.JobFailed })
	if c := jobOf(t, h).Status.Condition(batch.JobConditionFailed); c.Message != "The job failed: worker colossalai-example-worker-1 failed with exit code 137; workers must run until the launcher ends." {
		t.Errorf("Failed condition %+v", c)
	}
	if n := h.Count("create", "pods"); n != 2 {
		t.Errorf("%d pod creations: a failed worker is never restarted, and no launcher starts", n)
	}
}

func TestExtraLaunchArgs(t *testing.T) {
	cases := map[string][]string{
		"":                                   nil,
		"standalone":                         {"--standalone"},
		"max_restarts=3,rdzv_backend=c10d":   {"--max_restarts=3", "--rdzv_backend", "c10d"},
		"standalone,nnodes=1,max_restarts=2": {"--standalone", "--nnodes=1", "--max_restarts", "2"},
	}
	for want, args := range cases {
		if got, err := ExtraLaunchArgs(args); got != want || err != nil {
			t.Errorf("ExtraLaunchArgs(%q) = %q, want %q", args, got, want)
		}
	}
}

// TestDebugAndPause: debug mode starts the launcher and the workers at once with their debug
// commands (sleep inf by default, which the hint says cannot serve the launcher); a worker
// debug command that is sshd, as the docs' first example has, runs as the job's sshd, and the
// Running condition and a DebugMode event give the exact command that starts the run. Pause
// deletes the pods and keeps the other objects.
func TestDebugAndPause(t *testing.T) {
	run := "kubectl exec -it -n ns colossalai-example-launcher -- colossalai run --hostfile /etc/t9k/hostfile " +
		"--master_addr colossalai-example-worker-0.colossalai-example --master_port 29500 --nproc_per_node 1 train.py arg1"
	job := seed(t)
	job.Spec.RunMode = &batch.RunMode{Debug: &batch.DebugMode{Enabled: true}}
	h := enginetest.Start(t, newAdapter, []runtime.Object{job})
	h.WaitFor(t, "the launcher and 2 workers", func(context.Context) bool { return len(h.Pods(t, ns)) == 3 })
	for _, p := range h.Pods(t, ns) {
		if got := p.Spec.Containers[0].Command; len(got) != 2 || got[0] != "sleep" || got[1] != "inf" {
			t.Errorf("debug pod %s runs %v", p.Name, got)
		}
		h.SetPod(t, ns, p.Name, corev1.PodRunning, false, 0)
	}
	hint := "The workers' debug command is not sshd, so the launcher cannot reach them; with sshd running on every worker, start the run with: " + run
	h.WaitFor(t, "the Running condition with the hint", func(context.Context) bool {
		return jobOf(t, h).Status.Condition(batch.JobConditionRunning).Message == "The job is running in debug mode: replicas run their debug command. "+hint
	})
	enginetest.WaitEvent(t, h.Events, "Normal DebugMode "+hint)

	sshd := seed(t)
	sshd.Spec.RunMode = &batch.RunMode{Debug: &batch.DebugMode{Enabled: true, ReplicaSpecs: []batch.ReplicaDebugSet{
		{Type: batch.WorkerType, SkipInitContainer: true, Command: []string{"/usr/bin/sshd"}}}}}
	h1 := enginetest.Start(t, newAdapter, []runtime.Object{sshd})
	h1.WaitFor(t, "the launcher and 2 workers", func(context.Context) bool { return len(h1.Pods(t, ns)) == 3 })
	wantWorker := []string{"/bin/sh", "-c", `mkdir -p /run/sshd && s=$1 && shift && ` +
		`if ! { [ -x "$s" ] || command -v "$s" >/dev/null 2>&1; }; then echo "$s is not in the image: running $1 (ssh.sshdPath) instead" >&2; s=$1; fi && ` +
		`shift && exec "$s" "$@"`,
		"sshd", "/usr/bin/sshd", "/usr/sbin/sshd", "-D", "-e", "-p", "22",
		"-o", "HostKey=/root/.ssh/ssh_host_ed25519_key", "-o", "AuthorizedKeysFile=/root/.ssh/authorized_keys",
		"-o", "StrictModes=no", "-o", "PidFile=none"}
	for _, p := range h1.Pods(t, ns) {
		got, want := p.Spec.Containers[0].Command, wantWorker
		if p.Name == "colossalai-example-launcher" {
			want = []string{"sleep", "inf"}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("debug pod %s runs %q, want %q", p.Name, got, want)
		}
		h1.SetPod(t, ns, p.Name, corev1.PodRunning, true, 0)
	}
	h1.WaitFor(t, "the Running condition with the command", func(context.Context) bool {
		return jobOf(t, h1).Status.Condition(batch.JobConditionRunning).Message == "The job is running in debug mode: replicas run their debug command. Start the run with: "+run
	})
	enginetest.WaitEvent(t, h1.Events, "Normal DebugMode Start the run with: "+run)

	paused := seed(t)
	paused.Spec.RunMode = &batch.RunMode{Pause: &batch.PauseMode{Enabled: true}}
	h2 := enginetest.Start(t, newAdapter, []runtime.Object{paused})
	h2.WaitFor(t, "phase Paused with the objects made", func(ctx context.Context) bool {
		_, err := h2.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "colossalai-example-hostfile", metav1.GetOptions{})
		return err == nil && jobOf(t, h2).Status.Phase == batch.JobPaused
	})
	if n := len(h2.Pods(t, ns)); n != 0 {
		t.Errorf("%d pods of a paused job", n)
	}
}
