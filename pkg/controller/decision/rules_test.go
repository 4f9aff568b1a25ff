package decision

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// Failure policy rules (docs/failures.md): the first rule that matches an ending decides it.

func rulesPlan(n int32, policy batch.RestartPolicy, rules ...batch.FailurePolicyRule) *Plan {
	return &Plan{Groups: []Group{workers(n, policy, nil)}, Judge: allSucceed, FailurePolicy: &batch.FailurePolicy{Rules: rules}}
}

func exitCodes(op batch.ExitCodesOperator, codes ...int32) *batch.ExitCodesRequirement {
	return &batch.ExitCodesRequirement{Operator: op, Values: codes}
}

func TestFailJobRuleFailsAtOnce(t *testing.T) {
	plan := rulesPlan(2, batch.RestartOnFailure,
		batch.FailurePolicyRule{Name: "retry-nccl", Action: batch.RestartJob, OnExitCodes: exitCodes(batch.ExitCodesIn, 3)},
		batch.FailurePolicyRule{Name: "bad-input", Action: batch.FailJob, OnExitCodes: exitCodes(batch.ExitCodesIn, 42)})
	d := mustDecide(t, testJob(running("0", "1")), plan, Children{Pods: []*corev1.Pod{pod("job-worker-0", "w0", corev1.PodRunning, 0), pod("job-worker-1", "w1", corev1.PodFailed, 42)}}, nil, now)
	if d.Outcome == nil || d.Outcome.Succeeded || d.Outcome.Reason != ReasonFailurePolicy || !strings.Contains(d.Outcome.Message, `spec.failurePolicy.rules[1] ("bad-input")`) ||
		!strings.Contains(d.Outcome.Message, "job-worker-1 failed with exit code 42") {
		t.Fatalf("outcome %+v: want the job failed by rule bad-input, naming the replica and its exit code", d.Outcome)
	}
	if len(d.Restarted) != 0 || len(d.CreatePods) != 0 {
		t.Errorf("restarted %v, created %v: want nothing restarted though the policy is OnFailure", d.Restarted, names(d.CreatePods))
	}
	r := replicaOf(d.Status, "job-worker-1")
	if r.LastTermination == nil || r.LastTermination.Rule == nil || *r.LastTermination.Rule != (batch.FailurePolicyRuleRef{Index: 1, Action: batch.FailJob}) {
		t.Errorf("worker-1's last termination %+v: want it to name rule 1, FailJob", r.LastTermination)
	}
	if len(d.RuleDecisions) != 1 || d.RuleDecisions[0].Rule.Action != batch.FailJob {
		t.Errorf("rule decisions %+v: want one FailJob", d.RuleDecisions)
	}
	if c := d.Status.Condition(batch.JobConditionFailed); c.Status != corev1.ConditionTrue || c.Reason != ReasonFailurePolicy {
		t.Errorf("Failed condition %+v", c)
	}
}

func TestIgnoreRuleReplacesCountingNothing(t *testing.T) {
	plan := rulesPlan(1, batch.RestartNever, batch.FailurePolicyRule{Name: "spot", Action: batch.Ignore, OnExitCodes: exitCodes(batch.ExitCodesIn, 143)})
	d := mustDecide(t, testJob(running("0")), plan, Children{Pods: []*corev1.Pod{pod("job-worker-0", "w0", corev1.PodFailed, 143)}}, nil, now)
	r := replicaOf(d.Status, "job-worker-0")
	if d.Outcome != nil || r.RestartCount != 0 || r.Disruptions != 1 || len(d.DeletePods) != 1 || d.Status.Restarts != 0 {
		t.Fatalf("outcome %+v, replica %+v, deleted %v: want the pod replaced, counted as a disruption only", d.Outcome, r, names(d.DeletePods))
	}
	if tm := r.LastTermination; tm == nil || !tm.Disrupted || tm.Rule == nil || tm.Rule.Action != batch.Ignore || tm.Reason != ReasonFailurePolicy {
		t.Errorf("last termination %+v: want disrupted, reason FailurePolicy, rule spot", r.LastTermination)
	}
	// The pod gone, a new one is made; nothing counted.
	next := mustDecide(t, testJob(*d.Status), plan, Children{}, nil, now)
	if len(next.CreatePods) != 1 || replicaOf(next.Status, "job-worker-0").RestartCount != 0 {
		t.Errorf("created %v: want the replacement", names(next.CreatePods))
	}
}

