package engine

import (
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// What the controller knows besides its informers' caches: the writes they have yet to show,
// and when pods were seen to end.

// IndexByJob indexes children by the UID of their job, so that a sync reads its own children
// instead of filtering every object of the namespace. Every child informer has it, an
// admitter's too.
const IndexByJob = "t9k-job-uid"

func jobUIDOf(obj any) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	if uid := m.GetLabels()[batch.LabelControllerUID]; uid != "" {
		return []string{uid}, nil
	}
	return nil, nil
}

// children lists the children job controls, of every kind, from the informer caches, and
// when the ended pods were seen to end.
func (c *Controller) children(job Job) (Children, error) {
	ch := Children{kinds: c.kinds}
	for _, cc := range c.caches {
		objs, err := cc.indexer.ByIndex(IndexByJob, string(job.GetUID()))
		if err != nil {
			return Children{}, err
		}
		for _, obj := range objs {
			o, ok := obj.(metav1.Object)
			if !ok {
				continue
			}
			if ref := metav1.GetControllerOfNoCopy(o); ref == nil || ref.UID != job.GetUID() {
				continue // owned by UID, never by name alone
			}
			if pod := asPod(o); pod != nil {
				ch.Pods = append(ch.Pods, pod)
			} else {
				ch.Objects = append(ch.Objects, o)
			}
		}
	}
	for _, p := range ch.Pods {
		if seen, ok := c.endSeen.Load(p.UID); ok {
			if ch.EndSeen == nil {
				ch.EndSeen = map[types.UID]time.Time{}
			}
			ch.EndSeen[p.UID] = seen.(time.Time)
		}
	}
	return ch, nil
}

type writtenStatus struct {
	resourceVersion string
	at              time.Time
}

// statusWait is how long a sync should still wait for the cache to show the controller's
// last status write of the job: 0 once the cached job is that write or newer (another writer,
// a user's edit, may have changed it since), or once statusWaitTTL has passed.
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
func (c *Controller) expectationsWait(key string) time.Duration {
	var wait time.Duration
	for _, cc := range c.caches {
		wait = max(wait, c.expect.Wait(expectKey(key, cc.kind)))
	}
	return wait
}

func (c *Controller) forget(key string) {
	for _, cc := range c.caches {
		c.expect.Forget(expectKey(key, cc.kind))
	}
	c.written.Delete(key)
	c.held.Delete(key)
	c.announced.Delete(key)
}
