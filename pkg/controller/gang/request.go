package gang

import (
	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

// Reasons of a job's condition and events when it asks for gang scheduling.
const (
	reasonNotServed               = "GangSchedulingNotServed"
	reasonTopologyNotServed       = "GangTopologyNotServed"
	reasonResourceClaimsNotServed = "GangResourceClaimsNotServed"
	reasonIgnored                 = "GangSchedulerFieldsIgnored"
	reasonUnschedulable           = "GangUnschedulable"
	reasonRegrouping              = "GangChanging"
	reasonGangChangePending       = "GangChangePending"
)

// request is how a job asked to start whole.
type request struct {
	// queue and priority are spec.scheduler.t9kScheduler's when the job asked through it
	// (ForT9kScheduler): they mean nothing to kube-scheduler, and an event says so.
	fromT9kScheduler bool
	queue            string
	priority         int32
	// scheduling is the job's spec.scheduling (nil: it asked by the annotation or the flag
	// alone, for a gang of the default minCount).
	scheduling *batch.SchedulingConfiguration
}

// request returns how the job asks for a PodGroup, or nil: spec.scheduling, the annotation,
// or, with ForT9kScheduler, spec.scheduler.t9kScheduler. With ForT9kScheduler the plan's T9k
// Scheduler settings become the request, and the pods keep the default scheduler (the one
// that runs the GangScheduling plugin). A job that asks for both T9k Scheduler and a
// PodGroup, without ForT9kScheduler, cannot have both: its pods would go to a scheduler that
// knows nothing of PodGroups.
func (a *Admitter) request(job engine.Job, plan *engine.Plan) (*request, error) {
	annotated := job.GetAnnotations()[AnnotationGang] == "true"
	scheduling := job.JobLifecycle().Scheduling
	s := plan.Scheduler
	switch {
	case s != nil && a.config.ForT9kScheduler:
		plan.Scheduler = nil
		return &request{fromT9kScheduler: true, queue: s.Queue, priority: s.Priority, scheduling: scheduling}, nil
	case s != nil && scheduling != nil:
		return nil, &engine.InvalidSpecError{Message: "The job asks for T9k Scheduler (spec.scheduler.t9kScheduler) and for kube-scheduler's PodGroup (spec.scheduling): " +
			"a pod has one scheduler. Create the job again with one of them."}
	case s != nil && annotated:
		return nil, &engine.InvalidSpecError{Message: "The job asks for T9k Scheduler (spec.scheduler.t9kScheduler) and for Kubernetes' gang scheduling (annotation " +
			AnnotationGang + "): a pod has one scheduler. Remove one of them."}
	case annotated || scheduling != nil:
		return &request{scheduling: scheduling}, nil
	}
	return nil, nil
}
