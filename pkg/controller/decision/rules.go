package decision

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// Failure policy rules (spec.failurePolicy.rules; docs/failures.md). A replica's ending is
// matched against the rules in order, the first match decides: fail the job now, restart the
// replica whatever its restart policy says, restart the whole job, or replace the pod
// counting nothing. What no rule matches is handled as before: the restart policy decides a
// failure, a disruption is replaced, a stall restarts the job where it may.

// ending is one ending of a replica's pod, as the rules look at it.
type ending struct {
	replicaType string
	rank        int32
	// pod is the pod as it ended, or as it was last seen when it is gone; nil for a stall.
	pod *corev1.Pod
	// disrupted: Kubernetes disrupted the pod (DisruptionTarget), or it was deleted while it
	// ran; stalled: it stopped reporting progress.
	disrupted, stalled bool
}

// ruleMatch is a rule that matched, with its index.
type ruleMatch struct {
	index int
	rule  *batch.FailurePolicyRule
}

// ref names the rule in status.
func (m *ruleMatch) ref() *batch.FailurePolicyRuleRef {
	if m == nil {
		return nil
	}
	return &batch.FailurePolicyRuleRef{Index: int32(m.index), Action: m.rule.Action}
}

// text names the rule in messages: `spec.failurePolicy.rules[0] ("bad-input")`.
func (m *ruleMatch) text() string {
	return fmt.Sprintf("spec.failurePolicy.rules[%d] (%q)", m.index, m.rule.Name)
}

// matchRule returns the first rule of the policy that matches the ending, or nil.
func matchRule(policy *batch.FailurePolicy, e ending) *ruleMatch {
	if policy == nil {
		return nil
	}
	for i := range policy.Rules {
		if r := &policy.Rules[i]; ruleMatches(r, e) {
			return &ruleMatch{index: i, rule: r}
		}
	}
	return nil
}

func ruleMatches(r *batch.FailurePolicyRule, e ending) bool {
	if len(r.ReplicaTypes) > 0 && !slices.Contains(r.ReplicaTypes, e.replicaType) {
		return false
	}
	if len(r.Ranks) > 0 && !slices.Contains(r.Ranks, e.rank) {
		return false
	}
	switch {
	case r.OnExitCodes != nil:
		return !e.disrupted && !e.stalled && exitCodesMatch(r.OnExitCodes, e.pod)
	case len(r.OnPodConditions) > 0:
		return !e.stalled && conditionsMatch(r.OnPodConditions, e.pod)
	case len(r.OnReasons) > 0:
		return slices.ContainsFunc(r.OnReasons, func(reason batch.FailureReason) bool { return hasReason(e, reason) })
	default:
		// No matcher: every failure of the replicas, a stall included, not a disruption.
		return e.stalled || !e.disrupted && e.pod != nil && e.pod.Status.Phase == corev1.PodFailed
	}
}

// exitCodesMatch: a container that ended with a non-zero exit code (of the named container,
// when the requirement names one) is In, or NotIn, the values.
func exitCodesMatch(req *batch.ExitCodesRequirement, pod *corev1.Pod) bool {
	if pod == nil || pod.Status.Phase != corev1.PodFailed {
		return false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		t := cs.State.Terminated
		if t == nil || t.ExitCode == 0 || req.ContainerName != nil && *req.ContainerName != cs.Name {
			continue
		}
		if slices.Contains(req.Values, t.ExitCode) == (req.Operator == batch.ExitCodesIn) {
			return true
		}
	}
	return false
}

// conditionsMatch: the pod has one of the conditions, with its status.
func conditionsMatch(patterns []batch.PodConditionPattern, pod *corev1.Pod) bool {
	if pod == nil {
		return false
	}
	for _, p := range patterns {
		status := p.Status
		if status == "" {
			status = corev1.ConditionTrue
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == p.Type && c.Status == status {
				return true
			}
		}
	}
	return false
}

// hasReason: the ending is of the reason. OOMKilled is a container's; Evicted and
// DeadlineExceeded the pod's own reason (an eviction by the kubelet is also a disruption).
func hasReason(e ending, reason batch.FailureReason) bool {
	if reason == batch.ReasonStalled || e.stalled {
		return reason == batch.ReasonStalled && e.stalled
	}
	if e.pod == nil {
		return false
	}
	if reason == batch.ReasonOOMKilled {
		return slices.ContainsFunc(e.pod.Status.ContainerStatuses, func(cs corev1.ContainerStatus) bool {
			return cs.State.Terminated != nil && cs.State.Terminated.Reason == string(batch.ReasonOOMKilled)
		})
	}
	return e.pod.Status.Reason == string(reason)
}

// ReasonFailurePolicy is the reason of a job a rule failed (action FailJob).
const ReasonFailurePolicy = "FailurePolicy"

// applyRule looks for the rule that decides a replica's ended (or lost) pod and does what it
// says, noting its ruling on the replica; false when no rule matches and the replica is
// handled as without rules. disrupted: Kubernetes disrupted the pod, or it went while it ran.
func (x *decider) applyRule(r *replica, pod *corev1.Pod, disrupted bool, budget *restartBudget) bool {
	if !disrupted && pod.Status.Phase != corev1.PodFailed {
		return false // a success is the restart policy's alone
	}
	m := matchRule(x.plan.FailurePolicy, ending{replicaType: r.group.Type, rank: r.rank, pod: pod, disrupted: disrupted})
	if m == nil {
		return false
	}
	r.ruling = x.act(r, m, pod, budget)
	return true
}

