package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// Real runs: these tests' pods run in containers of the training image on the real node
// (realnode_test.go), where a kubelet with containerd runs them as on any cluster.

const realTimeout = 3 * time.Minute

func waitReal(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	waitFor(t, what, realTimeout, cond)
}

func waitGenericPhase(t *testing.T, ns, name string, phase batch.JobPhase) *batch.GenericJob {
	t.Helper()
	var job *batch.GenericJob
	waitReal(t, name+" "+string(phase), func(ctx context.Context) (bool, error) {
		j, err := env.jobs.BatchV1beta1().GenericJobs(ns).Get(ctx, name, metav1.GetOptions{})
		job = j
		return err == nil && j.Status.Phase == phase, nil
	})
	return job
}

// TestRealPyTorchJob: the PyTorch example (3 workers, gloo all-reduce, RANK, WORLD_SIZE,
// MASTER_ADDR and MASTER_PORT from the GenericJob's variables) succeeds, and every replica's
// log shows the reduced value.
func TestRealPyTorchJob(t *testing.T) {
	parallel(t, realNode.all())
	ns := namespace(t)
	needRealNode(t, ns, trainingImage)
	if out, err := kubectl("apply", "-n", ns, "-k", filepath.Join(repoRoot, "examples", "pytorch")); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	waitGenericPhase(t, ns, "pytorch-allreduce", batch.JobSucceeded)
	for i := range 3 {
		pod := fmt.Sprintf("pytorch-allreduce-worker-%d", i)
		if log := containerLogs(ns, pod, "worker"); !strings.Contains(log, fmt.Sprintf("rank %d of 3: all-reduce sum 6, want 6", i)) {
			t.Errorf("%s's log does not show the reduced value:\n%s", pod, log)
		}
	}
}

// realJob is a GenericJob of replicas workers of the training image on the real node, running
// command.
func realJob(name string, replicas int32, command ...string) *batch.GenericJob {
	r := replica("worker", trainingImage)
	r.Replicas = ptr.To(replicas)
	r.Template.Spec.Containers[0].Command = command
	onRealNode(&r.Template.Spec)
	return &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: batch.GenericJobSpec{ReplicaSpecs: []batch.GenericReplicaSpec{r}}}
}

// TestRealRestartAfterKill: a replica whose process is killed with SIGKILL is restarted under
// OnFailure; its second run succeeds, and the restart is counted once.
func TestRealRestartAfterKill(t *testing.T) {
	parallel(t, realNode.one())
	ns := namespace(t)
	needRealNode(t, ns, trainingImage)
	job := realJob("killed", 1, "sh", "-c", "if [ -e /work/ran ]; then echo second run; exit 0; fi; touch /work/ran; echo first run; exec sleep 600")
	r := &job.Spec.ReplicaSpecs[0]
	r.RestartPolicy = &batch.GenericRestartPolicy{Policy: batch.RestartOnFailure, Limit: ptr.To[int32](2)}
	marker := filepath.Join(os.TempDir(), "t9k-e2e-"+ns)
	t.Cleanup(func() { os.RemoveAll(marker) })
	r.Template.Spec.Volumes = []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
		Path: marker, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}}}
	r.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "work", MountPath: "/work"}}
	createJob(t, ns, job)

	killFirstRun(t, ns, "killed-worker-0", "main")
	done := waitGenericPhase(t, ns, job.Name, batch.JobSucceeded)
	task := done.Status.Tasks[0]
	rs := task.Replicas[0]
	if task.RestartCount != 1 || rs.RestartCount != 1 {
		t.Errorf("restart count %d (replica %d), want 1", task.RestartCount, rs.RestartCount)
	}
	if last := rs.LastTermination; last == nil || len(last.Containers) == 0 || last.Containers[0].ExitCode == nil || *last.Containers[0].ExitCode != 137 {
		t.Errorf("last termination %+v: want exit code 137 (SIGKILL)", last)
	}
	if log := containerLogs(ns, "killed-worker-0", "main"); !strings.Contains(log, "second run") {
		t.Errorf("the restarted replica's log: %q", log)
	}
}

