package main

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/informers/externalversions"
)

// job is what every kind has: its object metadata and the status all five share.
type job interface {
	metav1.Object
	JobStatus() *batch.JobStatus
}

// WaitFor watches one job with an informer until done says it is done, and returns the job
// as it was then; done is called with nil once the job is gone. The informer lists and
// watches only that job (a field selector on its name), and a watch that breaks is resumed
// by the informer: no polling, and nothing missed between the list and the watch.
func WaitFor(ctx context.Context, client versioned.Interface, kind, ns, name string, done func(job) bool) (job, error) {
	factory := externalversions.NewSharedInformerFactoryWithOptions(client, 0,
		externalversions.WithNamespace(ns),
		externalversions.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
	b := factory.Batch().V1beta1()
	var informer cache.SharedIndexInformer
	switch kind {
	case "GenericJob":
		informer = b.GenericJobs().Informer()
	case "MPIJob":
		informer = b.MPIJobs().Informer()
	case "ColossalAIJob":
		informer = b.ColossalAIJobs().Informer()
	case "TensorFlowTrainingJob":
		informer = b.TensorFlowTrainingJobs().Informer()
	case "XGBoostTrainingJob":
		informer = b.XGBoostTrainingJobs().Informer()
	default:
		return nil, fmt.Errorf("unknown kind %q: want one of %v", kind, Kinds)
	}

	found := make(chan job, 1)
	// The name is checked here too: a fake clientset's informer ignores field selectors.
	check := func(obj any) {
		j, _ := obj.(job)
		if j != nil && j.GetName() == name && done(j) {
			select {
			case found <- j:
			default:
			}
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    check,
		UpdateFunc: func(_, obj any) { check(obj) },
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if j, _ := obj.(job); j != nil && j.GetName() == name && done(nil) {
				select {
				case found <- nil:
				default:
				}
			}
		},
	}); err != nil {
		return nil, err
	}

	ctx, stop := context.WithCancel(ctx)
	defer func() {
		stop()
		factory.Shutdown() // waits for the informer's goroutines
	}()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return nil, ctx.Err()
	}
	// A job that does not exist, or is already gone, never sends an event.
	if _, exists, err := informer.GetStore().GetByKey(ns + "/" + name); err == nil && !exists && done(nil) {
		return nil, nil
	}
	select {
	case j := <-found:
		return j, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for %s %s/%s: %w", kind, ns, name, ctx.Err())
	}
}

// InPhase is done once the job is in one of phases.
func InPhase(phases ...batch.JobPhase) func(job) bool {
	return func(j job) bool {
		if j == nil {
			return false
		}
		for _, p := range phases {
			if j.JobStatus().Phase == p {
				return true
			}
		}
		return false
	}
}

// Gone is done once the job is deleted.
func Gone(j job) bool { return j == nil }
