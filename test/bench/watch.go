package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
	jobinformers "github.com/t9k-jobs/t9k-jobs/pkg/client/informers/externalversions"
)

// podCounts counts a namespace's pods: all of them, those bound to a node, those Running.
type podCounts struct{ created, scheduled, running int }

// watchPods counts the pods of a namespace that match selector (a label selector; all when
// empty) from an informer, to which it adds handlers before it starts.
func watchPods(ctx context.Context, kube kubernetes.Interface, ns, selector string, handlers ...cache.ResourceEventHandler) func() podCounts {
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	informer := factory.Core().V1().Pods().Informer()
	for _, h := range handlers {
		if _, err := informer.AddEventHandler(h); err != nil {
			panic(err) // only when the informer has stopped, and it has not started
		}
	}
	factory.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), informer.HasSynced)
	return func() podCounts {
		var n podCounts
		for _, obj := range informer.GetStore().List() {
			pod := obj.(*corev1.Pod)
			n.created++
			if pod.Spec.NodeName != "" {
				n.scheduled++
			}
			if pod.Status.Phase == corev1.PodRunning {
				n.running++
			}
		}
		return n
	}
}

// showProgress prints, with BENCH_DIAG set, a line a second of how far a run has got, once
// the returned stop is called (printing meanwhile would cost the run CPU).
func showProgress(run string, pods func() podCounts, jobsRunning func() int) (stop func()) {
	if os.Getenv("BENCH_DIAG") == "" {
		return func() {}
	}
	start := time.Now()
	var lines []string
	stopTicking := every(time.Second, func() {
		n := pods()
		lines = append(lines, fmt.Sprintf("%5.1fs %5d created %5d scheduled %5d Running %4d jobs Running",
			time.Since(start).Seconds(), n.created, n.scheduled, n.running, jobsRunning()))
	})
	return func() {
		stopTicking()
		for _, l := range lines {
			fmt.Printf("  %s %s\n", run, l)
		}
	}
}

// watchRunningJobs counts the Running jobs of a namespace that match selector from an
// informer, so that waiting costs the API server nothing; handlers are added to the informer
// before it starts. An MPIJob is Running once its launcher is.
func watchRunningJobs(ctx context.Context, kind string, client versioned.Interface, ns, selector string, handlers ...cache.ResourceEventHandler) func() int {
	factory := jobinformers.NewSharedInformerFactoryWithOptions(client, 0, jobinformers.WithNamespace(ns),
		jobinformers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	informer := factory.Batch().V1beta1().GenericJobs().Informer()
	switch kind {
	case "MPIJob":
		informer = factory.Batch().V1beta1().MPIJobs().Informer()
	case "TensorFlowTrainingJob":
		informer = factory.Batch().V1beta1().TensorFlowTrainingJobs().Informer()
	}
	for _, h := range handlers {
		if _, err := informer.AddEventHandler(h); err != nil {
			panic(err)
		}
	}
	factory.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), informer.HasSynced)
	return func() int {
		n := 0
		for _, obj := range informer.GetStore().List() {
			if obj.(interface{ JobStatus() *batch.JobStatus }).JobStatus().Phase == batch.JobRunning {
				n++
			}
		}
		return n
	}
}

// podsPerJob is how many pods a job of the bench has: its replicas, and an MPIJob's launcher.
func podsPerJob(c config) int {
	if c.kind == "MPIJob" {
		return c.replicas + 1
	}
	return c.replicas
}

func parallel(workers, n int, f func(i int) error) error {
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
		next  = make(chan int)
	)
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}
