package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/t9k-jobs/t9k-jobs/pkg/controller/metrics"
)

// Writes go out in batches of growing size (slow start, as the Kubernetes Job controller
// does): a job whose pods all fail to create (a quota, a bad template) costs a few failed
// requests, not hundreds. The first failure ends the sync and it is retried with backoff.
const (
	initialBatch = 8
	maxBatch     = 64
)

// inBatches runs write(i) for i in [0, n) in batches of growing size, and returns how many
// were attempted and the first error.
func inBatches(n int, write func(i int) error) (int, error) {
	done := 0
	for size := min(initialBatch, n); done < n; size = min(2*size, maxBatch, n-done) {
		size = min(size, n-done)
		errs := make([]error, size)
		var wg sync.WaitGroup
		for j := range size {
			wg.Go(func() { errs[j] = write(done + j) })
		}
		wg.Wait()
		done += size
		if err := errors.Join(errs...); err != nil {
			return done, err
		}
	}
	return done, nil
}

// writeLog lists, per kind of child, the names a write reached.
type writeLog map[*ChildKind][]string

func (w writeLog) add(k *ChildKind, names []string) {
	if len(names) > 0 {
		w[k] = append(w[k], names...)
	}
}

func (w writeLog) count() int {
	n := 0
	for _, names := range w {
		n += len(names)
	}
	return n
}

// in lists the names by kind, in the table's order: "secrets a; pods b, c".
func (w writeLog) in(kinds kindTable) string {
	var parts []string
	for _, k := range kinds {
		if names := w[k]; len(names) > 0 {
			parts = append(parts, k.Resource+" "+Listed(names, 5))
		}
	}
	return strings.Join(parts, "; ")
}

