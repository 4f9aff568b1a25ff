package engine

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// announceWaits records a Warning event for each reason the job's replicas now wait for that
// it has not announced since they began to wait: one event per job and reason, however many
// syncs the wait lasts, and again only after the job's replicas stopped waiting. The reasons
// announced are kept per job while it waits, and dropped when nothing waits (a restarted
// controller announces a wait still under way once more).
func (c *Controller) announceWaits(key string, job Job, waits []ReplicaWait) {
	if len(waits) == 0 {
		c.announced.Delete(key)
		return
	}
	var reasons []string
	if v, ok := c.announced.Load(key); ok {
		reasons = v.([]string)
	}
	added := false
	for _, w := range waits {
		if slices.Contains(reasons, w.Reason) {
			continue
		}
		c.recorder.Event(job, corev1.EventTypeWarning, w.Reason, w.Line())
		reasons, added = append(slices.Clip(reasons), w.Reason), true
	}
	if added {
		c.announced.Store(key, reasons)
	}
}
