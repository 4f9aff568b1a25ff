package decision

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// The bookkeeping of one replica within a decision: what it is, what it would do, and what it
// does once the outcome is known (restarts, creations, restarts taken back).

// replicaAction is what a replica would do next, if the job goes on.
type replicaAction int

const (
	noAction replicaAction = iota
	// needsPod: the replica has no pod.
	needsPod
	// restartNow: its pod ended and its policy and limits restart it now.
	restartNow
	// finishRestart: an earlier decision counted a restart, or recorded a replacement, whose
	// pod is still to be deleted or created (the controller stopped half-way, a delete was
	// refused, or the whole job waits for its old pods to go).
	finishRestart
	// replaceNow: its pod ended disrupted (DisruptionTarget): it is replaced, no restart
	// counted.
	replaceNow
	// withJob: its pod goes because another replica restarts or is replaced, and with it
	// the whole job (Plan.RestartJob).
	withJob
)

// replica is one replica while a decision is made.
type replica struct {
	group  *Group
	rank   int32
	pod    *corev1.Pod
	status batch.ReplicaStatus
	view   Replica
	action replicaAction
	// cause, for withJob, says which replica's restart or replacement takes this one along;
	// counted says whether that counts as a restart; requested, that a request restarts the
	// job (requested.go), which counts neither a restart nor a disruption.
	cause, causeBy     string
	counted, requested bool
	// disrupted: this decision recorded a disruption of its pod.
	disrupted bool
	// rule is the failure policy rule that decided what the replica does (nil: none did);
	// stalled says why a replica that still runs is restarted or replaced (stall.go);
	// ruling is what the rule, or the stall, decided of the job (rules.go).
	rule    *ruleMatch
	stalled string
	ruling  ruling
	// backoff, when its pod's restart waits for its backoff, is how long it has yet to wait.
	backoff time.Duration
}

