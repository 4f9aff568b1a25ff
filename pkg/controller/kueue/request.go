package kueue

import (
	kueue "github.com/t9k-jobs/t9k-jobs/pkg/apis/kueue/v1beta2"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

// Reasons of the conditions of a job that waits for Kueue.
const (
	reasonQueued            = "Queued"
	reasonEvicted           = "Evicted"
	reasonPreempted         = "Preempted"
	reasonKueueNotInstalled = "KueueNotInstalled"
)

// request is the queue a job asks for.
type request struct {
	localQueue string
	// priorityClass names a WorkloadPriorityClass; otherwise priority, when set, is the
	// Workload's priority.
	priorityClass string
	priority      *int32
}

// request returns the queue the job asks for, or nil. With ForT9kScheduler the plan's T9k
// Scheduler settings become the request, and the pods keep the default scheduler; Kueue's
// labels on the job win over them.
func (a *Admitter) request(job engine.Job, plan *engine.Plan) *request {
	var q *request
	if s := plan.Scheduler; s != nil && a.config.ForT9kScheduler {
		plan.Scheduler = nil
		priority := s.Priority
		q = &request{localQueue: s.Queue, priority: &priority}
	}
	labels := job.GetLabels()
	if name := labels[kueue.LabelQueueName]; name != "" {
		if q == nil {
			q = &request{}
		}
		q.localQueue = name
	}
	if q != nil && labels[kueue.LabelPriorityClass] != "" {
		q.priorityClass, q.priority = labels[kueue.LabelPriorityClass], nil
	}
	return q
}