func TestRestartJobRuleRestartsEveryReplicaOnce(t *testing.T) {
	plan := rulesPlan(3, batch.RestartNever, batch.FailurePolicyRule{Name: "nccl-timeout", Action: batch.RestartJob, OnExitCodes: exitCodes(batch.ExitCodesIn, 3)})
	plan.BackoffLimit = ptr.To[int32](1)
	pods := []*corev1.Pod{pod("job-worker-0", "w0", corev1.PodRunning, 0), pod("job-worker-1", "w1", corev1.PodFailed, 3), pod("job-worker-2", "w2", corev1.PodRunning, 0)}
	d := mustDecide(t, testJob(running("0", "1", "2")), plan, Children{Pods: pods}, nil, now)
	if d.Outcome != nil || d.Status.Restarts != 1 || len(d.DeletePods) != 3 || len(d.CreatePods) != 0 || !strings.Contains(d.JobRestartBy, "nccl-timeout") || d.JobRestartCause != RestartCauseRule {
		t.Fatalf("outcome %+v, restarts %d, deleted %v, created %v, by %q: want every pod deleted, one job restart by the rule",
			d.Outcome, d.Status.Restarts, names(d.DeletePods), names(d.CreatePods), d.JobRestartBy)
	}
	if r := replicaOf(d.Status, "job-worker-1"); r.RestartCount != 1 || r.LastTermination.Rule == nil || r.LastTermination.Rule.Action != batch.RestartJob {
		t.Errorf("worker-1 %+v: want one restart, named by the rule", r)
	}
	for _, name := range []string{"job-worker-0", "job-worker-2"} {
		if r := replicaOf(d.Status, name); r.RestartCount != 0 || r.LastTermination == nil || r.LastTermination.Reason != ReasonRestartedWithJob {
			t.Errorf("%s %+v: want restarted with the job, no restart of its own counted", name, r)
		}
	}
	// Behind the barrier while an old pod remains, though restartScope is Replica.
	terminating := pod("job-worker-0", "w0", corev1.PodRunning, 0)
	terminating.DeletionTimestamp = ptr.To(metav1.NewTime(now))
	waiting := mustDecide(t, testJob(*d.Status), plan, Children{Pods: []*corev1.Pod{terminating}}, nil, now)
	if len(waiting.CreatePods) != 0 || waiting.Status.Restarts != 1 {
		t.Errorf("while an old pod remains: created %v, restarts %d; want nothing new", names(waiting.CreatePods), waiting.Status.Restarts)
	}
	all := mustDecide(t, testJob(*waiting.Status), plan, Children{}, nil, now)
	if len(all.CreatePods) != 3 {
		t.Errorf("once the old pods are gone, created %v; want all three", names(all.CreatePods))
	}
	// backoffLimit 1 is used: a second exit 3 fails the job (the policy is Never).
	again := *all.Status
	for i := range again.Tasks[0].Replicas {
		again.Tasks[0].Replicas[i].Phase, again.Tasks[0].Replicas[i].UID = batch.ReplicaRunning, types.UID("x"+string(rune('0'+i)))
	}
	failed := mustDecide(t, testJob(again), plan, Children{Pods: []*corev1.Pod{pod("job-worker-0", "x0", corev1.PodFailed, 3), pod("job-worker-1", "x1", corev1.PodRunning, 0), pod("job-worker-2", "x2", corev1.PodRunning, 0)}}, nil, now)
	if failed.Outcome == nil || failed.Outcome.Succeeded {
		t.Errorf("a second exit 3 past backoffLimit: outcome %+v, want failed", failed.Outcome)
	}
}

