package decision

import (
	corev1 "k8s.io/api/core/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// Disruptions are not failures (docs/lifecycle.md, "Disruptions"). A pod that ended because
// Kubernetes disrupted it (its DisruptionTarget condition: preempted by the scheduler,
// evicted through the API or by its kubelet, its node drained, tainted or lost), or that was
// deleted by someone other than the controller while its job ran, is replaced without using
// a restart of its replica's limit or of the job's backoffLimit. Its replica's status counts
// it (disruptions) and tells how it ended (lastTermination, disrupted: true). A program that
// fails is counted exactly as before.

// ReasonDeleted is a disrupted pod's reason when it was deleted with nothing to say why.
const ReasonDeleted = "Deleted"

// ReasonRestartedWithJob is the reason of a pod deleted to restart (or replace) its whole
// job (spec.restartScope: Job).
const ReasonRestartedWithJob = "RestartedWithJob"

// TerminatedByKueue is the condition Kueue's topology-aware scheduling sets on a pod it
// fails before it ran because the node its domain gave it went bad (NotReady, tainted, gone):
// the pod is replaced on the node Kueue assigns instead, as after any disruption.
const TerminatedByKueue corev1.PodConditionType = "TerminatedByKueue"

// DisruptionTarget is a pod's condition that marks it disrupted, when it is True: Kubernetes'
// DisruptionTarget, or Kueue's TerminatedByKueue.
func DisruptionTarget(pod *corev1.Pod) (corev1.PodCondition, bool) {
	if pod == nil {
		return corev1.PodCondition{}, false
	}
	for _, c := range pod.Status.Conditions {
		if (c.Type == corev1.DisruptionTarget || c.Type == TerminatedByKueue) && c.Status == corev1.ConditionTrue {
			return c, true
		}
	}
	return corev1.PodCondition{}, false
}

// Disrupted reports whether a pod was disrupted, as Kubernetes marks it.
func Disrupted(pod *corev1.Pod) bool {
	_, ok := DisruptionTarget(pod)
	return ok
}

// disruptionText is how a replica's view names a disruption: its reason.
func disruptionText(pod *corev1.Pod) string {
	if c, ok := DisruptionTarget(pod); ok && c.Reason != "" {
		return c.Reason
	}
	return ReasonDeleted
}

// disrupt records the disruption of a replica's pod (nil: a pod the controller no longer
// sees, known from status) once: the replica counts it, its lastTermination tells it, and
// its status stands as Deleted, with the old pod's UID, until the new pod is made. It
// returns the disruption's reason.
func (x *decider) disrupt(r *replica, pod *corev1.Pod) string {
	s := &r.status
	uid := s.UID
	if pod != nil {
		uid = pod.UID
	}
	if t := s.LastTermination; t != nil && t.UID == uid && t.Disrupted {
		s.UID, s.Phase = uid, batch.ReplicaDeleted
		return t.Reason // recorded already
	}
	t := &batch.ReplicaTermination{UID: s.UID, Phase: s.Phase, Node: s.Node, Reason: s.Reason, Message: s.Message, Containers: s.Containers}
	if pod != nil {
		t = termination(pod)
	}
	t.Disrupted = true
	if c, ok := DisruptionTarget(pod); ok {
		t.Reason, t.Message = c.Reason, c.Message
	} else if t.Reason == "" {
		t.Reason, t.Message = ReasonDeleted, "The pod was deleted while the job ran."
	}
	s.Disruptions++
	s.LastTermination = t
	s.UID, s.Phase = uid, batch.ReplicaDeleted
	r.disrupted = true
	return t.Reason
}
