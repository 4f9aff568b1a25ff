package decision

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// documentedRetryable are the exit codes after which the ExitCode policy restarts, as
// docs/jobs.md and the API's RestartExitCode say: SIGINT, SIGKILL, SIGTERM and 138.
var documentedRetryable = []int32{130, 137, 138, 143}

// FuzzRestart decides restarts for any policy, replica phase, container exit codes, limit,
// backoffLimit and restart counts. What the code promises (replicas.go, wantsRestart,
// restartsLeft, restartBackoff; docs/jobs.md, "Restarts"):
//   - no panic;
//   - Never (and any policy the API does not know) restarts nothing, Always everything,
//     OnFailure what failed;
//   - ExitCode restarts a failed replica exactly when one of its containers exited with a
//     code of the documented set (as the preset rule, exitCodePreset, reads it); never a
//     replica that did not fail, nor one whose containers all exited 0 or never ran;
//   - ExitCode restarts nothing OnFailure would not;
//   - no replica is restarted once it has used its limit or the job its backoffLimit;
//   - the backoff before a restart is 0 for the first, then grows, never beyond a minute.
func FuzzRestart(f *testing.F) {
	for _, code := range append([]int32{0, 1, 2, 127, 128, 136, 139, 255, -1}, documentedRetryable...) {
		f.Add(uint8(3), uint8(1), code, int32(0), int32(0), uint8(1), int8(-1), int8(-1), int32(0), int32(0))
	}
	f.Add(uint8(3), uint8(1), int32(0), int32(137), int32(1), uint8(7), int8(3), int8(6), int32(2), int32(5))
	f.Add(uint8(1), uint8(0), int32(0), int32(0), int32(0), uint8(0), int8(0), int8(0), int32(0), int32(0))
	f.Fuzz(func(t *testing.T, policyIndex, phaseIndex uint8, code0, code1, code2 int32, present uint8, limit, backoffLimit int8, restarts, total int32) {
		policies := []batch.RestartPolicy{batch.RestartNever, batch.RestartOnFailure, batch.RestartAlways, batch.RestartExitCode, "Sometimes", ""}
		phases := []batch.ReplicaPhase{batch.ReplicaSucceeded, batch.ReplicaFailed, batch.ReplicaRunning, batch.ReplicaPending,
			batch.ReplicaCreating, batch.ReplicaUnknown, batch.ReplicaDeleted, ""}
		policy, phase := policies[int(policyIndex)%len(policies)], phases[int(phaseIndex)%len(phases)]
		s := batch.ReplicaStatus{Phase: phase}
		retryable := false
		pod := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}}
		for i, code := range []int32{code0, code1, code2} {
			c := batch.ContainerStatus{Name: string(rune('a' + i))}
			if present&(1<<i) != 0 {
				c.ExitCode = ptr.To(code)
				retryable = retryable || slices.Contains(documentedRetryable, code)
				pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name,
					State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}})
			}
			s.Containers = append(s.Containers, c)
		}
		preset := exitCodePreset("worker")
		if failed := phase == batch.ReplicaFailed; failed && policy == batch.RestartExitCode &&
			wantsRestart(Group{Restart: policy}, s) != ruleMatches(&preset, ending{replicaType: "worker", pod: pod}) {
			t.Fatalf("exit codes %v (present %03b): the ExitCode policy and its preset rule disagree", []int32{code0, code1, code2}, present&7)
		}

		g := Group{Restart: policy}
		got := wantsRestart(g, s)
		failed := phase == batch.ReplicaFailed
		var want bool
		switch policy {
		case batch.RestartAlways:
			want = true
		case batch.RestartOnFailure:
			want = failed
		case batch.RestartExitCode:
			want = failed && retryable
			if got && !wantsRestart(Group{Restart: batch.RestartOnFailure}, s) {
				t.Fatalf("ExitCode restarts %+v, which OnFailure would not", s)
			}
		}
		if got != want {
			t.Fatalf("policy %q, phase %q, exit codes %v (present %03b): restart %v, want %v", policy, phase,
				[]int32{code0, code1, code2}, present&7, got, want)
		}

		if limit >= 0 {
			g.Limit = ptr.To(int32(limit))
		}
		plan := &Plan{}
		if backoffLimit >= 0 {
			plan.BackoffLimit = ptr.To(int32(backoffLimit))
		}
		left := restartsLeft(g, restarts, &restartBudget{limit: plan.BackoffLimit, spent: total})
		if left && (g.Limit != nil && restarts >= *g.Limit || plan.BackoffLimit != nil && total >= *plan.BackoffLimit) {
			t.Fatalf("restarts left with %d of limit %v and %d of backoffLimit %v", restarts, limit, total, backoffLimit)
		}
		if !left && (g.Limit == nil || restarts < *g.Limit) && (plan.BackoffLimit == nil || total < *plan.BackoffLimit) {
			t.Fatalf("no restart left with %d of limit %v and %d of backoffLimit %v", restarts, limit, total, backoffLimit)
		}

		d := restartBackoff(restarts)
		if restarts <= 0 && d != 0 || d < 0 || d > time.Minute || restarts < 1<<30 && restartBackoff(restarts+1) < d {
			t.Fatalf("backoff %v after %d restarts, %v after one more", d, restarts, restartBackoff(restarts+1))
		}
	})
}

// exitCodePreset is the rule the ExitCode restart policy is (docs/failures.md): a replica of
// the type that fails with 130 (SIGINT), 137 (SIGKILL), 138 or 143 (SIGTERM) in any
// container is restarted, other failures are not. wantsRestart carries it out; FuzzRestart
// holds the two the same.
func exitCodePreset(replicaType string) batch.FailurePolicyRule {
	codes := make([]int32, 0, len(retryableExitCodes))
	for c := range retryableExitCodes {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	return batch.FailurePolicyRule{Name: "exit-code", Action: batch.RestartReplica, ReplicaTypes: []string{replicaType},
		OnExitCodes: &batch.ExitCodesRequirement{Operator: batch.ExitCodesIn, Values: codes}}
}
