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
	return h.pod(t, "mpi-example-launcher")
}

// pod waits for a pod of the job to be created. The pods of one sync are created in
// parallel: one existing says nothing of the others.
func (h harness) pod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	h.WaitFor(t, name, func(ctx context.Context) bool {
		p, err := h.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		pod = p
		return err == nil
	})
	return pod
}

// TestSeedExample: the documented example's objects, as golden files; the launcher waits for
// every worker to be Ready, and says so.
func TestSeedExample(t *testing.T) {
	h := start(t, seed(t))
	h.workersReady(t, 5, 4)
	h.WaitFor(t, "the wait in the Initialized condition", func(context.Context) bool {
		c := h.job(t).Status.Condition(batch.JobConditionInitialized)
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
		{"launcher exits 0", 0, batch.JobSucceeded, batch.JobConditionCompleted, SucceededMessage},
		{"launcher exits 1", 1, batch.JobFailed, batch.JobConditionFailed, "The job exited with an error code: mpi-example-launcher failed with exit code 1."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, seed(t)) // cleanUpWorkers: true
			h.workersReady(t, 5, 5)
			h.launcher(t)
			h.SetPod(t, ns, "mpi-example-launcher", map[bool]corev1.PodPhase{true: corev1.PodSucceeded, false: corev1.PodFailed}[tc.exitCode == 0], false, tc.exitCode)
			h.WaitFor(t, "the outcome", func(context.Context) bool { return h.job(t).Status.Phase == tc.phase })
			if c := h.job(t).Status.Condition(tc.conditionT); c.Status != corev1.ConditionTrue || c.Message != tc.message {
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
	if c := h.job(t).Status.Condition(batch.JobConditionFailed); !strings.Contains(c.Message, "worker mpi-example-worker-0 was deleted after the launcher started") {
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
	c := h2.job(t).Status.Condition(batch.JobConditionFailed)
	if c.Reason != "NameTaken" || !strings.Contains(c.Message, "ConfigMap mpi-example-hostfile already exists and does not belong to this job") {
		t.Errorf("Failed condition %+v", c)
	}
	if n := len(h2.Pods(t, ns)); n != 0 {
		t.Errorf("%d pods left of a job that cannot run", n)
	}
}

// TestDebugAndPause: debug mode starts the launcher at once with sleep inf and the workers
// with the documented sshd, run as the job's sshd (its keys, port and runtime directory);
// once they all run, the Running condition and a DebugMode event give the exact command that
// starts the run. A debug command that is not sshd is left as it is. Pause deletes the pods
// and keeps the other objects.
func TestDebugAndPause(t *testing.T) {
	job := seed(t)
	job.Spec.RunMode = &batch.RunMode{Debug: &batch.DebugMode{Enabled: true}}
	h := start(t, job)
	launcher := h.launcher(t)
	if got := launcher.Spec.Containers[0].Command; !reflect.DeepEqual(got, []string{"sleep", "inf"}) {
		t.Errorf("debug launcher runs %v", got)
	}
	if n := len(launcher.Spec.Volumes); n != 2 {
		t.Errorf("debug launcher has %d volumes, want the SSH Secret and the hostfile", n)
	}
	worker := h.pod(t, "mpi-example-worker-0")
	wantWorker := []string{"/bin/sh", "-c", `mkdir -p /run/sshd && s=$1 && shift && ` +
		`if ! { [ -x "$s" ] || command -v "$s" >/dev/null 2>&1; }; then echo "$s is not in the image: running $1 (ssh.sshdPath) instead" >&2; s=$1; fi && ` +
		`shift && exec "$s" "$@"`,
		"sshd", "/usr/bin/sshd", "/usr/sbin/sshd", "-D", "-e", "-p", "22",
		"-o", "HostKey=/root/.ssh/ssh_host_ed25519_key", "-o", "AuthorizedKeysFile=/root/.ssh/authorized_keys",
		"-o", "StrictModes=no", "-o", "PidFile=none"}
	if got := worker.Spec.Containers[0].Command; !reflect.DeepEqual(got, wantWorker) || worker.Spec.Containers[0].Args != nil {
		t.Errorf("debug worker runs %q %q, want %q", got, worker.Spec.Containers[0].Args, wantWorker)
	}

	// The launcher and the workers are created side by side: wait for all of them.
	h.WaitFor(t, "the launcher and 5 workers", func(context.Context) bool { return len(h.Pods(t, ns)) == 6 })
	for _, p := range h.Pods(t, ns) {
		h.SetPod(t, ns, p.Name, corev1.PodRunning, true, 0)
	}
	hint := "Start the run with: kubectl exec -it -n ns mpi-example-launcher -- /usr/local/bin/mpirun --prefix /usr/local " +
		"--hostfile /etc/t9k/hostfile --mca plm_rsh_args '-F /root/.ssh/config' --mca btl '^openib' " +
		"-N 3 --enable-recovery --max-restarts 100 --allow-run-as-root -bind-to none ./random_walk 20 40 2"
	want := "The job is running in debug mode: replicas run their debug command. " + hint
	h.WaitFor(t, "the Running condition", func(context.Context) bool {
		return h.job(t).Status.ConditionTrue(batch.JobConditionRunning)
	})
	if c := h.job(t).Status.Condition(batch.JobConditionRunning); c.Message != want {
		t.Errorf("Running condition message\n%s\nwant\n%s", c.Message, want)
	}
	enginetest.WaitEvent(t, h.Events, "Normal DebugMode "+hint)
	// Said once: a worker deleted and made again changes nothing of it.
	if err := h.Kube.CoreV1().Pods(ns).Delete(context.Background(), "mpi-example-worker-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var again *corev1.Pod
	h.WaitFor(t, "worker 0 made again", func(ctx context.Context) bool {
		p, err := h.Kube.CoreV1().Pods(ns).Get(ctx, "mpi-example-worker-0", metav1.GetOptions{})
		again = p
		return err == nil && again.UID != worker.UID
	})
	h.SetPod(t, ns, again.Name, corev1.PodRunning, true, 0)
	h.WaitFor(t, "status of the new worker 0", func(context.Context) bool {
		r := h.job(t).Status.Tasks[1].Replicas[0]
		return r.UID == again.UID && r.Phase == batch.ReplicaRunning
	})
	if c := h.job(t).Status.Condition(batch.JobConditionRunning); c.Message != want {
		t.Errorf("Running condition message after worker 0 came back: %s", c.Message)
	}
	for len(h.Events.Events) > 0 {
		if e := <-h.Events.Events; strings.Contains(e, "DebugMode") {
			t.Errorf("a second event: %s", e)
		}
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

// TestDebugCommands: a worker debug command that is sshd keeps its program and arguments and
// gets the job's options it lacks; any other debug command runs as given, and the hint says
// that the launcher cannot reach such workers.
func TestDebugCommands(t *testing.T) {
	cases := []struct {
		name    string
		command []string
		want    []string // after the wrapper's script and "sshd"
		hint    string
	}{
		{"sshd with its own port and options", []string{"/usr/local/sbin/sshd", "-p", "2222", "-o", "LogLevel=DEBUG"},
			[]string{"/usr/local/sbin/sshd", "/usr/sbin/sshd", "-p", "2222", "-o", "LogLevel=DEBUG", "-D", "-e",
				"-o", "HostKey=/root/.ssh/ssh_host_ed25519_key", "-o", "AuthorizedKeysFile=/root/.ssh/authorized_keys",
				"-o", "StrictModes=no", "-o", "PidFile=none"},
			"Start the run with: "},
		{"sleep", []string{"sleep", "inf"}, nil, "The workers' debug command is not sshd, so the launcher cannot reach them; " +
			"with sshd running on every worker, start the run with: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := seed(t)
			job.Spec.RunMode = &batch.RunMode{Debug: &batch.DebugMode{Enabled: true, ReplicaSpecs: []batch.ReplicaDebugSet{
				{Type: batch.WorkerType, Command: tc.command}}}}
			job.Default()
			plan, err := Plan(job)
			if err != nil {
				t.Fatal(err)
			}
			got := plan.Groups[1].Debug.Command
			switch {
			case tc.want == nil && !reflect.DeepEqual(got, tc.command):
				t.Errorf("worker debug command %q, want %q as given", got, tc.command)
			case tc.want != nil && (len(got) < 4 || got[0] != "/bin/sh" || got[3] != "sshd" || !reflect.DeepEqual(got[4:], tc.want)):
				t.Errorf("worker debug command %q, want the wrapper over %q", got, tc.want)
			}
			if spec := job.Spec.RunMode.Debug.For(batch.WorkerType); !reflect.DeepEqual(spec.Command, tc.command) {
				t.Errorf("the job's own debug setting changed to %q", spec.Command)
			}
			if !strings.HasPrefix(plan.DebugHint, tc.hint+"kubectl exec -it -n ns mpi-example-launcher -- /usr/local/bin/mpirun ") {
				t.Errorf("hint %q", plan.DebugHint)
			}
		})
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