// ruling is what a failure policy rule (or a stall, stall.go) decides of a replica beyond
// what the replica itself does (its action and view): whether the job fails on it, whether
// the whole job restarts with it, and the rule's decision to tell. Decide combines the
// replicas' rulings: the first that fails the job ends it (applyRulings), any that restarts
// the whole job restarts it (restartjob.go), and each decision told is an event.
type ruling struct {
	// fail, when set, fails the job on the replica; record is how its pod ended, for its
	// lastTermination should the job fail on it (nil: nothing to record).
	fail   *Outcome
	record *batch.ReplicaTermination
	// restartJob: the replica restarts with the whole job, whatever spec.restartScope says.
	restartJob bool
	// told is the rule's decision, for events and metrics (nil: none, or not yet: a restart
	// that waits for its backoff is told when it happens).
	told *RuleDecision
}

// act carries out a rule's action on a replica (pod: how it ended, nil for a stall), and
// returns its ruling.
func (x *decider) act(r *replica, m *ruleMatch, pod *corev1.Pod, budget *restartBudget) ruling {
	r.rule = m
	var ru ruling
	switch m.rule.Action {
	case batch.FailJob:
		r.view.Final = true
		ru = failJob(r, m.text()+" fails the job on it", pod)
	case batch.Ignore:
		r.view = Replica{Phase: batch.ReplicaDeleted, Lost: true, Disruption: "ignored by " + m.text()}
		r.action = replaceNow
	case batch.RestartReplica, batch.RestartJob:
		whole := m.rule.Action == batch.RestartJob
		if !restartLeft(r, whole, budget) {
			r.view.Final = true
			if r.stalled != "" {
				// A stalled replica that may not restart would hold its job for ever.
				return failJob(r, m.text()+" would restart it, but no restart is left", nil)
			}
			return ruling{}
		}
		ru.restartJob = whole
		if pod == nil || !PodEnded(pod) {
			budget.reserve()
			r.action = restartNow // a stall, or a pod that is going: no backoff to wait
		} else if x.restartAfterBackoff(r, pod, budget); r.action != restartNow {
			return ru // told when the backoff has passed and the restart happens
		}
	}
	ru.told = &RuleDecision{Replica: r.status.Name, Rule: *m.ref(), RuleName: m.rule.Name, Ending: endingOf(r, pod)}
	return ru
}

// failJob is the ruling that fails the job on a replica, for the reason why; pod is how the
// replica's pod ended (nil for a stall).
func failJob(r *replica, why string, pod *corev1.Pod) ruling {
	reason := ReasonFailurePolicy
	if r.rule == nil {
		reason = string(batch.ReasonStalled)
	}
	ru := ruling{fail: &Outcome{Reason: reason, Message: fmt.Sprintf("Replica %s, and %s.", endingOf(r, pod), why)}}
	if pod != nil && (r.status.LastTermination == nil || r.status.LastTermination.UID != pod.UID) {
		ru.record = termination(pod)
		ru.record.Rule = r.rule.ref()
	}
	return ru
}

// applyRulings adds what the rulings of replicas decided of the job to what earlier ones did
// (fail, told), the replicas taken in the order Decide applies the policies: the first
// replica that fails the job decides how it fails, and its lastTermination records how its
// pod ended; every rule's decision is told, in that order.
func applyRulings(fail *Outcome, told []RuleDecision, replicas []*replica) (*Outcome, []RuleDecision) {
	for _, r := range replicas {
		if fail == nil && r.ruling.fail != nil {
			fail = r.ruling.fail
			if r.ruling.record != nil {
				r.status.LastTermination = r.ruling.record
			}
		}
		if r.ruling.told != nil {
			told = append(told, *r.ruling.told)
		}
	}
	return fail, told
}

// endingOf says how a replica ended, for messages: "worker-1 failed with exit code 42".
func endingOf(r *replica, pod *corev1.Pod) string {
	switch {
	case r.stalled != "":
		return r.status.Name + " " + r.stalled
	case pod == nil:
		return r.status.Name + " went"
	case Disrupted(pod):
		return fmt.Sprintf("%s was disrupted (%s)", r.status.Name, disruptionText(pod))
	case pod.DeletionTimestamp != nil && !PodEnded(pod):
		return r.status.Name + " was deleted"
	}
	text := r.status.Name + " " + strings.ToLower(string(replicaPhase(pod))) + ExitText(exitCode(pod))
	if hasReason(ending{pod: pod}, batch.ReasonOOMKilled) {
		text += " (OOMKilled)"
	} else if pod.Status.Reason != "" {
		text += " (" + pod.Status.Reason + ")"
	}
	return text
}

// ended is how a restarted replica's pod ended, for its lastTermination: with the rule that
// restarted it, and for a stall the stall.
func (x *decider) ended(r *replica) *batch.ReplicaTermination {
	t := termination(r.pod)
	t.Rule = r.rule.ref()
	if r.stalled != "" {
		t.Reason, t.Message = string(batch.ReasonStalled), r.status.Name+" "+r.stalled+"."
	}
	return t
}

// ruleReplaced completes the record of a pod replaced by a rule's Ignore: its
// lastTermination names the rule, and a failure that was not a disruption says so.
func (x *decider) ruleReplaced(r *replica) {
	t := r.status.LastTermination
	if r.rule == nil || t == nil {
		return
	}
	t.Rule = r.rule.ref()
	if r.stalled != "" {
		t.Reason, t.Message = string(batch.ReasonStalled), r.status.Name+" "+r.stalled+"."
	} else if r.pod != nil && !Disrupted(r.pod) {
		t.Reason, t.Message = ReasonFailurePolicy, "Replaced, counting nothing, as "+r.rule.text()+" says."
	}
}

// RuleDecision is a failure policy rule's decision on a replica, for events and metrics.
type RuleDecision struct {
	Replica  string
	Rule     batch.FailurePolicyRuleRef
	RuleName string
	// Ending says how the replica ended: "worker-1 failed with exit code 42".
	Ending string
}
