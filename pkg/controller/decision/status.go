package decision

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// Condition messages the docs show.
const (
	msgInitialized = "The job has been initialized successfully."
	msgRunning     = "All pods are running normally."
	msgNoFailure   = "No replica has failed."
	// MsgSucceeded is also what an admitter tells its system of a job that succeeded.
	MsgSucceeded = "The job has finished successfully."
	msgDebug     = "The job is running in debug mode: replicas run their debug command."
)

// jobState is what a decision found of a job, beyond its replicas' statuses, that its phase
// and conditions say.
type jobState struct {
	// outcome: the job ends with this decision (nil: it does not).
	outcome *Outcome
	// paused: a pause holds the job.
	paused bool
	// unadmitted: the admitters' verdict on a job they have not admitted (nil: admitted, or
	// no admitter applies).
	unadmitted *Verdict
	// resumed: the job was paused and is no longer.
	resumed bool
	// failed describes the failed replicas, for the ReplicaFailure condition.
	failed []string
	// pods are the job's pods as the decision saw them.
	pods []*corev1.Pod
	// waiting says which replicas wait for others to be ready before they are made
	// (Decision.Waiting); waits, which replicas' pods wait, and why (Decision.Waits).
	waiting string
	waits   []ReplicaWait
	// debugHint is the plan's hint for a job in debug mode ("": none).
	debugHint string
	// fewer says that the elastic type runs fewer replicas than asked for, as its admission
	// holds ("": it runs them all).
	fewer string
}

// setPhaseAndConditions fills in phase and conditions. Every condition type is reported once;
// a condition's lastTransitionTime moves only when its status flips.
//
// A job its admitters have not admitted (st.unadmitted set: their verdict) is Pending, and
// its Running condition says what it waits for; so does Initialized until the job has had
// its replicas.
//
// Replicas whose pods wait (st.waits: unschedulable, a container that cannot start) are
// named in the Running condition, with the reason of the first as its reason, whether the
// job has yet to run or runs on without them.
func setPhaseAndConditions(s, old *batch.JobStatus, st jobState, now time.Time) {
	s.Conditions = append([]batch.JobCondition(nil), old.Conditions...)
	set := func(t batch.JobConditionType, status bool, reason, message string) {
		setCondition(&s.Conditions, t, status, reason, message, now)
	}
	created, total, running := counts(s.Tasks)
	initialized := old.ConditionTrue(batch.JobConditionInitialized) || (total > 0 && created == total)
	switch {
	case initialized:
		set(batch.JobConditionInitialized, true, "-", msgInitialized)
	case st.unadmitted != nil:
		set(batch.JobConditionInitialized, false, st.unadmitted.Reason, st.unadmitted.Message)
	case st.waiting != "":
		set(batch.JobConditionInitialized, false, "Waiting", st.waiting)
	default:
		set(batch.JobConditionInitialized, false, "Creating", fmt.Sprintf("%d of %d replicas created.", created, total))
	}

	if st.outcome != nil {
		endWith(set, st.outcome)
	}
	switch {
	case len(st.failed) > 0:
		set(batch.JobConditionReplicaFailure, true, "ReplicaFailed", "Failed replicas: "+Listed(st.failed, 10)+".")
	case len(st.pods) == 0 && !old.Finished():
		// A job that waits with no pod (queued, held, not yet created) has no news of pods.
		set(batch.JobConditionReplicaFailure, false, "-", msgNoFailure)
	default:
		set(batch.JobConditionReplicaFailure, false, "-", msgRunning)
	}

	// An ending, decided now or in an earlier sync, is final: its conditions stay as they are.
	switch {
	case s.Finished():
		s.Phase = batch.JobFailed
		if s.ConditionTrue(batch.JobConditionCompleted) {
			s.Phase = batch.JobSucceeded
		}
		if !hasCondition(s, batch.JobConditionPaused) {
			set(batch.JobConditionPaused, false, "-", "The job is not paused.")
		}
	case st.paused:
		s.Phase = batch.JobPaused
		// Every pod a paused job still has is being deleted: its program may run until its
		// grace period ends, so the replicas are deleted only once their pods are gone.
		left := len(st.pods)
		set(batch.JobConditionRunning, false, "Paused", "The job is paused.")
		if left == 0 {
			set(batch.JobConditionPaused, true, "Paused", "The job is paused: all replicas are deleted.")
		} else {
			set(batch.JobConditionPaused, true, "Pausing", fmt.Sprintf("The job is paused: %d replicas are being deleted.", left))
		}
		set(batch.JobConditionCompleted, false, "-", "The job has not finished.")
		set(batch.JobConditionFailed, false, "-", "The job has not failed.")
	case st.unadmitted != nil:
		s.Phase = batch.JobPending
		message := st.unadmitted.Message
		if left := len(st.pods); left > 0 {
			message += fmt.Sprintf(" %d replicas are being deleted.", left)
		}
		set(batch.JobConditionRunning, false, st.unadmitted.Reason, message)
		set(batch.JobConditionCompleted, false, "-", "The job has not finished.")
		set(batch.JobConditionFailed, false, "-", "The job has not failed.")
		setResumed(set, st.resumed)
	default:
		resuming := old.Phase == batch.JobPaused || old.Phase == batch.JobResuming
		switch {
		case running == total && total > 0:
			s.Phase = batch.JobRunning
		case resuming:
			s.Phase = batch.JobResuming
		case old.Phase == batch.JobRunning:
			s.Phase = batch.JobRunning // a replica restarting does not take a running job back
		default:
			s.Phase = batch.JobPending
		}
		switch {
		case len(st.waits) > 0:
			set(batch.JobConditionRunning, s.Phase == batch.JobRunning, st.waits[0].Reason, runningWith(running, total, st.waits))
		case s.Phase == batch.JobRunning:
			set(batch.JobConditionRunning, true, "-", runningMessage(st.pods, st.debugHint)+st.fewer)
		default:
			set(batch.JobConditionRunning, false, string(s.Phase), runningWith(running, total, nil))
		}
		set(batch.JobConditionCompleted, false, "-", "The job has not finished.")
		set(batch.JobConditionFailed, false, "-", "The job has not failed.")
		setResumed(set, st.resumed)
	}
	sortConditions(s.Conditions)
}

