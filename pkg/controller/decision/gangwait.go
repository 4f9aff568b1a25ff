package decision

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// A gang's new pods wait for its old ones to go (docs/gang.md, "disruptionMode"). The
// scheduler places a gang's pods (Verdict.Gang) as one only while none of the gang is bound:
// it counts the gang's bound pods toward its minCount, those being deleted included. A new
// pod made while others of the gang still terminate (the gang preempted whole, and each
// replica's new pod made as soon as its own old pod is gone) would be bound alone against
// that count, and wait there for the others to fit. So no new pod of the gang is made while a
// bound pod of it is being deleted: they are made together once the last is gone, and placed
// whole again.
//
// A pod is waited for only until its deletion is due (its deletionTimestamp, the end of its
// grace period) and gangStuckAfter more: a pod that stays longer is on a node that does not
// answer, and would hold its gang for good.

// gangStuckAfter is how long past its deletionTimestamp a pod still holds its gang's new pods.
const gangStuckAfter = 15 * time.Second

// gangWait says whether the new pods of the gang's types wait for an old pod of the gang to
// go, and, when they do, how long at most (the sync to look again then, should the pod not
// go first).
func (x *decider) gangWait(pods []*corev1.Pod) (wait bool, left time.Duration) {
	if x.admission == nil || len(x.admission.Gang) == 0 {
		return false, 0
	}
	for _, p := range pods {
		if p.DeletionTimestamp == nil || p.Spec.NodeName == "" || !x.admission.Gang[p.Labels[batch.LabelReplicaType]] {
			continue // an unbound pod counts toward nothing, and goes at once
		}
		if until := p.DeletionTimestamp.Add(gangStuckAfter).Sub(x.now); until > 0 {
			wait, left = true, MinPositive(left, until)
		}
	}
	return wait, left
}

// inGang reports whether a replica's pods join the job's gang.
func (x *decider) inGang(r *replica) bool {
	return x.admission != nil && x.admission.Gang[r.group.Type]
}