// createAndUpdate creates the decision's children and updates those whose content changed,
// expecting each write first so that a sync on a cache that does not show it yet does not
// send it again. What pods may mount (Secrets, ConfigMaps) goes first; then the pods beside
// the rest. It returns how many writes were sent that the cache will show, and reports them
// in one event per verb (events are writes too).
func (c *Controller) createAndUpdate(ctx context.Context, key string, job Job, d *Decision) (int, error) {
	created, updated := writeLog{}, writeLog{}
	var mu sync.Mutex
	write := func(first bool) error {
		var errs []error
		for _, group := range c.kinds.group(d.CreateObjects) {
			if group.kind.BeforePods == first {
				names, err := c.create(ctx, key, job, group.kind, group.objs)
				mu.Lock()
				created.add(group.kind, names)
				mu.Unlock()
				errs = append(errs, err)
			}
		}
		for _, group := range c.kinds.group(d.UpdateObjects) {
			if group.kind.BeforePods == first {
				names, err := c.update(ctx, key, group.kind, group.objs)
				mu.Lock()
				updated.add(group.kind, names)
				mu.Unlock()
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	err := write(true)
	if err == nil {
		var othersErr, podsErr error
		var wg sync.WaitGroup
		wg.Go(func() { othersErr = write(false) })
		pods, podsErr := c.create(ctx, key, job, podKind, asObjects(d.CreatePods))
		wg.Wait()
		created.add(podKind, pods)
		err = errors.Join(othersErr, podsErr)
	}
	if len(created) > 0 {
		c.recorder.Eventf(job, corev1.EventTypeNormal, "Created", "Created %s", created.in(c.kinds))
	}
	if len(updated) > 0 {
		c.recorder.Eventf(job, corev1.EventTypeNormal, "Updated", "Updated %s to follow the spec", updated.in(c.kinds))
	}
	if err != nil {
		c.recorder.Eventf(job, corev1.EventTypeWarning, "CreateFailed", "%v", err)
	}
	return created.count() + updated.count(), err
}

// deleteAll deletes pods, then other children, expecting each deletion by UID.
func (c *Controller) deleteAll(ctx context.Context, key string, job Job, pods []*corev1.Pod, objects []metav1.Object) error {
	deleted := writeLog{}
	var err error
	for _, group := range append([]kindGroup{{podKind, asObjects(pods)}}, c.kinds.group(objects)...) {
		var names []string
		names, err = c.remove(ctx, key, group.kind, group.objs)
		deleted.add(group.kind, names)
		if err != nil {
			break
		}
	}
	if len(deleted) > 0 {
		c.recorder.Eventf(job, corev1.EventTypeNormal, "Deleted", "Deleted %s", deleted.in(c.kinds))
	}
	return err
}

// kindGroup is the objects of one kind.
type kindGroup struct {
	kind *ChildKind
	objs []metav1.Object
}

// group groups objects by kind, in the table's order.
func (t kindTable) group(objs []metav1.Object) []kindGroup {
	var groups []kindGroup
	for _, k := range t {
		g := kindGroup{kind: k}
		for _, o := range objs {
			if k.is(o) {
				g.objs = append(g.objs, o)
			}
		}
		if len(g.objs) > 0 {
			groups = append(groups, g)
		}
	}
	return groups
}

func asObjects[T metav1.Object](objs []T) []metav1.Object {
	out := make([]metav1.Object, len(objs))
	for i, o := range objs {
		out[i] = o
	}
	return out
}

// NameTakenError says that a child's name is held by an object the job does not own: the job
// cannot run as long as it is there.
type NameTakenError struct {
	Kind, Name string
}

func (e *NameTakenError) Error() string {
	return fmt.Sprintf("%s %s already exists and does not belong to this job: delete it, or give the job another name", e.Kind, e.Name)
}

// checkOwner tells, after a create found the name taken, whether the object there is the
// job's own (a cache that had not shown it yet) or another's.
func (c *Controller) checkOwner(ctx context.Context, job Job, k *ChildKind, name string) error {
	obj, err := k.get(ctx, c.clients, job.GetNamespace(), name)
	switch {
	case apierrors.IsNotFound(err):
		return nil // gone since: the next sync creates it
	case err != nil:
		return err
	}
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil && ref.UID == job.GetUID() {
		return nil
	}
	return &NameTakenError{Kind: string(k.Kind), Name: name}
}

// create sends creations of one kind in batches and returns the names of the objects it
// created.
func (c *Controller) create(ctx context.Context, key string, job Job, k *ChildKind, objs []metav1.Object) ([]string, error) {
	if len(objs) == 0 {
		return nil, nil
	}
	expect := expectKey(key, k)
	c.expect.ExpectCreations(expect, len(objs))
	var mu sync.Mutex
	var created []string
	attempted, err := inBatches(len(objs), func(i int) error {
		err := k.create(ctx, c.clients, objs[i])
		switch {
		case err == nil:
			mu.Lock()
			created = append(created, objs[i].GetName())
			mu.Unlock()
			return nil
		case apierrors.IsAlreadyExists(err):
			// A stale cache (it exists, and its add event will come: do not expect it twice),
			// or the name is another's.
			c.expect.CreationObserved(expect)
			return c.checkOwner(ctx, job, k, objs[i].GetName())
		default:
			c.expect.CreationObserved(expect)
			return fmt.Errorf("creating %s %s: %w", k.Resource, objs[i].GetName(), err)
		}
	})
	for range len(objs) - attempted {
		c.expect.CreationObserved(expect) // never sent
	}
	if len(created) > 0 {
		metrics.ChildrenCreated.WithLabelValues(c.kind, k.Resource).Add(float64(len(created)))
	}
	return created, err
}

// update sends updates of one kind, each as of the resourceVersion the decision saw, and
// returns the names of the objects it updated. One changed since is not overwritten: the
// conflict retries the sync, which decides again on what the cache shows by then.
func (c *Controller) update(ctx context.Context, key string, k *ChildKind, objs []metav1.Object) ([]string, error) {
	if len(objs) == 0 {
		return nil, nil
	}
	expect := expectKey(key, k)
	uids := uidsOf(objs)
	c.expect.ExpectUpdates(expect, uids...)
	var mu sync.Mutex
	var updated []string
	attempted, err := inBatches(len(objs), func(i int) error {
		err := k.update(ctx, c.clients, objs[i])
		if err == nil {
			mu.Lock()
			updated = append(updated, objs[i].GetName())
			mu.Unlock()
			return nil
		}
		c.expect.UpdateObserved(expect, uids[i])
		return fmt.Errorf("updating %s %s: %w", k.Resource, objs[i].GetName(), err)
	})
	for _, uid := range uids[attempted:] {
		c.expect.UpdateObserved(expect, uid) // never sent
	}
	if len(updated) > 0 {
		metrics.ChildrenUpdated.WithLabelValues(c.kind, k.Resource).Add(float64(len(updated)))
	}
	return updated, err
}

// deleteAsSeen deletes an object only as the decision saw it: the same object (UID), in the
// same state (resourceVersion). A pod that ended after the decision was made on a cached copy
// that still showed it running is not deleted as unfinished; the API server refuses with a
// conflict and a fresh decision sees the pod as it is now.
func deleteAsSeen(obj metav1.Object) metav1.DeleteOptions {
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	pre := &metav1.Preconditions{UID: &uid}
	if rv != "" {
		pre.ResourceVersion = &rv
	}
	return metav1.DeleteOptions{Preconditions: pre}
}

// errChanged tells the retry that a delete was refused because its object changed since it
// was read: the next sync decides again on what the cache shows by then.
var errChanged = errors.New("changed since the decision was made; deciding again")

// remove deletes objects of one kind as seen, in batches, and returns the names it deleted.
func (c *Controller) remove(ctx context.Context, key string, k *ChildKind, objs []metav1.Object) ([]string, error) {
	if len(objs) == 0 {
		return nil, nil
	}
	expect := expectKey(key, k)
	uids := uidsOf(objs)
	c.expect.ExpectDeletions(expect, uids...)
	var mu sync.Mutex
	var deleted []string
	attempted, err := inBatches(len(objs), func(i int) error {
		err := k.delete(ctx, c.clients, objs[i], deleteAsSeen(objs[i]))
		switch {
		case err == nil:
			mu.Lock()
			deleted = append(deleted, objs[i].GetName())
			mu.Unlock()
			return nil
		case apierrors.IsNotFound(err):
			// Gone already: its delete event may never come.
			c.expect.DeletionObserved(expect, uids[i])
			return nil
		case apierrors.IsConflict(err):
			// Replaced or changed (a pod that ended, say): not deleted.
			c.expect.DeletionObserved(expect, uids[i])
			return fmt.Errorf("not deleting %s %s: %w: %w", k.Resource, objs[i].GetName(), errChanged, err)
		default:
			c.expect.DeletionObserved(expect, uids[i])
			return fmt.Errorf("deleting %s %s: %w", k.Resource, objs[i].GetName(), err)
		}
	})
	for _, uid := range uids[attempted:] {
		c.expect.DeletionObserved(expect, uid)
	}
	if len(deleted) > 0 {
		metrics.ChildrenDeleted.WithLabelValues(c.kind, k.Resource).Add(float64(len(deleted)))
	}
	return deleted, err
}

func uidsOf(objs []metav1.Object) []types.UID {
	uids := make([]types.UID, len(objs))
	for i, o := range objs {
		uids[i] = o.GetUID()
	}
	return uids
}
