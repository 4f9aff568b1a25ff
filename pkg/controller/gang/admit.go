package gang

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

// note is what Admit leaves for Decided.
type note struct {
	request *request
}

// Admit completes the plan of a job that asks to start whole: its PodGroup among the
// objects, and its members joined to it. The job is admitted at once, its pods made: the
// scheduler holds them until the whole gang fits. Only a cluster that does not serve the
// PodGroup API holds the job itself, with no pods: without a gang its pods would be placed
// one by one, which is what the job asked not to be.
func (a *Admitter) Admit(job engine.Job, plan *engine.Plan, children engine.Children) (*engine.Verdict, error) {
	r, err := a.request(job, plan)
	if err != nil || r == nil {
		return nil, err
	}
	n := &note{request: r}
	if engine.Finished(job.JobStatus()) {
		// An ended job keeps its PodGroup as it is: it goes with the job.
		if pg := podGroupOf(children.Objects); pg != nil && a.served() {
			plan.Objects = append(plan.Objects, engine.Object{Kind: PodGroupKind, Name: pg.Name, Keep: true})
		}
		return &engine.Verdict{Admitted: true, Note: n}, nil
	}
	if !a.served() {
		return &engine.Verdict{Reason: reasonNotServed, Note: n, Message: "The job asks to start whole (gang scheduling), but the API server does not serve " +
			"scheduling.k8s.io/v1beta1 PodGroups: turn on the GenericWorkload feature gate (API server, kube-scheduler, kube-controller-manager) " +
			"and --runtime-config=scheduling.k8s.io/v1beta1=true, then restart the controller; or remove the job's request."}, nil
	}
	types, minCount := members(plan)
	if minCount == 0 {
		return nil, nil
	}
	name := PodGroupName(job)
	plan.Objects = append(plan.Objects, podGroupObject(name, minCount, priorityClassOf(plan, types)))
	return &engine.Verdict{Admitted: true, Note: n, Pod: func(replicaType string, pod *corev1.Pod) {
		if types[replicaType] {
			pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &name}
		}
	}}, nil
}

// PodGroupName is the name of a job's PodGroup: its kind and name, since jobs of two kinds
// may share a name in a namespace.
func PodGroupName(job engine.Job) string {
	return strings.ToLower(job.GetObjectKind().GroupVersionKind().Kind) + "-" + job.GetName()
}

// members are the replica types that join the gang, and how many pods it has: every type
// whose pods are made at once. A type made only once others are Ready (a launcher, which
// waits for its workers: Group.After) stays outside: the gang would wait for a pod that is
// made only once the gang has run, and never start.
func members(plan *engine.Plan) (map[string]bool, int32) {
	types, count := map[string]bool{}, int32(0)
	for _, g := range plan.Groups {
		if len(g.After) > 0 || g.Replicas == 0 {
			continue
		}
		types[g.Type] = true
		count += g.Replicas
	}
	return types, count
}

// priorityClassOf is the PriorityClass the gang's pods ask for, when they all ask for the
// same one: the PodGroup's priority, which the API server resolves from it (it refuses a
// priority given as a number).
func priorityClassOf(plan *engine.Plan, types map[string]bool) string {
	class, first := "", true
	for _, g := range plan.Groups {
		if !types[g.Type] {
			continue
		}
		c := g.Template(0).Spec.PriorityClassName
		if !first && c != class {
			return ""
		}
		class, first = c, false
	}
	return class
}

// podGroupObject is the plan's PodGroup: a gang of minCount pods.
func podGroupObject(name string, minCount int32, priorityClass string) engine.Object {
	return engine.Object{Kind: PodGroupKind, Name: name, Build: func(metav1.Object) (metav1.Object, error) {
		return &schedulingv1beta1.PodGroup{Spec: schedulingv1beta1.PodGroupSpec{
			SchedulingPolicy:  schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}},
			PriorityClassName: priorityClass,
		}}, nil
	}}
}

// podGroupOf is the job's PodGroup among its children (nil: none).
func podGroupOf(objects []metav1.Object) *schedulingv1beta1.PodGroup {
	for _, o := range objects {
		if pg, ok := o.(*schedulingv1beta1.PodGroup); ok {
			return pg
		}
	}
	return nil
}

// unschedulable is the scheduler's word on a gang it could not place yet ("" once placed,
// or before it tried).
func unschedulable(pg *schedulingv1beta1.PodGroup) string {
	if pg == nil {
		return ""
	}
	for _, c := range pg.Status.Conditions {
		if c.Type == schedulingv1beta1.PodGroupInitiallyScheduled && c.Status == metav1.ConditionFalse {
			return fmt.Sprintf("%s: %s", c.Reason, c.Message)
		}
	}
	return ""
}
