package engine

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision"
	"github.com/t9k-jobs/t9k-jobs/pkg/features"
)

// The event handlers: a job's change syncs it; a child's change is observed in the
// expectations and syncs its job, batched (features.BatchedPodStatusUpdates).

func (c *Controller) watchJobs() {
	_, _ = c.adapter.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addJob,
		UpdateFunc: c.updateJob, // resyncs too: the safety net
		DeleteFunc: c.deleteJob,
	})
}

func (c *Controller) addJob(obj any) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	if job, ok := obj.(Job); ok {
		c.statusWait(key, job) // clears the wait once the write shows
	}
	c.queue.Add(key)
}

// updateJob syncs a changed job, unless only its progress changed: a replica's report
// decides nothing at once, and every reporting job would otherwise be synced at every
// coalesced write. A stall is found by the clock instead (armStallCheck).
func (c *Controller) updateJob(old, cur any) {
	if o, ok := old.(Job); ok {
		if j, ok := cur.(Job); ok && onlyProgressChanged(o, j) {
			c.armStallCheck(j)
			if _, waiting := c.written.Load(jobKey(j)); !waiting {
				return // (a sync that waits for its own write to show is let through)
			}
		}
	}
	c.addJob(cur)
}

// armStallCheck asks for a sync when a running job's replicas, reported in its status now,
// would be stalled should they say nothing more. No other event need come: a replica that
// reports once and then hangs changes nothing else, and the sync that sees its report is
// what arms the next timer (decision/stall.go). The queue keeps the earliest of the times
// asked for a key, so a job that reports often costs one timer, not one per report.
func (c *Controller) armStallCheck(j Job) {
	deadline := j.JobLifecycle().ProgressDeadlineSeconds
	if deadline == nil || *deadline <= 0 || j.JobStatus().Phase != batch.JobRunning {
		return
	}
	c.queue.AddAfter(jobKey(j), Seconds(*deadline)+c.reportLag())
}

func jobKey(j Job) string { return j.GetNamespace() + "/" + j.GetName() }

// onlyProgressChanged: the jobs differ in status.progress and in nothing a sync reads
// (spec: generation; the labels and annotations admitters read; deletion; the rest of status).
func onlyProgressChanged(old, cur Job) bool {
	os, cs := *old.JobStatus(), *cur.JobStatus()
	if equality.Semantic.DeepEqual(os.Progress, cs.Progress) {
		return false
	}
	os.Progress, cs.Progress = nil, nil
	return old.GetGeneration() == cur.GetGeneration() && old.GetDeletionTimestamp().Equal(cur.GetDeletionTimestamp()) &&
		maps.Equal(old.GetLabels(), cur.GetLabels()) && maps.Equal(old.GetAnnotations(), cur.GetAnnotations()) &&
		slices.Equal(old.GetFinalizers(), cur.GetFinalizers()) && equality.Semantic.DeepEqual(os, cs)
}

func (c *Controller) deleteJob(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		c.forget(key)
		c.queue.Add(key)
	}
	if job, ok := obj.(metav1.Object); ok {
		c.gone.forgetJob(job.GetUID())
		c.failing.forgetJob(job.GetUID())
		for _, a := range c.options.Admitters {
			if f, ok := a.(Forgetter); ok {
				f.Forget(job.GetUID())
			}
		}
	}
}

// watchChildren registers the handlers of one kind of child.
func (c *Controller) watchChildren(k *ChildKind, informer cache.SharedIndexInformer) {
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.childAdded(k, obj) },
		UpdateFunc: func(old, cur any) { c.childUpdated(k, old, cur) },
		DeleteFunc: func(obj any) { c.childDeleted(k, obj) },
	})
}

// ownerKey returns the key of the job of this kind that controls obj, if any.
func (c *Controller) ownerKey(obj metav1.Object) (string, bool) {
	ref := metav1.GetControllerOfNoCopy(obj)
	gvk := c.adapter.GroupVersionKind()
	if ref == nil || ref.Kind != gvk.Kind || ref.APIVersion != gvk.GroupVersion().String() {
		return "", false
	}
	return obj.GetNamespace() + "/" + ref.Name, true
}

