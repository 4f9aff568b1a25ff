package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	kueue "github.com/t9k-jobs/t9k-jobs/pkg/apis/kueue/v1beta2"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
	kueueclient "github.com/t9k-jobs/t9k-jobs/pkg/client/kueue/clientset/versioned"
	kueueinformers "github.com/t9k-jobs/t9k-jobs/pkg/client/kueue/informers/externalversions"
	"github.com/t9k-jobs/t9k-jobs/test/harness"
)

// -elastic: what a resize costs (docs/elastic.md). One cluster and controller; the burst's
// jobs, elastic (replicas R, between 1 and 2R), run; then every job is resized to 2R through
// the scale subresource, as kubectl scale does, and back to R. For each resize it reports,
// per job, the time from its scale request to its last new pod Running (grow) or its last
// removed pod gone (shrink), p50 and p99, and the controller's API writes per job's resize
// by verb and resource.

func elasticRun(ctx context.Context, c config, dir string) error {
	fmt.Printf("\n%d elastic GenericJobs of %d replicas (between 1 and %d), each resized to %d and back\n",
		c.jobs, c.replicas, 2*c.replicas, 2*c.replicas)
	if c.kueue {
		c.queue = queuePlain
		fmt.Printf("in Kueue's LocalQueue %q: growing through workload slices\n", benchQueue)
	}
	return withSettledJobs(ctx, c, dir, func(ctl *controllerProcess, admin *rest.Config, kube kubernetes.Interface) error {
		client := versioned.NewForConfigOrDie(admin)
		for _, step := range []struct {
			name string
			size int
		}{{"grow", 2 * c.replicas}, {"shrink", c.replicas}} {
			before, err := scrape(ctl.metrics)
			if err != nil {
				return err
			}
			took, quota, err := resizeAll(ctx, c, client, admin, kube, step.size)
			if err != nil {
				return err
			}
			if _, err := ctl.settle(ctx, "GenericJob", 5*time.Minute); err != nil {
				return err
			}
			after, err := scrape(ctl.metrics)
			if err != nil {
				return err
			}
			fmt.Printf("  %s to %d: from the scale request to the job's last pod %s, p50 %s p99 %s\n", step.name, step.size,
				map[bool]string{true: "Running", false: "gone"}[step.name == "grow"], ms(percentile(took, 0.5)), ms(percentile(took, 0.99)))
			if c.queue != queueNone {
				fmt.Printf("  %s to %d: from the scale request to Kueue holding the job's quota at that size (%s), p50 %s p99 %s\n", step.name, step.size,
					map[bool]string{true: "its slice admitted", false: "the removed pods' quota handed back"}[step.name == "grow"],
					ms(percentile(quota, 0.5)), ms(percentile(quota, 0.99)))
			}
			fmt.Printf("  %s: the controller's API writes per job, by verb and resource:\n", step.name)
			for _, k := range slices.Sorted(maps.Keys(after)) {
				verb := strings.Fields(k)[0]
				if n := after[k] - before[k]; n > 0 && isWrite(verb) {
					fmt.Printf("    %-40s %6.2f\n", k, n/float64(c.jobs))
				}
			}
		}
		return nil
	})
}

