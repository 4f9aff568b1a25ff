package kueue

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	kueue "github.com/t9k-jobs/t9k-jobs/pkg/apis/kueue/v1beta2"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

// What the job's controller tells Kueue through its Workload's status, as Kueue's own job
// integrations do:
//   - PodsReady, while admitted: True once every replica runs (Kueue's waitForPodsReady
//     evicts a job whose pods do not all get there in time); of a job MultiKueue runs on
//     another cluster, once its copied status shows every replica running (engine.Report's
//     Ready), as Kueue's own integrations tell it from a job's copied status;
//   - Finished, once the job has ended and none of its pods still runs: Kueue then releases
//     its quota, and must never count less than what runs (a clean-up policy may keep pods
//     running after the end: an MPIJob's sshd workers);
//   - reclaimablePods, while an ended job's kept pods run: the pods of each pod set that do
//     not, whose quota Kueue gives back at once (the ended launcher's, say);
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
	case r.Elsewhere && d.Status.Finished() && (evicted == nil || evicted.Status != metav1.ConditionTrue):
		// Another controller runs the job: MultiKueue, which finishes the Workload itself once
		// it has copied the end.
	case d.Status.Finished():
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

// reclaimablePods decides the Workload's reclaimable pods after a sync (nil: no change).
// An ended job whose clean-up policy keeps some pods running has them: every pod of a pod
// set but those that may still run (one being deleted runs until it is gone). A running
// job has them only for an elastic type it shrank (elasticReclaimable); any other replica
// of it may be made again (a restart), and Kueue refuses a count that shrinks while the
// workload holds quota. Counts therefore never go down here.
func reclaimablePods(wl *kueue.Workload, r engine.Report, elastic *engine.Elastic) []kueue.ReclaimablePod {
	if !r.Elsewhere && !r.Decision.Status.Finished() {
		return elasticReclaimable(wl, r, elastic)
	}
	if r.Elsewhere || !r.Running || !r.Decision.Status.Finished() ||
		!meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) ||
		meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) {
		return nil
	}
	running := map[string]int32{}
	for _, p := range r.Children.Pods {
		if !engine.PodEnded(p) {
			running[podSetName(p.Labels[batch.LabelReplicaType])]++
		}
	}
	had := map[string]int32{}
	for _, rp := range wl.Status.ReclaimablePods {
		had[rp.Name] = rp.Count
	}
	var pods []kueue.ReclaimablePod
	for _, ps := range wl.Spec.PodSets {
		if n := max(ps.Count-running[ps.Name], had[ps.Name]); n > 0 {
			pods = append(pods, kueue.ReclaimablePod{Name: ps.Name, Count: n})
		}
	}
	if slices.Equal(pods, wl.Status.ReclaimablePods) {
		return nil
	}
	return pods
}

// elasticHeld is how many pods of the job's elastic type its admitted Workload still holds
// quota for (podSetCounts.held). ok is false when the job has no elastic type or the Workload
// is not admitted.
func elasticHeld(wl *kueue.Workload, elastic *engine.Elastic) (n int32, ok bool) {
	c, ok := elasticCounts(wl, elastic)
	return c.held(), ok
}

// podSetCounts are an admitted pod set's counts: what it asks for, what Kueue admitted of it,
// and its reclaimable pods.
type podSetCounts struct{ asked, admitted, reclaimable int32 }

// held is how many pods the pod set still holds quota for: the count Kueue admitted, or fewer
// once reclaimable pods take the pod set's count below it (Kueue counts reclaimable pods off
// the pod set's count, not off the count it admitted).
func (c podSetCounts) held() int32 { return max(min(c.admitted, c.asked-c.reclaimable), 0) }

// elasticCounts are the counts of the elastic type's pod set in an admitted Workload.
func elasticCounts(wl *kueue.Workload, elastic *engine.Elastic) (c podSetCounts, ok bool) {
	if wl == nil || elastic == nil || wl.Status.Admission == nil {
		return c, false
	}
	name := podSetName(elastic.Type)
	for _, ps := range wl.Spec.PodSets {
		if ps.Name == name {
			c.asked, c.admitted, ok = ps.Count, ps.Count, true
		}
	}
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		if psa.Name == name && psa.Count != nil {
			c.admitted = *psa.Count
		}
	}
	for _, rp := range wl.Status.ReclaimablePods {
		if rp.Name == name {
			c.reclaimable = rp.Count
		}
	}
	return c, ok
}

// elasticReclaimable hands back to Kueue, at once, the quota of the elastic type's pods a
// shrink removed (docs/elastic.md): the pod set's reclaimable pods become its count less the
// size the job now runs at, once that size is below what the Workload holds. Kueue takes
// reclaimable pods that only grow, so a shrink's quota does not come back to this Workload:
// the job regrows at most to what it still holds.
func elasticReclaimable(wl *kueue.Workload, r engine.Report, elastic *engine.Elastic) []kueue.ReclaimablePod {
	c, ok := elasticCounts(wl, elastic)
	if !ok || !meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) ||
		meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) {
		return nil
	}
	var size int32
	for _, t := range r.Decision.Status.Tasks {
		if t.Type == elastic.Type {
			size = int32(len(t.Replicas))
		}
	}
	if size >= c.held() {
		return nil
	}
	name := podSetName(elastic.Type)
	pods := slices.Clone(wl.Status.ReclaimablePods)
	i := slices.IndexFunc(pods, func(rp kueue.ReclaimablePod) bool { return rp.Name == name })
	if i < 0 {
		pods = append(pods, kueue.ReclaimablePod{Name: name})
		i = len(pods) - 1
	}
	pods[i].Count = max(pods[i].Count, c.asked-size)
	return pods
}
