package decision

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// Restarts (docs/lifecycle.md): a replica whose pod ended is restarted as its group's restart
// policy says, after a backoff, within its own limit and the plan's backoffLimit.

// retryableExitCodes are the exit codes the ExitCode restart policy restarts after: SIGINT,
// SIGKILL, SIGTERM, and 138, which a program may use to ask for a restart.
var retryableExitCodes = map[int32]bool{130: true, 137: true, 143: true, 138: true}

// Restart backoff: a replica's first restart is immediate, later ones wait 1s, 2s, 4s, ...
// after its pod ended, up to maxRestartBackoff, so a replica that fails at once cannot spin.
const maxRestartBackoff = time.Minute

func restartBackoff(restarts int32) time.Duration {
	if restarts <= 0 {
		return 0
	}
	d := time.Second << min(restarts-1, 16)
	return min(d, maxRestartBackoff)
}

// endTime is when a pod's backoff starts: when it ended. A container's finishedAt is
// truncated to the second, so the pod ended within the second that follows it; the
// controller's own sighting of the end, when earlier than that, is closer and never before
// the end. With neither, now.
func (x *decider) endTime(pod *corev1.Pod) time.Time {
	end := x.now
	if f := finishedAt(pod); !f.IsZero() {
		end = f.Add(time.Second)
	}
	if seen, ok := x.endSeen[pod.UID]; ok && seen.Before(end) {
		end = seen
	}
	return end
}

// restartAfterBackoff restarts a replica whose pod ended once its backoff has passed, and
// otherwise asks for a sync when it will have.
func (x *decider) restartAfterBackoff(r *replica, pod *corev1.Pod) {
	if wait := restartBackoff(r.status.RestartCount) - x.now.Sub(x.endTime(pod)); wait > 0 {
		x.d.RequeueAfter = MinPositive(x.d.RequeueAfter, wait)
		return
	}
	x.reserveRestart()
	r.action = restartNow
}

// mayRestart reports whether a replica whose pod ended, as its status reports it, is to be
// restarted: the job goes on, its policy asks for it, and restarts are left.
func (x *decider) mayRestart(g *Group, s batch.ReplicaStatus) bool {
	return !x.finished && !x.paused && wantsRestart(*g, s) && restartsLeft(*g, x.plan, s.RestartCount, x.totalRestarts)
}

func wantsRestart(g Group, s batch.ReplicaStatus) bool {
	failed := s.Phase == batch.ReplicaFailed
	switch g.Restart {
	case batch.RestartAlways:
		return true
	case batch.RestartOnFailure:
		return failed
	case batch.RestartExitCode:
		// The preset rule it is (docs/failures.md): any container's non-zero code, as rules
		// read it.
		return failed && slices.ContainsFunc(s.Containers, func(c batch.ContainerStatus) bool {
			return c.ExitCode != nil && *c.ExitCode != 0 && retryableExitCodes[*c.ExitCode]
		})
	default:
		return false
	}
}

// reserveRestart counts a restart against the plan's backoff limit as soon as it is
// decided, so that the limit holds across the replicas of one decision. A whole job's
// restart counts once, in status.restarts, whichever replicas fail together (restartJob).
func (x *decider) reserveRestart() {
	if !x.plan.RestartJob {
		x.totalRestarts++
	}
}

func restartsLeft(g Group, plan *Plan, replicaRestarts, totalRestarts int32) bool {
	if g.Limit != nil && replicaRestarts >= *g.Limit {
		return false
	}
	return plan.BackoffLimit == nil || totalRestarts < *plan.BackoffLimit
}

// restartLeft: a restart of the replica (or, whole, of the job) is within its limits. A
// rule's restart of the replica counts toward the replica's limit and backoffLimit; of the
// job, toward backoffLimit only.
func (x *decider) restartLeft(r *replica, whole bool) bool {
	if whole {
		return x.plan.BackoffLimit == nil || x.totalRestarts < *x.plan.BackoffLimit
	}
	return restartsLeft(*r.group, x.plan, r.status.RestartCount, x.totalRestarts)
}
