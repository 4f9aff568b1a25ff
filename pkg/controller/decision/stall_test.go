package decision

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// Stalls (spec.progressDeadlineSeconds).

// reported is a running job whose replicas last reported progress that long ago, by the UIDs
// given (w0, w1 are the running pods').
func reported(ago map[string]time.Duration, uids map[string]types.UID) batch.JobStatus {
	s := running("0", "1")
	s.Progress = &batch.JobProgress{}
	for name, d := range ago {
		uid := uids[name]
		if uid == "" {
			uid = types.UID("w" + strings.TrimPrefix(name, "job-worker-"))
		}
		s.Progress.Replicas = append(s.Progress.Replicas, batch.ReplicaProgress{UID: uid, ProgressPercentage: ptr.To[int32](45), ReportTime: metav1.NewTime(now.Add(-d))})
	}
	return s
}

func stallPlan(policy batch.RestartPolicy) *Plan {
	return &Plan{Groups: []Group{workers(2, policy, nil)}, Judge: allSucceed, ProgressDeadline: time.Minute}
}

func runningPods() Children {
	return Children{Pods: []*corev1.Pod{pod("job-worker-0", "w0", corev1.PodRunning, 0), pod("job-worker-1", "w1", corev1.PodRunning, 0)}}
}

func TestStalledJobRestartsWhole(t *testing.T) {
	d := mustDecide(t, testJob(reported(map[string]time.Duration{"job-worker-0": 10 * time.Second, "job-worker-1": 2 * time.Minute}, nil)), stallPlan(batch.RestartOnFailure), runningPods(), nil, now)
	if d.Stalled == "" || !strings.Contains(d.Stalled, "job-worker-1") || strings.Contains(d.Stalled, "job-worker-0") || !strings.Contains(d.Stalled, "job-worker-1 last reported 45%") {
		t.Fatalf("stalled %q: want worker-1 named, with its last step", d.Stalled)
	}
	if c := d.Status.Condition(batch.JobConditionStalled); c.Status != corev1.ConditionTrue || c.Reason != ReasonProgressDeadlineExceeded {
		t.Errorf("Stalled condition %+v", c)
	}
	if d.Outcome != nil || d.Status.Restarts != 1 || len(d.DeletePods) != 2 || d.JobRestartBy != "spec.progressDeadlineSeconds" || d.JobRestartCause != RestartCauseStall {
		t.Fatalf("outcome %+v, restarts %d, deleted %v, by %q: want the whole job restarted once", d.Outcome, d.Status.Restarts, names(d.DeletePods), d.JobRestartBy)
	}
	if r := replicaOf(d.Status, "job-worker-1"); r.LastTermination == nil || r.LastTermination.Reason != string(batch.ReasonStalled) || r.RestartCount != 1 {
		t.Errorf("worker-1 %+v: want its pod ended Stalled, one restart", r)
	}
	// Its new pods have not reported: no stall, and the condition says so.
	after := mustDecide(t, testJob(*d.Status), stallPlan(batch.RestartOnFailure), Children{}, nil, now)
	if after.Stalled != "" || after.Status.Condition(batch.JobConditionStalled).Status != corev1.ConditionFalse || len(after.CreatePods) != 2 {
		t.Errorf("after the restart: stalled %q, condition %+v, created %v", after.Stalled, after.Status.Condition(batch.JobConditionStalled), names(after.CreatePods))
	}
}

func TestStallWithoutRestartsFails(t *testing.T) {
	d := mustDecide(t, testJob(reported(map[string]time.Duration{"job-worker-1": 2 * time.Minute}, nil)), stallPlan(batch.RestartNever), runningPods(), nil, now)
	if d.Outcome == nil || d.Outcome.Succeeded || d.Outcome.Reason != string(batch.ReasonStalled) {
		t.Fatalf("outcome %+v: want the job failed, Stalled", d.Outcome)
	}
}

func TestStallRule(t *testing.T) {
	plan := stallPlan(batch.RestartOnFailure)
	plan.FailurePolicy = &batch.FailurePolicy{Rules: []batch.FailurePolicyRule{{Name: "hung", Action: batch.FailJob, OnReasons: []batch.FailureReason{batch.ReasonStalled}}}}
	d := mustDecide(t, testJob(reported(map[string]time.Duration{"job-worker-1": 2 * time.Minute}, nil)), plan, runningPods(), nil, now)
	if d.Outcome == nil || d.Outcome.Reason != ReasonFailurePolicy || !strings.Contains(d.Outcome.Message, `("hung")`) {
		t.Fatalf("outcome %+v: want the job failed by rule hung", d.Outcome)
	}
	plan.FailurePolicy.Rules[0].Action = batch.RestartReplica
	d = mustDecide(t, testJob(reported(map[string]time.Duration{"job-worker-1": 2 * time.Minute}, nil)), plan, runningPods(), nil, now)
	if d.Outcome != nil || strings.Join(d.Restarted, ",") != "job-worker-1" || strings.Join(names(d.DeletePods), ",") != "job-worker-1" {
		t.Errorf("RestartReplica: restarted %v, deleted %v; want worker-1 alone", d.Restarted, names(d.DeletePods))
	}
}

