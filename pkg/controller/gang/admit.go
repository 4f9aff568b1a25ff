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

// Admit completes the plan of a job that asks for a PodGroup: the PodGroup among the
// objects, and its members joined to it (and to its shared claims). The job is admitted at
// once, its pods made: the scheduler holds them until the whole gang fits. Only a cluster
// that does not serve what the job asks for holds the job itself, with no pods and no
// PodGroup: without a gang its pods would be placed one by one, and without the topology
// constraint or the claims the API server would drop them from the PodGroup silently,
// neither of which is what the job asked for.
func (a *Admitter) Admit(job engine.Job, plan *engine.Plan, children engine.Children) (*engine.Verdict, error) {
	r, err := a.request(job, plan)
	if err != nil || r == nil {
		return nil, err
	}
	n := &note{request: r}
	if job.JobStatus().Finished() {
		// An ended job keeps its PodGroup as it is: it goes with the job.
		if pg := podGroupOf(children.Objects); pg != nil && a.served() {
			plan.Objects = append(plan.Objects, engine.PlannedChild{Kind: PodGroupKind, Name: pg.Name, Keep: true})
		}
		return &engine.Verdict{Admitted: true, Note: n}, nil
	}
	types, count := members(plan)
	if count == 0 {
		return nil, nil
	}
	spec, err := r.podGroupSpec(plan, types, count)
	if err != nil {
		return nil, err
	}
	if !a.served() {
		return &engine.Verdict{Reason: reasonNotServed, Note: n, Message: "The job asks to start whole (gang scheduling), but the API server does not serve " +
			"scheduling.k8s.io/v1beta1 PodGroups: turn on the GenericWorkload feature gate (API server, kube-scheduler, kube-controller-manager) " +
			"and --runtime-config=scheduling.k8s.io/v1beta1=true, then restart the controller; or remove the job's request."}, nil
	}
	if reason, message := a.notServed(&spec); reason != "" {
		return &engine.Verdict{Reason: reason, Message: message, Note: n}, nil
	}
	name := PodGroupName(job)
	plan.Objects = append(plan.Objects, podGroupObject(name, spec))
	return &engine.Verdict{Admitted: true, Note: n, Pod: func(replicaType string, pod *corev1.Pod) {
		if types[replicaType] {
			join(pod, name, spec.ResourceClaims)
		}
	}}, nil
}

// notServed says why the job waits when its PodGroup asks for a field the API server drops
// (Config.Features), "" when nothing is missing.
func (a *Admitter) notServed(spec *schedulingv1beta1.PodGroupSpec) (reason, message string) {
	var missing []string
	if spec.SchedulingConstraints != nil && !a.config.Features.Topology {
		reason = reasonTopologyNotServed
		missing = append(missing, "to keep its pods in one topology domain (spec.scheduling.schedulingConstraints), which needs the TopologyAwareWorkloadScheduling "+
			"feature gate (alpha in Kubernetes 1.37) on the API server and kube-scheduler")
	}
	if len(spec.ResourceClaims) > 0 && !a.config.Features.ResourceClaims {
		if reason == "" {
			reason = reasonResourceClaimsNotServed
		}
		missing = append(missing, "to share device claims (spec.scheduling.resourceClaims), which needs the DRAWorkloadResourceClaims "+
			"feature gate (beta, off by default, in Kubernetes 1.37) on the API server, kube-scheduler, kube-controller-manager and the kubelets")
	}
	if reason == "" {
		return "", ""
	}
	return reason, "The job asks " + strings.Join(missing, ", and ") + "; the API server drops that from PodGroups, so no PodGroup or pod is made. " +
		"Turn the feature gate on, then restart the controller (it looks once, at start); or create the job again without it."
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

// podGroupObject is the plan's PodGroup.
func podGroupObject(name string, spec schedulingv1beta1.PodGroupSpec) engine.PlannedChild {
	return engine.PlannedChild{Kind: PodGroupKind, Name: name, Build: func(metav1.Object) (metav1.Object, error) {
		return &schedulingv1beta1.PodGroup{Spec: *spec.DeepCopy()}, nil
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
