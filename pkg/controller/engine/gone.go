package engine

import (
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision"
)

// A disrupted pod can be deleted before its job's next sync reads it: the scheduler marks a
// pod it preempts DisruptionTarget and deletes it at once. Its last state is kept here until
// the job's status records how the pod ended, so that the replica's lastTermination names the
// disruption (PreemptionByScheduler) rather than a bare deletion.
//
// The children's informers keep it as they take each pod in (NewInformers: their transform
// sees every state of a pod before the cache holds it), not from the delete event: an
// informer drops a deleted pod from its cache first and tells its handlers after, and a sync
// in between (another pod of the job was preempted a moment before) found the pod gone and
// nothing remembered of it. The delete handler remembers too, for informers built without
// the transform and for the tombstones of a relist.
//
// The memory is indexed by job: a sync reads its own job's pods, and a deletion adds one, in
// time that does not grow with the pods other jobs lost (a mass preemption deletes thousands
// at once).

// goneTTL bounds how long a gone pod is remembered: a job deleted with its pods never syncs
// them away. goneSweep is how often the memory is swept of what is past it.
const (
	goneTTL   = 10 * time.Minute
	goneSweep = time.Minute
)

type gonePod struct {
	pod  *corev1.Pod
	seen time.Time
}

// goneMemory is the last state of the gone pods, by job UID, then pod UID.
type goneMemory struct {
	mu    sync.Mutex
	jobs  map[types.UID]map[types.UID]gonePod
	swept time.Time
}

// remember keeps the last state of a pod of job, seen at now.
func (m *goneMemory) remember(job types.UID, pod *corev1.Pod, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if now.Sub(m.swept) >= goneSweep {
		m.sweep(now)
	}
	if m.jobs == nil {
		m.jobs = map[types.UID]map[types.UID]gonePod{}
	}
	pods := m.jobs[job]
	if pods == nil {
		pods = map[types.UID]gonePod{}
		m.jobs[job] = pods
	}
	pods[pod.UID] = gonePod{pod: pod, seen: now}
}

// sweep forgets what was seen longer than goneTTL ago; m.mu is held.
func (m *goneMemory) sweep(now time.Time) {
	m.swept = now
	for job, pods := range m.jobs {
		for uid, g := range pods {
			if now.Sub(g.seen) > goneTTL {
				delete(pods, uid)
			}
		}
		if len(pods) == 0 {
			delete(m.jobs, job)
		}
	}
}

// of returns the remembered pods of a job that are not in cached, by UID (nil: none): the
// memory holds a disrupted pod from its first disrupted state on, and only the gone ones are
// the sync's to read and forget.
func (m *goneMemory) of(job types.UID, cached []*corev1.Pod) map[types.UID]*corev1.Pod {
	m.mu.Lock()
	defer m.mu.Unlock()
	pods := m.jobs[job]
	if len(pods) == 0 {
		return nil
	}
	var out map[types.UID]*corev1.Pod
	for uid, g := range pods {
		if slices.ContainsFunc(cached, func(p *corev1.Pod) bool { return p.UID == uid }) {
			continue
		}
		if out == nil {
			out = make(map[types.UID]*corev1.Pod, len(pods))
		}
		out[uid] = g.pod
	}
	return out
}

// forget forgets the listed pods of a job, as of() returned them: its status now tells how
// they ended. A state remembered since (a later event of the same pod) is kept.
func (m *goneMemory) forget(job types.UID, pods map[types.UID]*corev1.Pod) {
	if len(pods) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for uid, p := range pods {
		if g, ok := m.jobs[job][uid]; ok && g.pod == p {
			delete(m.jobs[job], uid)
		}
	}
	if len(m.jobs[job]) == 0 {
		delete(m.jobs, job)
	}
}

// forgetJob forgets every pod of a deleted job.
func (m *goneMemory) forgetJob(job types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.jobs, job)
}

// rememberDisrupted keeps the state of a pod of a job (a child's, as TrimChild keeps it)
// if it is disrupted.
func (m *goneMemory) rememberDisrupted(obj any, now time.Time) {
	m.rememberIf(obj, now, func(c *CachedPod) bool { return c.Disruption != nil }, decision.Disrupted)
}

// rememberIf keeps the state of a pod of a job when keep says so of it. maybe tells from the
// cached pod whether keep could: most pods are not made into a Pod to be looked at.
func (m *goneMemory) rememberIf(obj any, now time.Time, maybe func(*CachedPod) bool, keep func(*corev1.Pod) bool) {
	if cached, ok := obj.(*CachedPod); ok && !maybe(cached) {
		return
	}
	pod := asPod(obj)
	if pod == nil || !keep(pod) {
		return
	}
	if job := types.UID(pod.Labels[batch.LabelControllerUID]); job != "" {
		m.remember(job, pod, now)
	}
}

// trimChild is the children's informer transform: TrimChild, and the state of each disrupted
// pod being deleted remembered before the cache holds it. (A disrupted pod that ended and
// stays, evicted by its kubelet, is read from the cache.)
func (m *goneMemory) trimChild(obj any) (any, error) {
	trimmed, err := TrimChild(obj)
	if o, ok := trimmed.(metav1.Object); ok && err == nil && o.GetDeletionTimestamp() != nil {
		m.rememberDisrupted(trimmed, time.Now())
	}
	return trimmed, err
}

// NewInformers makes the factory of the children's informers over kube, with options (a
// namespace, a filter): each child is kept as TrimChild trims it, the last state of each
// disrupted pod as the controllers read it when the pod is gone (above), and the failing
// state of each pod that restarts in place (rememberFailing). The pods' watch resumes
// when the API server ends it (resumingPods).
func NewInformers(kube kubernetes.Interface, options ...informers.SharedInformerOption) Informers {
	gone, failing := &goneMemory{}, &goneMemory{}
	options = append(slices.Clip(options), informers.WithTransform(func(obj any) (any, error) {
		trimmed, err := gone.trimChild(obj)
		if err == nil {
			failing.rememberFailing(trimmed, time.Now())
		}
		return trimmed, err
	}))
	return Informers{Kube: informers.NewSharedInformerFactoryWithOptions(resumingPods{kube}, 0, options...), gone: gone, failing: failing}
}

// rememberFailing keeps the state of a pod that restarts in place while one of its containers
// has just failed: a moment later the kubelet restarts all of them, and their last state says
// only that (exit code 137, RestartingAllContainers). The sync that reads the pod held after
// it takes the failed container's exit code from here (decision/inplace.go). A pod's later
// failure replaces its earlier one; the memory goes with the job, or after goneTTL.
func (m *goneMemory) rememberFailing(obj any, now time.Time) {
	m.rememberIf(obj, now, func(c *CachedPod) bool { return c.Rare != nil }, decision.FailingInPlace)
}

// all returns every remembered pod of a job, by UID (nil: none).
func (m *goneMemory) all(job types.UID) map[types.UID]*corev1.Pod {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.jobs[job]) == 0 {
		return nil
	}
	out := make(map[types.UID]*corev1.Pod, len(m.jobs[job]))
	for uid, g := range m.jobs[job] {
		out[uid] = g.pod
	}
	return out
}

// rememberGone keeps the last state of a deleted pod that was disrupted.
func (c *Controller) rememberGone(obj any) {
	c.gone.rememberDisrupted(obj, c.now())
}
