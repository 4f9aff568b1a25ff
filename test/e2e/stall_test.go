package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/progress"
)

// stallLag is how late, at most, the controller calls a silent replica stalled past its
// deadline: the progress writer's interval and the controllers' clocks apart (docs/failures.md,
// "Stalls"), and a sync.
const stallLag = 5*time.Second + time.Second + 3*time.Second

// TestStallFoundWithNoOtherEvent: on kwok's nodes nothing changes a running pod, so nothing but
// the clock can find a stall. Each job's two replicas report once through the endpoint, as a
// training script would, and fall silent: the job with restartPolicy Never fails Stalled, the
// one whose rule says FailJob on Stalled fails by that rule, and the one that may restart
// restarts whole, each within its deadline plus the lag a report may take to show.
func TestStallFoundWithNoOtherEvent(t *testing.T) {
	ns := namespace(t)
	type stallCase struct {
		name     string
		deadline int64
		policy   batch.RestartPolicy
		rules    []batch.FailurePolicyRule
		// done: what the job shows once the stall is found.
		done func(*batch.GenericJob) bool
	}
	cases := []stallCase{
		{name: "never", deadline: 4, policy: batch.RestartNever, done: func(j *batch.GenericJob) bool {
			return j.Status.Phase == batch.JobFailed && j.Status.Condition(batch.JobConditionFailed).Reason == string(batch.ReasonStalled)
		}},
		{name: "rule", deadline: 4, policy: batch.RestartOnFailure,
			rules: []batch.FailurePolicyRule{{Name: "hung", Action: batch.FailJob, OnReasons: []batch.FailureReason{batch.ReasonStalled}}},
			done: func(j *batch.GenericJob) bool {
				c := j.Status.Condition(batch.JobConditionFailed)
				return j.Status.Phase == batch.JobFailed && c.Reason == "FailurePolicy" && strings.Contains(c.Message, `("hung")`)
			}},
		{name: "restart", deadline: 6, policy: batch.RestartOnFailure, done: func(j *batch.GenericJob) bool {
			return j.Status.Restarts == 1 && !j.Status.Finished()
		}},
	}
	for _, c := range cases {
		r := replica("worker", "busybox")
		r.Replicas = ptr.To[int32](2)
		r.RestartPolicy = &batch.GenericRestartPolicy{Policy: c.policy}
		exits(&r, 0, "10m")
		job := &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: c.name}, Spec: batch.GenericJobSpec{ReplicaSpecs: []batch.GenericReplicaSpec{r}}}
		job.Spec.ProgressDeadlineSeconds = ptr.To(c.deadline)
		if c.rules != nil {
			job.Spec.FailurePolicy = &batch.FailurePolicy{Rules: c.rules}
		}
		createJob(t, ns, job)
	}
	reported := map[string]time.Time{}
	for _, c := range cases {
		waitJob(t, ns, c.name, "Running", inPhase(batch.JobRunning))
		for rank := range 2 {
			pod := getPod(t, ns, fmt.Sprintf("%s-worker-%d", c.name, rank))
			to := reporterOf(t, pod)
			token := mintToken(t, pod, progress.Audience(progress.JobRef{Resource: "genericjobs", Namespace: ns, Name: c.name}))
			if code, body := to.post(to.url, token, progressReport(10*(rank+1))); code != http.StatusOK {
				t.Fatalf("%s: %d %s", pod.Name, code, body)
			}
		}
		reported[c.name] = time.Now()
	}
	for _, c := range cases {
		job := waitJob(t, ns, c.name, "stalled", func(j *batch.GenericJob) bool {
			return c.done(j) || j.Status.Finished()
		})
		if !c.done(job) {
			t.Errorf("%s: phase %s, conditions %+v, restarts %d; events:\n%s", c.name, job.Status.Phase, job.Status.Conditions, job.Status.Restarts, eventsOf(t, ns, c.name))
			continue
		}
		deadline := time.Duration(c.deadline) * time.Second
		// The Stalled condition turned True when the stall was found (the restarted job's
		// turns False again once its replicas are replaced; its transition is then later).
		at := job.Status.Condition(batch.JobConditionStalled).LastTransitionTime.Time
		if c.policy != batch.RestartNever && c.rules == nil {
			at = restartEventTime(t, ns, c.name)
		}
		if after := at.Sub(reported[c.name]); after < deadline-time.Second || after > deadline+stallLag {
			t.Errorf("%s: stalled %s after its replicas' last reports, want between its %s deadline and %s more", c.name, after.Round(time.Millisecond), deadline, stallLag)
		}
		if told := jobEvent(t, ns, c.name, "Stalled"); !strings.Contains(told, "reported no progress") {
			t.Errorf("%s: the Stalled Warning says %q", c.name, told)
		}
	}
}

// restartEventTime is when the job's RestartingJob event was first told. Events are written
// after the status that a restart shows in, by a client of their own: it is waited for.
func restartEventTime(t *testing.T, ns, job string) time.Time {
	t.Helper()
	e, ok := jobEventOf(t, ns, job, "RestartingJob", "")
	if !ok {
		t.FailNow()
	}
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}
