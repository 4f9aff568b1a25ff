package kueue

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kueue "github.com/t9k-jobs/t9k-jobs/pkg/apis/kueue/v1beta2"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

// WorkloadName is the name of a job's Workload: its kind and name, since jobs of two kinds
// may share a name in a namespace.
func WorkloadName(job engine.Job) string {
	return strings.ToLower(job.GetObjectKind().GroupVersionKind().Kind) + "-" + job.GetName()
}

// podSetName is the pod set of a replica type: pod sets are DNS labels.
func podSetName(replicaType string) string { return strings.ToLower(replicaType) }

// workloadObject is the plan's Workload: a pod set per replica type, as many pods as it has
// replicas, from the type's template, with its topology request (topology.go). What only a
// pod of a rank has (its name, its rank's environment) does not change what it asks of the
// cluster.
//
// The priority is set when the Workload is made (current nil) and left out of its hash: from
// then on Kueue owns it (it rewrites it when the class's value changes), as with its own
// integrations. A missing priority class therefore only keeps a Workload from being made.
//
// name is the Workload's; grow, when set, makes it a slice that replaces another for a larger
// size of the elastic type (slices.go).
func (a *Admitter) workloadObject(job engine.Job, plan *engine.Plan, q *request, current *kueue.Workload, name string, grow *growth) (engine.PlannedChild, error) {
	spec := kueue.WorkloadSpec{QueueName: q.localQueue}
	topology := make([]*kueue.PodSetTopologyRequest, len(plan.Groups))
	elastic := -1 // the pod set of the elastic type, if any
	for i, g := range plan.Groups {
		tmpl := g.Template(0)
		count := g.Replicas
		if e := plan.Elastic; e != nil && e.Type == g.Type {
			// Its count and minimum are set out of the hash (Unhashed): a resize must not
			// make the Workload again, which would requeue the job (docs/elastic.md).
			elastic, count = i, 0
		}
		spec.PodSets = append(spec.PodSets, kueue.PodSet{
			Name:     podSetName(g.Type),
			Count:    count,
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: tmpl.Labels, Annotations: tmpl.Annotations}, Spec: tmpl.Spec},
		})
		r, err := topologyRequest(g.Type, g.Replicas, tmpl.Annotations)
		if err != nil {
			return engine.PlannedChild{}, &engine.InvalidSpecError{Message: "Kueue cannot place the job by topology: " + err.Error() + "."}
		}
		topology[i] = r
		if i == elastic && r != nil && (r.Required != nil || r.Preferred != nil || r.Unconstrained != nil) {
			return engine.PlannedChild{}, &engine.InvalidSpecError{Message: fmt.Sprintf("Kueue cannot place the elastic type %s by topology: "+
				"a topology placement is made for a fixed number of pods, and an elastic type's changes (docs/elastic.md); "+
				"drop the topology annotations from its template, or spec.elastic", g.Type)}
		}
	}
	priority, ref := q.priority, (*kueue.PriorityClassRef)(nil)
	if q.priorityClass != "" && current == nil {
		class, err := a.priorities.Get(q.priorityClass)
		if err != nil {
			if apierrors.IsNotFound(err) {
				return engine.PlannedChild{}, &waitError{reasonQueued, fmt.Sprintf("WorkloadPriorityClass %q (label %s) does not exist: create it, or change the label.", q.priorityClass, kueue.LabelPriorityClass)}
			}
			return engine.PlannedChild{}, err
		}
		ref = &kueue.PriorityClassRef{Group: kueue.GroupName, Kind: "WorkloadPriorityClass", Name: class.Name}
		value := class.Value
		priority = &value
	}
	return engine.PlannedChild{Kind: WorkloadKind, Name: name,
		Build: func(metav1.Object) (metav1.Object, error) {
			return &kueue.Workload{Spec: *spec.DeepCopy()}, nil
		},
		// The job's UID, as Kueue's integrations label their Workloads, is left out of the hash
		// too: it never changes, and Workloads made before it was set stay as they are.
		//
		// So are the topology requests: they follow from the templates' annotations, which
		// the hash covers, and Workloads made before they were set stay as they are.
		Unhashed: func(built metav1.Object) {
			wl := built.(*kueue.Workload)
			wl.Spec.Priority, wl.Spec.PriorityClassRef = priority, ref
			for i := range wl.Spec.PodSets {
				wl.Spec.PodSets[i].TopologyRequest = topology[i]
			}
			if elastic >= 0 {
				// An elastic type asks for the size it wants, and may be admitted with as
				// few as its minimum (partial admission).
				e := plan.Elastic
				wl.Spec.PodSets[elastic].Count = plan.Groups[elastic].Replicas
				if n := e.Min; n < plan.Groups[elastic].Replicas {
					wl.Spec.PodSets[elastic].MinCount = &n
				}
				if grow != nil {
					grow.annotate(wl, elastic)
				}
			}
			wl.Labels[kueue.LabelJobUID] = string(job.GetUID())
		},
	}, nil
}

// workloadChange says what differs between a job's Workload, as the cache keeps it (its
// LocalQueue, its pod sets' names and counts), and the one built now: "LocalQueue changed from
// "a" to "b"", "replicas changed (worker: 2 to 4; ps: removed)", or else "pod templates
// changed" (the cache keeps no template).
func workloadChange(have, built *kueue.Workload) string {
	var changes []string
	if have.Spec.QueueName != built.Spec.QueueName {
		changes = append(changes, fmt.Sprintf("LocalQueue changed from %q to %q", have.Spec.QueueName, built.Spec.QueueName))
	}
	counts := map[string]int32{}
	for _, ps := range have.Spec.PodSets {
		counts[ps.Name] = ps.Count
	}
	var replicas []string
	for _, ps := range built.Spec.PodSets {
		n, had := counts[ps.Name]
		delete(counts, ps.Name)
		switch {
		case !had:
			replicas = append(replicas, fmt.Sprintf("%s: added, %d", ps.Name, ps.Count))
		case n != ps.Count:
			replicas = append(replicas, fmt.Sprintf("%s: %d to %d", ps.Name, n, ps.Count))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		replicas = append(replicas, name+": removed")
	}
	if len(replicas) > 0 {
		changes = append(changes, "replicas changed ("+strings.Join(replicas, "; ")+")")
	}
	if len(changes) == 0 {
		return "pod templates changed"
	}
	return strings.Join(changes, " and its ")
}

// waitError is a reason a queued job cannot be queued yet that a person must fix: the job
// waits with it as its condition.
type waitError struct{ reason, message string }

func (e *waitError) Error() string { return e.message }