func TestNoStall(t *testing.T) {
	plan := stallPlan(batch.RestartOnFailure)
	for _, tc := range []struct {
		name   string
		status batch.JobStatus
		want   time.Duration // the sync asked for
	}{
		{"within the deadline", reported(map[string]time.Duration{"job-worker-1": 20 * time.Second}, nil), 40 * time.Second},
		{"never reported", running("0", "1"), 0},
		{"reported by an earlier pod", reported(map[string]time.Duration{"job-worker-1": time.Hour}, map[string]types.UID{"job-worker-1": "old"}), 0},
	} {
		d := mustDecide(t, testJob(tc.status), plan, runningPods(), nil, now)
		if d.Stalled != "" || d.Outcome != nil || len(d.DeletePods) != 0 || d.RequeueAfter != tc.want {
			t.Errorf("%s: stalled %q, outcome %+v, deleted %v, requeue %s; want no stall, a sync in %s", tc.name, d.Stalled, d.Outcome, names(d.DeletePods), d.RequeueAfter, tc.want)
		}
	}
	// A replica that ended stopped reporting for good reason.
	done := runningPods()
	done.Pods[1] = pod("job-worker-1", "w1", corev1.PodSucceeded, 0)
	if d := mustDecide(t, testJob(reported(map[string]time.Duration{"job-worker-1": time.Hour}, nil)), plan, done, nil, now); d.Stalled != "" {
		t.Errorf("a replica that succeeded: stalled %q", d.Stalled)
	}
}

// A stalled replica whose rule would restart it, with no restart left, fails the job rather
// than holding it; the job that ended on its stall keeps the Stalled condition.
func TestStallWithNoRestartLeft(t *testing.T) {
	plan := stallPlan(batch.RestartOnFailure)
	plan.BackoffLimit = ptr.To[int32](0)
	plan.FailurePolicy = &batch.FailurePolicy{Rules: []batch.FailurePolicyRule{{Name: "hung", Action: batch.RestartJob, OnReasons: []batch.FailureReason{batch.ReasonStalled}}}}
	d := mustDecide(t, testJob(reported(map[string]time.Duration{"job-worker-1": 2 * time.Minute}, nil)), plan, runningPods(), nil, now)
	if d.Outcome == nil || d.Outcome.Succeeded || !strings.Contains(d.Outcome.Message, "no restart is left") {
		t.Fatalf("outcome %+v: want the job failed, no restart left", d.Outcome)
	}
	after := mustDecide(t, testJob(*d.Status), plan, runningPods(), nil, now)
	if c := after.Status.Condition(batch.JobConditionStalled); c.Status != corev1.ConditionTrue {
		t.Errorf("the failed job's Stalled condition %+v: want it kept", c)
	}
}

// The decision after a stall's restart may still see the old pods running (the cache has yet
// to show their deletion): they are being restarted, not stalled again, and the job goes on.
func TestStalledPodsStillSeenRunning(t *testing.T) {
	plan := stallPlan(batch.RestartOnFailure)
	plan.Groups[0].Limit = ptr.To[int32](1)
	status := reported(map[string]time.Duration{"job-worker-0": 61 * time.Second, "job-worker-1": 59 * time.Second}, nil)
	d := mustDecide(t, testJob(status), plan, runningPods(), nil, now)
	if d.Status.Restarts != 1 || len(d.DeletePods) != 2 {
		t.Fatalf("restarts %d, deleted %v: want the whole job restarted", d.Status.Restarts, names(d.DeletePods))
	}
	again := mustDecide(t, testJob(*d.Status), plan, runningPods(), nil, now.Add(time.Second))
	if again.Outcome != nil || again.Stalled != "" || again.Status.Restarts != 1 || len(again.DeletePods) != 2 {
		t.Errorf("outcome %+v, stalled %q, restarts %d, deleted %v: want the restart finished, nothing counted again", again.Outcome, again.Stalled, again.Status.Restarts, names(again.DeletePods))
	}
	for _, r := range again.Status.Tasks[0].Replicas {
		if r.Phase != batch.ReplicaDeleted {
			t.Errorf("%s: %s, want Deleted until its pod is gone", r.Name, r.Phase)
		}
	}
}

// A replica is called stalled only once its silence is longer than the deadline and the lag
// of the status behind its reports: a report taken and not yet written is no silence.
func TestStallWaitsForTheReportLag(t *testing.T) {
	plan := stallPlan(batch.RestartOnFailure)
	plan.ProgressLag = 6 * time.Second
	job := testJob(reported(map[string]time.Duration{"job-worker-0": time.Minute + 5*time.Second, "job-worker-1": time.Minute + 7*time.Second}, nil))
	d := mustDecide(t, job, plan, runningPods(), nil, now)
	if !strings.Contains(d.Stalled, "job-worker-1") || strings.Contains(d.Stalled, "job-worker-0") {
		t.Fatalf("stalled %q: want worker-1 alone, silent past the deadline and the lag", d.Stalled)
	}
	job = testJob(reported(map[string]time.Duration{"job-worker-0": time.Minute + 5*time.Second}, nil))
	d = mustDecide(t, job, plan, runningPods(), nil, now)
	if d.Stalled != "" || d.RequeueAfter != time.Second {
		t.Errorf("stalled %q, requeue after %s: want none yet, and a sync in 1s", d.Stalled, d.RequeueAfter)
	}
}
