package gang

import (
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

// Reasons of a job's condition and events when it asks for gang scheduling.
const (
	reasonNotServed     = "GangSchedulingNotServed"
	reasonIgnored       = "GangSchedulerFieldsIgnored"
	reasonUnschedulable = "GangUnschedulable"
)

// request is how a job asked to start whole.
type request struct {
	// queue and priority are spec.scheduler.t9kScheduler's when the job asked through it
	// (ForT9kScheduler): they mean nothing to kube-scheduler, and an event says so.
	fromT9kScheduler bool
	queue            string
	priority         int32
}

// request returns how the job asks for gang scheduling, or nil. With ForT9kScheduler the
// plan's T9k Scheduler settings become the request, and the pods keep the default scheduler
// (the one that runs the GangScheduling plugin). A job that asks for both T9k Scheduler and
// the gang annotation, without ForT9kScheduler, cannot have both: its pods would go to a
// scheduler that knows nothing of PodGroups.
func (a *Admitter) request(job engine.Job, plan *engine.Plan) (*request, error) {
	annotated := job.GetAnnotations()[AnnotationGang] == "true"
	s := plan.Scheduler
	switch {
	case s != nil && a.config.ForT9kScheduler:
		plan.Scheduler = nil
		return &request{fromT9kScheduler: true, queue: s.Queue, priority: s.Priority}, nil
	case s != nil && annotated:
		return nil, &engine.InvalidSpecError{Message: "The job asks for T9k Scheduler (spec.scheduler.t9kScheduler) and for Kubernetes' gang scheduling (annotation " +
			AnnotationGang + "): a pod has one scheduler. Remove one of them."}
	case annotated:
		return &request{}, nil
	}
	return nil, nil
}
