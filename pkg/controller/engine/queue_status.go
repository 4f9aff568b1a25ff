package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	kueue "github.com/t9k-jobs/t9k-jobs/pkg/apis/kueue/v1beta2"
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

// workloadConditions decides the Workload's conditions after a decision: the new list, and
// whether the admission is handed back. A nil list means no change.
func workloadConditions(wl *kueue.Workload, d *Decision, pods []*corev1.Pod, now time.Time) (conds []metav1.Condition, release bool) {
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
	case Finished(d.Status):
		// A pod being deleted runs until it is gone; one that ended holds nothing.
		if !meta.IsStatusConditionTrue(conds, kueue.WorkloadFinished) && !anyRunning(pods) {
			reason, message := "Succeeded", msgSucceeded
			if d.Status.Phase == batch.JobFailed {
				reason, message = "Failed", "The job has failed."
			}
			if d.Outcome != nil && d.Outcome.Message != "" {
				message = d.Outcome.Message
			} else if m := endMessage(d.Status); m != "" {
				message = m // ended in an earlier sync, or failed as written
			}
			set(metav1.Condition{Type: kueue.WorkloadFinished, Status: metav1.ConditionTrue, Reason: reason, Message: message})
		}
	case evicted != nil && evicted.Status == metav1.ConditionTrue:
		if !meta.IsStatusConditionTrue(conds, kueue.WorkloadQuotaReserved) || len(d.CreatePods) > 0 || anyRunning(pods) {
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
		set(podsReady(meta.FindStatusCondition(conds, kueue.WorkloadPodsReady), everyReplicaReady(d.Status, pods)))
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

// everyReplicaReady reports whether every replica of the decision has a pod that is ready, or
// has succeeded: what Kueue's waitForPodsReady waits for.
func everyReplicaReady(s *batch.JobStatus, pods []*corev1.Pod) bool {
	total, ready := 0, 0
	for _, t := range s.Tasks {
		total += len(t.Replicas)
	}
	for _, p := range pods {
		if p.DeletionTimestamp == nil && (podReady(p) || p.Status.Phase == corev1.PodSucceeded) {
			ready++
		}
	}
	return total > 0 && ready >= total
}

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

// keptRunning names the pods of an ended job that still run and that its decision does not
// delete: those its clean-up policy keeps, which hold the job's quota as long as they run.
func keptRunning(d *Decision, pods []*corev1.Pod) []string {
	if !Finished(d.Status) {
		return nil
	}
	var names []string
	for _, p := range unlisted(live(pods), d.DeletePods) {
		if !podEnded(p) {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return names
}

// anyRunning reports whether a pod may still run: one not yet gone that has not ended (one
// being deleted runs until it is gone).
func anyRunning(pods []*corev1.Pod) bool {
	return slices.ContainsFunc(pods, func(p *corev1.Pod) bool { return !podEnded(p) })
}

// patchWorkload sends a merge patch of a Workload as the sync saw it (its resourceVersion):
// the controller's copy of a Workload lacks Kueue's other fields, so it is never written
// whole, and a change since is not overwritten (the conflict retries the sync).
func (c *Controller) patchWorkload(ctx context.Context, wl *kueue.Workload, fields map[string]any, subresources ...string) error {
	fields["metadata"] = map[string]any{"resourceVersion": wl.ResourceVersion}
	patch, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	_, err = c.clients.Kueue.KueueV1beta2().Workloads(wl.Namespace).Patch(ctx, wl.Name, types.MergePatchType, patch, metav1.PatchOptions{}, subresources...)
	return err
}

// tellQueue says, once a decision is carried out, what the queue should know: events for
// what it did to the job, then the job's priority or the Workload's status. One write of the
// Workload per sync: each is made on the resourceVersion seen, and its event brings the next
// sync.
func (c *Controller) tellQueue(ctx context.Context, job Job, q *Queue, wl *kueue.Workload, d *Decision, pods []*corev1.Pod, was string) error {
	c.recordQueue(job, q, d, was, wl)
	if wl == nil || wl.DeletionTimestamp != nil || slices.Contains(d.DeleteObjects, metav1.Object(wl)) {
		return nil
	}
	if changed, err := c.syncWorkloadPriority(ctx, job, wl); changed || err != nil {
		return err
	}
	return c.syncWorkloadStatus(ctx, job, wl, d, pods)
}

// syncWorkloadStatus writes what workloadConditions decided.
func (c *Controller) syncWorkloadStatus(ctx context.Context, job Job, wl *kueue.Workload, d *Decision, pods []*corev1.Pod) error {
	if kept := keptRunning(d, pods); len(kept) > 0 && d.Outcome != nil {
		c.recorder.Eventf(job, corev1.EventTypeNormal, "QuotaKept",
			"Kueue keeps the job's quota while %d of its replicas still run (%s): the job's clean-up policy keeps them; the quota is released once they have ended or been deleted",
			len(kept), listed(kept, 10))
	}
	conds, release := workloadConditions(wl, d, pods, c.now())
	if conds == nil {
		return nil
	}
	status := map[string]any{"conditions": conds}
	if release {
		status["admission"] = nil
	}
	if err := c.patchWorkload(ctx, wl, map[string]any{"status": status}, "status"); err != nil {
		return fmt.Errorf("writing the status of Workload %s: %w", wl.Name, err)
	}
	if release {
		c.recorder.Eventf(job, corev1.EventTypeNormal, "Requeued", "Every pod is gone: handed the admission back to Kueue; the job waits in LocalQueue %q again", wl.Spec.QueueName)
	}
	return nil
}

// recordQueue says in events what the queue did to the job in this sync: admitted it (its
// pods are created) or evicted it (its pods are deleted), or that it cannot queue it. was is
// the reason of the job's Running condition before the sync.
func (c *Controller) recordQueue(job Job, q *Queue, d *Decision, was string, wl *kueue.Workload) {
	switch {
	case q == nil:
	case q.Reason == reasonKueueNotInstalled && was != reasonKueueNotInstalled:
		c.recorder.Event(job, corev1.EventTypeWarning, q.Reason, q.Message)
	case q.Admitted && len(d.CreatePods) > 0 && queueReason(was):
		c.recorder.Eventf(job, corev1.EventTypeNormal, "Admitted", "Kueue admitted the job to ClusterQueue %s: its replicas are created", wl.Status.Admission.ClusterQueue)
	case (q.Reason == reasonEvicted || q.Reason == reasonPreempted) && len(d.DeletePods) > 0:
		c.recorder.Event(job, corev1.EventTypeWarning, q.Reason, q.Message)
		if !queueReason(was) { // the first sync of this eviction: once per eviction
			metrics.QueueEvictions.WithLabelValues(c.kind, q.EvictionReason).Inc()
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

// endMessage is what an ended job's Completed or Failed condition says.
func endMessage(s *batch.JobStatus) string {
	for _, t := range []batch.JobConditionType{batch.JobConditionFailed, batch.JobCompleted} {
		if c := conditionOf(s, t); c.Status == corev1.ConditionTrue {
			return c.Message
		}
	}
	return ""
}

// finishWorkload tells Kueue that a job that ended outside a decision (it failed as written)
// is finished, so that its quota is released.
func (c *Controller) finishWorkload(ctx context.Context, job Job) error {
	if c.clients.Kueue == nil {
		return nil
	}
	children, err := c.children(job)
	if err != nil {
		return err
	}
	wl := workloadOf(children.Objects)
	if wl == nil || wl.DeletionTimestamp != nil {
		return nil
	}
	return c.syncWorkloadStatus(ctx, job, wl, &Decision{Status: job.JobStatus()}, children.Pods)
}

// syncWorkloadPriority follows a change of the job's priority-class label once its Workload
// exists, as Kueue's integrations do: the Workload's priority is patched in place (Kueue
// weighs it at the next admission or preemption). It reports whether it wrote. A class that
// does not exist leaves the priority as it is, with a Warning event.
func (c *Controller) syncWorkloadPriority(ctx context.Context, job Job, wl *kueue.Workload) (bool, error) {
	name := job.GetLabels()[kueue.LabelPriorityClass]
	if name == "" || c.queues == nil || Finished(job.JobStatus()) || (wl.Spec.PriorityClassRef != nil && wl.Spec.PriorityClassRef.Name == name) {
		return false, nil
	}
	class, err := c.queues.priorities.Get(name)
	if apierrors.IsNotFound(err) {
		c.recorder.Eventf(job, corev1.EventTypeWarning, "PriorityClassNotFound", "WorkloadPriorityClass %q (label %s) does not exist: the job keeps its priority", name, kueue.LabelPriorityClass)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	spec := map[string]any{"spec": map[string]any{
		"priorityClassRef": kueue.PriorityClassRef{Group: kueue.GroupName, Kind: "WorkloadPriorityClass", Name: class.Name},
		"priority":         class.Value,
	}}
	if err := c.patchWorkload(ctx, wl, spec); err != nil {
		return false, fmt.Errorf("changing the priority of Workload %s: %w", wl.Name, err)
	}
	c.recorder.Eventf(job, corev1.EventTypeNormal, "PriorityChanged", "The job's priority is now WorkloadPriorityClass %s's, %d", class.Name, class.Value)
	return true, nil
}
