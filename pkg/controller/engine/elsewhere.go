package engine

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision"
)

// Jobs another controller runs (spec.managedBy; docs/queueing.md, "Across clusters with
// MultiKueue"). On a MultiKueue manager cluster a job names kueue.x-k8s.io/multikueue:
// Kueue's MultiKueue runs a copy of it on a worker cluster and writes the copy's status into
// it. This controller then keeps only what its admitters make for the job (the Workload by
// which Kueue queues it, and MultiKueue dispatches it), and nothing else: no pods, Services
// or other children. It writes the job's status only while the admitters hold the job and
// no copy of it may run: before MultiKueue first dispatches it, and once a pause has taken
// its Workload (and so its copy) away, then until the next dispatch; nothing else says why
// the job waits then. A status that shows a copy that started is left as it is, evicted or
// not: the copy may still run (on a worker MultiKueue lost touch with), and MultiKueue
// copies a status again only when the copy's changes, so words written over it would stay.
// Once admitted, the status is the other controller's; an ended job's is never touched.

// keepAdmittersOnly narrows the decision on a job another controller runs to the admitters'
// children: it keeps what it creates, updates and deletes of theirs, and deletes every other
// child the job has (made before it was handed over; it cannot be, but a child is never left
// to run twice). The status is the decision's only while the admitters hold the job and no
// copy of it may run; otherwise it is the job's own, and nothing is written.
func (c *Controller) keepAdmittersOnly(job Job, plan *Plan, verdict *Verdict, children Children, d *Decision) *Decision {
	admitters := map[*ChildKind]bool{}
	for _, a := range c.options.Admitters {
		for _, k := range a.Kinds() {
			admitters[k] = true
		}
	}
	// admittersOrOthers splits objects into the admitters' and the others.
	admittersOrOthers := func(objs []metav1.Object) (kept, others []metav1.Object) {
		for _, o := range objs {
			if admitters[c.kinds.of(o)] {
				kept = append(kept, o)
			} else {
				others = append(others, o)
			}
		}
		return kept, others
	}
	_, gone := admittersOrOthers(decision.Live(children.Objects))
	deleted, _ := admittersOrOthers(d.DeleteObjects)
	created, _ := admittersOrOthers(d.CreateObjects)
	updated, _ := admittersOrOthers(d.UpdateObjects)
	kept := &Decision{Status: job.JobStatus(), DeletePods: decision.Live(children.Pods), CreateObjects: created,
		UpdateObjects: updated, DeleteObjects: append(gone, deleted...), RequeueAfter: d.RequeueAfter, Elsewhere: true}
	if st := job.JobStatus(); verdict != nil && !verdict.Admitted && !st.Finished() && (st.StartTime == nil || plan.Paused) {
		kept.Status = d.Status
	}
	return kept
}

// everyReplicaRunning reports whether a status another controller wrote shows every replica
// running or succeeded: the most it says of readiness (a copy's pods are not here to look at).
func everyReplicaRunning(s *batch.JobStatus) bool {
	total := 0
	for _, t := range s.Tasks {
		for _, r := range t.Replicas {
			if r.Phase != batch.ReplicaRunning && r.Phase != batch.ReplicaSucceeded {
				return false
			}
			total++
		}
	}
	return total > 0
}
