package main

import (
	"context"
	"fmt"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
	jobinformers "github.com/t9k-jobs/t9k-jobs/pkg/client/informers/externalversions"
)

// Finished jobs for -finished and -scale, and counts of them and their pods. This process
// may watch 10,000 jobs and 80,000 pods on the same 2 cores as the controller, so its
// informers keep of each object only its name and phase, and count in their handlers.

// prefillJob is a GenericJob whose pods end at once and stay (cleanUpPolicy None), without
// services: a finished job as it sits in the controller's cache. It and its pods carry
// prefillLabel.
func prefillJob(c config, i int) *batch.GenericJob {
	labels := map[string]string{prefillLabel: "true"}
	return &batch.GenericJob{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("done-%05d", i), Labels: labels},
		Spec: batch.GenericJobSpec{
			ReplicaSpecs: []batch.GenericReplicaSpec{{Type: "worker", Replicas: ptr.To(int32(c.replicas)),
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{"test.batch.tensorstack.dev/exit-code": "0"}},
					Spec:       podSpec()}}},
			CleanUpPolicy: batch.CleanUpNone,
		},
	}
}

// createFinished creates the finished jobs [from, to) in jobNamespace.
func createFinished(ctx context.Context, c config, admin *rest.Config, from, to int) error {
	client := versioned.NewForConfigOrDie(admin)
	return parallel(32, to-from, func(i int) error {
		_, err := client.BatchV1beta1().GenericJobs(jobNamespace).Create(ctx, prefillJob(c, from+i), metav1.CreateOptions{})
		return err
	})
}

// tally counts objects of one kind, those in a phase, and those deleted, as an informer sees
// them.
type tally struct{ all, running, succeeded, failed, deleted atomic.Int64 }

func (t *tally) count(phase string, by int64) {
	t.all.Add(by)
	switch phase {
	case string(corev1.PodRunning): // the same word for jobs
		t.running.Add(by)
	case string(batch.JobSucceeded):
		t.succeeded.Add(by)
	case string(batch.JobFailed):
		t.failed.Add(by)
	}
}

// handler counts an object in its phase when it comes, moves it when its phase changes, and
// uncounts it when it goes; phase reads the phase of an object as the informer keeps it.
func (t *tally) handler(phase func(any) string) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { t.count(phase(obj), 1) },
		UpdateFunc: func(old, obj any) {
			t.count(phase(old), -1)
			t.count(phase(obj), 1)
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			t.count(phase(obj), -1)
			t.deleted.Add(1)
		},
	}
}

// gcWarning says, when pods of finished jobs went, who most likely took them: not the
// controller (cleanUpPolicy None), but kube-controller-manager's PodGC, which deletes ended
// pods past --terminated-pod-gc-threshold (12,500 by default; test/cluster sets 100,000). The
// controller then holds fewer pods than the jobs had, and its queue sees every deletion.
func gcWarning(pods *tally) string {
	n := pods.deleted.Load()
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("warning: %d pods of finished jobs were deleted meanwhile, most likely by kube-controller-manager's PodGC (--terminated-pod-gc-threshold): the figures are of fewer pods than the jobs had, and the controller saw their deletions", n)
}

// tallyPods counts the pods of a namespace that match selector.
func tallyPods(ctx context.Context, kube kubernetes.Interface, ns, selector string) *tally {
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	informer := factory.Core().V1().Pods().Informer()
	t := &tally{}
	prepareInformer(informer, t.handler(func(obj any) string { return string(obj.(*corev1.Pod).Status.Phase) }), func(obj any) (any, error) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return obj, nil
		}
		return &corev1.Pod{ObjectMeta: slim(pod.ObjectMeta), Status: corev1.PodStatus{Phase: pod.Status.Phase}}, nil
	})
	factory.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), informer.HasSynced)
	return t
}

// tallyJobs counts the GenericJobs of a namespace that match selector.
func tallyJobs(ctx context.Context, client versioned.Interface, ns, selector string) *tally {
	factory := jobinformers.NewSharedInformerFactoryWithOptions(client, 0, jobinformers.WithNamespace(ns),
		jobinformers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	informer := factory.Batch().V1beta1().GenericJobs().Informer()
	t := &tally{}
	prepareInformer(informer, t.handler(func(obj any) string { return string(obj.(*batch.GenericJob).Status.Phase) }), func(obj any) (any, error) {
		job, ok := obj.(*batch.GenericJob)
		if !ok {
			return obj, nil
		}
		return &batch.GenericJob{ObjectMeta: slim(job.ObjectMeta), Status: batch.JobStatus{Phase: job.Status.Phase}}, nil
	})
	factory.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), informer.HasSynced)
	return t
}

// prepareInformer sets an informer's transform and handler before its factory starts it.
func prepareInformer(informer cache.SharedIndexInformer, h cache.ResourceEventHandler, transform cache.TransformFunc) {
	if err := informer.SetTransform(transform); err != nil {
		panic(err) // only once started, and it has not
	}
	if _, err := informer.AddEventHandler(h); err != nil {
		panic(err)
	}
}

// slim is what an informer needs of an object's metadata: its key and version.
func slim(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, ResourceVersion: m.ResourceVersion}
}
