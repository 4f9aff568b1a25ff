package decision

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// FuzzFailurePolicy decides a replica's ending under any one rule (any action, any matcher)
// and restart policy. What rules.go promises (docs/failures.md, "Failure rules"):
//   - no panic;
//   - a rule decides only an ending it matches, never a success nor a running pod;
//   - FailJob fails the job; Ignore counts no restart, of the replica or the job;
//   - no restart beyond the replica's limit or the backoffLimit, whoever asks for it;
//   - a failure no rule matches is decided as without rules.
func FuzzFailurePolicy(f *testing.F) {
	f.Add(uint8(0), uint8(0), int32(42), uint8(0), false, false, int8(-1), int8(-1), int32(0))
	f.Add(uint8(1), uint8(3), int32(137), uint8(0), false, true, int8(1), int8(2), int32(1))
	f.Add(uint8(3), uint8(2), int32(143), uint8(0), true, false, int8(0), int8(0), int32(0))
	f.Add(uint8(2), uint8(4), int32(1), uint8(1), false, false, int8(3), int8(-1), int32(2))
	f.Fuzz(func(t *testing.T, actionIndex, matcherIndex uint8, code int32, phaseIndex uint8, disruptedPod, oom bool, limit, backoffLimit int8, restarts int32) {
		actions := []batch.FailurePolicyAction{batch.FailJob, batch.RestartReplica, batch.RestartJob, batch.Ignore}
		rule := batch.FailurePolicyRule{Name: "r", Action: actions[int(actionIndex)%len(actions)]}
		switch matcherIndex % 5 {
		case 0:
			rule.OnExitCodes = exitCodes(batch.ExitCodesIn, code)
		case 1:
			rule.OnExitCodes = exitCodes(batch.ExitCodesNotIn, code)
		case 2:
			rule.OnPodConditions = []batch.PodConditionPattern{{Type: corev1.DisruptionTarget}}
		case 3:
			rule.OnReasons = []batch.FailureReason{batch.ReasonOOMKilled, batch.ReasonEvicted}
		}
		phases := []corev1.PodPhase{corev1.PodFailed, corev1.PodSucceeded, corev1.PodRunning}
		phase := phases[int(phaseIndex)%len(phases)]
		exit := code
		if phase == corev1.PodSucceeded {
			exit = 0
		}
		p := pod("job-worker-0", "w0", phase, exit)
		if oom && phase == corev1.PodFailed {
			p.Status.ContainerStatuses[0].State.Terminated.Reason = "OOMKilled"
		}
		if disruptedPod {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "TerminationByKubelet"})
		}
		restarts = max(0, restarts%8)
		plan := rulesPlan(1, batch.RestartOnFailure, rule)
		if limit >= 0 {
			plan.Groups[0].Limit = ptr.To(int32(limit))
		}
		if backoffLimit >= 0 {
			plan.BackoffLimit = ptr.To(int32(backoffLimit))
		}
		status := statusWith(batch.JobRunning, replicaStatus("job-worker-0", "w0", batch.ReplicaRunning, restarts))
		d := mustDecide(t, testJob(status), plan, Children{Pods: []*corev1.Pod{p}}, nil, now)
		r := replicaOf(d.Status, "job-worker-0")

		ended := phase != corev1.PodRunning
		matches := ended && (phase == corev1.PodFailed || Disrupted(p)) && ruleMatches(&rule, ending{replicaType: "worker", pod: p, disrupted: Disrupted(p)})
		if len(d.RuleDecisions) > 0 && !matches {
			t.Fatalf("rule %+v decided a pod it does not match (phase %s, exit %d, disrupted %v, oom %v)", rule, phase, exit, disruptedPod, oom)
		}
		if matches && rule.Action == batch.FailJob && (d.Outcome == nil || d.Outcome.Succeeded) {
			t.Fatalf("a FailJob rule matched: outcome %+v", d.Outcome)
		}
		if matches && rule.Action == batch.Ignore && (r.RestartCount != restarts || d.Status.Restarts != 0) {
			t.Fatalf("an Ignore rule counted: restartCount %d (was %d), job restarts %d", r.RestartCount, restarts, d.Status.Restarts)
		}
		if r.RestartCount > restarts && (plan.Groups[0].Limit != nil && restarts >= *plan.Groups[0].Limit && rule.Action != batch.RestartJob ||
			plan.BackoffLimit != nil && restarts >= *plan.BackoffLimit) {
			t.Fatalf("restarted past its limits: %d restarts, limit %v, backoffLimit %v, rule %s", restarts, limit, backoffLimit, rule.Action)
		}
		if !matches {
			plan.FailurePolicy = nil
			without := mustDecide(t, testJob(status), plan, Children{Pods: []*corev1.Pod{p}}, nil, now)
			if w := replicaOf(without.Status, "job-worker-0"); w.RestartCount != r.RestartCount || (without.Outcome == nil) != (d.Outcome == nil) {
				t.Fatalf("an ending no rule matches was decided differently: restarts %d vs %d, outcome %+v vs %+v", r.RestartCount, w.RestartCount, d.Outcome, without.Outcome)
			}
		}
	})
}
