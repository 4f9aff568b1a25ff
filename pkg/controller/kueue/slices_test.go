package kueue

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	kueue "github.com/t9k-jobs/t9k-jobs/pkg/apis/kueue/v1beta2"
)

// workloadNamed reads one of the job's Workloads (nil: none of the name).
func (s *queueTest) workloadNamed(t *testing.T, name string) *kueue.Workload {
	t.Helper()
	wl, err := s.kueue.KueueV1beta2().Workloads("ns").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return wl
}

// kueueDecidesOn sets a Workload's status as Kueue would.
func (s *queueTest) kueueDecidesOn(t *testing.T, name string, change func(*kueue.Workload)) {
	t.Helper()
	wl := s.workloadNamed(t, name)
	if wl == nil {
		t.Fatalf("no Workload %s", name)
	}
	change(wl)
	if _, err := s.kueue.KueueV1beta2().Workloads("ns").UpdateStatus(context.Background(), wl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Refresh(t)
}

// replaced is Kueue's finishing of a slice for its replacement.
func replaced(wl *kueue.Workload) {
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadFinished, Status: metav1.ConditionTrue, Reason: workloadSliceReplaced})
}

// partlyAdmitted is elasticQueueTest's job (4 workers, at least min) once Kueue has admitted
// n of its workers, and the slice it asks for the rest with.
func partlyAdmitted(t *testing.T, min, n int32) (*queueTest, *kueue.Workload) {
	t.Helper()
	s := elasticQueueTest(t, min)
	s.Step(t)
	s.kueueDecides(t, admitWorkers(n))
	s.Step(t)
	slice := s.workloadNamed(t, "genericjob-job-2")
	if slice == nil {
		t.Fatalf("no slice asked for: the job runs %d of the 4 workers it wants", n)
	}
	return s, slice
}

// A partly admitted elastic job asks for the rest with a slice that replaces its Workload,
// and runs what it holds until Kueue admits the slice; then it makes the new workers, and
// lets the old Workload go once Kueue has finished it.
func TestElasticJobGrowsThroughASlice(t *testing.T) {
	s, slice := partlyAdmitted(t, 2, 2)
	first := s.workload(t)
	if got, want := slice.Annotations, map[string]string{AnnotationElasticJob: "true", AnnotationSliceReplacementFor: "ns/genericjob-job", AnnotationSliceName: "genericjob-job"}; !hasAll(got, want) {
		t.Errorf("slice annotations %v, want %v", got, want)
	}
	if ps := slice.Spec.PodSets; len(ps) != 2 || ps[0].Count != 4 || ps[0].MinCount != nil || ps[1].Count != 1 {
		t.Errorf("slice pod sets %+v: want worker 4 with no minimum (Kueue takes no minimum on a slice), ps 1", ps)
	}
	if slice.Spec.QueueName != first.Spec.QueueName || !metav1.IsControlledBy(slice, s.Job(t)) {
		t.Errorf("slice in queue %q, owned by %v: want the job's queue %q and the job", slice.Spec.QueueName, slice.OwnerReferences, first.Spec.QueueName)
	}
	if got, want := podNames(s.Pods(t)), "job-ps-0 job-worker-0 job-worker-1"; got != want {
		t.Errorf("pods %s while the slice waits, want %s", got, want)
	}
	if events := drain(s.Events); !strings.Contains(events, "Growing Asked Kueue for worker at 4 replicas, with Workload genericjob-job-2 replacing genericjob-job: the job runs 2 until Kueue admits it") {
		t.Errorf("events %q: want a Growing event", events)
	}
	s.Step(t)
	if s.workloadNamed(t, "genericjob-job-3") != nil {
		t.Fatal("a second slice was asked for while the first waits")
	}

	s.kueueDecidesOn(t, "genericjob-job-2", admit)
	s.Step(t)
	if got, want := podNames(s.Pods(t)), "job-ps-0 job-worker-0 job-worker-1 job-worker-2 job-worker-3"; got != want {
		t.Errorf("pods %s once the slice is admitted, want %s", got, want)
	}
	if old := s.workloadNamed(t, "genericjob-job"); old == nil || old.DeletionTimestamp != nil {
		t.Error("the old Workload went before Kueue finished it")
	}
	s.kueueDecidesOn(t, "genericjob-job", replaced)
	s.Step(t)
	if s.workloadNamed(t, "genericjob-job") != nil {
		t.Error("the old Workload stays after Kueue replaced it")
	}
	if events := drain(s.Events); !strings.Contains(events, "Grown Kueue admitted Workload genericjob-job-2, which replaced genericjob-job: worker holds quota for 4 replicas") {
		t.Errorf("events %q: want a Grown event", events)
	}
	s.runAll(t)
	s.Step(t)
	if c := meta.FindStatusCondition(s.workloadNamed(t, "genericjob-job-2").Status.Conditions, kueue.WorkloadPodsReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("PodsReady of the slice that holds the job's quota: %+v, want True", c)
	}

	// Shrunk and grown again: the next slice replaces the second, for the difference.
	s.editSpec(t, func(j *batch.GenericJob) { j.Spec.Elastic.Replicas = 2 })
	s.Step(t)
	s.Step(t)
	s.editSpec(t, func(j *batch.GenericJob) { j.Spec.Elastic.Replicas = 3 })
	s.Step(t)
	if third := s.workloadNamed(t, "genericjob-job-3"); third == nil || third.Annotations[AnnotationSliceReplacementFor] != "ns/genericjob-job-2" ||
		third.Annotations[AnnotationSliceName] != "genericjob-job" || third.Spec.PodSets[0].Count != 3 {
		t.Errorf("after a shrink to 2 and a resize to 3: slice %+v, want genericjob-job-3 for 3 workers replacing genericjob-job-2", third)
	}
}

