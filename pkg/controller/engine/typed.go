package engine

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// Typed is the part of an Adapter that only differs by type between kinds: the kind, its
// informer, reads from its cache and status writes. An adapter embeds it and adds Plan.
type Typed[T Job] struct {
	kind     string
	informer cache.SharedIndexInformer
	get      func(namespace, name string) (T, error)
	update   func(ctx context.Context, job T) (T, error)
}

// NewTyped describes a kind: get reads a job from the informer's cache, update writes its
// status subresource.
func NewTyped[T Job](kind string, informer cache.SharedIndexInformer, get func(namespace, name string) (T, error),
	update func(ctx context.Context, job T) (T, error)) Typed[T] {
	return Typed[T]{kind: kind, informer: informer, get: get, update: update}
}

// GroupVersionKind of the kind's jobs.
func (t Typed[T]) GroupVersionKind() schema.GroupVersionKind {
	return batch.SchemeGroupVersion.WithKind(t.kind)
}

// Informer watches the kind's jobs.
func (t Typed[T]) Informer() cache.SharedIndexInformer { return t.informer }

// Get reads a job from the informer cache.
func (t Typed[T]) Get(namespace, name string) (Job, error) {
	job, err := t.get(namespace, name)
	if err != nil {
		return nil, err
	}
	return job, nil
}

// UpdateStatus writes a job's status subresource and returns the job as written.
func (t Typed[T]) UpdateStatus(ctx context.Context, job Job) (Job, error) {
	written, err := t.update(ctx, job.(T))
	if err != nil {
		return nil, err
	}
	return written, nil
}
