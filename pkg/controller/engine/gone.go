package engine

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// A disrupted pod can be deleted before its job's next sync reads it: the scheduler marks a
// pod it preempts DisruptionTarget and deletes it at once. The informer's delete event still
// carries the pod's last state; it is kept here until the job's status records how the pod
// ended, so that the replica's lastTermination names the disruption (PreemptionByScheduler)
// rather than a bare deletion.

// goneTTL bounds how long a gone pod is remembered: a job deleted with its pods never syncs
// them away.
const goneTTL = 10 * time.Minute

type gonePod struct {
	job  types.UID
	pod  *corev1.Pod
	seen time.Time
}

// rememberGone keeps the last state of a deleted pod that was disrupted.
func (c *Controller) rememberGone(obj any) {
	pod := asPod(obj)
	if pod == nil || !disrupted(pod) {
		return
	}
	job := types.UID(pod.Labels[batch.LabelControllerUID])
	if job == "" {
		return
	}
	now := c.now()
	c.gone.Range(func(uid, v any) bool {
		if now.Sub(v.(gonePod).seen) > goneTTL {
			c.gone.Delete(uid)
		}
		return true
	})
	c.gone.Store(pod.UID, gonePod{job: job, pod: pod, seen: now})
}

// goneOf returns the remembered pods of a job, by UID.
func (c *Controller) goneOf(job types.UID) map[types.UID]*corev1.Pod {
	var gone map[types.UID]*corev1.Pod
	c.gone.Range(func(uid, v any) bool {
		if g := v.(gonePod); g.job == job {
			if gone == nil {
				gone = map[types.UID]*corev1.Pod{}
			}
			gone[g.pod.UID] = g.pod
		}
		return true
	})
	return gone
}