// TestRealReadinessAndNames: a pod with a tcpSocket readiness probe is Ready only once its
// program listens; from inside each replica, every replica's documented host name
// ($(service.worker[i].host)) resolves to that replica's pod IP.
func TestRealReadinessAndNames(t *testing.T) {
	parallel(t, realNode.one())
	ns := namespace(t)
	needRealNode(t, ns, trainingImage)
	script := `for h in $(service.worker[0].host) $(service.worker[1].host) $(service.worker[2].host); do
  until ip=` + "`getent hosts $h | cut -d' ' -f1`" + ` && [ -n "$ip" ]; do sleep 0.2; done
  echo "resolved $h $ip"
done
sleep 2
echo listening
exec /usr/bin/python3 -m http.server $(service.port[http])`
	job := realJob("names", 3, "sh", "-c", script)
	job.Spec.Service = &batch.ServiceOption{Ports: []batch.ServicePort{{Name: "http", Port: 8080}}}
	job.Spec.ReplicaSpecs[0].Template.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1,
		ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}}
	createJob(t, ns, job)

	ips := map[string]string{}
	waitReal(t, "every replica Ready, none before it listens", func(ctx context.Context) (bool, error) {
		pods, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		ready := 0
		for _, p := range pods.Items {
			if !podIsReady(&p) {
				continue
			}
			ready++
			ips[p.Name] = p.Status.PodIP
			if !strings.Contains(containerLogs(ns, p.Name, "main"), "listening") {
				t.Fatalf("%s is Ready before its program listens", p.Name)
			}
		}
		return ready == 3, nil
	})
	for i := range 3 {
		log := containerLogs(ns, fmt.Sprintf("names-worker-%d", i), "main")
		for j := range 3 {
			name := fmt.Sprintf("names-worker-%d", j)
			if want := fmt.Sprintf("resolved %s %s\n", name, ips[name]); !strings.Contains(log, want) {
				t.Errorf("names-worker-%d did not resolve %s to its pod IP %s:\n%s", i, name, ips[name], log)
			}
		}
	}
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TestRealPauseAndDelete: pausing a job ends its processes, resuming starts them again, and
// deleting it ends them for good. The kubelet stops a container as on any cluster: SIGTERM,
// then SIGKILL once the pod's grace period is over. The command, sleep, is pid 1 of its
// container, which the kernel spares the signals it has no handler for: SIGTERM leaves it
// running, and the processes end only at the SIGKILL, gracePeriod later. All that time the
// job is pausing, not paused: its Paused condition says Pausing while they run, and Paused
// ("all replicas are deleted") only once they are gone. A job resumed while its pods are
// still in their grace period resumes: the SIGKILL that ends them (exit code 137) is the
// pause's, not a failure of the replicas.
func TestRealPauseAndDelete(t *testing.T) {
	parallel(t, realNode.all())
	ns := namespace(t)
	needRealNode(t, ns, trainingImage)
	const marker = "sleep 6110"
	const gracePeriod = 4
	job := realJob("stopper", 2, "sleep", "6110")
	job.Spec.ReplicaSpecs[0].Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](gracePeriod)
	createJob(t, ns, job)
	running := func(n int) func(context.Context) (bool, error) {
		return func(context.Context) (bool, error) { return len(processesWith(marker)) == n, nil }
	}
	pods := func(ctx context.Context) []corev1.Pod {
		list, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil
		}
		return list.Items
	}
	// resumed waits until the job runs 2 new replicas: the old pods gone (their processes
	// with them, as the kubelet removes a pod only once its containers are stopped), 2
	// processes and the job Running. It fails at once if the job fails instead.
	resumed := func(what string) {
		t.Helper()
		waitReal(t, what, func(ctx context.Context) (bool, error) {
			j, err := env.jobs.BatchV1beta1().GenericJobs(ns).Get(ctx, "stopper", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			if j.Status.Phase == batch.JobFailed {
				t.Fatalf("the resumed job failed: %s", j.Status.Condition(batch.JobConditionFailed).Message)
			}
			for _, p := range pods(ctx) {
				if p.DeletionTimestamp != nil {
					return false, nil
				}
			}
			return j.Status.Phase == batch.JobRunning && len(processesWith(marker)) == 2, nil
		})
	}
	waitReal(t, "2 processes", running(2))

	setPause(t, ns, "stopper", true)
	paused := time.Now()
	var pausing, early bool
	waitReal(t, "no process after the pause, the job Pausing until then", func(ctx context.Context) (bool, error) {
		j, err := env.jobs.BatchV1beta1().GenericJobs(ns).Get(ctx, "stopper", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		c := j.Status.Condition(batch.JobConditionPaused)
		// The job first, then the processes: a process seen after the job said Paused was
		// running when it said so.
		left := len(processesWith(marker))
		if c.Reason == "Paused" && left > 0 && !early {
			early = true
			t.Errorf("%.1fs after the pause the job says %q while %d of its processes run", time.Since(paused).Seconds(), c.Message, left)
		}
		pausing = pausing || (c.Reason == "Pausing" && left > 0)
		return left == 0, nil
	})
	took := time.Since(paused)
	t.Logf("the processes ended %.1fs after the pause", took.Seconds())
	if !pausing {
		t.Error("the job never said Pausing while its processes ran")
	}
	if took < gracePeriod*time.Second {
		t.Errorf("the processes ended %.1fs after the pause, before the pods' grace period of %ds was over: sleep, pid 1, ignores SIGTERM, so something killed them early", took.Seconds(), gracePeriod)
	}
	waitReal(t, "the paused pods gone", func(ctx context.Context) (bool, error) { return len(pods(ctx)) == 0, nil })
	waitJob(t, ns, "stopper", "Paused, all replicas deleted", func(j *batch.GenericJob) bool {
		return j.Status.Phase == batch.JobPaused && j.Status.Condition(batch.JobConditionPaused).Reason == "Paused"
	})
	setPause(t, ns, "stopper", false)
	resumed("2 processes after the resume")

	// Paused again, and resumed once the pods' containers have ended but the pods are still
	// there: on a cluster a moment between the kubelet's last status and the pod's removal,
	// held here by a finalizer of the test's, as another controller's finalizer may hold a
	// pod. Their end (137, the SIGKILL after the grace period) is the pause's, not the
	// replicas' failure: the job resumes, with new pods once the old ones are gone.
	const hold = "test.t9k.dev/hold"
	finalizers := func(ctx context.Context, names string) {
		for _, p := range pods(ctx) {
			patch := fmt.Sprintf(`{"metadata":{"finalizers":%s}}`, names)
			if _, err := env.kube.CoreV1().Pods(ns).Patch(ctx, p.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Errorf("setting the finalizers of %s: %v", p.Name, err)
			}
		}
	}
	finalizers(context.Background(), `["`+hold+`"]`)
	t.Cleanup(func() { finalizers(context.Background(), "null") })
	setPause(t, ns, "stopper", true)
	waitReal(t, "the paused pods ended, held by the finalizer", func(ctx context.Context) (bool, error) {
		ps := pods(ctx)
		for _, p := range ps {
			if p.DeletionTimestamp == nil || (p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded) {
				return false, nil
			}
		}
		return len(ps) == 2 && len(processesWith(marker)) == 0, nil
	})
	setPause(t, ns, "stopper", false)
	waitJob(t, ns, "stopper", "resumed", func(j *batch.GenericJob) bool {
		return j.Status.Condition(batch.JobConditionPaused).Reason == "Resumed" || j.Status.Phase == batch.JobFailed
	})
	// What is checked is that nothing fails: watched for a while.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if j := getJob(t, ns, "stopper"); j.Status.Phase == batch.JobFailed {
			t.Errorf("resumed while the pods the pause deleted were ending, the job failed: %s", j.Status.Condition(batch.JobConditionFailed).Message)
			break
		}
	}
	finalizers(context.Background(), "null")
	resumed("2 new processes once the old pods are gone")

	if err := env.jobs.BatchV1beta1().GenericJobs(ns).Delete(context.Background(), "stopper", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReal(t, "no process after the deletion", running(0))
}

