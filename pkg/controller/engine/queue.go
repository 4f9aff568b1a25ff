package engine

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	kueue "github.com/t9k-jobs/t9k-jobs/pkg/apis/kueue/v1beta2"
	kueueinformers "github.com/t9k-jobs/t9k-jobs/pkg/client/kueue/informers/externalversions"
	kueuelisters "github.com/t9k-jobs/t9k-jobs/pkg/client/kueue/listers/kueue/v1beta2"
)

// Queueing with Kueue. A job that asks for a LocalQueue (the label kueue.x-k8s.io/queue-name,
// or spec.scheduler.t9kScheduler with Options.KueueForT9kScheduler) has one more child, a
// Workload that describes every replica type as a pod set. Kueue admits the Workload whole or
// not at all; until it does, the job is held as a pause holds it (no pods), and once it does
// its pods are created with what the admission assigned. When Kueue evicts it (preemption,
// pods not ready in time), its pods are deleted, the admission is handed back, and it waits
// again. The job's controller also tells Kueue when every pod is ready (PodsReady) and when
// the job has ended (Finished), as Kueue's own integrations do. docs/queueing.md says why
// it is built this way.

// maxPodSets is the most pod sets a Workload may have: the replica types of one job.
const maxPodSets = 8

// Reasons of the conditions of a job that waits for Kueue.
const (
	reasonQueued            = "Queued"
	reasonEvicted           = "Evicted"
	reasonPreempted         = "Preempted"
	reasonKueueNotInstalled = "KueueNotInstalled"
)

// Queue is a queueing system's verdict on a job that waits in a queue: the job runs only
// while it is admitted.
type Queue struct {
	// Admitted: the job may run. PodSets add to its pods what the admission assigned, by
	// replica type.
	Admitted bool
	PodSets  map[string]PodSetAdmission
	// Reason and Message say why the job does not run, while it is not admitted;
	// EvictionReason is Kueue's own, when it evicted the job.
	Reason, Message, EvictionReason string
}

// PodSetAdmission is what an admission adds to the pods of one replica type: the node labels
// and tolerations of the flavors assigned, and what admission checks ask for.
type PodSetAdmission struct {
	Labels, Annotations, NodeSelector map[string]string
	Tolerations                       []corev1.Toleration
}

// applyTo adds the admission's settings to a pod; the admission's node selector wins over
// the template's for the same key.
func (a PodSetAdmission) applyTo(pod *corev1.Pod) {
	pod.Labels = withAll(pod.Labels, a.Labels)
	pod.Annotations = withAll(pod.Annotations, a.Annotations)
	pod.Spec.NodeSelector = withAll(pod.Spec.NodeSelector, a.NodeSelector)
	for _, t := range a.Tolerations {
		if !slices.ContainsFunc(pod.Spec.Tolerations, func(have corev1.Toleration) bool { return have.MatchToleration(&t) }) {
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, t)
		}
	}
}

func withAll(to, from map[string]string) map[string]string {
	if len(from) == 0 {
		return to
	}
	if to == nil {
		to = map[string]string{}
	}
	maps.Copy(to, from)
	return to
}

// queueRequest is the queue a job asks for.
type queueRequest struct {
	localQueue string
	// priorityClass names a WorkloadPriorityClass; otherwise priority, when set, is the
	// Workload's priority.
	priorityClass string
	priority      *int32
}

// queueRequest returns the queue the job asks for, or nil. With KueueForT9kScheduler the
// plan's T9k Scheduler settings become the request, and the pods keep the default scheduler;
// Kueue's labels on the job win over them.
func (c *Controller) queueRequest(job Job, plan *Plan) *queueRequest {
	var q *queueRequest
	if s := plan.Scheduler; s != nil && c.options.KueueForT9kScheduler {
		plan.Scheduler = nil
		priority := s.Priority
		q = &queueRequest{localQueue: s.Queue, priority: &priority}
	}
	labels := job.GetLabels()
	if name := labels[kueue.LabelQueueName]; name != "" {
		if q == nil {
			q = &queueRequest{}
		}
		q.localQueue = name
	}
	if q != nil && labels[kueue.LabelPriorityClass] != "" {
		q.priorityClass, q.priority = labels[kueue.LabelPriorityClass], nil
	}
	return q
}

