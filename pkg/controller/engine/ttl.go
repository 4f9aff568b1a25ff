package engine

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/metrics"
)

// Deleting finished jobs (docs/lifecycle.md, "Deleting finished jobs"). A job with
// spec.ttlSecondsAfterFinished is deleted, its children first, that many seconds after
// status.completionTime. The time left is counted from the status on every sync and the job's
// key comes back when it runs out: no resync is relied on, and a controller that was down
// when it ran out deletes the job on its first sync (the caches' initial list syncs every
// job). Nothing is deleted early: the job is read again from the API server and checked
// before it is deleted, with its UID and resourceVersion as preconditions, so that a TTL
// lengthened meanwhile, or a new job of the same name, is kept. An admitter may hold a job
// whose TTL ran out (TTLHolder): a copy MultiKueue runs stays until MultiKueue has its end.

// TTLHolder is an admitter that may keep a finished job whose TTL ran out from being deleted
// for now, because a system outside the controller has yet to see the job's end: Kueue's
// MultiKueue, which learns how a job ended from the copy it runs on another cluster (the
// copy's status and Workload), and ends the job where it was submitted only then. An
// admitter that holds a job hears of its end through its own children: their next change
// syncs the job, and the TTL is counted again.
type TTLHolder interface {
	// HoldsTTL says why the finished job must not be deleted yet ("": it may be).
	HoldsTTL(job Job) string
}

// ttlLeft is ttlLeft at the controller's time, unless an admitter holds the job: then no TTL
// applies for now (ok false), and the job is not asked back for it.
func (c *Controller) ttlLeft(ctx context.Context, job Job) (left time.Duration, ok bool) {
	left, ok = ttlLeft(job, c.now())
	if !ok || left > 0 {
		return left, ok
	}
	job = c.withKind(job) // the holders look up its children
	for _, a := range c.options.Admitters {
		if h, is := a.(TTLHolder); is {
			if why := h.HoldsTTL(job); why != "" {
				klog.FromContext(ctx).V(4).Info("A finished job's ttlSecondsAfterFinished has passed; it is kept for now", "kind", c.kind, "job", klog.KObj(job), "why", why)
				return 0, false
			}
		}
	}
	return left, ok
}

// ttlLeft is how long a finished job has before its TTL runs out; ok is false when no TTL
// applies (none set, or the job has not finished).
func ttlLeft(job Job, now time.Time) (left time.Duration, ok bool) {
	ttl, s := job.JobLifecycle().TTLSecondsAfterFinished, job.JobStatus()
	if ttl == nil || !s.Finished() {
		return 0, false
	}
	end := decision.CompletionTime(s, s)
	if end == nil {
		return 0, false
	}
	return end.Add(Seconds(int64(*ttl))).Sub(now), true
}

// deleteExpired deletes a finished job whose TTL has run out, once the API server's copy of
// it agrees; otherwise it says how long is left.
func (c *Controller) deleteExpired(ctx context.Context, key string, cached Job) (time.Duration, error) {
	fresh, err := c.adapter.Read(ctx, cached.GetNamespace(), cached.GetName())
	switch {
	case apierrors.IsNotFound(err):
		return 0, nil
	case err != nil:
		return 0, err
	case fresh.GetUID() != cached.GetUID() || fresh.GetDeletionTimestamp() != nil:
		return 0, nil // another job of the name, or already going: its events sync it
	}
	left, ok := ttlLeft(fresh, c.now())
	switch {
	case !ok:
		return 0, nil
	case left > 0:
		return left, nil
	}
	if err := c.adapter.Delete(ctx, fresh); err != nil && !apierrors.IsNotFound(err) {
		return 0, err // a conflict: changed since it was read; the retry reads it again
	}
	metrics.TTLDeletions.WithLabelValues(c.kind).Inc()
	klog.FromContext(ctx).Info("Deleted a finished job: its ttlSecondsAfterFinished passed", "kind", c.kind, "job", key,
		"completionTime", decision.CompletionTime(fresh.JobStatus(), fresh.JobStatus()), "ttlSecondsAfterFinished", *fresh.JobLifecycle().TTLSecondsAfterFinished)
	return 0, nil
}
