package engine

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision"
)

// A disrupted pod can be deleted before its job's next sync reads it: the scheduler marks a
// pod it preempts DisruptionTarget and deletes it at once. The informer's delete event still
// carries the pod's last state; it is kept here until the job's status records how the pod
// ended, so that the replica's lastTermination names the disruption (PreemptionByScheduler)
// rather than a bare deletion.
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

// remember keeps the last state of a pod of job, seen gone at now.
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

// of returns the remembered pods of a job, by UID (nil: none).
func (m *goneMemory) of(job types.UID) map[types.UID]*corev1.Pod {
	m.mu.Lock()
	defer m.mu.Unlock()
	pods := m.jobs[job]
	if len(pods) == 0 {
		return nil
	}
	out := make(map[types.UID]*corev1.Pod, len(pods))
	for uid, g := range pods {
		out[uid] = g.pod
	}
	return out
}

// forget forgets the listed pods of a job: its status now tells how they ended.
func (m *goneMemory) forget(job types.UID, pods map[types.UID]*corev1.Pod) {
	if len(pods) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for uid := range pods {
		delete(m.jobs[job], uid)
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

// rememberGone keeps the last state of a deleted pod that was disrupted.
func (c *Controller) rememberGone(obj any) {
	pod := asPod(obj)
	if pod == nil || !decision.Disrupted(pod) {
		return
	}
	if job := types.UID(pod.Labels[batch.LabelControllerUID]); job != "" {
		c.gone.remember(job, pod, c.now())
	}
}
