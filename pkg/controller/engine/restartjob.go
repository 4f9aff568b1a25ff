package engine

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

// restartJob turns a replica's restart or replacement into the whole job's, and raises the
// barrier while old pods remain.
func (x *decider) restartJob(all []*replica) {
	var cause *replica
	for _, r := range all {
		if r.action == restartNow {
			cause = r
			break
		}
	}
	counted := cause != nil
	if cause == nil {
		for _, r := range all {
			if r.action == replaceNow || r.disrupted {
				cause = r
				break
			}
		}
	}
	if cause != nil {
		text := causeText(cause, counted)
		if counted {
			x.d.Status.Restarts++
		}
		x.d.JobRestart = text
		for _, r := range all {
			if r.pod == nil || r.pod.DeletionTimestamp != nil || r.status.Phase == batch.ReplicaDeleted ||
				r.action == restartNow || r.action == replaceNow || r.action == finishRestart {
				continue
			}
			r.action, r.cause, r.counted = withJob, text, counted
		}
	}
	for _, r := range all {
		switch {
		case r.pod == nil:
		case r.action == restartNow || r.action == replaceNow || r.action == withJob || r.status.Phase == batch.ReplicaDeleted:
			x.barrier = true
		}
	}
}

// causeText says which replica restarts the job, and why: "worker-1 failed with exit code 1".
func causeText(r *replica, counted bool) string {
	name := r.status.Name
	if !counted {
		return fmt.Sprintf("%s was disrupted (%s)", name, r.view.Disruption)
	}
	phase := strings.ToLower(string(r.status.Phase))
	if r.pod != nil {
		phase = strings.ToLower(string(replicaPhase(r.pod)))
	}
	return fmt.Sprintf("%s %s%s", name, phase, ExitText(statusExitCode(r.status)))
}
