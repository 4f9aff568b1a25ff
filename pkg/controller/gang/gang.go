// Package gang is the engine's admitter for Kubernetes' own gang scheduling
// (engine.Admitter): kube-scheduler's GangScheduling plugin and the scheduling.k8s.io/v1beta1
// PodGroup. A job that asks for one (spec.scheduling, the annotation
// scheduling.t9k.dev/gang: "true", or spec.scheduler.t9kScheduler with
// Config.ForT9kScheduler) has one more child, a PodGroup made before its pods, carrying
// spec.scheduling's policy (a gang by default), topology constraint, disruption mode and
// shared claims; every replica that must run together joins it (spec.schedulingGroup, and
// the shared claims in spec.resourceClaims), and with a gang policy the scheduler binds none
// of them until it can bind as many as the group's minCount. The admitter does not hold the
// job: its pods are made at once and wait in the scheduler, which is what places them. Only
// when the cluster does not serve what the job asks for does the job wait, with no pods and
// no PodGroup, saying what to turn on. docs/gang.md says why it is built this way.
package gang

import (
	"sync"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

// PodGroupKind is the scheduling.k8s.io PodGroup: the gang of a job's pods.
const PodGroupKind engine.ObjectKind = "PodGroup"

// AnnotationGang asks, with the value "true", that a job start whole.
const AnnotationGang = "scheduling.t9k.dev/gang"

// Config is what the admitter is made of.
type Config struct {
	// Client writes PodGroups; nil when the PodGroup API is not served: a job that asks for
	// gang scheduling then waits, saying what to turn on, and no PodGroup is watched.
	Client kubernetes.Interface
	// Informers is the factory of the jobs' children (filtered to the project's), in which
	// the PodGroups' informer is made. Nil when Client is.
	Informers informers.SharedInformerFactory
	// ForT9kScheduler makes spec.scheduler.t9kScheduler ask for gang scheduling
	// (--scheduler=gang); its queue and priority have no meaning here and are ignored, with
	// an event that says so.
	ForT9kScheduler bool
	// Features are the PodGroup fields the API server keeps (DetectFeatures); a job that
	// asks for one it drops waits, saying what to turn on. Meaningful only with Client.
	Features Features
	// Recorder records the events of the job's gang.
	Recorder record.EventRecorder
}

// Admitter places jobs' pods as gangs.
type Admitter struct {
	config Config
	// kind is the PodGroup's entry in the controllers' tables of child kinds (nil: the API is
	// not served).
	kind *engine.ChildKind
	// unplacedWhy holds, by job UID, the last reason the scheduler gave for not placing the job's
	// gang, so that an event says each new one once.
	unplacedWhy sync.Map
	// waiting holds, by job UID, the reason the job waits for, once an event said it.
	waiting sync.Map
	// pending holds, by job UID, the change of a running gang's count an event said (a
	// countChange), while the PodGroup keeps the old one.
	pending sync.Map
}

var (
	_ engine.Admitter  = (*Admitter)(nil)
	_ engine.Forgetter = (*Admitter)(nil)
)

// New makes the admitter. Its informer is taken from the factory now; the caller starts it.
func New(config Config) *Admitter {
	a := &Admitter{config: config}
	if config.Client == nil {
		return a
	}
	a.kind = podGroupKind(config.Informers.Scheduling().V1beta1().PodGroups().Informer(), config.Client)
	return a
}

// podGroupKind is the PodGroup's table entry: made before the pods that join it (the
// scheduler holds a pod whose group does not exist yet, but then tells nothing of why), and
// its status, the scheduler's word on the gang, syncs the job at once.
func podGroupKind(informer cache.SharedIndexInformer, client kubernetes.Interface) *engine.ChildKind {
	k := engine.NewChildKind(PodGroupKind, schedulingv1beta1.GroupName, "podgroups", informer,
		func(ns string) engine.Client[*schedulingv1beta1.PodGroup] {
			if client == nil {
				return nil
			}
			return client.SchedulingV1beta1().PodGroups(ns)
		})
	k.BeforePods = true
	return k
}

// served reports whether the PodGroup API is served.
func (a *Admitter) served() bool { return a.kind != nil }

// Kinds is the PodGroup, when its API is served.
func (a *Admitter) Kinds() []*engine.ChildKind {
	if !a.served() {
		return nil
	}
	return []*engine.ChildKind{a.kind}
}

// ChildKinds lists the kinds of children the admitter may make, whether or not the API is
// served (for checks that every kind is covered, such as the controller's RBAC).
func ChildKinds() []engine.ChildKind { return []engine.ChildKind{*podGroupKind(nil, nil)} }

// Watch has nothing more to watch: the PodGroups are children, watched as such.
func (a *Admitter) Watch(engine.Jobs) []cache.InformerSynced { return nil }