// TestRealMPIJob: the MPIJob example, the documented mpirun arguments as written (-N 3 on 3
// workers), reaches every worker through sshd with the job's key and host key checking on:
// 9 ranks all-reduce to the right value, the job ends Succeeded and the launcher's log shows
// it, and the ranks ran 3 on each worker (each rank prints its host name, which is its pod's:
// ranks run where sshd started them, in that pod's namespaces). A program that exits non-zero
// on one rank ends the job Failed, with the code.
func TestRealMPIJob(t *testing.T) {
	parallel(t, realNode.all())
	realMPIJob(t)
}

// realMPIJob is TestRealMPIJob's run, which the in-cluster install repeats on its controller.
func realMPIJob(t *testing.T) {
	ns := namespace(t)
	needRealNode(t, ns, trainingImage)
	example := filepath.Join(repoRoot, "examples", "mpi")
	if out, err := kubectl("apply", "-n", ns, "-k", example); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	s := waitStatus(t, "success", mpiStatus(ns, "mpi-allreduce"), func(s *batch.JobStatus) bool { return s.Phase == batch.JobSucceeded || s.Phase == batch.JobFailed })
	if s.Phase != batch.JobSucceeded {
		t.Fatalf("the MPIJob ended %s: %+v", s.Phase, s.Conditions)
	}
	log := containerLogs(ns, "mpi-allreduce-launcher", "launcher")
	if n := strings.Count(log, "all-reduce sum 45, want 45"); n != 9 {
		t.Errorf("the launcher's log shows %d of 9 ranks:\n%s", n, log)
	}
	hostOf := rankHosts(t, log)
	perHost := ranksPerHost(hostOf)
	t.Logf("ranks per host: %v", perHost)
	for i := range 3 {
		worker := fmt.Sprintf("mpi-allreduce-worker-%d", i)
		if perHost[worker] != 3 {
			t.Errorf("%d ranks ran on %s, want 3 (-N 3); ranks per host: %v\n%s", perHost[worker], worker, perHost, log)
		}
		delete(perHost, worker)
	}
	if len(perHost) != 0 {
		t.Errorf("ranks ran on hosts other than the workers: %v", perHost)
	}
	if len(hostOf) != 9 {
		t.Errorf("the launcher's log names the hosts of %d of 9 ranks: %v", len(hostOf), hostOf)
	}

	// One rank fails: mpirun, and the job, fail with its code.
	job := exampleMPIJob(t, "mpi-fails")
	job.Spec.Worker.ExtraMPIArgs = []string{"-N", "3", "--allow-run-as-root", "-x", "FAIL_RANK"}
	job.Spec.Worker.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "FAIL_RANK", Value: "4"}}
	if _, err := env.jobs.BatchV1beta1().MPIJobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	failed := waitStatus(t, "failure", mpiStatus(ns, "mpi-fails"), func(s *batch.JobStatus) bool { return s.Phase == batch.JobFailed || s.Phase == batch.JobSucceeded })
	if c := failed.Condition(batch.JobConditionFailed); failed.Phase != batch.JobFailed || !strings.Contains(c.Message, "mpi-fails-launcher failed with exit code 3") {
		t.Errorf("phase %s, Failed condition %+v", failed.Phase, c)
	}
}

