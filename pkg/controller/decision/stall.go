package decision

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// Stalls (spec.progressDeadlineSeconds; docs/failures.md, "Stalls"). A running replica whose
// current pod reported progress (status.progress.replicas, by pod UID) and has reported
// nothing since for the deadline is stalled: the job's Stalled condition names it, a Warning
// says it, and the failure policy's rules decide (reason Stalled). Without a rule, the whole
// job restarts where the stalled replica's restart policy and limits allow a restart, and
// fails otherwise. A replica that never reported is never called stalled, nor is one whose
// pod is new since its last report (a restart starts the count again).
//
// A report is in status.progress up to Plan.ProgressLag after it was taken, so a replica is
// called stalled once it has been silent for the deadline plus that lag: only then does the
// status prove the silence. The first report of a job syncs nothing (updateJob): the handler
// that sees it asks for the sync that would find the stall (armStallCheck).

// ReasonProgressDeadlineExceeded is the reason of the Stalled condition while it is True.
const ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"

// stalls finds the stalled replicas of a running job and has the rules (or the default)
// decide what each does. It returns them, each with its ruling (rules.go); the Stalled
// condition's message ("" when none is stalled); and how soon a replica that reported would
// be stalled should it stay silent, for a sync then (0: none would).
func (x *decider) stalls(old *batch.JobStatus, all []*replica, budget *restartBudget) (stalled []*replica, message string, requeue time.Duration) {
	deadline := x.plan.ProgressDeadline
	if deadline <= 0 || old.Progress == nil || x.finished || x.paused || x.plan.Debug || old.Phase != batch.JobRunning {
		return nil, "", 0
	}
	reports := make(map[types.UID]batch.ReplicaProgress, len(old.Progress.Replicas))
	for _, p := range old.Progress.Replicas {
		reports[p.UID] = p
	}
	for _, r := range all {
		if r.pod == nil || PodEnded(r.pod) || r.pod.DeletionTimestamp != nil || r.action != noAction {
			continue
		}
		p, ok := reports[r.pod.UID]
		if !ok {
			continue
		}
		silent := x.now.Sub(p.ReportTime.Time)
		if silent < deadline+x.plan.ProgressLag {
			requeue = MinPositive(requeue, deadline+x.plan.ProgressLag-silent)
			continue
		}
		r.stalled = fmt.Sprintf("reported no progress for %s (spec.progressDeadlineSeconds: %d)", silent.Round(time.Second), int64(deadline/time.Second))
		stalled = append(stalled, r)
	}
	if len(stalled) == 0 {
		return nil, "", requeue
	}
	names := make([]string, len(stalled))
	for i, r := range stalled {
		names[i] = r.status.Name
		if m := matchRule(x.plan.FailurePolicy, ending{replicaType: r.group.Type, rank: r.rank, stalled: true}); m != nil {
			r.ruling = x.act(r, m, nil, budget)
			continue
		}
		r.ruling = stallByDefault(r, budget)
	}
	last := ""
	if first := stalled[0]; reports[first.pod.UID].ProgressPercentage != nil {
		last = fmt.Sprintf("; %s last reported %d%%", first.status.Name, *reports[first.pod.UID].ProgressPercentage)
	}
	message = fmt.Sprintf("%s reported no progress for %d s or more (spec.progressDeadlineSeconds)%s.",
		Listed(names, 10), int64(deadline/time.Second), last)
	return stalled, message, requeue
}

// stallByDefault: without a rule, a stall restarts the whole job where the replica may be
// restarted (its restart policy restarts a failure, and limits are left), else fails it.
func stallByDefault(r *replica, budget *restartBudget) ruling {
	if r.group.Restart != batch.RestartNever && r.group.Restart != "" && restartLeft(r, true, budget) &&
		(r.group.Limit == nil || r.status.RestartCount < *r.group.Limit) {
		budget.reserve()
		r.action = restartNow
		return ruling{restartJob: true}
	}
	why := "the job fails: its restart policy (" + strings.ToLower(string(r.group.Restart)) + ") or its limits allow no restart"
	if r.group.Restart == "" {
		why = "the job fails: its restart policy allows no restart"
	}
	return failJob(r, why, nil)
}

// setStalled sets the Stalled condition: True while replicas are stalled; False once they no
// longer are (they reported again, or were restarted), for a job that was stalled.
func setStalled(s, old *batch.JobStatus, stalled string, now time.Time) {
	switch {
	case stalled != "":
		setCondition(&s.Conditions, batch.JobConditionStalled, true, ReasonProgressDeadlineExceeded, stalled, now)
	case old.ConditionTrue(batch.JobConditionStalled) && !s.Finished():
		// A job that ended on its stall keeps saying so.
		setCondition(&s.Conditions, batch.JobConditionStalled, false, "Progressing", "No replica that reported progress has been silent for spec.progressDeadlineSeconds since.", now)
	}
}
