package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	kueue "github.com/t9k-jobs/t9k-jobs/pkg/apis/kueue/v1beta2"
	kueueclient "github.com/t9k-jobs/t9k-jobs/pkg/client/kueue/clientset/versioned"
)

// elasticQueuedJob is queuedJob's job of 1-CPU workers made elastic: asking for n, between
// lo and n, running until the test ends it.
func elasticQueuedJob(name, queue string, n, lo int32) *batch.GenericJob {
	job := queuedJob(name, queue, n, "1h")
	job.Spec.ReplicaSpecs[0].Replicas = nil
	job.Spec.Elastic = &batch.ElasticPolicy{ReplicaType: "worker", Replicas: n, MinReplicas: lo, MaxReplicas: n}
	return job
}

// TestKueueElasticJob: with real Kueue, an elastic job asking for 4 workers in a queue with
// room for 2 is admitted partly and runs 2, and says so; scaled down to 1 while it runs, it
// hands the quota of the worker it removed back to Kueue at once, which admits a waiting
// job of 1 worker onto it; asked for 4 again, it stays at the 1 it still holds quota for.
func TestKueueElasticJob(t *testing.T) {
	client := useKueue(t)
	parallel(t)
	ns := namespace(t)
	queue := queueFor(t, ns, 2)
	elastic := elasticQueuedJob("elastic", queue, 4, 1)
	createJob(t, ns, elastic)
	running := waitJob(t, ns, elastic.Name, "running 2 of 4 workers", runningWorkers(2))
	if n := len(running.Status.Tasks[0].Replicas); n != 2 {
		t.Errorf("status lists %d workers, want the 2 admitted", n)
	}
	wl := workloadOf(t, client, ns, "genericjob-elastic")
	if ps := wl.Spec.PodSets[0]; ps.Count != 4 || ps.MinCount == nil || *ps.MinCount != 1 {
		t.Errorf("pod set %+v: want 4 asked, at least 1", ps)
	}
	if events, ok := eventsSaying(t, ns, elastic.Name, "worker: 2 of 4 (partial admission)"); !ok {
		t.Errorf("no Admitted event saying the admission is partial:\n%s", events)
	}

	other := queuedJob("other", queue, 1, "1h")
	createJob(t, ns, other)
	waitJob(t, ns, other.Name, "queued for want of quota", func(j *batch.GenericJob) bool {
		return j.Status.Condition(batch.JobConditionRunning).Reason == "Queued"
	})
	if out, err := kubectl("scale", "-n", ns, "gj/elastic", "--replicas=1"); err != nil {
		t.Fatalf("kubectl scale --replicas=1: %v: %s", err, out)
	}
	waitJob(t, ns, elastic.Name, "running 1 worker", runningWorkers(1))
	waitJob(t, ns, other.Name, "admitted onto the quota the shrink released", inPhase(batch.JobRunning))
	wl = workloadOf(t, client, ns, "genericjob-elastic")
	if rp := wl.Status.ReclaimablePods; len(rp) != 1 || rp[0].Name != "worker" || rp[0].Count != 3 {
		t.Errorf("reclaimable pods %+v, want worker: 3 (of the pod set's 4, 1 runs)", rp)
	}
	// Events are written after the status that shows what they tell: waited for.
	if events, ok := eventsSaying(t, ns, elastic.Name, "Resized worker from 2 to 1 replicas"); !ok {
		t.Errorf("no Resized event for the shrink:\n%s", events)
	}

	if out, err := kubectl("scale", "-n", ns, "gj/elastic", "--replicas=4"); err != nil {
		t.Fatalf("kubectl scale --replicas=4: %v: %s", err, out)
	}
	waitJob(t, ns, elastic.Name, "spec at 4", func(j *batch.GenericJob) bool { return j.Spec.Elastic.Replicas == 4 })
	// The controller has seen the new size once it has written a status of that generation.
	again := waitJob(t, ns, elastic.Name, "the new size seen", func(j *batch.GenericJob) bool {
		return j.Status.ObservedGeneration == j.Generation
	})
	if n := len(again.Status.Tasks[0].Replicas); n != 1 {
		t.Errorf("asked for 4 again, the job lists %d workers; want the 1 its Workload still holds quota for", n)
	}
	if wl := workloadOf(t, client, ns, "genericjob-elastic"); !metav1.IsControlledBy(wl, again) || wl.UID == "" ||
		!meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted) {
		t.Errorf("the Workload was made again or lost its admission: %+v", wl.Status.Conditions)
	}
}

