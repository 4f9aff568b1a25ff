package engine

import (
	"strconv"
	"time"
)

// How far the informers' caches lag behind the controller's own writes: the status it wrote
// last, and the children it created or deleted (expectations), which a sync waits to see
// before it decides again.

// writtenStatus is the controller's last status write of a job, and when it was made.
type writtenStatus struct {
	resourceVersion string
	at              time.Time
}

// statusWait is how long a sync should still wait for the cache to show the controller's
// last status write of the job: 0 once the cached job is that write or newer (another writer,
// a user's edit, may have changed it since), or once statusWaitTTL has passed. A sync taken
// as urgent that has to wait stays urgent (lanes.stillUrgent).
func (c *Controller) statusWait(key string, job Job) time.Duration {
	v, ok := c.written.Load(key)
	if !ok {
		return 0
	}
	w := v.(writtenStatus)
	left := statusWaitTTL - c.now().Sub(w.at)
	if atLeast(job.GetResourceVersion(), w.resourceVersion) || left <= 0 {
		c.written.CompareAndDelete(key, v)
		return 0
	}
	c.lanes.stillUrgent(key)
	return left
}

// atLeast reports whether resourceVersion a is b or newer. Resource versions are opaque to
// clients, but the API server's come from etcd's revision, an increasing integer; when either
// is not one, only equality counts (and the wait runs out).
func atLeast(a, b string) bool {
	if a == b {
		return true
	}
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x >= y
}

// Expectations are kept per job and kind of child.
func expectKey(key string, k *ChildKind) string { return key + "/" + k.Resource }

// expectationsWait is how long the job's expected writes may still hold it back (0: none).
// A sync taken as urgent that has to wait stays urgent: a pod may show Running before the
// cache shows the job's last Service created, and the event of that Service should sync the
// job before the keys queued meanwhile.
func (c *Controller) expectationsWait(key string) time.Duration {
	var wait time.Duration
	for _, cc := range c.caches {
		wait = max(wait, c.expect.Wait(expectKey(key, cc.kind)))
	}
	if wait > 0 {
		c.lanes.stillUrgent(key)
	}
	return wait
}

func (c *Controller) forget(key string) {
	for _, cc := range c.caches {
		c.expect.Forget(expectKey(key, cc.kind))
	}
	c.written.Delete(key)
	c.lanes.forget(key)
	c.held.Delete(key)
	c.announced.Delete(key)
}
