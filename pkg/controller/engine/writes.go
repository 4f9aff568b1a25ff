package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
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

// createAll creates the decision's services and pods, side by side, expecting them first so
// that a sync on a cache that does not show them yet does not create them again. It returns
// how many were created, and reports them in one event (events are writes too).
func (c *Controller) createAll(ctx context.Context, key string, job Job, d *Decision) (int, error) {
	// The other objects first: pods mount the Secrets and ConfigMaps.
	objects, err := c.createObjects(ctx, key, job, d.CreateObjects)
	if err != nil {
		return len(objects), err
	}
	var services, pods []string
	var servicesErr, podsErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		services, servicesErr = create(ctx, c, job, servicesKey(key), "services", d.CreateServices, func(s *corev1.Service) error {
			_, err := c.kube.CoreV1().Services(s.Namespace).Create(ctx, s, metav1.CreateOptions{})
			return err
		})
	})
	pods, podsErr = create(ctx, c, job, podsKey(key), "pods", d.CreatePods, func(p *corev1.Pod) error {
		_, err := c.kube.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		return err
	})
	wg.Wait()
	var parts []string
	if len(objects) > 0 {
		parts = append(parts, summarize(objects))
	}
	if len(pods) > 0 {
		parts = append(parts, "pods "+summarize(pods))
	}
	if len(services) > 0 {
		parts = append(parts, "services "+summarize(services))
	}
	if len(parts) > 0 {
		c.recorder.Eventf(job, corev1.EventTypeNormal, "Created", "Created %s", strings.Join(parts, "; "))
	}
	err = errors.Join(servicesErr, podsErr)
	if err != nil {
		c.recorder.Eventf(job, corev1.EventTypeWarning, "CreateFailed", "%v", err)
	}
	return len(objects) + len(services) + len(pods), err
}

// createObjects creates the plan's other objects that are missing, one by one (they are few),
// and returns them as kind/name.
func (c *Controller) createObjects(ctx context.Context, key string, job Job, objs []Object) ([]string, error) {
	var created []string
	for _, o := range objs {
		obj, err := o.Build()
		if err != nil {
			return created, fmt.Errorf("making %s %s: %w", o.Kind, o.Name, err)
		}
		obj.SetName(o.Name)
		obj.SetNamespace(job.GetNamespace())
		labels := obj.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[batch.LabelJobName] = job.GetName()
		labels[batch.LabelControllerUID] = string(job.GetUID())
		obj.SetLabels(labels)
		obj.SetOwnerReferences(controllerRef(job))
		var names []string
		switch v := obj.(type) {
		case *corev1.Secret:
			names, err = create(ctx, c, job, secretsKey(key), "secrets", []*corev1.Secret{v}, func(s *corev1.Secret) error {
				_, err := c.kube.CoreV1().Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{})
				return err
			})
		case *corev1.ConfigMap:
			names, err = create(ctx, c, job, configMapsKey(key), "configmaps", []*corev1.ConfigMap{v}, func(m *corev1.ConfigMap) error {
				_, err := c.kube.CoreV1().ConfigMaps(m.Namespace).Create(ctx, m, metav1.CreateOptions{})
				return err
			})
		case *corev1.Service:
			names, err = create(ctx, c, job, servicesKey(key), "services", []*corev1.Service{v}, func(s *corev1.Service) error {
				_, err := c.kube.CoreV1().Services(s.Namespace).Create(ctx, s, metav1.CreateOptions{})
				return err
			})
		case *appsv1.Deployment:
			names, err = create(ctx, c, job, deploymentsKey(key), "deployments", []*appsv1.Deployment{v}, func(d *appsv1.Deployment) error {
				_, err := c.kube.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{})
				return err
			})
		default:
			return created, fmt.Errorf("%s %s: the engine does not create a %T", o.Kind, o.Name, obj)
		}
		for _, n := range names {
			created = append(created, fmt.Sprintf("%s %s", strings.ToLower(string(o.Kind)), n))
		}
		if err != nil {
			return created, err
		}
	}
	return created, nil
}

// NameTakenError says that a child's name is held by an object the job does not own: the job
// cannot run as long as it is there.
type NameTakenError struct {
	Kind, Name string
}

func (e *NameTakenError) Error() string {
	return fmt.Sprintf("%s %s already exists and does not belong to this job: delete it, or give the job another name", e.Kind, e.Name)
}

// resourceKinds names the kinds of the resources the engine creates, for messages.
var resourceKinds = map[string]string{"pods": "Pod", "services": "Service", "secrets": "Secret", "configmaps": "ConfigMap", "deployments": "Deployment"}

