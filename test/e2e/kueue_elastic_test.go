package e2e

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	kueue "github.com/t9k-jobs/t9k-jobs/pkg/apis/kueue/v1beta2"
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
	if rp := wl.Status.ReclaimablePods; len(rp) != 1 || rp[0].Name != "worker" || rp[0].Count != 1 {
		t.Errorf("reclaimable pods %+v, want worker: 1 (2 admitted, 1 running)", rp)
	}
	if !strings.Contains(eventsOf(t, ns, elastic.Name), "Resized worker from 2 to 1 replicas") {
		t.Errorf("no Resized event for the shrink:\n%s", eventsOf(t, ns, elastic.Name))
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