// TestRealColossalAIJob: the launcher reaches every worker over SSH with the job's key and
// hostfile, and runs `colossalai run` (the stand-in of test/colossalai, which does what
// ColossalAI's does) with the controller's command: a real torch.distributed run of
// procPerWorker processes on each of 2 workers, a gloo all-reduce over 4 processes.
func TestRealColossalAIJob(t *testing.T) {
	parallel(t, realNode.all())
	ns := namespace(t)
	needRealNode(t, ns, trainingImage)
	job := realColossalAIJob(t, ns, "colossal")
	if _, err := env.jobs.BatchV1beta1().ColossalAIJobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var s *batch.JobStatus
	waitReal(t, "the job ended", func(ctx context.Context) (bool, error) {
		j, err := env.jobs.BatchV1beta1().ColossalAIJobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		s = &j.Status
		return s.Phase == batch.JobSucceeded || s.Phase == batch.JobFailed, nil
	})
	log := containerLogs(ns, "colossal-launcher", "launcher")
	if s.Phase != batch.JobSucceeded {
		t.Fatalf("the job ended %s: %+v\nlauncher log:\n%s", s.Phase, s.Conditions, log)
	}
	if n := strings.Count(log, "all-reduce sum 10, want 10"); n != 4 {
		t.Errorf("the launcher's log shows %d of 4 processes:\n%s", n, log)
	}
	if !strings.Contains(log, "colossal-worker-0.colossal: success") || !strings.Contains(log, "colossal-worker-1.colossal: success") {
		t.Errorf("the launcher's log does not report both workers:\n%s", log)
	}
}

