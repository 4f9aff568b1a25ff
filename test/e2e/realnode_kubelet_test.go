package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/test/cluster"
)

// What only a real kubelet shows: a container killed by its memory limit, a container that
// fails its liveness probe, a pod the kubelet evicts for its own storage limit, and one it
// preempts for a critical pod. Each is a job's replica on the real node, and the job reports
// it as the kubelet did.

// realNodeJob is a GenericJob of one worker of the training image on the real node, running
// command.
func realNodeJob(name string, command ...string) *batch.GenericJob {
	r := replica("worker", trainingImage)
	r.Template.Spec.Containers[0].Command = command
	r.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	onRealNode(&r.Template.Spec)
	return &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: batch.GenericJobSpec{ReplicaSpecs: []batch.GenericReplicaSpec{r}}}
}

// TestRealNodeOOMKilled: a replica that outgrows its memory limit is killed by the kernel;
// its status says OOMKilled with exit code 137, as the kubelet reports it, and its restart
// policy applies: OnFailure restarts it once (limit 1), then the job fails.
func TestRealNodeOOMKilled(t *testing.T) {
	parallel(t, realNode.one())
	ns := namespace(t)
	needRealNode(t, ns, trainingImage)
	job := realNodeJob("oom", "tail", "/dev/zero") // tail keeps the whole endless line in memory
	r := &job.Spec.ReplicaSpecs[0]
	r.RestartPolicy = &batch.GenericRestartPolicy{Policy: batch.RestartOnFailure, Limit: ptr.To[int32](1)}
	r.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")}
	createJob(t, ns, job)

	done := waitGenericPhase(t, ns, job.Name, batch.JobFailed)
	rs := done.Status.Tasks[0].Replicas[0]
	if rs.RestartCount != 1 {
		t.Errorf("restart count %d, want 1 (OnFailure, limit 1)", rs.RestartCount)
	}
	last := rs.LastTermination
	if last == nil || len(last.Containers) == 0 || last.Containers[0].ExitCode == nil || *last.Containers[0].ExitCode != 137 ||
		last.Containers[0].Reason != "OOMKilled" {
		t.Fatalf("last termination %+v: want exit code 137, reason OOMKilled", last)
	}
	if msg := jobEvent(t, ns, job.Name, "Restarting"); !strings.Contains(msg, "OOMKilled") {
		t.Errorf("Restarting event %q does not say OOMKilled", msg)
	}
}

// TestRealNodeLivenessProbe: a container whose liveness probe fails is killed by the kubelet;
// the replica's pod fails (the engine makes every pod restartPolicy Never and restarts
// replicas itself), and the job reports the container's end as the kubelet reports it.
func TestRealNodeLivenessProbe(t *testing.T) {
	parallel(t, realNode.one())
	ns := namespace(t)
	needRealNode(t, ns, trainingImage)
	job := realNodeJob("liveness", "sleep", "600")
	c := &job.Spec.ReplicaSpecs[0].Template.Spec.Containers[0]
	c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"false"}}},
		PeriodSeconds: 1, FailureThreshold: 2}
	createJob(t, ns, job)

	done := waitGenericPhase(t, ns, job.Name, batch.JobFailed)
	pod, err := env.kube.CoreV1().Pods(ns).Get(context.Background(), "liveness-worker-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pod.Status.ContainerStatuses) == 0 || pod.Status.ContainerStatuses[0].State.Terminated == nil {
		t.Fatalf("the pod's container has not terminated: %+v", pod.Status.ContainerStatuses)
	}
	kubelet := pod.Status.ContainerStatuses[0].State.Terminated
	rs := done.Status.Tasks[0].Replicas[0]
	if len(rs.Containers) == 0 || rs.Containers[0].ExitCode == nil {
		t.Fatalf("the replica's containers %+v have no exit code", rs.Containers)
	}
	if got := rs.Containers[0]; *got.ExitCode != kubelet.ExitCode || got.Reason != kubelet.Reason {
		t.Errorf("the replica says exit code %d, reason %q; the kubelet said %d, %q", *got.ExitCode, got.Reason, kubelet.ExitCode, kubelet.Reason)
	}
	if events, ok := eventsSaying(t, ns, pod.Name, "Liveness probe failed"); !ok {
		t.Errorf("the pod's events do not say its liveness probe failed:\n%s", events)
	}
}

