package mpijob

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/t9k-jobs/t9k-jobs/examples"
	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
	jobinformers "github.com/t9k-jobs/t9k-jobs/pkg/client/informers/externalversions"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/enginetest"
)

const ns = "ns"

func newAdapter(c versioned.Interface, f jobinformers.SharedInformerFactory) engine.Adapter {
	return New(c, f.Batch().V1beta1().MPIJobs())
}

// seed is the documented example, in namespace ns.
func seed(t *testing.T) *batch.MPIJob {
	t.Helper()
	job := &batch.MPIJob{}
	if err := examples.Decode("mpi-example.yaml", job); err != nil {
		t.Fatal(err)
	}
	job.Namespace, job.UID = ns, "mpi-uid"
	return job
}

func (h harness) job(t *testing.T) *batch.MPIJob {
	t.Helper()
	job, err := h.Jobs.BatchV1beta1().MPIJobs(ns).Get(context.Background(), "mpi-example", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return job
}

type harness struct{ *enginetest.Harness }

func start(t *testing.T, job *batch.MPIJob, kubeObjects ...runtime.Object) harness {
	return harness{enginetest.Start(t, newAdapter, []runtime.Object{job}, kubeObjects...)}
}

func (h harness) condition(t *testing.T, c batch.JobConditionType) batch.JobCondition {
	for _, cond := range h.job(t).Status.Conditions {
		if cond.Type == c {
			return cond
		}
	}
	return batch.JobCondition{}
}

// workersReady starts the job's workers, n of them Ready.
func (h harness) workersReady(t *testing.T, workers, n int) {
	t.Helper()
	h.WaitFor(t, fmt.Sprintf("%d workers", workers), func(context.Context) bool { return len(h.Pods(t, ns)) >= workers })
	for i := range workers {
		h.SetPod(t, ns, fmt.Sprintf("mpi-example-worker-%d", i), corev1.PodRunning, i < n, 0)
	}
}

func (h harness) launcher(t *testing.T) *corev1.Pod {
	t.Helper()
	var launcher *corev1.Pod
	h.WaitFor(t, "the launcher", func(ctx context.Context) bool {
		p, err := h.Kube.CoreV1().Pods(ns).Get(ctx, "mpi-example-launcher", metav1.GetOptions{})
		launcher = p
		return err == nil
	})
	return launcher
}

// TestSeedExample: the documented example's objects, as golden files; the launcher waits for
// every worker to be Ready, and says so.
func TestSeedExample(t *testing.T) {
	h := start(t, seed(t))
	h.workersReady(t, 5, 4)
	h.WaitFor(t, "the wait in the Initialized condition", func(context.Context) bool {
		c := h.condition(t, batch.JobInitialized)
		return c.Reason == "Waiting" && strings.Contains(c.Message, "4 of 5 ready")
	})
	if _, err := h.Kube.CoreV1().Pods(ns).Get(context.Background(), "mpi-example-launcher", metav1.GetOptions{}); err == nil {
		t.Fatal("the launcher was created before every worker was Ready")
	}
	h.SetPod(t, ns, "mpi-example-worker-4", corev1.PodRunning, true, 0)
	launcher := h.launcher(t)

	worker, err := h.Kube.CoreV1().Pods(ns).Get(context.Background(), "mpi-example-worker-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hostfile, _ := h.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "mpi-example-hostfile", metav1.GetOptions{})
	service, _ := h.Kube.CoreV1().Services(ns).Get(context.Background(), "mpi-example", metav1.GetOptions{})
	secret, _ := h.Kube.CoreV1().Secrets(ns).Get(context.Background(), "mpi-example-ssh", metav1.GetOptions{})
	keys := make([]string, 0, len(secret.Data))
	for k := range secret.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if want := []string{"authorized_keys", "config", "id_ed25519", "id_ed25519.pub", "known_hosts", "ssh_host_ed25519_key", "ssh_host_ed25519_key.pub"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("Secret keys %v, want %v", keys, want)
	}
	worker.Status, launcher.Status = corev1.PodStatus{}, corev1.PodStatus{}
	enginetest.Golden(t, "seed", launcher, worker, hostfile, service)
}

func TestOutcomes(t *testing.T) {
	cases := []struct {
		name       string
		exitCode   int32
		phase      batch.JobPhase
		conditionT batch.JobConditionType
		message    string
	}{
		{"launcher exits 0", 0, batch.JobSucceeded, batch.JobCompleted, SucceededMessage},
		{"launcher exits 1", 1, batch.JobFailed, batch.JobConditionFailed, "The job exited with an error code: mpi-example-launcher failed with exit code 1."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, seed(t)) // cleanUpWorkers: true
			h.workersReady(t, 5, 5)
			h.launcher(t)
			h.SetPod(t, ns, "mpi-example-launcher", map[bool]corev1.PodPhase{true: corev1.PodSucceeded, false: corev1.PodFailed}[tc.exitCode == 0], false, tc.exitCode)
			h.WaitFor(t, "the outcome", func(context.Context) bool { return h.job(t).Status.Phase == tc.phase })
			if c := h.condition(t, tc.conditionT); c.Status != corev1.ConditionTrue || c.Message != tc.message {
				t.Errorf("%s condition %+v, want message %q", tc.conditionT, c, tc.message)
			}
			h.WaitFor(t, "the workers cleaned up, the launcher kept", func(context.Context) bool {
				pods := h.Pods(t, ns)
				return len(pods) == 1 && pods[0].Name == "mpi-example-launcher"
			})
		})
	}
}