func TestOOMKilledByType(t *testing.T) {
	plan := &Plan{Groups: []Group{
		{Type: "ps", Replicas: 1, Restart: batch.RestartNever, Template: template("ps")},
		workers(1, batch.RestartNever, nil),
	}, Judge: allSucceed, FailurePolicy: &batch.FailurePolicy{Rules: []batch.FailurePolicyRule{
		{Name: "ps-oom", Action: batch.FailJob, ReplicaTypes: []string{"ps"}, OnReasons: []batch.FailureReason{batch.ReasonOOMKilled}},
		{Name: "worker-oom", Action: batch.RestartReplica, ReplicaTypes: []string{"worker"}, OnReasons: []batch.FailureReason{batch.ReasonOOMKilled}},
	}}}
	oom := func(name, uid string) *corev1.Pod {
		p := pod(name, types.UID(uid), corev1.PodFailed, 137)
		p.Status.ContainerStatuses[0].State.Terminated.Reason = "OOMKilled"
		return p
	}
	status := batch.JobStatus{Phase: batch.JobRunning, Tasks: []batch.TaskStatus{
		{Type: "ps", Replicas: []batch.ReplicaStatus{replicaStatus("job-ps-0", "p0", batch.ReplicaRunning, 0)}},
		{Type: "worker", Replicas: []batch.ReplicaStatus{replicaStatus("job-worker-0", "w0", batch.ReplicaRunning, 0)}}}}

	worker := mustDecide(t, testJob(status), plan, Children{Pods: []*corev1.Pod{pod("job-ps-0", "p0", corev1.PodRunning, 0), oom("job-worker-0", "w0")}}, nil, now)
	if worker.Outcome != nil || strings.Join(worker.Restarted, ",") != "job-worker-0" {
		t.Errorf("a worker OOMKilled: outcome %+v, restarted %v; want the worker restarted though its policy is Never", worker.Outcome, worker.Restarted)
	}
	ps := mustDecide(t, testJob(status), plan, Children{Pods: []*corev1.Pod{oom("job-ps-0", "p0"), pod("job-worker-0", "w0", corev1.PodRunning, 0)}}, nil, now)
	if ps.Outcome == nil || ps.Outcome.Succeeded || !strings.Contains(ps.Outcome.Message, "ps-oom") || !strings.Contains(ps.Outcome.Message, "(OOMKilled)") {
		t.Errorf("the ps OOMKilled: outcome %+v; want the job failed by ps-oom", ps.Outcome)
	}
}

