// Package kueue is the engine's admitter for Kueue (engine.Admitter). A job that asks for a
// LocalQueue (the label kueue.x-k8s.io/queue-name, or spec.scheduler.t9kScheduler with
// Config.ForT9kScheduler) has one more child, a Workload that describes every replica type as
// a pod set. Kueue admits the Workload whole or not at all; until it does, the engine holds
// the job as a pause holds it (no pods), and once it does its pods are created with what the
// admission assigned. When Kueue evicts it (preemption, pods not ready in time), its pods are
// deleted, the admission is handed back, and it waits again. The admitter also tells Kueue
// when every pod is ready (PodsReady) and when the job has ended (Finished), as Kueue's own
// integrations do. docs/queueing.md says why it is built this way.
package kueue

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	kueue "github.com/t9k-jobs/t9k-jobs/pkg/apis/kueue/v1beta2"
	kueueclient "github.com/t9k-jobs/t9k-jobs/pkg/client/kueue/clientset/versioned"
	kueueinformers "github.com/t9k-jobs/t9k-jobs/pkg/client/kueue/informers/externalversions"
	kueuelisters "github.com/t9k-jobs/t9k-jobs/pkg/client/kueue/listers/kueue/v1beta2"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

// WorkloadKind is Kueue's Workload: a queued job's request for admission.
const WorkloadKind engine.ObjectKind = "Workload"

// Config is what the admitter is made of.
type Config struct {
	// Client writes Workloads; nil when Kueue's API is not served: a job that asks for a
	// queue then waits, saying that Kueue is missing, and nothing of Kueue is watched.
	Client kueueclient.Interface
	// Workloads is the factory of the jobs' Workloads, filtered to the project's children
	// and trimmed by TrimWorkload; Cluster that of what admissions name (ResourceFlavors,
	// WorkloadPriorityClasses: not the project's children, so not filtered). Both nil when
	// Client is.
	Workloads, Cluster kueueinformers.SharedInformerFactory
	// ForT9kScheduler makes spec.scheduler.t9kScheduler ask Kueue (--scheduler=kueue): its
	// queue is the LocalQueue, its priority the Workload's; pods keep the default scheduler.
	// Otherwise the field places pods with T9k Scheduler.
	ForT9kScheduler bool
	// Recorder records the events of what Kueue did to a job.
	Recorder record.EventRecorder
	// MaxPodSets is the most pod sets the cluster's Workloads take, as its Workload CRD says
	// (spec.podSets' maxItems: 18 since Kueue v0.19, 8 before); 0: DefaultMaxPodSets.
	MaxPodSets int
}

// Admitter admits jobs through Kueue.
type Admitter struct {
	config Config
	// kind is the Workload's entry in the controllers' tables of child kinds (nil: Kueue's
	// API is not served).
	kind      *engine.ChildKind
	workloads cache.SharedIndexInformer
	// flavors and priorities read the cluster-wide objects an admission names.
	flavors    kueuelisters.ResourceFlavorLister
	priorities kueuelisters.WorkloadPriorityClassLister
	// classes is the informer of WorkloadPriorityClasses, whose creation syncs the jobs
	// that name them.
	classes cache.SharedIndexInformer
}

var _ engine.Admitter = (*Admitter)(nil)

// New makes the admitter. Its informers are taken from the factories now; the caller starts
// them.
func New(config Config) *Admitter {
	a := &Admitter{config: config}
	if config.Client == nil {
		return a
	}
	a.workloads = config.Workloads.Kueue().V1beta2().Workloads().Informer()
	a.kind = engine.NewChildKind(WorkloadKind, kueue.GroupName, "workloads", a.workloads,
		func(ns string) engine.Client[*kueue.Workload] { return config.Client.KueueV1beta2().Workloads(ns) })
	a.flavors = config.Cluster.Kueue().V1beta2().ResourceFlavors().Lister()
	a.priorities = config.Cluster.Kueue().V1beta2().WorkloadPriorityClasses().Lister()
	a.classes = config.Cluster.Kueue().V1beta2().WorkloadPriorityClasses().Informer()
	return a
}

// installed reports whether Kueue's API is served.
func (a *Admitter) installed() bool { return a.kind != nil }

// Kinds is the Workload, when Kueue's API is served.
func (a *Admitter) Kinds() []*engine.ChildKind {
	if !a.installed() {
		return nil
	}
	return []*engine.ChildKind{a.kind}
}

// ChildKinds lists the kinds of children the admitter may make, whether or not Kueue's API is
// served (for checks that every kind is covered, such as the controller's RBAC).
func ChildKinds() []engine.ChildKind {
	return []engine.ChildKind{*engine.NewChildKind(WorkloadKind, kueue.GroupName, "workloads", nil,
		func(string) engine.Client[*kueue.Workload] { return nil })}
}

// Watch syncs, when a WorkloadPriorityClass is created, the jobs of the kind that name it:
// one that waits for it makes its Workload, one whose label changed to it takes its
// priority. The classes listed at start need not: every job is synced then.
func (a *Admitter) Watch(jobs engine.Jobs) []cache.InformerSynced {
	if !a.installed() {
		return nil
	}
	_, _ = a.classes.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			class, ok := obj.(metav1.Object)
			if !ok || initial {
				return
			}
			for _, job := range jobs.List() {
				if job.GetLabels()[kueue.LabelPriorityClass] != class.GetName() || job.JobStatus().Finished() {
					continue
				}
				if key, err := cache.MetaNamespaceKeyFunc(job); err == nil {
					jobs.Sync(key)
				}
			}
		},
	})
	flavors := a.config.Cluster.Kueue().V1beta2().ResourceFlavors().Informer()
	return []cache.InformerSynced{flavors.HasSynced, a.classes.HasSynced}
}

// TrimWorkload is the informer transform of the Workloads' cache: what engine.TrimChild keeps
// of every child, and of a Workload its pod sets' names and counts (not their templates) and
// its status.
func TrimWorkload(obj any) (any, error) {
	obj, err := engine.TrimChild(obj)
	o, ok := obj.(*kueue.Workload)
	if err != nil || !ok {
		return obj, err
	}
	wl := &kueue.Workload{ObjectMeta: o.ObjectMeta, Spec: o.Spec, Status: o.Status}
	wl.Spec.PodSets = make([]kueue.PodSet, len(o.Spec.PodSets))
	for i, ps := range o.Spec.PodSets {
		wl.Spec.PodSets[i] = kueue.PodSet{Name: ps.Name, Count: ps.Count}
	}
	return wl, nil
}