// setResumed sets the Paused condition of a job that is not paused: resumed, it says so (and
// its replicas are made with their resume settings).
func setResumed(set func(batch.JobConditionType, bool, string, string), resumed bool) {
	if resumed {
		set(batch.JobConditionPaused, false, "Resumed", "The job has been resumed.")
	} else {
		set(batch.JobConditionPaused, false, "-", "The job is not paused.")
	}
}

// Listed joins names for a message, the first most of a long list: a condition message is
// part of the status, which must stay small for the largest job, and an event is read by a
// person.
func Listed(names []string, most int) string {
	if len(names) <= most {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:most], ", "), len(names)-most)
}

// runningMessage describes what a running job's pods run: status tells what the pods do,
// whatever the spec asks for now. When they all run their debug command, the plan's hint
// follows.
func runningMessage(pods []*corev1.Pod, debugHint string) string {
	debug, total := 0, 0
	for _, p := range Live(pods) {
		total++
		if p.Annotations[batch.AnnotationRunMode] == batch.RunModeDebug {
			debug++
		}
	}
	switch {
	case debug == 0:
		return msgRunning
	case debug == total && debugHint != "":
		return msgDebug + " " + debugHint
	case debug == total:
		return msgDebug
	default:
		return fmt.Sprintf("The job is running; %d of %d replicas run their debug command, the others their own.", debug, total)
	}
}

// endWith sets the conditions of an ended job as the docs show them: on failure Completed is
// False with the failure's reason and message; on success Running and Failed are False with
// the success's.
func endWith(set func(batch.JobConditionType, bool, string, string), o *Outcome) {
	reason := o.Reason
	if o.Succeeded {
		if reason == "" {
			reason = "Succeeded"
		}
		set(batch.JobConditionCompleted, true, reason, o.Message)
		set(batch.JobConditionFailed, false, reason, o.Message)
		set(batch.JobConditionRunning, false, reason, o.Message)
		return
	}
	if reason == "" {
		reason = "Failed"
	}
	set(batch.JobConditionFailed, true, reason, o.Message)
	set(batch.JobConditionCompleted, false, reason, o.Message)
	set(batch.JobConditionRunning, false, reason, o.Message)
}

