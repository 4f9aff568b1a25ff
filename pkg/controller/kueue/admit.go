package kueue

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	kueue "github.com/t9k-jobs/t9k-jobs/pkg/apis/kueue/v1beta2"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

// DefaultMaxPodSets is the most pod sets a Workload may have (the replica types of one job)
// in the Kueue version the project is tested with, v0.19: 8 before it.
const DefaultMaxPodSets = 18

// note is what Admit leaves for Decided: the job's Workload (nil: none yet) and Kueue's
// verdict (nil: the job has ended, and Kueue is told only that).
type note struct {
	wl    *kueue.Workload
	state *state
	// adopt is a prebuilt Workload to make the job's (prebuilt.go).
	adopt *kueue.Workload
	// grown is the slice the job asks for to grow its elastic type (nil: none).
	grown *growth
}

// Admit puts a job that asks for a queue in it: its verdict is Kueue's, and the plan gets the
// Workload among its objects (none while the job is paused, once its pods are gone: its quota
// is handed back). What the job waits for, events announce: its Workload's, and a
// WorkloadPriorityClass's creation (Watch).
func (a *Admitter) Admit(job engine.Job, plan *engine.Plan, children engine.Children) (*engine.Verdict, error) {
	q := a.request(job, plan)
	if q == nil {
		return nil, nil
	}
	if max := a.maxPodSets(); len(plan.Groups) > max {
		return nil, &engine.InvalidSpecError{Message: fmt.Sprintf("The cluster's Kueue admits jobs of at most %d replica types (%s), and this job has %d: run it outside Kueue's queues, or with fewer replica types.",
			max, kueueVersionOfLimit(max), len(plan.Groups))}
	}
	if name := prebuiltWorkload(job); name != "" {
		return a.admitPrebuilt(job, plan, q, name, workloadNamed(children.Objects, name))
	}
	workloads := chainOf(job, children.Objects)
	wl := workloads.current
	if job.JobStatus().Finished() {
		// An ended job keeps its Workload as it is (Finished), whatever its queue, flavors or
		// priority class became since.
		if wl != nil {
			plan.Objects = append(plan.Objects, engine.PlannedChild{Kind: WorkloadKind, Name: wl.Name, Keep: true})
		}
		return &engine.Verdict{Admitted: true, Note: &note{wl: wl}}, nil
	}
	s, err := a.state(q, wl)
	if err != nil {
		return nil, err
	}
	if why := rejectedForManagedBy(job, wl); why != "" {
		return nil, notForMultiKueue(job, q, why)
	}
	if admittedWithoutMultiKueue(job, wl) {
		return nil, notDispatched(q)
	}
	if !a.installed() {
		return verdict(wl, s, plan.Elastic), nil
	}
	// A Workload goes only once the job's pods have: deleting it gives its quota back, which
	// Kueue may then admit another job onto.
	keep := engine.PlannedChild{Kind: WorkloadKind, Name: workloads.name(), Keep: true}
	running := engine.AnyRunning(children.Pods)
	if plan.Paused {
		if wl != nil && running {
			plan.Objects = append(plan.Objects, keep)
		}
		return verdict(wl, s, plan.Elastic), nil
	}
	name := workloads.name()
	if wl != nil && len(children.Pods) == 0 && handedBackSlice(wl) {
		// An evicted slice asks for the size the job had grown to, with no minimum: the job
		// asks anew with a Workload of its own, down to its minimum (slices.go).
		wl, name = nil, workloads.nextName()
		s = &state{reason: reasonQueued, message: fmt.Sprintf("Waiting for Kueue to admit the job from LocalQueue %q.", q.localQueue)}
	}
	obj, err := a.workloadObject(job, plan, q, wl, name, nil)
	var wait *waitError
	switch {
	case errors.As(err, &wait):
		return verdict(wl, &state{reason: wait.reason, message: wait.message}, plan.Elastic), nil
	case err != nil:
		return nil, err
	}
	if wl != nil {
		// The job changed what its Workload holds (its LocalQueue, replicas or templates):
		// Kueue cannot change an admitted Workload, so the job stops, and its Workload is made
		// again once its pods are gone.
		built, err := engine.BuildChild(job, obj, wl)
		if err != nil {
			return nil, err
		}
		if engine.BuiltOtherwise(wl, built) {
			s = &state{reason: reasonQueued, message: "The job's " + workloadChange(wl, built.(*kueue.Workload)) +
				": it is queued anew, with a new Workload once its pods are gone."}
			if running {
				obj = keep
			}
		}
	}
	plan.Objects = append(plan.Objects, obj)
	if obj.Keep || !s.admitted {
		return verdict(wl, s, plan.Elastic), nil
	}
	grown, err := a.grow(job, plan, q, workloads)
	if err != nil {
		return nil, err
	}
	v := verdict(wl, s, plan.Elastic)
	v.Note.(*note).grown = grown
	return v, nil
}

// verdict is Kueue's state as the engine takes it. An admitted job's elastic type (nil: none)
// runs as many replicas as its Workload holds quota for (elasticHeld): what Kueue admitted
// of it (partial admission), less what a shrink handed back.
func verdict(wl *kueue.Workload, s *state, elastic *engine.Elastic) *engine.Verdict {
	var counts map[string]int32
	if n, ok := elasticHeld(wl, elastic); ok && s.admitted {
		counts = map[string]int32{elastic.Type: n}
	}
	return &engine.Verdict{Admitted: s.admitted, Reason: s.reason, Message: s.message, Note: &note{wl: wl, state: s}, Counts: counts,
		Pod: func(replicaType string, pod *corev1.Pod) {
			if ps, ok := s.podSets[podSetName(replicaType)]; ok {
				ps.applyTo(pod)
			}
		}}
}

// maxPodSets is the most pod sets the cluster's Workloads may have.
func (a *Admitter) maxPodSets() int {
	if a.config.MaxPodSets > 0 {
		return a.config.MaxPodSets
	}
	return DefaultMaxPodSets
}

// kueueVersionOfLimit says which Kueue versions have a pod-set limit.
func kueueVersionOfLimit(max int) string {
	switch max {
	case 8:
		return "Kueue before v0.19 takes 8 pod sets"
	case 18:
		return "Kueue v0.19 and later take 18 pod sets"
	}
	return fmt.Sprintf("its Workload API's limit is %d pod sets", max)
}
