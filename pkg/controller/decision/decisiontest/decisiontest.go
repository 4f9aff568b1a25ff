// Package decisiontest builds the jobs, pods and statuses that the tests of the decision and
// of the engine decide on: a GenericJob named "job" in namespace "ns", and its workers'
// pods, job-worker-<rank>. It imports nothing of the decision, so that the decision's own
// tests can use it too.
package decisiontest

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// Now is the tests' time.
var Now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// NoCPU is what the scheduler says of a pod no node has the CPU for.
const NoCPU = "0/4 nodes are available: 4 Insufficient cpu. preemption: 0/4 nodes are available: 4 No preemption victims found for incoming pod."

// Job is the GenericJob "job" with the status given.
func Job(status batch.JobStatus) *batch.GenericJob {
	job := &batch.GenericJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: batch.SchemeGroupVersion.String(), Kind: "GenericJob"},
		ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns", UID: "job-uid", Generation: 1},
		Status:     status,
	}
	return job
}

// Template is a replica's pod template: an init container, and a main container that runs
// command with an argument.
func Template(command ...string) func(int32) corev1.PodTemplateSpec {
	return func(int32) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox"}},
			Containers:     []corev1.Container{{Name: "main", Image: "busybox", Command: command, Args: []string{"--flag"}}},
		}}
	}
}

// Pod is a worker's pod in the phase given: its container runs, or, once the pod has ended,
// ended an hour ago with the exit code given.
func Pod(name string, uid types.UID, phase corev1.PodPhase, exitCode int32) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: uid, Labels: map[string]string{batch.LabelReplicaType: "worker"}},
		Status:     corev1.PodStatus{Phase: phase},
	}
	state := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	if phase == corev1.PodSucceeded || phase == corev1.PodFailed {
		state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode, FinishedAt: metav1.NewTime(Now.Add(-time.Hour))}}
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: state}}
	return p
}

// Ready makes a pod Ready.
func Ready(p *corev1.Pod) *corev1.Pod {
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	return p
}

// Unschedulable makes a pod one the scheduler could not place a minute ago, with its message.
// Its reason and message are fresh copies, as a decoded pod's are.
func Unschedulable(p *corev1.Pod, message string) *corev1.Pod {
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: strings.Clone(corev1.PodReasonUnschedulable), Message: strings.Clone(message), LastTransitionTime: metav1.NewTime(Now.Add(-time.Minute))}}
	return p
}

// DisruptedPod is a worker's pod that Kubernetes disrupted (DisruptionTarget, for the reason
// given) and its kubelet evicted.
func DisruptedPod(name string, uid types.UID, reason string) *corev1.Pod {
	p := Pod(name, uid, corev1.PodFailed, 137)
	p.Status.Reason = "Evicted"
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: reason, Message: "The node was low on resource: memory."})
	return p
}

// TerminatedByKueue is worker 0's pod, failed before it ran by Kueue's topology-aware
// scheduling because the node its domain gave it went bad.
func TerminatedByKueue() *corev1.Pod {
	p := Pod("job-worker-0", "w0", corev1.PodFailed, 0)
	p.Status.ContainerStatuses = nil
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: "TerminatedByKueue", Status: corev1.ConditionTrue,
		Reason: "UnschedulableOnAssignedNode", Message: "Pod terminated by Kueue NodeController due to node taint"})
	return p
}

// ReplicaStatus is a replica's status.
func ReplicaStatus(name string, uid types.UID, phase batch.ReplicaPhase, restarts int32) batch.ReplicaStatus {
	return batch.ReplicaStatus{Name: name, UID: uid, Phase: phase, RestartCount: restarts}
}

// StatusWith is the status of a job of workers in the phase given, Initialized once it has
// one.
func StatusWith(phase batch.JobPhase, replicas ...batch.ReplicaStatus) batch.JobStatus {
	s := batch.JobStatus{Phase: phase, Tasks: []batch.TaskStatus{{Type: "worker", Replicas: replicas}}}
	for _, r := range replicas {
		s.Tasks[0].RestartCount += r.RestartCount
	}
	if phase != "" {
		s.Conditions = []batch.JobCondition{{Type: batch.JobConditionInitialized, Status: corev1.ConditionTrue}}
	}
	return s
}

// Running is the status of a running job whose workers of the ranks given run, worker n's
// pod by UID w<n>.
func Running(ranks ...string) batch.JobStatus {
	var rs []batch.ReplicaStatus
	for _, n := range ranks {
		rs = append(rs, ReplicaStatus("job-worker-"+n, types.UID("w"+n), batch.ReplicaRunning, 0))
	}
	return StatusWith(batch.JobRunning, rs...)
}

// Names are the objects' names, in their order.
func Names[T metav1.Object](objs []T) []string {
	out := []string{}
	for _, o := range objs {
		out = append(out, o.GetName())
	}
	return out
}