// observe reports a replica as it is and says what it would do; a restart it would take is
// counted against budget.
func (x *decider) observe(g *Group, rank int32, prev batch.ReplicaStatus, pod *corev1.Pod, budget *restartBudget) *replica {
	r := &replica{group: g, rank: rank, pod: pod, status: prev, view: Replica{Phase: prev.Phase}}
	if r.status.Containers == nil {
		r.status.Containers = []batch.ContainerStatus{}
	}
	counted := restartCounted(prev)
	switch {
	case pod != nil && pod.DeletionTimestamp != nil:
		fromPod(&r.status, pod)
		switch {
		case counted && prev.UID == pod.UID:
			r.status.Phase, r.view.Phase = batch.ReplicaDeleted, batch.ReplicaDeleted
			r.action = finishRestart
		case PodEnded(pod) && !x.paused && !Disrupted(pod) && prev.Phase != batch.ReplicaDeleted:
			// An ended pod that is being deleted (clean-up, by hand) ended all the same; a
			// restart it is due waits until it is gone. Not one the status already says
			// deleted: it ended because the engine deleted it (a pause, then a resume
			// before it was gone), and resume recreates every replica.
			r.view = Replica{Phase: r.status.Phase, ExitCode: exitCode(pod), Final: !x.mayRestart(g, r.status, budget)}
		default:
			r.status.Phase, r.view.Phase = batch.ReplicaDeleted, batch.ReplicaDeleted
			r.view.Lost = !x.finished && !x.paused
			if r.view.Lost && prev.Phase != batch.ReplicaDeleted {
				// Deleted by someone else (an eviction, a drain, by hand) while the job
				// runs: a disruption, unless a rule says otherwise. A new pod replaces it
				// once it is gone.
				if x.applyRule(r, pod, true, budget) {
					break
				}
				r.view.Disruption = x.disrupt(r, pod)
			}
		}
	case pod != nil && x.paused:
		// A pause (or an admitter's hold) deletes every pod: the replica is Deleted from this
		// decision on, so that the end its deletion brings (a SIGKILL after the grace period)
		// is not taken for its program's should the job resume before the pod is gone.
		fromPod(&r.status, pod)
		r.status.Phase, r.view.Phase = batch.ReplicaDeleted, batch.ReplicaDeleted
	case pod != nil && !PodEnded(pod) && prev.UID != "" && prev.UID == pod.UID && prev.Phase == batch.ReplicaDeleted:
		// An earlier decision deleted this running pod to restart or replace it (a stall, a
		// whole job's restart) and the cache has yet to show the deletion, or the delete
		// failed: finish it. Read as running, the pod would be restarted, or stall, again.
		fromPod(&r.status, pod)
		r.status.Phase, r.view.Phase = batch.ReplicaDeleted, batch.ReplicaDeleted
		r.action = finishRestart
	case pod != nil:
		fromPod(&r.status, pod)
		r.view = Replica{Phase: r.status.Phase, ExitCode: exitCode(pod), Ready: PodReady(pod)}
		if !PodEnded(pod) {
			break
		}
		if prev.UID == pod.UID && prev.Phase == batch.ReplicaDeleted {
			// This pod's restart (or replacement) is counted already: finish it, do not
			// count it again.
			r.status.Phase, r.view.Phase = batch.ReplicaDeleted, batch.ReplicaDeleted
			r.action = finishRestart
			break
		}
		if !x.finished && !x.paused && x.applyRule(r, pod, Disrupted(pod), budget) {
			break
		}
		if Disrupted(pod) && !x.finished && !x.paused {
			// Evicted, preempted, its node drained: not the program's failure.
			r.view = Replica{Phase: batch.ReplicaDeleted, Lost: true, Disruption: disruptionText(pod)}
			r.action = replaceNow
			break
		}
		if !x.mayRestart(g, r.status, budget) {
			r.view.Final = true
			break
		}
		x.restartAfterBackoff(r, pod, budget)
	default: // no pod
		switch {
		case counted:
			r.action = finishRestart
		case x.unadmitted && prev.Phase == "":
			// Never created: it waits with its job.
		case x.paused:
			r.status.Phase, r.view.Phase = batch.ReplicaDeleted, batch.ReplicaDeleted
		case prev.Phase == batch.ReplicaSucceeded || prev.Phase == batch.ReplicaFailed:
			// Its pod ended and is gone (cleaned up, or deleted before its restart): a
			// restart it is due happens now, with a new pod; otherwise keep what it did.
			if x.mayRestart(g, prev, budget) {
				budget.reserve()
				r.action = restartNow
				break
			}
			r.view.Final = true
		case x.finished:
			r.status.Phase, r.view.Phase = batch.ReplicaDeleted, batch.ReplicaDeleted
		default:
			r.action = needsPod
			// A pod it had is gone though it had not ended: deleted by hand, or with its node.
			// (Deleted: the engine deleted it, for a pause or a restart.)
			r.view.Lost = prev.UID != "" && prev.Phase != batch.ReplicaCreating && prev.Phase != batch.ReplicaDeleted
			r.view.Phase = batch.ReplicaCreating
			if r.view.Lost {
				last := x.gone[prev.UID] // its last state, when its deletion was seen
				if last != nil && x.applyRule(r, last, true, budget) {
					break
				}
				r.view.Disruption = x.disrupt(r, last)
			}
		}
	}
	return r
}

// carried is what carrying out a replica's action asks of the decision beyond the replica's
// own status: a restart to count, its pod to delete, a new pod to make, and how its pod ended
// for the nodes policy to look at (nodes.go).
type carried struct {
	restarted bool
	remove    *corev1.Pod
	create    bool
	ended     *batch.ReplicaTermination
}

