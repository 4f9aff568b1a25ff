package engine

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
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

// syncElsewhere keeps the admitters' children of a job another controller runs, and deletes
// any other child the job has (made before it was handed over; it cannot be, but a child is
// never left to run twice).
func (c *Controller) syncElsewhere(ctx context.Context, key string, job Job, plan *Plan, children Children, verdicts *verdicts) (time.Duration, error) {
	verdict := verdicts.combined()
	d := Decide(job, plan, children, verdict, c.now())
	if d.BuildErr != nil {
		return 0, d.BuildErr
	}
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
	_, gone := admittersOrOthers(live(children.Objects))
	deleted, _ := admittersOrOthers(d.DeleteObjects)
	gone = append(gone, deleted...)
	if err := c.deleteAll(ctx, key, job, live(children.Pods), gone); err != nil {
		return 0, err
	}
	created, _ := admittersOrOthers(d.CreateObjects)
	updated, _ := admittersOrOthers(d.UpdateObjects)
	writes := &Decision{Status: job.JobStatus(), CreateObjects: created, UpdateObjects: updated, DeleteObjects: gone}
	if _, err := c.createAndUpdate(ctx, key, job, writes); err != nil {
		return 0, err
	}
	if st := job.JobStatus(); verdict != nil && !verdict.Admitted && !Finished(st) && (st.StartTime == nil || plan.Paused) {
		if err := c.writeStatus(ctx, key, job, d.Status, nil); err != nil {
			return 0, err
		}
	}
	// The admitters hear of the sync as the job's own controller reports it (its status), so
	// that a queue's eviction is handed back at once: there is no pod to wait for here. Ready
	// is what that status says: Kueue's waitForPodsReady on this cluster counts from the
	// admission here, and would evict a job that runs elsewhere if nothing said it started.
	if len(verdicts.by) > 0 {
		r := c.report(writes, children, conditionOf(job.JobStatus(), batch.JobConditionRunning).Reason)
		r.Elsewhere, r.Ready = true, everyReplicaRunning(job.JobStatus())
		if err := c.tell(ctx, job, verdicts, r); err != nil {
			return 0, err
		}
	}
	return d.RequeueAfter, nil
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
