package decision

import (
	"fmt"
	"strings"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// Whole-job restart (spec.restartScope: Job; docs/lifecycle.md, "Restarting the whole job"),
// for a group that cannot re-form around one new member, such as PyTorch DDP without elastic
// rendezvous. When a replica is restarted as its policy says, or replaced after a
// disruption, every other replica's pod is deleted with it; the new pods are created only
// once every old one is gone, a barrier, so that no new pod meets an old one.
//
// A restart counts once for the job (status.restarts, which backoffLimit bounds) and once for
// each replica whose pod it deleted (restartCount); a disruption's replacement counts as
// none, only as a disruption of each replica. Every step is recorded in status before a pod
// is deleted (the replica Deleted, its old pod's UID in lastTermination), so that a
// controller that stops half-way finishes the restart and counts nothing twice.

// jobRestart is a whole job's restart, as a decision orders it: why (which replica restarts
// the job, and how it ended), what asked for it and what kind of thing that is (a
// RestartCause), and whether it counts as a restart of the job (a disruption's replacement
// does not).
type jobRestart struct {
	why, by, cause string
	counted        bool
}

// The causes of a whole job's restart (Decision.JobRestartCause).
const (
	RestartCauseFailure    = "Failure"    // a replica's restart, under spec.restartScope: Job
	RestartCauseRule       = "Rule"       // a failure policy rule's RestartJob
	RestartCauseStall      = "Stall"      // a stall, by default
	RestartCauseDisruption = "Disruption" // a disrupted replica's replacement, under spec.restartScope: Job
	RestartCauseRequest    = "Request"    // the job's restart-attempt annotation (requested.go)
)

// restartJob turns a replica's restart or replacement, or a request (requested, "" for
// none: requested.go), into the whole job's, and raises the barrier while old pods remain. With spec.restartScope: Job every restart and replacement
// does; otherwise only a failure policy rule's RestartJob, or a stall's default, does, and
// counts one restart, of the job and of the replica that caused it: the others are
// restarted with it, counted as disruptions (RestartedWithJob). It returns the job's restart
// (nil: none starts now), and whether the barrier stands: some old pod is not gone yet, so
// no pod is created.
func (x *decider) restartJob(all []*replica, requested string) (restart *jobRestart, barrier bool) {
	if cause := x.jobRestartCause(all); cause == nil && requested != "" {
		restart = requestedRestart(requested)
		takeAlong(all, restart, false)
	} else if cause != nil {
		counted := cause.action == restartNow
		restart = &jobRestart{why: causeText(cause, counted), by: restartBy(cause, x.plan.RestartJob), cause: restartCause(cause, counted), counted: counted}
		takeAlong(all, restart, counted && x.plan.RestartJob)
	}
	for _, r := range all {
		switch {
		case r.pod == nil:
		case r.action == restartNow || r.action == replaceNow || r.action == withJob || r.status.Phase == batch.ReplicaDeleted:
			barrier = true
		}
	}
	return restart, barrier
}

// takeAlong makes every replica whose pod still runs its life go with the whole job's
// restart, counted as a restart of its own or not; those restarting or being replaced on
// their own account, or whose pod goes already, keep their way.
func takeAlong(all []*replica, restart *jobRestart, counted bool) {
	for _, r := range all {
		if r.pod == nil || r.pod.DeletionTimestamp != nil || r.status.Phase == batch.ReplicaDeleted ||
			r.action == restartNow || r.action == replaceNow || r.action == finishRestart {
			continue
		}
		r.action, r.cause, r.causeBy, r.counted = withJob, restart.why, restart.by, counted
		r.requested = restart.cause == RestartCauseRequest
	}
}

// jobRestartCause is the replica whose restart (or replacement) restarts the whole job: with
// spec.restartScope: Job, any; otherwise one a rule (or a stall) restarts with its job.
func (x *decider) jobRestartCause(all []*replica) *replica {
	for _, r := range all {
		if r.action == restartNow && (x.plan.RestartJob || wholeJob(r)) {
			return r
		}
	}
	if !x.plan.RestartJob {
		return nil
	}
	// An elastic type re-forms around the replicas it has while it keeps its minimum: the
	// disrupted one is replaced alone (elastic.go).
	holds := x.elasticHolds(all)
	for _, r := range all {
		if (r.action == replaceNow || r.disrupted) && !(holds && x.plan.isElastic(r.group)) {
			return r
		}
	}
	return nil
}

// wholeJob: a rule's RestartJob, or a stall without a rule, restarts the replica.
func wholeJob(r *replica) bool {
	if r.rule != nil {
		return r.rule.rule.Action == batch.RestartJob
	}
	return r.stalled != ""
}

// restartBy names what restarts the whole job, for messages.
func restartBy(cause *replica, scopeJob bool) string {
	switch {
	case cause.rule != nil:
		return cause.rule.text()
	case cause.stalled != "":
		return "spec.progressDeadlineSeconds"
	case scopeJob:
		return "spec.restartScope: Job"
	}
	return ""
}

// restartCause says what kind of thing the replica that restarts the job is.
func restartCause(cause *replica, counted bool) string {
	switch {
	case cause.rule != nil:
		return RestartCauseRule
	case cause.stalled != "":
		return RestartCauseStall
	case !counted:
		return RestartCauseDisruption
	}
	return RestartCauseFailure
}

// jobRestartUnderway: a whole job's restart, started by an earlier decision of a job whose
// restartScope is Replica, still has old pods to see gone: no new pod is made before.
func jobRestartUnderway(all []*replica) bool {
	for _, r := range all {
		t := r.status.LastTermination
		if r.pod == nil || r.status.Phase != batch.ReplicaDeleted || t == nil || t.UID != r.status.UID {
			continue
		}
		if t.Reason == ReasonRestartedWithJob || t.Reason == string(batch.ReasonStalled) || t.Rule != nil && t.Rule.Action == batch.RestartJob {
			return true
		}
	}
	return false
}

// causeText says which replica restarts the job, and why: "worker-1 failed with exit code 1".
func causeText(r *replica, counted bool) string {
	name := r.status.Name
	if r.stalled != "" {
		return name + " " + r.stalled
	}
	if !counted {
		return fmt.Sprintf("%s was disrupted (%s)", name, r.view.Disruption)
	}
	phase := strings.ToLower(string(r.status.Phase))
	if r.pod != nil {
		phase = strings.ToLower(string(replicaPhase(r.pod)))
	}
	return fmt.Sprintf("%s %s%s", name, phase, ExitText(statusExitCode(r.status)))
}
