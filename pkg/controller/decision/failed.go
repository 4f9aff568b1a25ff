package decision

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// A job that cannot run as written fails at once, outside Decide: its plan cannot be made, an
// admitter calls its spec invalid (InvalidSpec), or a child's name is held by another object
// (NameTaken). The engine finds these on its way to a decision, or while carrying one out,
// and carries out the failure as it does any decision.

// Failed is the decision that fails such a job: its status says Failed, with the reason and
// message given; its unfinished replicas stop, as at any failure, and its replicas' Services
// go (children: the job's, with those the failing sync made before it found out).
func Failed(job Job, children Children, reason, message string, now time.Time) *Decision {
	return &Decision{
		Status:        FailedStatus(job, reason, message, now),
		Outcome:       &Outcome{Reason: reason, Message: message},
		DeletePods:    cleanUp(&Plan{CleanUp: batch.CleanUpUnfinished}, children.Pods, nil),
		DeleteObjects: replicaServices(children.Objects),
	}
}

// FailedStatus is the status of a job that cannot run as written: it fails at once, with
// the reason and message given, and nothing is created.
func FailedStatus(job Job, reason, message string, now time.Time) *batch.JobStatus {
	old := job.JobStatus()
	s := &batch.JobStatus{ObservedGeneration: job.GetGeneration(), Phase: batch.JobFailed, Tasks: old.Tasks, Aggregate: old.Aggregate,
		StartTime: old.StartTime, Restarts: old.Restarts}
	s.Conditions = append([]batch.JobCondition(nil), old.Conditions...)
	set := func(t batch.JobConditionType, status bool, r, m string) {
		setCondition(&s.Conditions, t, status, r, m, now)
	}
	if !hasCondition(old, batch.JobConditionInitialized) {
		set(batch.JobConditionInitialized, false, reason, message)
	}
	endWith(set, &Outcome{Reason: reason, Message: message})
	if !hasCondition(old, batch.JobConditionReplicaFailure) {
		set(batch.JobConditionReplicaFailure, false, "-", msgNoFailure)
	}
	if !hasCondition(old, batch.JobConditionPaused) {
		set(batch.JobConditionPaused, false, "-", "The job is not paused.")
	}
	sortConditions(s.Conditions)
	s.CompletionTime = CompletionTime(old, s)
	return s
}

// replicaServices are the live Services among objects that belong to a replica.
func replicaServices(objects []metav1.Object) []metav1.Object {
	var out []metav1.Object
	for _, o := range objects {
		if s, ok := o.(*corev1.Service); ok && s.DeletionTimestamp == nil && s.Labels[batch.LabelReplicaType] != "" {
			out = append(out, o)
		}
	}
	return out
}
