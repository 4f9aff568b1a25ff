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
// otherwise notes how long the backoff has yet to run (replica.backoff: Decide asks for a
// sync then).
func (x *decider) restartAfterBackoff(r *replica, pod *corev1.Pod, budget *restartBudget) {
	if wait := restartBackoff(r.status.RestartCount) - x.now.Sub(x.endTime(pod)); wait > 0 {
		r.backoff = wait
		return
	}
	budget.reserve()
	r.action = restartNow
}

// mayRestart reports whether a replica whose pod ended, as its status reports it, is to be
// restarted: the job goes on, its policy asks for it, and restarts are left.
func (x *decider) mayRestart(g *Group, s batch.ReplicaStatus, budget *restartBudget) bool {
	return !x.finished && !x.paused && wantsRestart(*g, s) && restartsLeft(*g, s.RestartCount, budget)
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

// restartBudget is the plan's backoffLimit as one decision spends it: the job's restarts so
// far, and each restart the decision orders as soon as it is decided, so that the limit holds
// across the replicas of one decision. Decide makes it and hands it to each policy that
// restarts (replicas.go, rules.go, stall.go), in the order it applies them.
type restartBudget struct {
	// limit is the plan's backoffLimit (nil: none).
	limit *int32
	// spent counts the job's restarts, those this decision orders included: the replicas'
	// restarts, or with Plan.RestartJob the job's (perJob).
	spent  int32
	perJob bool
}

// newRestartBudget is what the job has spent of its plan's backoffLimit before this decision.
func newRestartBudget(plan *Plan, old *batch.JobStatus) *restartBudget {
	b := &restartBudget{limit: plan.BackoffLimit, perJob: plan.RestartJob}
	if b.perJob {
		b.spent = old.Restarts
		return b
	}
	for _, task := range old.Tasks {
		for _, r := range task.Replicas {
			b.spent += r.RestartCount
		}
	}
	return b
}

// reserve counts a restart the decision orders. A whole job's restart counts once, in
// status.restarts, whichever replicas fail together (restartJob).
func (b *restartBudget) reserve() {
	if !b.perJob {
		b.spent++
	}
}

// left: the job may restart once more.
func (b *restartBudget) left() bool {
	return b.limit == nil || b.spent < *b.limit
}

// restartsLeft: a replica that has restarted replicaRestarts times may restart once more,
// within its group's limit and the job's backoffLimit.
func restartsLeft(g Group, replicaRestarts int32, budget *restartBudget) bool {
	if g.Limit != nil && replicaRestarts >= *g.Limit {
		return false
	}
	return budget.left()
}

// restartLeft: a restart of the replica (or, whole, of the job) is within its limits. A
// rule's restart of the replica counts toward the replica's limit and backoffLimit; of the
// job, toward backoffLimit only.
func restartLeft(r *replica, whole bool, budget *restartBudget) bool {
	if whole {
		return budget.left()
	}
	return restartsLeft(*r.group, r.status.RestartCount, budget)
}