// WorkloadName is the name of a job's Workload: its kind and name, since jobs of two kinds
// may share a name in a namespace.
func WorkloadName(job Job) string {
	return strings.ToLower(job.GetObjectKind().GroupVersionKind().Kind) + "-" + job.GetName()
}

// podSetName is the pod set of a replica type: pod sets are DNS labels.
func podSetName(replicaType string) string { return strings.ToLower(replicaType) }

// queueListers read the cluster-wide objects an admission names.
type queueListers struct {
	flavors    kueuelisters.ResourceFlavorLister
	priorities kueuelisters.WorkloadPriorityClassLister
	synced     []cache.InformerSynced
}

func newQueueListers(f kueueinformers.SharedInformerFactory) *queueListers {
	flavors := f.Kueue().V1beta2().ResourceFlavors()
	priorities := f.Kueue().V1beta2().WorkloadPriorityClasses()
	return &queueListers{
		flavors:    flavors.Lister(),
		priorities: priorities.Lister(),
		synced:     []cache.InformerSynced{flavors.Informer().HasSynced, priorities.Informer().HasSynced},
	}
}

// workloadObject is the plan's Workload: a pod set per replica type, as many pods as it has
// replicas, from the type's template. What only a pod of a rank has (its name, its rank's
// environment) does not change what it asks of the cluster.
//
// The priority is set when the Workload is made (current nil) and left out of its hash: from
// then on Kueue owns it (it rewrites it when the class's value changes), as with its own
// integrations. A missing priority class therefore only keeps a Workload from being made.
func (c *Controller) workloadObject(job Job, plan *Plan, q *queueRequest, current *kueue.Workload) (Object, error) {
	spec := kueue.WorkloadSpec{QueueName: q.localQueue}
	for _, g := range plan.Groups {
		tmpl := g.Template(0)
		spec.PodSets = append(spec.PodSets, kueue.PodSet{
			Name:     podSetName(g.Type),
			Count:    g.Replicas,
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: tmpl.Labels, Annotations: tmpl.Annotations}, Spec: tmpl.Spec},
		})
	}
	priority, ref := q.priority, (*kueue.PriorityClassRef)(nil)
	if q.priorityClass != "" && current == nil {
		class, err := c.queues.priorities.Get(q.priorityClass)
		if err != nil {
			if apierrors.IsNotFound(err) {
				return Object{}, &waitError{reasonQueued, fmt.Sprintf("WorkloadPriorityClass %q (label %s) does not exist: create it, or change the label.", q.priorityClass, kueue.LabelPriorityClass)}
			}
			return Object{}, err
		}
		ref = &kueue.PriorityClassRef{Group: kueue.GroupName, Kind: "WorkloadPriorityClass", Name: class.Name}
		value := class.Value
		priority = &value
	}
	return Object{Kind: WorkloadKind, Name: WorkloadName(job),
		Build: func(metav1.Object) (metav1.Object, error) {
			return &kueue.Workload{Spec: *spec.DeepCopy()}, nil
		},
		// The job's UID, as Kueue's integrations label their Workloads, is left out of the hash
		// too: it never changes, and Workloads made before it was set stay as they are.
		Unhashed: func(built metav1.Object) {
			wl := built.(*kueue.Workload)
			wl.Spec.Priority, wl.Spec.PriorityClassRef = priority, ref
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

// watchPriorityClasses syncs, when a WorkloadPriorityClass is created, the jobs of the kind
// that name it: one that waits for it makes its Workload, one whose label changed to it takes
// its priority. The classes listed at start need not: every job is synced then.
func (c *Controller) watchPriorityClasses(informer cache.SharedIndexInformer) {
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			class, ok := obj.(metav1.Object)
			if !ok || initial {
				return
			}
			for _, o := range c.adapter.Informer().GetStore().List() {
				job, ok := o.(Job)
				if !ok || job.GetLabels()[kueue.LabelPriorityClass] != class.GetName() || Finished(job.JobStatus()) {
					continue
				}
				if key, err := cache.MetaNamespaceKeyFunc(job); err == nil {
					c.queue.Add(key)
				}
			}
		},
	})
}

// waitError is a reason a queued job cannot be queued yet that a person must fix: the job
// waits with it as its condition.
type waitError struct{ reason, message string }

func (e *waitError) Error() string { return e.message }

