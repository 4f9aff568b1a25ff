package kueue

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	kueue "github.com/t9k-jobs/t9k-jobs/pkg/apis/kueue/v1beta2"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/metrics"
)

// What the job's controller tells Kueue through its Workload's status, as Kueue's own job
// integrations do:
//   - PodsReady, while admitted: True once every replica runs (Kueue's waitForPodsReady
//     evicts a job whose pods do not all get there in time);
//   - Finished, once the job has ended and none of its pods still runs: Kueue then releases
//     its quota, and must never count less than what runs (a clean-up policy may keep pods
//     running after the end: an MPIJob's sshd workers);
//   - after an eviction, once the job's pods are gone: the admission is handed back
//     (QuotaReserved False, no status.admission), which lets Kueue queue it again.

// Messages of the PodsReady condition, as Kueue's integrations word them.
const (
	podsReadyMessage    = "All pods reached readiness and the workload is running"
	podsNotReadyMessage = "Not all pods are ready or succeeded"
	recoveringMessage   = "At least one pod has failed, waiting for recovery"
)

// workloadConditions decides the Workload's conditions after a sync: the new list, and
// whether the admission is handed back. A nil list means no change.
func workloadConditions(wl *kueue.Workload, r engine.Report) (conds []metav1.Condition, release bool) {
	d, now := r.Decision, r.Now
	conds = append([]metav1.Condition(nil), wl.Status.Conditions...)
	changed := false
	set := func(c metav1.Condition) {
		c.LastTransitionTime = metav1.NewTime(now)
		c.ObservedGeneration = wl.Generation
		if meta.SetStatusCondition(&conds, c) {
			changed = true
		}
	}
	evicted := meta.FindStatusCondition(conds, kueue.WorkloadEvicted)
	switch {
	case engine.Finished(d.Status):
		// A pod being deleted runs until it is gone; one that ended holds nothing.
		if !meta.IsStatusConditionTrue(conds, kueue.WorkloadFinished) && !r.Running {
			reason, message := "Succeeded", engine.MsgSucceeded
			if d.Status.Phase == batch.JobFailed {
				reason, message = "Failed", "The job has failed."
			}
			if d.Outcome != nil && d.Outcome.Message != "" {
				message = d.Outcome.Message
			} else if m := engine.EndMessage(d.Status); m != "" {
				message = m // ended in an earlier sync, or failed as written
			}
			set(metav1.Condition{Type: kueue.WorkloadFinished, Status: metav1.ConditionTrue, Reason: reason, Message: message})
		}
	case evicted != nil && evicted.Status == metav1.ConditionTrue:
		if !meta.IsStatusConditionTrue(conds, kueue.WorkloadQuotaReserved) || len(d.CreatePods) > 0 || r.Running {
			break // handed back already, or pods still to go
		}
		requeued := evicted.Reason == "Preempted" || evicted.Reason == "NodeFailures"
		set(metav1.Condition{Type: "Requeued", Status: conditionStatus(requeued), Reason: evicted.Reason, Message: evicted.Message})
		set(metav1.Condition{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionFalse, Reason: "Pending", Message: evicted.Message})
		if meta.FindStatusCondition(conds, kueue.WorkloadAdmitted) != nil {
			set(metav1.Condition{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: "NoReservation", Message: "The workload has no reservation"})
		}
		if meta.FindStatusCondition(conds, kueue.WorkloadPodsReady) != nil {
			set(waitForStart)
		}
		release = true
	case meta.IsStatusConditionTrue(conds, kueue.WorkloadAdmitted):
		set(podsReady(meta.FindStatusCondition(conds, kueue.WorkloadPodsReady), r.Ready))
	case meta.FindStatusCondition(conds, kueue.WorkloadPodsReady) != nil:
		// Not admitted (any more): a start after the next admission is a start, not a
		// recovery, whatever the job went through before.
		set(waitForStart)
	}
	if !changed && !release {
		return nil, false
	}
	return conds, release
}

// waitForStart is the PodsReady condition of a job that has not started since its admission.
var waitForStart = metav1.Condition{Type: kueue.WorkloadPodsReady, Status: metav1.ConditionFalse, Reason: "WaitForStart", Message: podsNotReadyMessage}