// heldCPUs is the CPU the admitted Workloads of a namespace hold, as Kueue counts it: of each
// pod set, the count admitted, or fewer once its reclaimable pods take the pod set's count
// below it; 1 CPU a pod (queuedJob's). The ClusterQueue's status says the same, but Kueue
// writes it seconds late.
func heldCPUs(ctx context.Context, client kueueclient.Interface, ns string) (int32, int, error) {
	list, err := client.KueueV1beta2().Workloads(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, err
	}
	var held int32
	admitted := 0
	for _, wl := range list.Items {
		if !meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) ||
			meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) || wl.Status.Admission == nil {
			continue
		}
		admitted++
		reclaimable := map[string]int32{}
		for _, rp := range wl.Status.ReclaimablePods {
			reclaimable[rp.Name] = rp.Count
		}
		for _, ps := range wl.Spec.PodSets {
			n := ps.Count
			for _, psa := range wl.Status.Admission.PodSetAssignments {
				if psa.Name == ps.Name && psa.Count != nil {
					n = *psa.Count
				}
			}
			held += max(min(n, ps.Count-reclaimable[ps.Name]), 0)
		}
	}
	return held, admitted, nil
}

// TestKueueElasticChurn: 50 elastic jobs of 1-CPU workers (asking for 3, at least 1) compete
// in one ClusterQueue of 12 CPUs, and a third of them are shrunk to 1 while they run or
// wait. The admitted Workloads never hold less CPU than the pods that run ask for, the pods
// never ask for more than the quota, every job ends, and once all have, no Workload holds
// anything: no quota leaked by a shrink, nothing pending for ever.
func TestKueueElasticChurn(t *testing.T) {
	client := useKueue(t)
	parallel(t)
	ns := namespace(t)
	queue := queueFor(t, ns, 12)
	pods := countPods(t, ns)
	const jobs = 50
	for i := range jobs {
		job := queuedJob(fmt.Sprintf("churn-%02d", i), queue, 3, "2s")
		job.Spec.ReplicaSpecs[0].Replicas = nil
		job.Spec.Elastic = &batch.ElasticPolicy{ReplicaType: "worker", Replicas: 3, MinReplicas: 1, MaxReplicas: 3}
		createJob(t, ns, job)
	}
	ctx := context.Background()
	for i := 0; i < jobs; i += 3 {
		patch := []byte(`{"spec":{"elastic":{"replicas":1}}}`)
		if _, err := env.jobs.BatchV1beta1().GenericJobs(ns).Patch(ctx, fmt.Sprintf("churn-%02d", i), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var samples, under int
	waitFor(t, "every job ended", 3*jobTimeout, func(ctx context.Context) (bool, error) {
		// The usage is read first: a pod that runs, not being deleted, when the pods are
		// read ran, or was made, when the usage was read, and its quota was held then
		// (quota is released only once a pod is being deleted or has ended). Pods made
		// since, whose admission may be later, are left out (creation times are whole
		// seconds).
		read := time.Now().Add(-time.Second)
		held, _, err := heldCPUs(ctx, client, ns)
		if err != nil {
			return false, nil
		}
		list, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		var running int32
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.CreationTimestamp.Time.Before(read) {
				running++ // 1 CPU each
			}
		}
		samples++
		if held < running {
			under++
			t.Logf("sample %d: the Workloads hold %d CPUs, running pods ask for %d", samples, held, running)
		}
		js, err := env.jobs.BatchV1beta1().GenericJobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, j := range js.Items {
			if !j.Status.Finished() {
				return false, nil
			}
		}
		return len(js.Items) == jobs, nil
	})
	if under > 0 {
		t.Errorf("in %d of %d samples Kueue held less quota than the running pods ask for", under, samples)
	}
	if most := pods.mostCPUs(); most > 12 {
		t.Errorf("the pods asked for %g CPUs at once, more than the queue's 12", most)
	}
	waitFor(t, "Kueue holding nothing once every job ended", jobTimeout, func(ctx context.Context) (bool, error) {
		held, admitted, err := heldCPUs(ctx, client, ns)
		return err == nil && held == 0 && admitted == 0, nil
	})
	js, err := env.jobs.BatchV1beta1().GenericJobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range js.Items {
		if j.Status.Phase != batch.JobSucceeded {
			t.Errorf("%s ended %s: %s", j.Name, j.Status.Phase, j.Status.Condition(batch.JobConditionRunning).Message)
		}
	}
	t.Logf("%d samples; the most CPUs the pods asked for at once: %g", samples, pods.mostCPUs())
}

// TestKueueElasticJobGrowsIntoFreedQuota: an elastic job asking for 4 workers, at least 2, in
// a queue of 4 CPUs where another job holds 2, is admitted with 2 and asks at once for the
// rest with a workload slice that replaces its Workload, which waits. Once the other job is
// deleted, Kueue admits the slice for the 2 CPUs freed and finishes the old Workload: the job
// grows to 4 by itself, its first two workers untouched, and lets the old Workload go. Kueue
// then holds 4 CPUs for it in one Workload; scaled to 3, it holds 3.
func TestKueueElasticJobGrowsIntoFreedQuota(t *testing.T) {
	client := useKueue(t)
	parallel(t)
	ns := namespace(t)
	queue := queueFor(t, ns, 4)
	blocker := queuedJob("blocker", queue, 2, "1h")
	createJob(t, ns, blocker)
	waitJob(t, ns, blocker.Name, "running", inPhase(batch.JobRunning))
	elastic := elasticQueuedJob("elastic", queue, 4, 2)
	createJob(t, ns, elastic)
	first := waitJob(t, ns, elastic.Name, "running 2 of 4 workers", runningWorkers(2))
	uids := map[string]types.UID{}
	for _, r := range first.Status.Tasks[0].Replicas {
		uids[r.Name] = r.UID
	}
	var slice *kueue.Workload
	waitFor(t, "a slice for 4 workers, waiting", jobTimeout, func(ctx context.Context) (bool, error) {
		wl, err := client.KueueV1beta2().Workloads(ns).Get(ctx, "genericjob-elastic-2", metav1.GetOptions{})
		slice = wl
		return err == nil && wl.Spec.PodSets[0].Count == 4, nil
	})
	if a := slice.Annotations; a["kueue.x-k8s.io/elastic-job"] != "true" || a["kueue.x-k8s.io/workload-slice-replacement-for"] != ns+"/genericjob-elastic" {
		t.Errorf("slice annotations %v: want it an elastic slice replacing %s/genericjob-elastic", a, ns)
	}
	if events, ok := eventsSaying(t, ns, elastic.Name, "Asked Kueue for worker at 4 replicas, with Workload genericjob-elastic-2 replacing genericjob-elastic: the job runs 2"); !ok {
		t.Errorf("no Growing event:\n%s", events)
	}

	deleteJob(t, ns, blocker.Name)
	grown := waitJob(t, ns, elastic.Name, "running 4 workers", runningWorkers(4))
	for name, uid := range uids {
		if r := replicaStatusOf(grown, name); r.UID != uid || r.RestartCount != 0 {
			t.Errorf("%s: pod %s, %d restarts; want its first pod %s, not restarted", name, r.UID, r.RestartCount, uid)
		}
	}
	if grown.Status.Restarts != 0 {
		t.Errorf("status.restarts %d after growing, want 0", grown.Status.Restarts)
	}
	heldIs := func(cpus int32) {
		t.Helper()
		waitFor(t, fmt.Sprintf("Kueue holding %d CPUs for the job, in one Workload", cpus), jobTimeout, func(ctx context.Context) (bool, error) {
			held, admitted, err := heldCPUs(ctx, client, ns)
			return err == nil && held == cpus && admitted == 1, err
		})
	}
	heldIs(4)
	waitFor(t, "the replaced Workload gone", jobTimeout, func(ctx context.Context) (bool, error) {
		_, err := client.KueueV1beta2().Workloads(ns).Get(ctx, "genericjob-elastic", metav1.GetOptions{})
		return err != nil, nil
	})
	if events, ok := eventsSaying(t, ns, elastic.Name, "Kueue admitted Workload genericjob-elastic-2, which replaced genericjob-elastic: worker holds quota for 4 replicas"); !ok {
		t.Errorf("no Grown event:\n%s", events)
	}

	if out, err := kubectl("scale", "-n", ns, "gj/elastic", "--replicas=3"); err != nil {
		t.Fatalf("kubectl scale --replicas=3: %v: %s", err, out)
	}
	waitJob(t, ns, elastic.Name, "running 3 workers", runningWorkers(3))
	heldIs(3)
}