// TestRealXGBoostJob: the XGBoost example trains for real: the master hosts the tracker,
// master and 2 workers form the collective from the env the controller gives them, and the
// master checks the model's accuracy.
func TestRealXGBoostJob(t *testing.T) {
	parallel(t, realNode.all())
	ns := namespace(t)
	needRealNode(t, ns, trainingImage)
	if out, err := kubectl("apply", "-n", ns, "-k", filepath.Join(repoRoot, "examples", "xgboost")); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var s *batch.JobStatus
	waitReal(t, "the job ended", func(ctx context.Context) (bool, error) {
		j, err := env.jobs.BatchV1beta1().XGBoostTrainingJobs(ns).Get(ctx, "xgboost-train", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		s = &j.Status
		return s.Phase == batch.JobSucceeded || s.Phase == batch.JobFailed, nil
	})
	log := containerLogs(ns, "xgboost-train-master-0", "xgboost")
	if s.Phase != batch.JobSucceeded || !strings.Contains(log, "rank 0: accuracy") {
		t.Fatalf("the job ended %s; the master's log:\n%s", s.Phase, log)
	}
	t.Logf("the master's log:\n%s", log)
	for i := range 2 {
		if log := containerLogs(ns, fmt.Sprintf("xgboost-train-worker-%d", i), "xgboost"); !strings.Contains(log, fmt.Sprintf("rank %d of 3", i+1)) {
			t.Errorf("worker %d did not join as rank %d:\n%s", i, i+1, log)
		}
	}
}

// TestRealTensorFlowJob: a program that reads TF_CONFIG as TensorFlow does reaches every
// task of the cluster by the address given (chief, 2 workers, 1 ps); the chief, killed with
// SIGKILL on its first run (exit code 137, as the kubelet reports it), is restarted under
// ExitCode and the job still succeeds. TensorFlow is not in Debian, so not in the training
// image: the program is test/tensorflow's stand-in, mounted by hostPath, which proves the
// cluster TF_CONFIG describes, not TensorFlow's training.
func TestRealTensorFlowJob(t *testing.T) {
	parallel(t, realNode.all())
	ns := namespace(t)
	needRealNode(t, ns, trainingImage)
	program, err := filepath.Abs(filepath.Join(repoRoot, "test", "tensorflow"))
	if err != nil {
		t.Fatal(err)
	}
	hold := filepath.Join(os.TempDir(), "t9k-e2e-tf-"+ns)
	t.Cleanup(func() { os.RemoveAll(hold) })
	replica := func(typ string, n int32, holdFirst bool) batch.TrainingReplicaSpec {
		c := corev1.Container{Name: "tensorflow", Image: trainingImage, Command: []string{"/usr/bin/python3", "/program/tf_config_check.py"},
			VolumeMounts: []corev1.VolumeMount{{Name: "program", MountPath: "/program", ReadOnly: true}, {Name: "hold", MountPath: "/hold"}}}
		if holdFirst {
			c.Env = []corev1.EnvVar{{Name: "HOLD_FIRST_RUN", Value: "/hold"}}
		}
		spec := corev1.PodSpec{Containers: []corev1.Container{c}, Volumes: []corev1.Volume{
			{Name: "program", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: program}}},
			{Name: "hold", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: hold, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}},
		}}
		onRealNode(&spec)
		return batch.TrainingReplicaSpec{Type: typ, Replicas: ptr.To(n), RestartPolicy: batch.RestartExitCode, Template: corev1.PodTemplateSpec{Spec: spec}}
	}
	job := &batch.TensorFlowTrainingJob{ObjectMeta: metav1.ObjectMeta{Name: "tf"}, Spec: batch.TensorFlowTrainingJobSpec{
		ReplicaSpecs: []batch.TrainingReplicaSpec{replica("chief", 1, true), replica("worker", 2, false), replica("ps", 1, false)}}}
	if _, err := env.jobs.BatchV1beta1().TensorFlowTrainingJobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	killFirstRun(t, ns, "tf-chief-0", "tensorflow")
	var s *batch.JobStatus
	waitReal(t, "the job ended", func(ctx context.Context) (bool, error) {
		j, err := env.jobs.BatchV1beta1().TensorFlowTrainingJobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		s = &j.Status.JobStatus
		return s.Phase == batch.JobSucceeded || s.Phase == batch.JobFailed, nil
	})
	log := containerLogs(ns, "tf-chief-0", "tensorflow")
	if s.Phase != batch.JobSucceeded || !strings.Contains(log, "3 of 3 tasks answered") {
		t.Fatalf("the job ended %s; the chief's log:\n%s", s.Phase, log)
	}
	if s.Tasks[0].Type != "chief" || s.Tasks[0].RestartCount != 1 {
		t.Fatalf("tasks %+v: want the chief restarted once", s.Tasks)
	}
	if last := s.Tasks[0].Replicas[0].LastTermination; last == nil || len(last.Containers) == 0 || last.Containers[0].ExitCode == nil || *last.Containers[0].ExitCode != 137 {
		t.Errorf("the chief's last termination %+v: want exit code 137 (SIGKILL)", last)
	}
}