func TestRuleMatching(t *testing.T) {
	main := "main"
	failed := pod("job-worker-1", "w1", corev1.PodFailed, 7)
	failed.Status.ContainerStatuses = append(failed.Status.ContainerStatuses, corev1.ContainerStatus{Name: "sidecar",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}})
	evicted := disruptedPod("job-worker-1", "w1", "TerminationByKubelet")
	deadline := pod("job-worker-1", "w1", corev1.PodFailed, 137)
	deadline.Status.Reason = "DeadlineExceeded"
	succeeded := pod("job-worker-1", "w1", corev1.PodSucceeded, 0)
	at := func(p *corev1.Pod) ending {
		return ending{replicaType: "worker", rank: 1, pod: p, disrupted: Disrupted(p)}
	}
	for _, tc := range []struct {
		name string
		rule batch.FailurePolicyRule
		e    ending
		want bool
	}{
		{"In matches a non-zero code", batch.FailurePolicyRule{OnExitCodes: exitCodes(batch.ExitCodesIn, 7)}, at(failed), true},
		{"NotIn skips containers that exited 0", batch.FailurePolicyRule{OnExitCodes: exitCodes(batch.ExitCodesNotIn, 7)}, at(failed), false},
		{"NotIn matches another code", batch.FailurePolicyRule{OnExitCodes: exitCodes(batch.ExitCodesNotIn, 1, 2)}, at(failed), true},
		{"a named container", batch.FailurePolicyRule{OnExitCodes: &batch.ExitCodesRequirement{ContainerName: &main, Operator: batch.ExitCodesIn, Values: []int32{7}}}, at(failed), true},
		{"another named container", batch.FailurePolicyRule{OnExitCodes: &batch.ExitCodesRequirement{ContainerName: ptr.To("sidecar"), Operator: batch.ExitCodesIn, Values: []int32{7}}}, at(failed), false},
		{"exit codes never match a disruption", batch.FailurePolicyRule{OnExitCodes: exitCodes(batch.ExitCodesIn, 137)}, at(evicted), false},
		{"DisruptionTarget", batch.FailurePolicyRule{OnPodConditions: []batch.PodConditionPattern{{Type: corev1.DisruptionTarget}}}, at(evicted), true},
		{"DisruptionTarget False", batch.FailurePolicyRule{OnPodConditions: []batch.PodConditionPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionFalse}}}, at(evicted), false},
		{"Evicted", batch.FailurePolicyRule{OnReasons: []batch.FailureReason{batch.ReasonEvicted}}, at(evicted), true},
		{"DeadlineExceeded", batch.FailurePolicyRule{OnReasons: []batch.FailureReason{batch.ReasonDeadlineExceeded}}, at(deadline), true},
		{"OOMKilled is not DeadlineExceeded", batch.FailurePolicyRule{OnReasons: []batch.FailureReason{batch.ReasonOOMKilled}}, at(deadline), false},
		{"Stalled only a stall", batch.FailurePolicyRule{OnReasons: []batch.FailureReason{batch.ReasonStalled}}, at(failed), false},
		{"a stall", batch.FailurePolicyRule{OnReasons: []batch.FailureReason{batch.ReasonStalled}}, ending{replicaType: "worker", rank: 1, stalled: true}, true},
		{"no matcher: any failure", batch.FailurePolicyRule{}, at(failed), true},
		{"no matcher: not a disruption", batch.FailurePolicyRule{}, at(evicted), false},
		{"no matcher: a stall", batch.FailurePolicyRule{}, ending{replicaType: "worker", stalled: true}, true},
		{"no matcher: not a success", batch.FailurePolicyRule{}, at(succeeded), false},
		{"another type", batch.FailurePolicyRule{ReplicaTypes: []string{"ps"}}, at(failed), false},
		{"its rank", batch.FailurePolicyRule{Ranks: []int32{1}}, at(failed), true},
		{"another rank", batch.FailurePolicyRule{Ranks: []int32{0, 2}}, at(failed), false},
	} {
		if got := ruleMatches(&tc.rule, tc.e); got != tc.want {
			t.Errorf("%s: matched %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A rule decides a disruption too: a pod evicted by its kubelet fails the job.
func TestRuleOnDisruption(t *testing.T) {
	plan := rulesPlan(1, batch.RestartOnFailure, batch.FailurePolicyRule{Name: "no-evictions", Action: batch.FailJob, OnPodConditions: []batch.PodConditionPattern{{Type: corev1.DisruptionTarget}}})
	d := mustDecide(t, testJob(running("0")), plan, Children{Pods: []*corev1.Pod{disruptedPod("job-worker-0", "w0", "TerminationByKubelet")}}, nil, now)
	if d.Outcome == nil || d.Outcome.Succeeded || !strings.Contains(d.Outcome.Message, "no-evictions") || len(d.DeletePods) > 0 && len(d.Disrupted) > 0 {
		t.Errorf("outcome %+v, disrupted %v: want the job failed by the rule, nothing replaced", d.Outcome, d.Disrupted)
	}
	// Without rules, as before: replaced, nothing counted.
	plan.FailurePolicy = nil
	d = mustDecide(t, testJob(running("0")), plan, Children{Pods: []*corev1.Pod{disruptedPod("job-worker-0", "w0", "TerminationByKubelet")}}, nil, now)
	if d.Outcome != nil || len(d.Disrupted) != 1 {
		t.Errorf("without rules: outcome %+v, disrupted %v; want it replaced", d.Outcome, d.Disrupted)
	}
}

// A pod deleted while it ran, gone before a sync read it, that an Ignore rule matches (by its
// last state) is replaced at once; one that is still being deleted is not deleted again.
func TestIgnoreRuleOnAGonePod(t *testing.T) {
	plan := rulesPlan(1, batch.RestartNever, batch.FailurePolicyRule{Name: "spot", Action: batch.Ignore,
		OnPodConditions: []batch.PodConditionPattern{{Type: corev1.DisruptionTarget}}})
	last := disruptedPod("job-worker-0", "w0", "DeletionByTaintManager")
	d := mustDecide(t, testJob(running("0")), plan, Children{Gone: map[types.UID]*corev1.Pod{"w0": last}}, nil, now)
	r := replicaOf(d.Status, "job-worker-0")
	if len(d.CreatePods) != 1 || len(d.DeletePods) != 0 || r.Disruptions != 1 || r.LastTermination == nil || r.LastTermination.Rule == nil {
		t.Fatalf("created %v, deleted %d, replica %+v: want the replacement made at once, the rule recorded", names(d.CreatePods), len(d.DeletePods), r)
	}
	deleting := disruptedPod("job-worker-0", "w0", "DeletionByTaintManager")
	deleting.Status.Phase = corev1.PodRunning
	deleting.DeletionTimestamp = ptr.To(metav1.NewTime(now))
	d = mustDecide(t, testJob(running("0")), plan, Children{Pods: []*corev1.Pod{deleting}}, nil, now)
	if len(d.DeletePods) != 0 || replicaOf(d.Status, "job-worker-0").Disruptions != 1 {
		t.Errorf("deleted %v: a pod being deleted is not deleted again", names(d.DeletePods))
	}
}
