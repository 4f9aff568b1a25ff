package kueue

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	kueue "github.com/t9k-jobs/t9k-jobs/pkg/apis/kueue/v1beta2"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/metrics"
)

// What the admitter does once a sync is carried out: events and metrics for what Kueue did
// to the job, and the writes of the Workload (its status, as status.go decides it, or its
// priority).

// patchWorkload sends a merge patch of a Workload as the sync saw it (its resourceVersion):
// the controller's copy of a Workload lacks Kueue's other fields, so it is never written
// whole, and a change since is not overwritten (the conflict retries the sync).
func (a *Admitter) patchWorkload(ctx context.Context, wl *kueue.Workload, fields map[string]any, subresources ...string) error {
	metadata, _ := fields["metadata"].(map[string]any)
	if metadata == nil {
		metadata = map[string]any{}
		fields["metadata"] = metadata
	}
	metadata["resourceVersion"] = wl.ResourceVersion
	patch, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	_, err = a.config.Client.KueueV1beta2().Workloads(wl.Namespace).Patch(ctx, wl.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: engine.FieldManager}, subresources...)
	return err
}

// Decided says, once a decision is carried out, what Kueue should know: events for what it
// did to the job, then the job's priority or the Workload's status. One write of the
// Workload per sync: each is made on the resourceVersion seen, and its event brings the next
// sync.
func (a *Admitter) Decided(ctx context.Context, job engine.Job, v *engine.Verdict, r engine.Report) error {
	n := v.Note.(*note)
	if n.adopt != nil {
		return a.adopt(ctx, job, n.adopt)
	}
	a.record(job, n, r)
	a.recordSlices(job, n, r)
	wl := n.wl
	if wl == nil || wl.DeletionTimestamp != nil || slices.Contains(r.Decision.DeleteObjects, metav1.Object(wl)) {
		return nil
	}
	if changed, err := a.syncPriority(ctx, job, wl); changed || err != nil {
		return err
	}
	return a.syncStatus(ctx, job, wl, r)
}

// Ended tells Kueue that a job that ended outside a decision (it failed as written) is
// finished, so that its quota is released once none of its pods runs.
func (a *Admitter) Ended(ctx context.Context, job engine.Job, r engine.Report) error {
	if !a.installed() {
		return nil
	}
	wl := jobWorkload(job, r.Children.Objects)
	if wl == nil || wl.DeletionTimestamp != nil {
		return nil
	}
	return a.syncStatus(ctx, job, wl, r)
}

// syncStatus writes what workloadConditions decided.
func (a *Admitter) syncStatus(ctx context.Context, job engine.Job, wl *kueue.Workload, r engine.Report) error {
	if kept := r.KeptRunning; len(kept) > 0 && r.Decision.Outcome != nil {
		a.config.Recorder.Eventf(job, corev1.EventTypeNormal, "QuotaKept",
			"Kueue keeps the quota of the %d replicas of the job that still run (%s): the job's clean-up policy keeps them; the rest of the job's quota is released now, theirs once they have ended or been deleted",
			len(kept), engine.Listed(kept, 10))
	}
	conds, release := workloadConditions(wl, r)
	reclaimable := reclaimablePods(wl, r, engine.ElasticOf(job.JobLifecycle()))
	if conds == nil && reclaimable == nil {
		return nil
	}
	status := map[string]any{}
	if conds != nil {
		status["conditions"] = conds
	}
	if reclaimable != nil {
		status["reclaimablePods"] = reclaimable
	}
	if release {
		status["admission"] = nil
	}
	if err := a.patchWorkload(ctx, wl, map[string]any{"status": status}, "status"); err != nil {
		return fmt.Errorf("writing the status of Workload %s: %w", wl.Name, err)
	}
	switch {
	case release && deactivated(wl):
		a.config.Recorder.Eventf(job, corev1.EventTypeNormal, "Deactivated", "Every pod is gone: handed the admission back to Kueue; Workload %s is deactivated: the job waits until it is activated again", wl.Name)
	case release:
		a.config.Recorder.Eventf(job, corev1.EventTypeNormal, "Requeued", "Every pod is gone: handed the admission back to Kueue; the job waits in LocalQueue %q again", wl.Spec.QueueName)
	}
	return nil
}

