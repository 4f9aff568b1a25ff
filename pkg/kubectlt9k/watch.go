package kubectlt9k

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"github.com/t9k-jobs/t9k-jobs/pkg/client/informers/externalversions"
)

// watch calls print for every change of a job after the list it was given: an informer per
// kind (or per job named), whose first list is skipped, as kubectl get -w prints only what
// changes after its table. A job that is deleted is printed once more, as it was.
func (o *Options) watch(ctx context.Context, listed []job, refs []string, print func(job) error) error {
	seen := map[string]string{} // kind/namespace/name -> resourceVersion printed
	for _, j := range listed {
		seen[key(j)] = j.GetResourceVersion()
	}
	changes := make(chan job, 64)
	send := func(k kind) func(any) {
		return func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if o, ok := obj.(jobObject); ok {
				select {
				case changes <- job{k, o}:
				case <-ctx.Done():
				}
			}
		}
	}
	watchKind := func(k kind, name string) error {
		informer := o.informer(ctx, k, name)
		_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    send(k),
			UpdateFunc: func(_, obj any) { send(k)(obj) },
			DeleteFunc: send(k),
		})
		return err
	}
	if len(refs) == 0 {
		for _, k := range kinds {
			if err := watchKind(k, ""); err != nil {
				return err
			}
		}
	} else {
		for _, j := range listed {
			if err := watchKind(j.Kind, j.GetName()); err != nil {
				return err
			}
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case j := <-changes:
			if seen[key(j)] == j.GetResourceVersion() {
				continue // the informer's first list: printed in the table already
			}
			seen[key(j)] = j.GetResourceVersion()
			if err := print(j); err != nil {
				return err
			}
		}
	}
}

// informer is a started informer on the jobs of kind k in o.Namespace, or on the one named
// name, until ctx ends.
func (o *Options) informer(ctx context.Context, k kind, name string) cache.SharedIndexInformer {
	opts := []externalversions.SharedInformerOption{externalversions.WithNamespace(o.Namespace)}
	if name != "" {
		opts = append(opts, externalversions.WithTweakListOptions(func(l *metav1.ListOptions) {
			l.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
	}
	f := externalversions.NewSharedInformerFactoryWithOptions(o.Jobs, 0, opts...)
	informer := k.informer(f.Batch().V1beta1())
	f.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		f.Shutdown()
	}()
	return informer
}

// waitUntil waits, with an informer on the one job, until done holds for it, and returns it
// as it was then.
func (o *Options) waitUntil(ctx context.Context, j job, done func(job) bool) (job, error) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	found := make(chan job, 1)
	check := func(obj any) {
		if jo, ok := obj.(jobObject); ok && jo.GetName() == j.GetName() && done(job{j.Kind, jo}) {
			select {
			case found <- job{j.Kind, jo}:
			default:
			}
		}
	}
	informer := o.informer(ctx, j.Kind, j.GetName())
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: check, UpdateFunc: func(_, obj any) { check(obj) }}); err != nil {
		return job{}, err
	}
	select {
	case j := <-found:
		return j, nil
	case <-ctx.Done():
		return job{}, ctx.Err()
	}
}

// waitShown waits, up to o.Timeout, until done holds for the job ref a command changed.
// Past the timeout, the error says what was asked, what the job does not show yet, and where
// to look: "<asked>, but <notYet> after 2m0s; `kubectl t9k why <ref>` says why".
func (o *Options) waitShown(ctx context.Context, j job, ref string, done func(job) bool, asked, notYet string) (job, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	now, err := o.waitUntil(ctx, j, done)
	if errors.Is(err, context.DeadlineExceeded) {
		return job{}, fmt.Errorf("%s, but %s after %s; `kubectl t9k why %s` says why", asked, notYet, o.Timeout, ref)
	}
	return now, err
}

func key(j job) string {
	return fmt.Sprintf("%s/%s/%s", j.Kind.Resource, j.GetNamespace(), j.GetName())
}

// now is the time rows are aged by: o.Now in tests, the clock otherwise.
func (o *Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}