// TestRealNodeOwnStorageLimit: a pod that writes more than its ephemeral-storage limit is
// evicted by the kubelet, which says so in the pod's reason and message but does not mark it
// DisruptionTarget: the pod broke its own limit, as an OOM kill does its memory's. The
// replica has failed (restart policy Never), and its status carries the kubelet's words.
func TestRealNodeOwnStorageLimit(t *testing.T) {
	parallel(t, realNode.one())
	ns := namespace(t)
	needRealNode(t, ns, trainingImage)
	job := realNodeJob("storage", "sh", "-c", "head -c 20000000 /dev/zero > /tmp/fill; exec sleep 600")
	r := &job.Spec.ReplicaSpecs[0]
	r.RestartPolicy = &batch.GenericRestartPolicy{Policy: batch.RestartNever}
	r.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("5Mi")}
	createJob(t, ns, job)

	done := waitGenericPhase(t, ns, job.Name, batch.JobFailed)
	rs := done.Status.Tasks[0].Replicas[0]
	if rs.Reason != "Evicted" || !strings.Contains(rs.Message, "ephemeral local storage") {
		t.Errorf("replica reason %q, message %q: want the kubelet's Evicted and its message", rs.Reason, rs.Message)
	}
	if rs.Disruptions != 0 {
		t.Errorf("%d disruptions: a pod evicted for its own limit failed", rs.Disruptions)
	}
}

// TestRealNodePreemptedByKubelet: the kubelet frees room for a critical pod bound to its node
// by killing a job's pod, which it marks DisruptionTarget (TerminationByKubelet): the replica
// is replaced and no restart is counted, though its restart policy is Never; the replacement
// runs once the critical pod is gone.
func TestRealNodePreemptedByKubelet(t *testing.T) {
	parallel(t, realNode.all())
	ns := namespace(t)
	needRealNode(t, ns, trainingImage)
	ctx := context.Background()
	node, err := env.kube.CoreV1().Nodes().Get(ctx, cluster.RealNodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cpu := node.Status.Allocatable[corev1.ResourceCPU]
	// The job's pod takes most of the node's CPU; the critical pod needs more than is left.
	half := resource.NewMilliQuantity(cpu.MilliValue()/2+100, resource.DecimalSI)
	job := realNodeJob("preempted", "sh", "-c", "if [ -e /marks/ran ]; then echo second run; exit 0; fi; touch /marks/ran; exec sleep 600")
	r := &job.Spec.ReplicaSpecs[0]
	r.RestartPolicy = &batch.GenericRestartPolicy{Policy: batch.RestartNever}
	spec := &r.Template.Spec
	spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: *half}
	marks := filepath.Join(os.TempDir(), "t9k-e2e-"+ns)
	t.Cleanup(func() { os.RemoveAll(marks) })
	spec.Volumes = []corev1.Volume{{Name: "marks", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
		Path: marks, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}}}
	spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "marks", MountPath: "/marks"}}
	createJob(t, ns, job)
	waitJob(t, ns, job.Name, "running", inPhase(batch.JobRunning))

	// A critical pod (system-node-critical is for kube-system) bound to the node by name: the
	// kubelet admits it, preempting what stands in its way.
	critical := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "critical-" + ns, Namespace: "kube-system"}, Spec: corev1.PodSpec{
		NodeName: cluster.RealNodeName, PriorityClassName: "system-node-critical",
		Tolerations:                   []corev1.Toleration{cluster.RealNodeToleration},
		TerminationGracePeriodSeconds: ptr.To[int64](1),
		Containers: []corev1.Container{{Name: "main", Image: trainingImage, Command: []string{"sleep", "600"},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: *half}}}},
	}}
	if _, err := env.kube.CoreV1().Pods("kube-system").Create(ctx, critical, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deleteCritical := func() {
		_ = env.kube.CoreV1().Pods("kube-system").Delete(ctx, critical.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	}
	t.Cleanup(deleteCritical)
	msg := jobEvent(t, ns, job.Name, "Disrupted")
	if !strings.Contains(msg, "TerminationByKubelet") {
		t.Errorf("Disrupted event %q does not give the kubelet's reason", msg)
	}
	deleteCritical()

	done := waitGenericPhase(t, ns, job.Name, batch.JobSucceeded)
	rs := done.Status.Tasks[0].Replicas[0]
	if rs.RestartCount != 0 || rs.Disruptions != 1 {
		t.Errorf("restart count %d, disruptions %d: want a disruption, no restart", rs.RestartCount, rs.Disruptions)
	}
	if !strings.Contains(containerLogs(ns, "preempted-worker-0", "main"), "second run") {
		t.Errorf("the replacement did not run to the end: %q", containerLogs(ns, "preempted-worker-0", "main"))
	}
}