// record says in events what Kueue did to the job in this sync: admitted it (its pods are
// created) or evicted it (its pods are deleted), or that it cannot queue it.
func (a *Admitter) record(job engine.Job, n *note, r engine.Report) {
	q, d, was, wl := n.state, r.Decision, r.WasWaiting, n.wl
	switch {
	case q == nil:
	case q.reason == reasonKueueNotInstalled && was != reasonKueueNotInstalled:
		a.config.Recorder.Event(job, corev1.EventTypeWarning, q.reason, q.message)
	case q.admitted && len(d.CreatePods) > 0 && (queueReason(was) || firstStart(r)):
		a.config.Recorder.Eventf(job, corev1.EventTypeNormal, "Admitted", "Kueue admitted the job to ClusterQueue %s: its replicas are created%s%s", wl.Status.Admission.ClusterQueue, partly(wl), placedBy(wl))
	case (q.reason == reasonEvicted || q.reason == reasonPreempted) && len(d.DeletePods) > 0:
		a.config.Recorder.Event(job, corev1.EventTypeWarning, q.reason, q.message)
		if !queueReason(was) { // the first sync of this eviction: once per eviction
			metrics.QueueEvictions.WithLabelValues(job.GetObjectKind().GroupVersionKind().Kind, q.evictionReason).Inc()
		}
	}
}

// firstStart reports whether a sync makes the first pods of a job that never ran: admitted
// before its status ever said it waited (Kueue admits a job that fits at once).
func firstStart(r engine.Report) bool {
	return r.WasWaiting == "" && len(r.Children.Pods) == 0 && !r.Decision.Status.ConditionTrue(batch.JobConditionInitialized)
}

// queueReason reports whether a Running condition's reason says the job waits for its queue.
func queueReason(reason string) bool {
	switch reason {
	case reasonQueued, reasonEvicted, reasonPreempted, reasonKueueNotInstalled:
		return true
	}
	return false
}

// syncPriority follows a change of the job's priority-class label once its Workload
// exists, as Kueue's integrations do: the Workload's priority is patched in place (Kueue
// weighs it at the next admission or preemption). It reports whether it wrote. A class that
// does not exist leaves the priority as it is, with a Warning event.
func (a *Admitter) syncPriority(ctx context.Context, job engine.Job, wl *kueue.Workload) (bool, error) {
	name := job.GetLabels()[kueue.LabelPriorityClass]
	if name == "" || !a.installed() || job.JobStatus().Finished() || (wl.Spec.PriorityClassRef != nil && wl.Spec.PriorityClassRef.Name == name) {
		return false, nil
	}
	class, err := a.priorities.Get(name)
	if apierrors.IsNotFound(err) {
		a.config.Recorder.Eventf(job, corev1.EventTypeWarning, "PriorityClassNotFound", "WorkloadPriorityClass %q (label %s) does not exist: the job keeps its priority", name, kueue.LabelPriorityClass)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	spec := map[string]any{"spec": map[string]any{
		"priorityClassRef": kueue.PriorityClassRef{Group: kueue.GroupName, Kind: "WorkloadPriorityClass", Name: class.Name},
		"priority":         class.Value,
	}}
	if err := a.patchWorkload(ctx, wl, spec); err != nil {
		return false, fmt.Errorf("changing the priority of Workload %s: %w", wl.Name, err)
	}
	a.config.Recorder.Eventf(job, corev1.EventTypeNormal, "PriorityChanged", "The job's priority is now WorkloadPriorityClass %s's, %d", class.Name, class.Value)
	return true, nil
}

// partly says which pod sets Kueue admitted with fewer pods than they ask for (partial
// admission of an elastic type, docs/elastic.md): "; worker: 2 of 4 (partial admission)".
func partly(wl *kueue.Workload) string {
	asked := map[string]int32{}
	for _, ps := range wl.Spec.PodSets {
		asked[ps.Name] = ps.Count
	}
	var parts []string
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		if psa.Count != nil && *psa.Count < asked[psa.Name] {
			parts = append(parts, fmt.Sprintf("%s: %d of %d", psa.Name, *psa.Count, asked[psa.Name]))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, ", ") + " (partial admission)"
}

// placedBy says, for the Admitted event, where Kueue placed the pod sets it placed by
// topology: "; placed by topology: worker in rack: r1 (4)".
func placedBy(wl *kueue.Workload) string {
	var parts []string
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		if psa.TopologyAssignment != nil {
			parts = append(parts, psa.Name+" in "+placement(psa.TopologyAssignment))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; placed by topology: " + strings.Join(parts, "; ")
}
