package gang

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

// note is what Admit leaves for Decided.
type note struct {
	request *request
	// pending: the job asks for another gang than the running one's PodGroup, which keeps
	// its count until the gang's pods are all gone.
	pending *countChange
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
	want := podGroupObject(name, spec)
	if pg := podGroupOf(children.Objects); pg != nil {
		changed, err := changedGang(job, want, pg)
		if err != nil {
			return nil, err
		}
		switch {
		case pg.DeletionTimestamp != nil && placed(children.Pods, types):
			// Deleted by hand while its pods run: it goes once they are gone; the engine
			// makes it again then.
		case changed && placed(children.Pods, types):
			// The gang runs: it keeps the group it has until its pods are next all gone.
			n.pending = &countChange{from: minCountOf(pg.Spec), to: minCountOf(spec)}
			want = engine.PlannedChild{Kind: PodGroupKind, Name: name, Keep: true}
		case changed:
			plan.Objects = append(plan.Objects, want) // the engine deletes the old group
			return &engine.Verdict{Reason: reasonRegrouping, Note: n, Message: fmt.Sprintf("The job's gang changed (%s): none of its pods has been placed yet, "+
				"so they are deleted and made again once its PodGroup is made again with the new count (a PodGroup cannot change, and stays while a pod joins it).",
				countChange{from: minCountOf(pg.Spec), to: minCountOf(spec)})}, nil
		}
	}
	plan.Objects = append(plan.Objects, want)
	return &engine.Verdict{Admitted: true, Note: n, Gang: types, Pod: func(replicaType string, pod *corev1.Pod) {
		if types[replicaType] {
			join(pod, name, spec.ResourceClaims)
		}
	}}, nil
}

// A gang that changes (docs/gang.md, "A new minCount"): spec.scheduling's minCount, or the
// number of its pods when minCount is left to default. A PodGroup's spec cannot change, and
// kube-controller-manager keeps a deleted PodGroup while any pod joins it (the
// podgroup-protection finalizer), so the group is made again only once no pod joins it. While
// none of the gang's pods has been placed, that costs nothing: they are deleted (the job is
// held, as an admitter holds a job) and made again with the new group. Once the gang runs, its
// pods are not stopped for it: the group keeps its count until the pods are all gone (a pause,
// a whole-job restart), and an event says so once.

// countChange is a gang's minCount as the PodGroup has it and as the job now asks.
type countChange struct{ from, to int32 }

func (c countChange) String() string {
	return fmt.Sprintf("minCount %d, now %d", c.from, c.to)
}

// changedGang reports whether the PodGroup the job asks for is another than the one it has,
// by the hash the engine compares (engine.BuiltOtherwise).
func changedGang(job engine.Job, want engine.PlannedChild, pg *schedulingv1beta1.PodGroup) (bool, error) {
	if pg.DeletionTimestamp != nil {
		return true, nil // going: made again once gone
	}
	built, err := engine.BuildChild(job, want, pg)
	if err != nil {
		return false, err
	}
	return engine.BuiltOtherwise(pg, built), nil
}

// placed reports whether a pod of the gang has been bound to a node and is not being
// deleted: the gang has run, or runs.
func placed(pods []*corev1.Pod, types map[string]bool) bool {
	for _, p := range pods {
		if types[p.Labels[batch.LabelReplicaType]] && p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			return true
		}
	}
	return false
}

func minCountOf(spec schedulingv1beta1.PodGroupSpec) int32 {
	if g := spec.SchedulingPolicy.Gang; g != nil {
		return g.MinCount
	}
	return 1 // basic: the scheduler counts one
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
