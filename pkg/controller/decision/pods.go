package decision

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// What a decision reads from pods, and which pods the clean-up deletes.

// PodEnded reports whether a pod has ended: it runs no more and holds nothing of the node.
func PodEnded(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
}

// PodReady reports whether a pod's Ready condition is True.
func PodReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func replicaPhase(pod *corev1.Pod) batch.ReplicaPhase {
	switch pod.Status.Phase {
	case corev1.PodPending, "":
		return batch.ReplicaPending
	case corev1.PodRunning:
		return batch.ReplicaRunning
	case corev1.PodSucceeded:
		return batch.ReplicaSucceeded
	case corev1.PodFailed:
		return batch.ReplicaFailed
	default:
		return batch.ReplicaUnknown
	}
}

// fromPod reports a replica's pod in its status.
func fromPod(s *batch.ReplicaStatus, pod *corev1.Pod) {
	s.UID, s.Phase, s.Containers = pod.UID, replicaPhase(pod), containerStatuses(pod)
	s.Node, s.Reason, s.Message = pod.Spec.NodeName, pod.Status.Reason, pod.Status.Message
}

// termination records how a pod ended.
func termination(pod *corev1.Pod) *batch.ReplicaTermination {
	return &batch.ReplicaTermination{UID: pod.UID, Phase: replicaPhase(pod), Node: pod.Spec.NodeName,
		Reason: pod.Status.Reason, Message: pod.Status.Message, Containers: containerStatuses(pod)}
}

func containerStatuses(pod *corev1.Pod) []batch.ContainerStatus {
	out := make([]batch.ContainerStatus, 0, len(pod.Status.ContainerStatuses))
	for _, cs := range pod.Status.ContainerStatuses {
		s := batch.ContainerStatus{Name: cs.Name}
		switch {
		case cs.State.Terminated != nil:
			code := cs.State.Terminated.ExitCode
			s.State, s.ExitCode, s.Reason = batch.ContainerTerminated, &code, cs.State.Terminated.Reason
		case cs.State.Running != nil:
			s.State = batch.ContainerRunning
		default:
			s.State = batch.ContainerWaiting
			if w := cs.State.Waiting; w != nil {
				s.Reason = w.Reason
			}
		}
		out = append(out, s)
	}
	return out
}

// exitCode is the first non-zero exit code of a pod's containers, or 0.
func exitCode(pod *corev1.Pod) int32 {
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return t.ExitCode
		}
	}
	return 0
}

// statusExitCode is the first non-zero exit code of a replica's containers, or 0.
func statusExitCode(s batch.ReplicaStatus) int32 {
	for _, c := range s.Containers {
		if c.ExitCode != nil && *c.ExitCode != 0 {
			return *c.ExitCode
		}
	}
	return 0
}

// finishedAt is when a pod's last container ended, as its node reports it (zero when it does
// not say).
func finishedAt(pod *corev1.Pod) time.Time {
	var end time.Time
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.FinishedAt.After(end) {
			end = t.FinishedAt.Time
		}
	}
	return end
}

// failureText names a failed replica with the exit code status keeps for it.
func failureText(s batch.ReplicaStatus) string {
	return s.Name + ExitText(statusExitCode(s))
}

// cleanUp returns the pods the plan's clean-up policy deletes once the job has ended, leaving
// out those already being deleted.
func cleanUp(plan *Plan, pods, deleting []*corev1.Pod) []*corev1.Pod {
	if plan.CleanUp == batch.CleanUpNone {
		return nil
	}
	var out []*corev1.Pod
	for _, p := range Unlisted(Live(pods), deleting) {
		if plan.CleanUpTypes != nil && !contains(plan.CleanUpTypes, p.Labels[batch.LabelReplicaType]) {
			continue
		}
		ended := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		if plan.CleanUp == batch.CleanUpAll || !ended {
			out = append(out, p)
		}
	}
	return out
}

// Live returns the objects that are not being deleted.
func Live[T interface{ GetDeletionTimestamp() *metav1.Time }](objs []T) []T {
	var out []T
	for _, o := range objs {
		if o.GetDeletionTimestamp() == nil {
			out = append(out, o)
		}
	}
	return out
}

// Unlisted returns the pods of pods that are not in listed.
func Unlisted(pods, listed []*corev1.Pod) []*corev1.Pod {
	skip := map[string]bool{}
	for _, p := range listed {
		skip[p.Name] = true
	}
	var out []*corev1.Pod
	for _, p := range pods {
		if !skip[p.Name] {
			out = append(out, p)
		}
	}
	return out
}

// MinPositive is the sooner of two waits, where one of 0 or less is none: b when a is none.
func MinPositive(a, b time.Duration) time.Duration {
	if a <= 0 || b < a {
		return b
	}
	return a
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