// A slice that waits follows the size asked for: a new size makes a new slice in its place,
// and a size the job's Workload holds needs none.
func TestElasticSliceFollowsTheSizeAsked(t *testing.T) {
	s, _ := partlyAdmitted(t, 1, 1)
	s.editSpec(t, func(j *batch.GenericJob) { j.Spec.Elastic.Replicas = 3 })
	s.Step(t)
	if s.workloadNamed(t, "genericjob-job-2") != nil {
		t.Error("the slice for 4 stays after a resize to 3")
	}
	if next := s.workloadNamed(t, "genericjob-job-3"); next == nil || next.Spec.PodSets[0].Count != 3 {
		t.Errorf("slice %+v after a resize to 3, want genericjob-job-3 for 3 workers", next)
	}
	s.editSpec(t, func(j *batch.GenericJob) { j.Spec.Elastic.Replicas = 1 })
	s.Step(t)
	if s.workloadNamed(t, "genericjob-job-3") != nil {
		t.Error("a slice stays though the job's Workload holds the size asked for")
	}
	if got, want := podNames(s.Pods(t)), "job-ps-0 job-worker-0"; got != want {
		t.Errorf("pods %s, want %s", got, want)
	}
}

// An evicted job drops the slice it waited for: it stops, and asks again once admitted.
func TestEvictedJobDropsItsSlice(t *testing.T) {
	s, _ := partlyAdmitted(t, 2, 2)
	s.kueueDecides(t, func(wl *kueue.Workload) {
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: "Preempted", Message: "Preempted to accommodate a workload"})
	})
	s.Step(t)
	if s.workloadNamed(t, "genericjob-job-2") != nil {
		t.Error("the slice stays while the job is evicted")
	}
}

func hasAll(got, want map[string]string) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// A grown job that Kueue evicts asks anew, once its pods are gone and its quota handed back,
// with a Workload of its own that may be admitted down to its minimum: the evicted slice
// would be readmitted only whole.
func TestEvictedSliceIsAskedAnewWithItsMinimum(t *testing.T) {
	s, _ := partlyAdmitted(t, 2, 2)
	s.kueueDecidesOn(t, "genericjob-job-2", admit)
	s.kueueDecidesOn(t, "genericjob-job", replaced)
	s.Step(t)
	if got := len(s.Pods(t)); got != 5 {
		t.Fatalf("%d pods once grown, want 4 workers and the ps", got)
	}
	s.kueueDecidesOn(t, "genericjob-job-2", func(wl *kueue.Workload) {
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: "Preempted", Message: "Preempted to accommodate a workload"})
	})
	for range 3 {
		s.Step(t)
	}
	if got := len(s.Pods(t)); got != 0 {
		t.Fatalf("%d pods after the eviction, want none", got)
	}
	if s.workloadNamed(t, "genericjob-job-2") != nil {
		t.Error("the evicted slice stays")
	}
	fresh := s.workloadNamed(t, "genericjob-job-3")
	if fresh == nil {
		t.Fatal("no new Workload asked for")
	}
	if ps := fresh.Spec.PodSets[0]; ps.Count != 4 || ps.MinCount == nil || *ps.MinCount != 2 || fresh.Annotations[AnnotationSliceReplacementFor] != "" {
		t.Errorf("new Workload: pod set %+v, annotations %v; want 4 workers, at least 2, not a slice", ps, fresh.Annotations)
	}
	if c := s.Job(t).Status.Condition(batch.JobConditionRunning); c.Reason != reasonQueued {
		t.Errorf("Running condition %+v, want the job queued", c)
	}
}
