package gang

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

// Decided says in events what a sync did to the job's gang: that the cluster cannot
// make the PodGroup the job asks for (once, when the wait starts), that spec.scheduler.t9kScheduler's queue and
// priority are ignored (once, when the PodGroup is made), and each new reason the scheduler
// gives for not placing the gang. The engine writes nothing else of the PodGroup: its status
// is the scheduler's.
func (a *Admitter) Decided(_ context.Context, job engine.Job, v *engine.Verdict, r engine.Report) error {
	n := v.Note.(*note)
	if !v.Admitted {
		// Once per wait: the job's condition says it once written, but a status held for
		// the batch is written a sync later, which would say it again.
		if last, ok := a.waiting.Load(job.GetUID()); r.WasWaiting != v.Reason && (!ok || last != v.Reason) {
			a.config.Recorder.Event(job, corev1.EventTypeWarning, v.Reason, v.Message)
		}
		a.waiting.Store(job.GetUID(), v.Reason)
		return nil
	}
	a.waiting.Delete(job.GetUID())
	if r.Decision.Status.Finished() {
		a.unplacedWhy.Delete(job.GetUID())
		a.pending.Delete(job.GetUID())
		return nil
	}
	a.sayPending(job, n.pending)
	if n.request.fromT9kScheduler && slices.ContainsFunc(r.Decision.CreateObjects, isPodGroup) {
		a.config.Recorder.Eventf(job, corev1.EventTypeWarning, reasonIgnored,
			"The job starts whole (gang scheduling, --scheduler=gang): spec.scheduler.t9kScheduler's queue %q and priority %d mean nothing to kube-scheduler and are ignored; give the pods a priorityClassName for a priority",
			n.request.queue, n.request.priority)
	}
	a.sayUnschedulable(job, podGroupOf(r.Children.Objects))
	return nil
}

// Ended forgets what was announced of a job that ended outside a decision.
func (a *Admitter) Ended(_ context.Context, job engine.Job, _ engine.Report) error {
	a.unplacedWhy.Delete(job.GetUID())
	a.waiting.Delete(job.GetUID())
	a.pending.Delete(job.GetUID())
	return nil
}

// Forget drops what was announced of a deleted job.
func (a *Admitter) Forget(job types.UID) {
	a.unplacedWhy.Delete(job)
	a.waiting.Delete(job)
	a.pending.Delete(job)
}

// sayPending says once, in a Normal event, that a running gang keeps its PodGroup's count
// while the job asks for another (nil: it does not).
func (a *Admitter) sayPending(job engine.Job, c *countChange) {
	if c == nil {
		a.pending.Delete(job.GetUID())
		return
	}
	if last, ok := a.pending.Swap(job.GetUID(), *c); ok && last == *c {
		return
	}
	a.config.Recorder.Eventf(job, corev1.EventTypeNormal, reasonGangChangePending,
		"The job's gang changed (%s) while its pods run: its PodGroup keeps minCount %d, and the new count applies the next time the gang's pods are all made again "+
			"(a pause and resume, or a whole-job restart). Running pods are not stopped for it.", c, c.from)
}

// sayUnschedulable records a Warning event when the scheduler gives a new reason for not
// placing the gang; kubectl describe shows it beside the pods' own.
func (a *Admitter) sayUnschedulable(job engine.Job, pg *schedulingv1beta1.PodGroup) {
	why := unschedulable(pg)
	if why == "" {
		a.unplacedWhy.Delete(job.GetUID())
		return
	}
	if last, ok := a.unplacedWhy.Load(job.GetUID()); ok && last == why {
		return
	}
	a.unplacedWhy.Store(job.GetUID(), why)
	a.config.Recorder.Eventf(job, corev1.EventTypeWarning, reasonUnschedulable,
		"The scheduler cannot place the job's gang (PodGroup %s) whole yet: %s", pg.Name, why)
}

func isPodGroup(o metav1.Object) bool { _, ok := o.(*schedulingv1beta1.PodGroup); return ok }