func (c *Controller) childAdded(k *ChildKind, obj any) {
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	key, ok := c.ownerKey(o)
	if !ok {
		return
	}
	if o.GetDeletionTimestamp() != nil {
		c.expect.DeletionObserved(expectKey(key, k), o.GetUID())
	} else {
		c.expect.CreationObserved(expectKey(key, k))
	}
	c.noteEnd(o)
	// The last of a sync's creations to show lets the job be decided again: at once, as a
	// sync may be waiting for it; a creation among others is batched.
	c.enqueueChange(key, c.expectationsWait(key) == 0)
}

func (c *Controller) childUpdated(k *ChildKind, old, cur any) {
	oldObj, okOld := old.(metav1.Object)
	o, ok := cur.(metav1.Object)
	if !ok || !okOld || oldObj.GetResourceVersion() == o.GetResourceVersion() {
		return // a resync
	}
	key, ok := c.ownerKey(o)
	if !ok {
		return
	}
	if o.GetDeletionTimestamp() != nil && oldObj.GetDeletionTimestamp() == nil {
		// A graceful delete: count it now; the deletion itself is ignored by UID.
		c.expect.DeletionObserved(expectKey(key, k), o.GetUID())
		c.queue.Add(key)
		return
	}
	if oldObj.GetAnnotations()[AnnotationChildHash] != o.GetAnnotations()[AnnotationChildHash] {
		c.expect.UpdateObserved(expectKey(key, k), o.GetUID())
	}
	c.noteEnd(o)
	urgent := k.Urgent || milestone(oldObj, o)
	if urgent {
		c.lanes.mark(key)
	}
	c.enqueueChange(key, urgent)
}

// childDeleted observes the deletion of a child (possibly a tombstone), and syncs its job at
// once.
func (c *Controller) childDeleted(k *ChildKind, obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	c.endSeen.Delete(o.GetUID())
	c.inPlaceWritten.Delete(o.GetUID())
	if key, ok := c.ownerKey(o); ok {
		c.rememberGone(obj)
		c.expect.DeletionObserved(expectKey(key, k), o.GetUID())
		c.queue.Add(key)
	}
}

// noteEnd records when a pod was first seen ended.
func (c *Controller) noteEnd(o metav1.Object) {
	if phase, _, ok := podState(o); ok && (phase == corev1.PodSucceeded || phase == corev1.PodFailed) {
		c.endSeen.LoadOrStore(o.GetUID(), c.now())
	}
}

// podState is what the handlers read of a cached pod: its phase and readiness.
func podState(obj any) (phase corev1.PodPhase, ready, ok bool) {
	switch p := obj.(type) {
	case *CachedPod:
		return p.Phase, p.Ready, true
	case *corev1.Pod:
		return p.Status.Phase, decision.PodReady(p), true
	}
	return "", false, false
}

// milestone reports whether a child's change may start its job: a pod that starts running,
// or a running pod that becomes ready or not (replicas may wait for others to be ready). Such
// a change syncs its job at once, before keys queued for other reasons (lanes); while the job
// starts, the status the sync decides is written at once only if the phase moved
// (holdStartingStatus). Other changes are batched, pods ending among them: a ready pod that ends is no
// longer ready, yet it is an end like the others.
func milestone(old, cur metav1.Object) bool {
	wasPhase, wasReady, okOld := podState(old)
	phase, ready, ok := podState(cur)
	return ok && okOld && phase == corev1.PodRunning && (wasPhase != phase || wasReady != ready)
}

// enqueueChange syncs the job after a child's change: at once if now is set or batching is
// off; otherwise with BatchedPodStatusUpdates the syncs of changes within podBatchPeriod are
// one, and so is their status write.
func (c *Controller) enqueueChange(key string, now bool) {
	if now || !features.Enabled(features.BatchedPodStatusUpdates) {
		c.queue.Add(key)
		return
	}
	c.queue.AddAfter(key, podBatchPeriod)
}