func counts(tasks []batch.TaskStatus) (created, total, running int) {
	for _, t := range tasks {
		for _, r := range t.Replicas {
			total++
			if r.UID != "" {
				created++
			}
			if r.Phase == batch.ReplicaRunning || r.Phase == batch.ReplicaSucceeded {
				running++
			}
		}
	}
	return created, total, running
}

func aggregate(tasks []batch.TaskStatus) batch.Aggregate {
	var a batch.Aggregate
	for _, t := range tasks {
		for _, r := range t.Replicas {
			switch r.Phase {
			case batch.ReplicaCreating:
				a.Creating++
			case batch.ReplicaPending:
				a.Pending++
			case batch.ReplicaRunning:
				a.Running++
			case batch.ReplicaSucceeded:
				a.Succeeded++
			case batch.ReplicaFailed:
				a.Failed++
			case batch.ReplicaUnknown:
				a.Unknown++
			case batch.ReplicaDeleted:
				a.Deleted++
			}
		}
	}
	return a
}

func setCondition(conds *[]batch.JobCondition, t batch.JobConditionType, status bool, reason, message string, now time.Time) {
	s := corev1.ConditionFalse
	if status {
		s = corev1.ConditionTrue
	}
	for i := range *conds {
		c := &(*conds)[i]
		if c.Type != t {
			continue
		}
		if c.Status != s {
			c.Status, c.LastTransitionTime = s, metav1.NewTime(now)
		}
		c.Reason, c.Message = reason, message
		return
	}
	*conds = append(*conds, batch.JobCondition{Type: t, Status: s, LastTransitionTime: metav1.NewTime(now), Reason: reason, Message: message})
}

var conditionOrder = map[batch.JobConditionType]int{
	batch.JobConditionInitialized: 0, batch.JobConditionRunning: 1, batch.JobConditionReplicaFailure: 2,
	batch.JobConditionCompleted: 3, batch.JobConditionFailed: 4, batch.JobConditionPaused: 5,
	batch.JobConditionStalled: 6, batch.JobConditionInPlaceUnavailable: 7,
}

func sortConditions(conds []batch.JobCondition) {
	for i := 1; i < len(conds); i++ {
		for j := i; j > 0 && conditionOrder[conds[j].Type] < conditionOrder[conds[j-1].Type]; j-- {
			conds[j], conds[j-1] = conds[j-1], conds[j]
		}
	}
}

func hasCondition(s *batch.JobStatus, t batch.JobConditionType) bool {
	return s.Condition(t).Type == t
}

// wasPaused reports whether a job is paused or has been paused and resumed: resume settings
// apply from then on.
func wasPaused(s *batch.JobStatus) bool {
	c := s.Condition(batch.JobConditionPaused)
	return c.Status == corev1.ConditionTrue || c.Reason == "Resumed"
}

// EndMessage is what an ended job's Failed or Completed condition says ("" before the end).
func EndMessage(s *batch.JobStatus) string {
	for _, t := range []batch.JobConditionType{batch.JobConditionFailed, batch.JobConditionCompleted} {
		if c := s.Condition(t); c.Status == corev1.ConditionTrue {
			return c.Message
		}
	}
	return ""
}

// CompletionTime is when the job finished: kept once set, else the time its Completed or
// Failed condition turned True (now, for a job that ends with this decision; earlier, for
// one that ended before the status had the field).
func CompletionTime(old, s *batch.JobStatus) *metav1.Time {
	switch {
	case old.CompletionTime != nil:
		return old.CompletionTime
	case !s.Finished():
		return nil
	}
	for _, t := range []batch.JobConditionType{batch.JobConditionCompleted, batch.JobConditionFailed} {
		if c := s.Condition(t); c.Status == corev1.ConditionTrue {
			at := c.LastTransitionTime
			return &at
		}
	}
	return nil
}