// checkOwner tells, after a create found the name taken, whether the object there is the
// job's own (a cache that had not shown it yet) or another's.
func (c *Controller) checkOwner(ctx context.Context, job Job, resource, name string) error {
	ns, get := job.GetNamespace(), metav1.GetOptions{}
	var obj metav1.Object
	var err error
	switch resource {
	case "pods":
		obj, err = c.kube.CoreV1().Pods(ns).Get(ctx, name, get)
	case "services":
		obj, err = c.kube.CoreV1().Services(ns).Get(ctx, name, get)
	case "secrets":
		obj, err = c.kube.CoreV1().Secrets(ns).Get(ctx, name, get)
	case "configmaps":
		obj, err = c.kube.CoreV1().ConfigMaps(ns).Get(ctx, name, get)
	case "deployments":
		obj, err = c.kube.AppsV1().Deployments(ns).Get(ctx, name, get)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil // gone since: the next sync creates it
	case err != nil:
		return err
	}
	if ref := metav1.GetControllerOf(obj); ref != nil && ref.UID == job.GetUID() {
		return nil
	}
	return &NameTakenError{Kind: resourceKinds[resource], Name: name}
}

// create sends creations in batches and returns the names of the objects it created.
func create[T metav1.Object](ctx context.Context, c *Controller, job Job, expectKey, resource string, objs []T, send func(T) error) ([]string, error) {
	if len(objs) == 0 {
		return nil, nil
	}
	c.expect.ExpectCreations(expectKey, len(objs))
	var mu sync.Mutex
	var created []string
	attempted, err := inBatches(len(objs), func(i int) error {
		err := send(objs[i])
		switch {
		case err == nil:
			mu.Lock()
			created = append(created, objs[i].GetName())
			mu.Unlock()
			return nil
		case apierrors.IsAlreadyExists(err):
			// A stale cache (it exists, and its add event will come: do not expect it twice),
			// or the name is another's.
			c.expect.CreationObserved(expectKey)
			return c.checkOwner(ctx, job, resource, objs[i].GetName())
		default:
			c.expect.CreationObserved(expectKey)
			return fmt.Errorf("creating %s %s: %w", resource, objs[i].GetName(), err)
		}
	})
	for range len(objs) - attempted {
		c.expect.CreationObserved(expectKey) // never sent
	}
	if len(created) > 0 {
		metrics.ChildrenCreated.WithLabelValues(c.kind, resource).Add(float64(len(created)))
	}
	return created, err
}

// deleteAll deletes the decision's pods and services, expecting each deletion by UID.
func (c *Controller) deleteAll(ctx context.Context, key string, job Job, d *Decision) error {
	if err := remove(c, job, podsKey(key), "pods", d.DeletePods, func(p *corev1.Pod) error {
		return c.kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, deleteAsSeen(p))
	}); err != nil {
		return err
	}
	return remove(c, job, servicesKey(key), "services", d.DeleteServices, func(s *corev1.Service) error {
		return c.kube.CoreV1().Services(s.Namespace).Delete(ctx, s.Name, deleteAsSeen(s))
	})
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

func remove[T metav1.Object](c *Controller, job Job, expectKey, resource string, objs []T, send func(T) error) error {
	if len(objs) == 0 {
		return nil
	}
	uids := make([]types.UID, len(objs))
	for i, o := range objs {
		uids[i] = o.GetUID()
	}
	c.expect.ExpectDeletions(expectKey, uids...)
	var mu sync.Mutex
	var deleted []string
	attempted, err := inBatches(len(objs), func(i int) error {
		err := send(objs[i])
		switch {
		case err == nil:
			mu.Lock()
			deleted = append(deleted, objs[i].GetName())
			mu.Unlock()
			return nil
		case apierrors.IsNotFound(err):
			// Gone already: its delete event may never come.
			c.expect.DeletionObserved(expectKey, uids[i])
			return nil
		case apierrors.IsConflict(err):
			// Replaced or changed (a pod that ended, say): not deleted.
			c.expect.DeletionObserved(expectKey, uids[i])
			return fmt.Errorf("not deleting %s %s: %w: %w", resource, objs[i].GetName(), errChanged, err)
		default:
			c.expect.DeletionObserved(expectKey, uids[i])
			return fmt.Errorf("deleting %s %s: %w", resource, objs[i].GetName(), err)
		}
	})
	for _, uid := range uids[attempted:] {
		c.expect.DeletionObserved(expectKey, uid)
	}
	if len(deleted) > 0 {
		metrics.ChildrenDeleted.WithLabelValues(c.kind, resource).Add(float64(len(deleted)))
		c.recorder.Eventf(job, corev1.EventTypeNormal, "Deleted", "Deleted %s: %s", resource, summarize(deleted))
	}
	return err
}

// summarize lists names for an event, the first few of a long list.
func summarize(names []string) string {
	const most = 5
	if len(names) <= most {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:most], ", "), len(names)-most)
}
