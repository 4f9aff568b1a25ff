package kueue

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	kueue "github.com/t9k-jobs/t9k-jobs/pkg/apis/kueue/v1beta2"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

var _ engine.TTLHolder = (*Admitter)(nil)

// HoldsTTL keeps a finished job from its ttlSecondsAfterFinished while MultiKueue has yet to
// see its end (docs/queueing.md, "Across clusters with MultiKueue"). MultiKueue learns how a
// job ended from its copy on a worker: it copies the copy's status into the job on the
// manager, finishes the manager's Workload once the copy's is Finished, and then removes the
// copy. So:
//
//   - on a worker, a copy MultiKueue made (labelled kueue.x-k8s.io/multikueue-origin) is kept
//     while its Workload is there: MultiKueue removes it. Deleted by its TTL first (the copy
//     has the manager's spec, TTL included), the copy would take the end with it: the
//     manager's job would stay Running for good, its Workload admitted and its quota held.
//     The job's TTL applies on the manager, where it was submitted, as Kueue does for batch
//     Jobs since v0.20 (it leaves the field out of a copy);
//   - on the manager, a job MultiKueue runs is kept while its Workload holds quota and is not
//     yet Finished: MultiKueue copies the end first, then finishes the Workload a moment
//     later, and a job deleted in between would take its Workload with it unfinished.
//
// The Workload's change (Finished; gone) syncs the job again.
func (a *Admitter) HoldsTTL(job engine.Job) string {
	if !a.installed() {
		return ""
	}
	if origin := job.GetLabels()[kueue.LabelMultiKueueOrigin]; origin != "" {
		if wl := a.cachedWorkload(job.GetNamespace(), prebuiltWorkload(job)); wl != nil && wl.DeletionTimestamp == nil {
			return fmt.Sprintf("MultiKueue (%s) runs this copy of the job and removes it once the job it was copied from has its outcome; the TTL applies there", origin)
		}
		return ""
	}
	if job.JobLifecycle().ManagedBy != batch.MultiKueueControllerName {
		return ""
	}
	wl := a.cachedWorkload(job.GetNamespace(), WorkloadName(job))
	if wl == nil || wl.DeletionTimestamp != nil || !metav1.IsControlledBy(wl, job) ||
		!meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) ||
		meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) {
		return ""
	}
	return fmt.Sprintf("MultiKueue has yet to finish Workload %s", wl.Name)
}

// cachedWorkload is a Workload of the cache (nil: none).
func (a *Admitter) cachedWorkload(namespace, name string) *kueue.Workload {
	if name == "" {
		return nil
	}
	obj, found, err := a.workloads.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil || !found {
		return nil
	}
	wl, _ := obj.(*kueue.Workload)
	return wl
}

// A job in a LocalQueue whose ClusterQueue dispatches through MultiKueue, but without
// spec.managedBy: kueue.x-k8s.io/multikueue, is a job MultiKueue will not run: it rejects its
// check, and Kueue deactivates the Workload for good (docs/queueing.md, "Across clusters with
// MultiKueue"). Nor can it ever run here as it is: spec.managedBy cannot change once the job
// exists. The job fails, saying so and what to do, rather than waiting for an admission that
// never comes. Kueue says why in the check's message, and again in the Workload's
// DeactivationTarget and Evicted conditions: "The owner is not managed by Kueue: Expecting
// .spec.managedBy to be "kueue.x-k8s.io/multikueue" not """ (Kueue v0.16 to v0.19).

// rejectedForManagedBy is Kueue's word on a Workload MultiKueue rejected for the job's
// spec.managedBy, empty or this controller's ("": none such, or another controller runs the
// job).
func rejectedForManagedBy(job engine.Job, wl *kueue.Workload) string {
	if wl == nil || job.JobLifecycle().ManagedElsewhere() {
		return ""
	}
	says := func(message string) bool {
		return strings.Contains(message, ".spec.managedBy") && strings.Contains(message, strconv.Quote(batch.MultiKueueControllerName))
	}
	for _, c := range wl.Status.AdmissionChecks {
		if c.State == "Rejected" && says(c.Message) {
			return c.Message
		}
	}
	for _, t := range []string{kueue.WorkloadEvicted, kueue.WorkloadDeactivationTarget} {
		if c := meta.FindStatusCondition(wl.Status.Conditions, t); c != nil && c.Status == metav1.ConditionTrue && says(c.Message) {
			return c.Message
		}
	}
	return ""
}

// notForMultiKueue is the failure of a job in queue q that MultiKueue rejected for its
// spec.managedBy; why is Kueue's word.
func notForMultiKueue(job engine.Job, q *request, why string) error {
	has := "has no spec.managedBy"
	if by := job.JobLifecycle().ManagedBy; by != "" {
		has = fmt.Sprintf("has spec.managedBy: %s", by)
	}
	return &engine.InvalidSpecError{Message: fmt.Sprintf(
		"LocalQueue %q runs its jobs on other clusters through Kueue's MultiKueue, which takes only jobs with spec.managedBy: %s, and this job %s (it cannot change once a job exists): it will never run. Create the job again with spec.managedBy: %s, or in a LocalQueue that runs jobs on this cluster. Kueue: %s",
		q.localQueue, batch.MultiKueueControllerName, has, batch.MultiKueueControllerName, sentence(why))}
}

// deactivated reports whether Kueue deactivated the Workload (spec.active false): it admits it
// no more until someone activates it again.
func deactivated(wl *kueue.Workload) bool {
	return wl != nil && wl.Spec.Active != nil && !*wl.Spec.Active
}

// The converse: a job with spec.managedBy: kueue.x-k8s.io/multikueue that Kueue admits on
// this cluster with no admission check at all. No MultiKueue check dispatches it to a worker
// (its ClusterQueue has none, or its pods request nothing of the flavors that carry one:
// Kueue keeps only the checks of the flavors it assigns), and its spec.managedBy keeps this
// controller from running it here: it would hold its quota and never run. It fails, saying
// so and what to do.

// admittedWithoutMultiKueue reports whether the Workload of a job MultiKueue is to run was
// admitted here with no admission check.
func admittedWithoutMultiKueue(job engine.Job, wl *kueue.Workload) bool {
	return job.JobLifecycle().ManagedBy == batch.MultiKueueControllerName && wl != nil &&
		meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted) && len(wl.Status.AdmissionChecks) == 0
}

// notDispatched is the failure of a job admitted without MultiKueue in queue q.
func notDispatched(q *request) error {
	return &engine.InvalidSpecError{Message: fmt.Sprintf(
		"Kueue admitted the job in LocalQueue %q with no admission check, so MultiKueue will not run it on another cluster, and its spec.managedBy: %s keeps this cluster's controller from running it: it would never run. Create it again in a LocalQueue whose ClusterQueue has a MultiKueue admission check (on flavors that cover a resource its pods request, such as pods), or without spec.managedBy to run it on this cluster.",
		q.localQueue, batch.MultiKueueControllerName)}
}