// resizeAll resizes every job of the burst to size through its scale subresource, and
// returns how long each took to be at that size: its pods of that many Running, none more;
// and, for queued jobs, to Kueue holding quota for that many of its workers (quotaAt).
func resizeAll(ctx context.Context, c config, client versioned.Interface, admin *rest.Config, kube kubernetes.Interface, size int) (running, quota []time.Duration, err error) {
	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	var mu sync.Mutex
	asked := map[string]time.Time{}
	took, held := map[string]time.Duration{}, map[string]time.Duration{}
	if c.queue != queueNone {
		if err := quotaAt(watchCtx, admin, size, &mu, asked, held); err != nil {
			return nil, nil, err
		}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(jobNamespace))
	informer := factory.Core().V1().Pods().Informer()
	// A job is at its new size when, in the informer's cache, it has that many pods, all
	// Running.
	err = checkByJob(informer, func(job string, pods []any) {
		mu.Lock()
		defer mu.Unlock()
		at, ok := asked[job]
		if !ok || took[job] != 0 {
			return
		}
		n := 0
		for _, obj := range pods {
			if p := obj.(*corev1.Pod); p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				n++
			}
		}
		if n == size && len(pods) == size {
			took[job] = time.Since(at)
		}
	})
	if err != nil {
		return nil, nil, err
	}
	factory.Start(watchCtx.Done())
	cache.WaitForCacheSync(watchCtx.Done(), informer.HasSynced)

	patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, size))
	err = parallel(16, c.jobs, func(i int) error {
		name := fmt.Sprintf("job-%04d", i)
		mu.Lock()
		asked[name] = time.Now()
		mu.Unlock()
		// As kubectl scale sends it: a merge patch of the Scale (the typed client would
		// decode the answer as a GenericJob).
		return client.BatchV1beta1().RESTClient().Patch(types.MergePatchType).Namespace(jobNamespace).
			Resource("genericjobs").Name(name).SubResource("scale").Body(patch).Do(ctx).Error()
	})
	if err != nil {
		return nil, nil, err
	}
	// Each request was recorded before it was sent: the pod (and Workload) events that follow
	// it check its job.
	err = harness.WaitFor(ctx, fmt.Sprintf("every job at %d replicas", size), 50*time.Millisecond, 5*time.Minute, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(took) == c.jobs && (c.queue == queueNone || len(held) == c.jobs), nil
	})
	mu.Lock()
	defer mu.Unlock()
	return slices.Collect(maps.Values(took)), slices.Collect(maps.Values(held)), err
}

// quotaAt records in held, for each job asked to resize (asked, under mu), how long after its
// request Kueue held quota for exactly size of its workers: one Workload of the job holds
// quota and is not finished, and its worker pod set's count admitted, less its reclaimable
// pods, is size.
func quotaAt(ctx context.Context, admin *rest.Config, size int, mu *sync.Mutex, asked map[string]time.Time, held map[string]time.Duration) error {
	factory := kueueinformers.NewSharedInformerFactoryWithOptions(kueueclient.NewForConfigOrDie(admin), 0, kueueinformers.WithNamespace(jobNamespace))
	informer := factory.Kueue().V1beta2().Workloads().Informer()
	err := checkByJob(informer, func(job string, objs []any) {
		mu.Lock()
		defer mu.Unlock()
		at, ok := asked[job]
		if !ok || held[job] != 0 {
			return
		}
		holding, n := 0, int32(0)
		for _, obj := range objs {
			wl := obj.(*kueue.Workload)
			if !meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) ||
				meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) || wl.Status.Admission == nil {
				continue
			}
			holding++
			n = workersHeld(wl)
		}
		if holding == 1 && n == int32(size) {
			held[job] = time.Since(at)
		}
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), informer.HasSynced)
	return nil
}

// checkByJob indexes an informer's objects by their job (the job-name label) and calls check
// with a job's objects, from the informer's cache, at each event of one of them.
func checkByJob(informer cache.SharedIndexInformer, check func(job string, objs []any)) error {
	const byJob = "job"
	jobOf := func(obj any) string {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if o, ok := obj.(metav1.Object); ok {
			return o.GetLabels()["batch.tensorstack.dev/job-name"]
		}
		return ""
	}
	if err := informer.AddIndexers(cache.Indexers{byJob: func(obj any) ([]string, error) { return []string{jobOf(obj)}, nil }}); err != nil {
		return err
	}
	on := func(obj any) {
		if job := jobOf(obj); job != "" {
			objs, _ := informer.GetIndexer().ByIndex(byJob, job)
			check(job, objs)
		}
	}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: on, UpdateFunc: func(_, obj any) { on(obj) }, DeleteFunc: on})
	return err
}

// workersHeld is how many workers an admitted Workload holds quota for: the count Kueue
// admitted of the pod set, less what its reclaimable pods take off the pod set's count.
func workersHeld(wl *kueue.Workload) int32 {
	var asked, admitted, reclaimable int32
	for _, ps := range wl.Spec.PodSets {
		if ps.Name == "worker" {
			asked, admitted = ps.Count, ps.Count
		}
	}
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		if psa.Name == "worker" && psa.Count != nil {
			admitted = *psa.Count
		}
	}
	for _, rp := range wl.Status.ReclaimablePods {
		if rp.Name == "worker" {
			reclaimable = rp.Count
		}
	}
	return max(min(admitted, asked-reclaimable), 0)
}
