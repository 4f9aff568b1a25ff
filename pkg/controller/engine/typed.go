package engine

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// Defaulter is a job of a kind whose unset fields have defaults.
type Defaulter interface {
	Job
	Default()
}

// NewAdapter makes a kind's Adapter from what differs between kinds only by type: its name,
// informer, lister (as the generated lister's per-namespace getter) and status client (as the
// generated clientset's per-namespace getter), and its plan function. The plan function gets
// a defaulted copy of the job: users see what they wrote, the plan what it means.
func NewAdapter[T Defaulter, L interface {
	Get(name string) (T, error)
}, C interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	UpdateStatus(ctx context.Context, job T, opts metav1.UpdateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}](kind string, informer cache.SharedIndexInformer, lister func(namespace string) L, client func(namespace string) C,
	plan func(job T) (*Plan, error)) Adapter {
	return &kindAdapter[T]{
		kind: kind, informer: informer, plan: plan,
		get: func(ns, name string) (T, error) { return lister(ns).Get(name) },
		read: func(ctx context.Context, ns, name string) (T, error) {
			return client(ns).Get(ctx, name, metav1.GetOptions{})
		},
		update: func(ctx context.Context, job T) (T, error) {
			return client(job.GetNamespace()).UpdateStatus(ctx, job, metav1.UpdateOptions{FieldManager: FieldManager})
		},
		delete: func(ctx context.Context, job T) error {
			uid, rv := job.GetUID(), job.GetResourceVersion()
			return client(job.GetNamespace()).Delete(ctx, job.GetName(), metav1.DeleteOptions{
				Preconditions:     &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
				PropagationPolicy: ptr.To(metav1.DeletePropagationForeground),
			})
		},
	}
}

// PlanDefaulted is what the engine gives a plan function: a defaulted copy of job.
func PlanDefaulted[T Defaulter](plan func(job T) (*Plan, error), job T) (*Plan, error) {
	copied := job.DeepCopyObject().(T)
	copied.Default()
	p, err := plan(copied)
	if err != nil {
		return nil, err
	}
	p.SetLifecycle(copied.JobLifecycle())
	return p, nil
}

type kindAdapter[T Defaulter] struct {
	kind     string
	informer cache.SharedIndexInformer
	get      func(namespace, name string) (T, error)
	read     func(ctx context.Context, namespace, name string) (T, error)
	update   func(ctx context.Context, job T) (T, error)
	delete   func(ctx context.Context, job T) error
	plan     func(job T) (*Plan, error)
}

func (t *kindAdapter[T]) GroupVersionKind() schema.GroupVersionKind {
	return batch.SchemeGroupVersion.WithKind(t.kind)
}

func (t *kindAdapter[T]) Informer() cache.SharedIndexInformer { return t.informer }

func (t *kindAdapter[T]) Get(namespace, name string) (Job, error) {
	job, err := t.get(namespace, name)
	if err != nil {
		return nil, err
	}
	return job, nil
}

func (t *kindAdapter[T]) Plan(job Job) (*Plan, error) { return PlanDefaulted(t.plan, job.(T)) }

func (t *kindAdapter[T]) UpdateStatus(ctx context.Context, job Job) (Job, error) {
	written, err := t.update(ctx, job.(T))
	if err != nil {
		return nil, err
	}
	return written, nil
}

func (t *kindAdapter[T]) Read(ctx context.Context, namespace, name string) (Job, error) {
	job, err := t.read(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return job, nil
}

func (t *kindAdapter[T]) Delete(ctx context.Context, job Job) error { return t.delete(ctx, job.(T)) }