// carryOut orders what observe said a replica would do, now that the outcome is known: a job
// that has ended restarts and creates nothing, and takes back a restart it counted but did
// not carry out.
func (x *decider) carryOut(r *replica) carried {
	switch r.action {
	case needsPod:
		if x.finished {
			r.status.Phase = batch.ReplicaDeleted
			return carried{}
		}
		return carried{create: true}
	case restartNow:
		if x.finished {
			return carried{} // the replica keeps its pod and its ending; clean-up decides the pod
		}
		r.status.RestartCount++
		if r.pod == nil { // gone already: straight to the new pod
			s := r.status
			r.status.LastTermination = &batch.ReplicaTermination{UID: s.UID, Phase: s.Phase, Node: s.Node, Reason: s.Reason, Message: s.Message, Containers: s.Containers, Rule: r.rule.ref()}
			r.status.Phase = batch.ReplicaDeleted // counted, until the new pod is made
			return carried{restarted: true, ended: r.status.LastTermination, create: true}
		}
		r.status.LastTermination = x.ended(r)
		r.status.Phase = batch.ReplicaDeleted
		return carried{restarted: true, ended: r.status.LastTermination, remove: r.pod}
	case replaceNow:
		if x.finished {
			return carried{} // the job ended first: the pod is reported as it ended (observe read it)
		}
		x.disrupt(r, r.pod)
		x.ruleReplaced(r)
		c := carried{ended: r.status.LastTermination}
		switch {
		case r.pod == nil: // gone already (a rule's Ignore of a pod deleted while it ran)
			c.create = true
		case r.pod.DeletionTimestamp == nil:
			c.remove = r.pod
		}
		return c
	case withJob:
		if x.finished {
			return carried{}
		}
		t := termination(r.pod)
		how := "Deleted"
		if x.restartsInPlace(r.pod) {
			how = "Restarted in place"
		}
		t.Reason, t.Message = ReasonRestartedWithJob, how+" to restart the whole job ("+r.causeBy+"): "+r.cause+"."
		switch {
		case r.counted:
			r.status.RestartCount++
		case !r.requested:
			t.Disrupted = true
			r.status.Disruptions++
		}
		r.status.LastTermination = t
		r.status.UID, r.status.Phase = r.pod.UID, batch.ReplicaDeleted
		return carried{restarted: r.counted, remove: r.pod}
	case finishRestart:
		switch {
		case x.finished && r.status.LastTermination != nil && r.status.LastTermination.Disrupted:
			// A replacement that will not happen: nothing was counted.
		case x.finished:
			takeBackRestart(r)
		case x.paused:
			// Pause deletes the pod; resume creates the replica again.
		case r.pod == nil:
			return carried{create: true}
		case r.pod.DeletionTimestamp == nil:
			return carried{remove: r.pod}
		}
	}
	return carried{}
}

// createPod makes a replica's new pod, which avoids the nodes listed, and reports the
// replica as being created.
func (x *decider) createPod(job Job, r *replica, resumed bool, excluded []batch.ExcludedNode, attempt int32) *corev1.Pod {
	r.status.UID, r.status.Phase = "", batch.ReplicaCreating
	r.status.Containers, r.status.Node, r.status.Reason, r.status.Message = []batch.ContainerStatus{}, "", "", ""
	plan := x.plan
	if x.noAgent {
		withoutAgent := *plan
		withoutAgent.InPlace = nil
		plan = &withoutAgent
	}
	pod := newPod(job, plan, x.admission, *r.group, r.rank, resumed, attempt)
	excludeNodes(pod, excluded)
	return pod
}

// stampAttempt records, in the replica's last termination, the attempt its pod was made for,
// read from the pod's label while the pod is there to read it (a pod made before attempts
// were labelled leaves it out). The record is copied, not changed in place: the old status
// belongs to the informer's cache.
func stampAttempt(r *replica) {
	t := r.status.LastTermination
	if t == nil || t.Attempt != 0 || r.pod == nil || r.pod.UID != t.UID {
		return
	}
	n, err := strconv.Atoi(r.pod.Labels[batch.LabelAttempt])
	if err != nil || n < 1 {
		return
	}
	c := *t
	c.Attempt = int32(n)
	r.status.LastTermination = &c
}

// restartCounted reports whether a replica's status counts a restart of its current pod that
// has not been carried out yet: the pod is marked Deleted and its ending recorded.
func restartCounted(s batch.ReplicaStatus) bool {
	return s.Phase == batch.ReplicaDeleted && s.UID != "" && s.LastTermination != nil && s.LastTermination.UID == s.UID
}

// takeBackRestart undoes the count of a restart that will not happen because the job ended
// first, so that a replica's restart count stays the number of pods it had, minus one. It
// is reported as its pod ended.
func takeBackRestart(r *replica) {
	s := &r.status
	s.RestartCount--
	if r.pod != nil {
		if r.pod.DeletionTimestamp == nil {
			s.Phase = replicaPhase(r.pod)
		}
	} else if t := s.LastTermination; t != nil {
		s.Phase, s.Node, s.Reason, s.Message, s.Containers = t.Phase, t.Node, t.Reason, t.Message, t.Containers
	}
	s.LastTermination = nil
}
