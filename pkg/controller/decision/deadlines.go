package decision

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// Deadlines (runPolicy.activeDeadlineSeconds, spec.startupDeadlineSeconds; docs/lifecycle.md):
// a job that runs longer than its plan allows fails, and so does one whose replicas are not
// all running in time after they were created. Both count from status.startTime, again at
// each resume or readmission; debug mode has neither.

// deadline ends a job that has run longer than its plan allows, and otherwise says how long
// it has left, for a sync then (0: no deadline).
func (x *decider) deadline(start *metav1.Time) (*Outcome, time.Duration) {
	if x.plan.Deadline <= 0 || start == nil {
		return nil, 0
	}
	left := start.Add(x.plan.Deadline).Sub(x.now)
	if left > 0 {
		return nil, left
	}
	return &Outcome{Reason: "DeadlineExceeded", Message: fmt.Sprintf("The job ran longer than runPolicy.activeDeadlineSeconds (%d s) allows.", int64(x.plan.Deadline/time.Second))}, 0
}

// startupDeadline ends a job whose replicas are not all running the plan's StartupDeadline
// after status.startTime (their creation, again at each resume or readmission), and
// otherwise says how long they have left, for a sync then (0: no deadline runs). A job that has been Running since is past its
// start: a replica restarted later does not take it back. The message names the replicas
// still waiting and says why, as the Running condition does.
func (x *decider) startupDeadline(job string, start *metav1.Time, old *batch.JobStatus, all []*replica) (*Outcome, time.Duration) {
	if x.plan.StartupDeadline <= 0 || start == nil || old.Phase == batch.JobRunning {
		return nil, 0
	}
	var waiting []string
	for _, r := range all {
		switch r.status.Phase {
		case batch.ReplicaRunning, batch.ReplicaSucceeded:
			continue
		}
		state := strings.ToLower(string(r.status.Phase))
		switch {
		case r.view.Held:
			state = "held until every " + strings.Join(r.group.After, " and ") + " is ready"
		case state == "":
			state = "not created"
		}
		waiting = append(waiting, strings.TrimPrefix(r.status.Name, job+"-")+" "+state)
	}
	if len(waiting) == 0 {
		return nil, 0
	}
	if left := start.Add(x.plan.StartupDeadline).Sub(x.now); left > 0 {
		return nil, left
	}
	message := fmt.Sprintf("The job's replicas were not all running %d s after they were created (spec.startupDeadlineSeconds): %s.",
		int64(x.plan.StartupDeadline/time.Second), Listed(waiting, waitNames))
	if waits := waitsOf(job, all); len(waits) > 0 {
		message += " Why: " + waitMessage(waits) + "."
	}
	return &Outcome{Reason: ReasonStartupDeadlineExceeded, Message: message}, 0
}

// ReasonStartupDeadlineExceeded is the reason of a job that failed its start deadline.
const ReasonStartupDeadlineExceeded = "StartupDeadlineExceeded"