// TestWorkerLostAfterLauncherStarted: a worker deleted once the launcher runs fails the job;
// before, it is created again.
func TestWorkerLostAfterLauncherStarted(t *testing.T) {
	job := seed(t)
	job.Spec.Worker.Replicas = ptr.To[int32](2)
	h := start(t, job)
	h.workersReady(t, 2, 0)
	if err := h.Kube.CoreV1().Pods(ns).Delete(context.Background(), "mpi-example-worker-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.WaitFor(t, "worker 1 created again", func(ctx context.Context) bool {
		_, err := h.Kube.CoreV1().Pods(ns).Get(ctx, "mpi-example-worker-1", metav1.GetOptions{})
		return err == nil
	})
	h.workersReady(t, 2, 2)
	h.launcher(t)
	h.SetPod(t, ns, "mpi-example-launcher", corev1.PodRunning, false, 0)
	if err := h.Kube.CoreV1().Pods(ns).Delete(context.Background(), "mpi-example-worker-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.WaitFor(t, "the job failed", func(context.Context) bool { return h.job(t).Status.Phase == batch.JobFailed })
	if c := h.condition(t, batch.JobConditionFailed); !strings.Contains(c.Message, "worker mpi-example-worker-0 was deleted after the launcher started") {
		t.Errorf("Failed condition %+v", c)
	}
}

// TestObjectsRecreatedAndNamesHeld: a deleted Secret comes back; a hostfile name held by
// another object fails the job with a message naming it.
func TestObjectsRecreatedAndNamesHeld(t *testing.T) {
	h := start(t, seed(t))
	h.WaitFor(t, "the Secret", func(ctx context.Context) bool {
		_, err := h.Kube.CoreV1().Secrets(ns).Get(ctx, "mpi-example-ssh", metav1.GetOptions{})
		return err == nil
	})
	if err := h.Kube.CoreV1().Secrets(ns).Delete(context.Background(), "mpi-example-ssh", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.WaitFor(t, "the Secret made again", func(ctx context.Context) bool {
		_, err := h.Kube.CoreV1().Secrets(ns).Get(ctx, "mpi-example-ssh", metav1.GetOptions{})
		return err == nil
	})

	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mpi-example-hostfile", Namespace: ns}}
	h2 := start(t, seed(t), other)
	h2.WaitFor(t, "the job failed", func(context.Context) bool { return h2.job(t).Status.Phase == batch.JobFailed })
	c := h2.condition(t, batch.JobConditionFailed)
	if c.Reason != "NameTaken" || !strings.Contains(c.Message, "ConfigMap mpi-example-hostfile already exists and does not belong to this job") {
		t.Errorf("Failed condition %+v", c)
	}
	if n := len(h2.Pods(t, ns)); n != 0 {
		t.Errorf("%d pods left of a job that cannot run", n)
	}
}

// TestDebugAndPause: debug mode starts the launcher at once with sleep inf and the workers
// with the documented sshd; pause deletes the pods and keeps the other objects.
func TestDebugAndPause(t *testing.T) {
	job := seed(t)
	job.Spec.RunMode = &batch.RunMode{Debug: &batch.DebugMode{Enabled: true}}
	h := start(t, job)
	launcher := h.launcher(t)
	if got := launcher.Spec.Containers[0].Command; !reflect.DeepEqual(got, []string{"sleep", "inf"}) {
		t.Errorf("debug launcher runs %v", got)
	}
	worker, err := h.Kube.CoreV1().Pods(ns).Get(context.Background(), "mpi-example-worker-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := worker.Spec.Containers[0].Command; !reflect.DeepEqual(got, []string{"/usr/bin/sshd", "-D"}) {
		t.Errorf("debug worker runs %v", got)
	}

	paused := seed(t)
	paused.Spec.RunMode = &batch.RunMode{Pause: &batch.PauseMode{Enabled: true}}
	h2 := start(t, paused)
	h2.WaitFor(t, "phase Paused with the objects made", func(ctx context.Context) bool {
		_, err := h2.Kube.CoreV1().Secrets(ns).Get(ctx, "mpi-example-ssh", metav1.GetOptions{})
		return err == nil && h2.job(t).Status.Phase == batch.JobPaused
	})
	if n := len(h2.Pods(t, ns)); n != 0 {
		t.Errorf("%d pods of a paused job", n)
	}
}

func TestSlots(t *testing.T) {
	gpu := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: workerContainer,
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}}}}}}
	cases := []struct {
		args []string
		tmpl corev1.PodTemplateSpec
		want int
	}{
		{[]string{"-N", "3", "--allow-run-as-root"}, corev1.PodTemplateSpec{}, 3},
		{[]string{"--npernode", "2"}, gpu, 2},
		{[]string{"--map-by", "ppr:5:node"}, corev1.PodTemplateSpec{}, 5},
		{nil, gpu, 4},
		{[]string{"-np", "8"}, corev1.PodTemplateSpec{}, 1},
	}
	for _, tc := range cases {
		if got := Slots(tc.args, tc.tmpl); got != tc.want {
			t.Errorf("Slots(%v) = %d, want %d", tc.args, got, tc.want)
		}
	}
}