// TestRealExecProbe: an exec readiness probe runs inside the container (its mount, UTS,
// network and PID namespaces): the pod is Ready only once the probe's command succeeds there,
// not before. The probe proves where it ran: it records its namespaces in the container's
// emptyDir, which only the container's mount namespace has, and the container logs them
// beside its own; the test waits for that line, then compares.
func TestRealExecProbe(t *testing.T) {
	parallel(t, realNode.one())
	ns := namespace(t)
	needRealNode(t, ns, trainingImage)
	const namespaces = `for n in mnt uts net pid; do printf ' %s=%s' $n $(readlink /proc/self/ns/$n); done`
	script := `sleep 2
echo creating the ready file
touch /ready-dir/ready
until [ -s /ready-dir/probed ]; do sleep 0.1; done
echo "probe:$(cat /ready-dir/probed)"
echo "container:$(` + namespaces + `)"
exec sleep 600`
	probe := `test -e /ready-dir/ready && { ` + namespaces + `; } > /ready-dir/probed.tmp && mv /ready-dir/probed.tmp /ready-dir/probed`
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "exec-probe"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "main", Image: trainingImage,
			Command:        []string{"sh", "-c", script},
			VolumeMounts:   []corev1.VolumeMount{{Name: "scratch", MountPath: "/ready-dir"}},
			ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", probe}}}}}},
		Volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
	}}
	onRealNode(&pod.Spec)
	if _, err := env.kube.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var probeLine, containerLine string
	waitReal(t, "the pod Ready, not before its file exists, and the probe's namespaces logged", func(ctx context.Context) (bool, error) {
		p, err := env.kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		// The log line comes before the file: a Ready pod must show it.
		log := containerLogs(ns, pod.Name, "main")
		if podIsReady(p) && !strings.Contains(log, "creating the ready file") {
			t.Fatal("the pod is Ready before the probe's file exists")
		}
		for _, line := range strings.Split(log, "\n") {
			if rest, ok := strings.CutPrefix(line, "probe:"); ok {
				probeLine = rest
			}
			if rest, ok := strings.CutPrefix(line, "container:"); ok {
				containerLine = rest
			}
		}
		return podIsReady(p) && containerLine != "", nil
	})
	t.Logf("the probe's namespaces:%s", probeLine)
	if probeLine != containerLine {
		t.Errorf("the probe ran outside the container's namespaces:\nprobe:    %s\ncontainer:%s", probeLine, containerLine)
	}
	for _, n := range []string{"mnt", "uts", "net", "pid"} {
		own, err := os.Readlink("/proc/self/ns/" + n)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf(" %s=%s", n, own); strings.Contains(containerLine+" ", want+" ") {
			t.Errorf("the container shares the machine's %s namespace (%s): the comparison proves nothing", n, own)
		}
	}
}