// queueState is Kueue's verdict on the job, from its Workload (nil while there is none).
func (c *Controller) queueState(q *queueRequest, wl *kueue.Workload) (*Queue, error) {
	waiting := fmt.Sprintf("Waiting for Kueue to admit the job from LocalQueue %q", q.localQueue)
	switch {
	case c.queues == nil:
		return &Queue{Reason: reasonKueueNotInstalled, Message: fmt.Sprintf(
			"The job asks for Kueue's LocalQueue %q, but Kueue's API (kueue.x-k8s.io/v1beta2 Workloads) is not served: install Kueue and restart the controller, or take the job out of the queue.",
			q.localQueue)}, nil
	case wl == nil || wl.DeletionTimestamp != nil:
		return &Queue{Reason: reasonQueued, Message: waiting + "."}, nil
	}
	conds := wl.Status.Conditions
	if ev := meta.FindStatusCondition(conds, kueue.WorkloadEvicted); ev != nil && ev.Status == metav1.ConditionTrue {
		reason := reasonEvicted
		if ev.Reason == "Preempted" {
			reason = reasonPreempted
		}
		message := fmt.Sprintf("Kueue evicted the job (%s): %s", ev.Reason, sentence(ev.Message))
		if by := c.preemptor(ev.Message); by != "" {
			message += " " + by + " took its place."
		}
		return &Queue{Reason: reason, EvictionReason: ev.Reason, Message: message + " It waits to be admitted again."}, nil
	}
	if meta.IsStatusConditionTrue(conds, kueue.WorkloadAdmitted) && wl.Status.Admission != nil {
		podSets, err := c.admitted(wl)
		if err != nil {
			return nil, err
		}
		return &Queue{Admitted: true, PodSets: podSets}, nil
	}
	if meta.IsStatusConditionTrue(conds, kueue.WorkloadQuotaReserved) {
		return &Queue{Reason: reasonQueued, Message: waiting + ": quota is reserved; admission checks are pending."}, nil
	}
	if r := meta.FindStatusCondition(conds, kueue.WorkloadQuotaReserved); r != nil && r.Message != "" {
		return &Queue{Reason: reasonQueued, Message: waiting + ": " + sentence(r.Message)}, nil
	}
	return &Queue{Reason: reasonQueued, Message: waiting + "."}, nil
}

// preemptorUID finds the preempting job's UID in Kueue's preemption message: "Preempted to
// accommodate a workload (UID: ..., JobUID: ...) due to ...".
var preemptorUID = regexp.MustCompile(`JobUID: ([0-9A-Za-z-]+)\)`)

// preemptor names the job of the controller's kinds whose Workload preempted this one, from
// Kueue's message and the Workloads' cache ("": another kind of workload, or unknown).
func (c *Controller) preemptor(message string) string {
	m := preemptorUID.FindStringSubmatch(message)
	if m == nil {
		return ""
	}
	for _, cc := range c.caches {
		if cc.kind.Kind != WorkloadKind {
			continue
		}
		objs, _ := cc.indexer.ByIndex(byJob, m[1])
		for _, obj := range objs {
			if o, ok := obj.(metav1.Object); ok {
				if ref := metav1.GetControllerOfNoCopy(o); ref != nil && string(ref.UID) == m[1] {
					return fmt.Sprintf("%s %s/%s", ref.Kind, o.GetNamespace(), ref.Name)
				}
			}
		}
	}
	return ""
}

// sentence ends a message from elsewhere with a full stop.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || strings.HasSuffix(s, ".") {
		return s
	}
	return s + "."
}

// admitted is what an admission adds to the pods of each replica type: the node labels and
// tolerations of the flavors it assigned, and the updates of admission checks.
func (c *Controller) admitted(wl *kueue.Workload) (map[string]PodSetAdmission, error) {
	out := map[string]PodSetAdmission{}
	byPodSet := map[string]*PodSetAdmission{}
	for _, ps := range wl.Spec.PodSets {
		byPodSet[ps.Name] = &PodSetAdmission{}
	}
	for _, a := range wl.Status.Admission.PodSetAssignments {
		adm := byPodSet[a.Name]
		if adm == nil {
			continue
		}
		for _, name := range slices.Sorted(maps.Values(a.Flavors)) {
			flavor, err := c.queues.flavors.Get(name)
			if err != nil {
				return nil, fmt.Errorf("reading ResourceFlavor %s of the admission: %w", name, err)
			}
			adm.NodeSelector = withAll(adm.NodeSelector, flavor.Spec.NodeLabels)
			adm.Tolerations = append(adm.Tolerations, flavor.Spec.Tolerations...)
		}
	}
	for _, check := range wl.Status.AdmissionChecks {
		for _, u := range check.PodSetUpdates {
			if adm := byPodSet[u.Name]; adm != nil {
				adm.Labels = withAll(adm.Labels, u.Labels)
				adm.Annotations = withAll(adm.Annotations, u.Annotations)
				adm.NodeSelector = withAll(adm.NodeSelector, u.NodeSelector)
				adm.Tolerations = append(adm.Tolerations, u.Tolerations...)
			}
		}
	}
	// Pod sets are named after replica types in lower case; the plan's types are found by it.
	for name, adm := range byPodSet {
		out[name] = *adm
	}
	return out, nil
}