// podsReady is the PodsReady condition of an admitted job whose replicas are all ready or
// not; a job that was ready and lost a replica waits for its recovery.
func podsReady(cur *metav1.Condition, ready bool) metav1.Condition {
	c := metav1.Condition{Type: kueue.WorkloadPodsReady}
	switch {
	case ready:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, "Started", podsReadyMessage
		if cur != nil && (cur.Reason == "WaitForRecovery" || cur.Reason == "Recovered") {
			c.Reason = "Recovered"
		}
	case cur != nil && (cur.Status == metav1.ConditionTrue || cur.Reason == "WaitForRecovery"):
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, "WaitForRecovery", recoveringMessage
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, "WaitForStart", podsNotReadyMessage
	}
	return c
}

func conditionStatus(b bool) metav1.ConditionStatus {
	if b {
		return metav1.ConditionTrue
	}
	return metav1.ConditionFalse
}

// patchWorkload sends a merge patch of a Workload as the sync saw it (its resourceVersion):
// the controller's copy of a Workload lacks Kueue's other fields, so it is never written
// whole, and a change since is not overwritten (the conflict retries the sync).
func (a *Admitter) patchWorkload(ctx context.Context, wl *kueue.Workload, fields map[string]any, subresources ...string) error {
	fields["metadata"] = map[string]any{"resourceVersion": wl.ResourceVersion}
	patch, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	_, err = a.config.Client.KueueV1beta2().Workloads(wl.Namespace).Patch(ctx, wl.Name, types.MergePatchType, patch, metav1.PatchOptions{}, subresources...)
	return err
}

// Decided says, once a decision is carried out, what Kueue should know: events for what it
// did to the job, then the job's priority or the Workload's status. One write of the
// Workload per sync: each is made on the resourceVersion seen, and its event brings the next
// sync.
func (a *Admitter) Decided(ctx context.Context, job engine.Job, v *engine.Verdict, r engine.Report) error {
	n := v.Note.(*note)
	a.record(job, n, r)
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
	wl := workloadOf(r.Children.Objects)
	if wl == nil || wl.DeletionTimestamp != nil {
		return nil
	}
	return a.syncStatus(ctx, job, wl, r)
}

// syncStatus writes what workloadConditions decided.
func (a *Admitter) syncStatus(ctx context.Context, job engine.Job, wl *kueue.Workload, r engine.Report) error {
	if kept := r.KeptRunning; len(kept) > 0 && r.Decision.Outcome != nil {
		a.config.Recorder.Eventf(job, corev1.EventTypeNormal, "QuotaKept",
			"Kueue keeps the job's quota while %d of its replicas still run (%s): the job's clean-up policy keeps them; the quota is released once they have ended or been deleted",
			len(kept), engine.Listed(kept, 10))
	}
	conds, release := workloadConditions(wl, r)
	if conds == nil {
		return nil
	}
	status := map[string]any{"conditions": conds}
	if release {
		status["admission"] = nil
	}
	if err := a.patchWorkload(ctx, wl, map[string]any{"status": status}, "status"); err != nil {
		return fmt.Errorf("writing the status of Workload %s: %w", wl.Name, err)
	}
	if release {
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
	case q.admitted && len(d.CreatePods) > 0 && queueReason(was):
		a.config.Recorder.Eventf(job, corev1.EventTypeNormal, "Admitted", "Kueue admitted the job to ClusterQueue %s: its replicas are created", wl.Status.Admission.ClusterQueue)
	case (q.reason == reasonEvicted || q.reason == reasonPreempted) && len(d.DeletePods) > 0:
		a.config.Recorder.Event(job, corev1.EventTypeWarning, q.reason, q.message)
		if !queueReason(was) { // the first sync of this eviction: once per eviction
			metrics.QueueEvictions.WithLabelValues(job.GetObjectKind().GroupVersionKind().Kind, q.evictionReason).Inc()
		}
	}
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
	if name == "" || !a.installed() || engine.Finished(job.JobStatus()) || (wl.Spec.PriorityClassRef != nil && wl.Spec.PriorityClassRef.Name == name) {
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