// killFirstRun waits until a pod's container has logged "first run", and kills it with
// SIGKILL from this machine: its command, pid 1 of the container's PID namespace, whose end
// takes every other process of the container with it.
func killFirstRun(t *testing.T, ns, pod, container string) {
	t.Helper()
	var p *corev1.Pod
	// The log can show the first run before the pod's status shows its container running
	// (the kubelet reports the status on its own clock): wait for both.
	waitReal(t, pod+"'s first run", func(ctx context.Context) (bool, error) {
		var err error
		p, err = env.kube.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil || !strings.Contains(containerLogs(ns, pod, container), "first run") {
			return false, nil
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == container && cs.State.Running != nil && cs.ContainerID != "" {
				return true, nil
			}
		}
		return false, nil
	})
	pid := containerInit(t, p, container)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing %s's process %d: %v", pod, pid, err)
	}
}

// realColossalAIJob is a ColossalAIJob of 2 workers x 2 processes of the training image on
// the real node: the PyTorch example's all-reduce (a ConfigMap "scripts" it creates in ns) run
// by `colossalai run`, the stand-in of test/colossalai, which a hostPath volume mounts in the
// workers and the launcher (the training image has no ColossalAI).
func realColossalAIJob(t *testing.T, ns, name string) *batch.ColossalAIJob {
	t.Helper()
	allreduceScripts(t, ns)
	standIn, err := filepath.Abs(filepath.Join(repoRoot, "test", "colossalai"))
	if err != nil {
		t.Fatal(err)
	}
	worker := corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "worker", Image: trainingImage, VolumeMounts: []corev1.VolumeMount{
			{Name: "scripts", MountPath: "/workspace"}, {Name: "colossalai", MountPath: "/opt/colossalai", ReadOnly: true}}}},
		Volumes: []corev1.Volume{
			{Name: "scripts", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "scripts"}}}},
			{Name: "colossalai", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: standIn}}},
		},
	}}
	onRealNode(&worker.Spec)
	job := &batch.ColossalAIJob{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: batch.ColossalAIJobSpec{
		Launcher: batch.ColossalAILauncher{Image: trainingImage, WorkingDir: "/workspace",
			Env: []corev1.EnvVar{{Name: "PATH", Value: "/opt/colossalai:/usr/local/bin:/usr/bin:/bin"}}},
		Worker: batch.ColossalAIWorkerSpec{Replicas: ptr.To[int32](2), ProcPerWorker: ptr.To[int32](2),
			Command: []string{"allreduce.py"}, Template: worker,
			// Debian's torchrun (PyTorch 1.13 on Python 3.11) cannot parse its own default
			// "0" for these two; passing them also proves torchArgs reach torchrun.
			TorchArgs: []string{"--redirects", "2", "--tee=1"}},
	}}
	return job
}

// rankHosts reads the host each rank of examples/mpi's allreduce.py ran on from its lines
// ("rank 4 of 9 on mpi-allreduce-worker-1: all-reduce sum 45, want 45"), by rank; a rank
// reported twice fails the test.
func rankHosts(t *testing.T, log string) map[int]string {
	t.Helper()
	hostOf := map[int]string{}
	for _, line := range strings.Split(log, "\n") {
		var rank, size int
		var host string
		if _, err := fmt.Sscanf(line, "rank %d of %d on %s", &rank, &size, &host); err != nil {
			continue
		}
		host = strings.TrimSuffix(host, ":")
		if prev, ok := hostOf[rank]; ok {
			t.Errorf("rank %d reported twice, on %s and %s", rank, prev, host)
		}
		hostOf[rank] = host
	}
	return hostOf
}

// ranksPerHost counts ranks by host.
func ranksPerHost(hostOf map[int]string) map[string]int {
	perHost := map[string]int{}
	for _, host := range hostOf {
		perHost[host]++
	}
	return perHost
}