// podSetOf finds the admission of a replica type.
func (q *Queue) podSetOf(replicaType string) (PodSetAdmission, bool) {
	if q == nil || !q.Admitted {
		return PodSetAdmission{}, false
	}
	a, ok := q.PodSets[podSetName(replicaType)]
	return a, ok
}

// workloadOf is the job's Workload among its children (nil: none).
func workloadOf(objects []metav1.Object) *kueue.Workload {
	for _, o := range objects {
		if wl, ok := o.(*kueue.Workload); ok {
			return wl
		}
	}
	return nil
}

// InvalidQueueError is a queue request that cannot be met as the job is written: the job
// fails with it.
type InvalidQueueError struct{ message string }

func (e *InvalidQueueError) Error() string { return e.message }

// enqueue puts a job that asks for a queue in it: the plan gets the queue's verdict and the
// Workload among its objects (none while the job is paused, once its pods are gone: its quota
// is handed back). It returns the job's Workload (nil: none yet). What the job waits for,
// events announce: its Workload's, and a WorkloadPriorityClass's creation
// (watchPriorityClasses).
func (c *Controller) enqueue(job Job, plan *Plan, children Children) (*kueue.Workload, error) {
	q := c.queueRequest(job, plan)
	if q == nil {
		return nil, nil
	}
	if len(plan.Groups) > maxPodSets {
		return nil, &InvalidQueueError{fmt.Sprintf("Kueue admits jobs of at most %d replica types, and this job has %d: run it outside Kueue's queues, or with fewer replica types.",
			maxPodSets, len(plan.Groups))}
	}
	wl := workloadOf(children.Objects)
	if Finished(job.JobStatus()) {
		// An ended job keeps its Workload as it is (Finished), whatever its queue, flavors or
		// priority class became since.
		if wl != nil {
			plan.Objects = append(plan.Objects, Object{Kind: WorkloadKind, Name: wl.Name, Keep: true})
		}
		return wl, nil
	}
	state, err := c.queueState(q, wl)
	if err != nil {
		return nil, err
	}
	plan.Queue = state
	if c.queues == nil {
		return wl, nil
	}
	// A Workload goes only once the job's pods have: deleting it gives its quota back, which
	// Kueue may then admit another job onto.
	keep := Object{Kind: WorkloadKind, Name: WorkloadName(job), Keep: true}
	running := anyRunning(children.Pods)
	if plan.Paused {
		if wl != nil && running {
			plan.Objects = append(plan.Objects, keep)
		}
		return wl, nil
	}
	obj, err := c.workloadObject(job, plan, q, wl)
	var wait *waitError
	switch {
	case errors.As(err, &wait):
		plan.Queue = &Queue{Reason: wait.reason, Message: wait.message}
		return wl, nil
	case err != nil:
		return nil, err
	}
	if wl != nil {
		// The job changed what its Workload holds (its LocalQueue, replicas or templates):
		// Kueue cannot change an admitted Workload, so the job stops, and its Workload is made
		// again once its pods are gone.
		built, err := buildObject(job, obj, wl)
		if err != nil {
			return nil, err
		}
		if builtOtherwise(wl, built) {
			plan.Queue = &Queue{Reason: reasonQueued, Message: "The job's " + workloadChange(wl, built.(*kueue.Workload)) +
				": it is queued anew, with a new Workload once its pods are gone."}
			if running {
				obj = keep
			}
		}
	}
	plan.Objects = append(plan.Objects, obj)
	return wl, nil
}
