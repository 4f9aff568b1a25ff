package kueue

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	kueue "github.com/t9k-jobs/t9k-jobs/pkg/apis/kueue/v1beta2"
)

// MultiKueue (docs/queueing.md, "Across clusters with MultiKueue"): on the manager, a job
// managed by MultiKueue has its Workload and nothing else; on a worker, its copy runs under
// the Workload MultiKueue made for it, adopted.

// On the manager: the Workload is made, and once Kueue admits it no pod is made and the
// job's status is left to MultiKueue; an eviction is handed back at once. Before the first
// dispatch nothing else writes its status: the controller says why it waits.
func TestManagedByMultiKueueHasOnlyItsWorkload(t *testing.T) {
	job := queuedJob(map[string]string{kueue.LabelQueueName: "team-a"})
	job.Spec.ManagedBy = batch.MultiKueueControllerName
	s := newQueueTest(t, job, true, Config{}, flavors...)
	s.Step(t)
	if wl := s.workload(t); len(wl.Spec.PodSets) != 2 || metav1.GetControllerOf(wl) == nil {
		t.Fatalf("the manager's Workload %+v: want two pod sets, controlled by the job", wl)
	}
	waiting := func(reason string) {
		t.Helper()
		st := s.Job(t).Status
		running := st.Condition(batch.JobConditionRunning)
		if st.Phase != batch.JobPending || running.Reason != reason {
			t.Errorf("a waiting job MultiKueue manages: phase %q, Running %+v; want Pending, %s", st.Phase, running, reason)
		}
	}
	waiting(reasonQueued)

	s.kueueDecides(t, dispatched)
	s.Step(t)
	if pods := s.Pods(t); len(pods) != 0 {
		t.Errorf("a job MultiKueue manages got %d pods on the manager", len(pods))
	}
	s.podsReady(t, metav1.ConditionFalse, "WaitForStart")
	// MultiKueue copies the worker's status: the controller leaves it be, also once the job
	// is evicted (the copy may still run on a worker MultiKueue lost).
	s.copyStarted(t)
	s.Step(t)
	if st := s.Job(t).Status; st.Phase != batch.JobRunning || len(st.Tasks) != 2 || len(st.Conditions) != 0 {
		t.Errorf("the controller wrote the status of a job MultiKueue runs: %+v", st)
	}
	s.podsReady(t, metav1.ConditionTrue, "Started")
	s.kueueDecides(t, func(wl *kueue.Workload) {
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: "AdmissionCheck", Message: "Reserving remote lost"})
	})
	s.Step(t)
	if wl := s.workload(t); wl.Status.Admission != nil || meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) {
		t.Errorf("an evicted Workload of a job MultiKueue manages was not handed back: %+v", wl.Status)
	}
	if st := s.Job(t).Status; st.Phase != batch.JobRunning || len(st.Conditions) != 0 {
		t.Errorf("the controller wrote over the status of a started copy on an eviction: %+v", st)
	}
}

// copyStarted sets the job's status as MultiKueue copies it from a copy whose replicas all
// run.
func (s *queueTest) copyStarted(t *testing.T) {
	t.Helper()
	s.copyStatus(t, batch.ReplicaRunning, batch.ReplicaRunning, batch.ReplicaRunning)
}

// copyStatus sets the job's status as MultiKueue copies it from a copy that started, its
// replicas (worker-0, worker-1, ps-0) in the phases given.
func (s *queueTest) copyStatus(t *testing.T, worker0, worker1, ps0 batch.ReplicaPhase) {
	t.Helper()
	copied := s.Job(t)
	copied.Status = batch.JobStatus{Phase: batch.JobRunning, StartTime: &metav1.Time{Time: now}, Tasks: []batch.TaskStatus{
		{Type: "worker", Replicas: []batch.ReplicaStatus{{Name: "job-worker-0", Phase: worker0}, {Name: "job-worker-1", Phase: worker1}}},
		{Type: "ps", Replicas: []batch.ReplicaStatus{{Name: "job-ps-0", Phase: ps0}}},
	}}
	if _, err := s.Jobs.BatchV1beta1().GenericJobs("ns").UpdateStatus(context.Background(), copied, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Refresh(t)
}

// podsReady checks the Workload's PodsReady condition.
func (s *queueTest) podsReady(t *testing.T, status metav1.ConditionStatus, reason string) {
	t.Helper()
	c := meta.FindStatusCondition(s.workload(t).Status.Conditions, kueue.WorkloadPodsReady)
	if c == nil || c.Status != status || c.Reason != reason {
		t.Errorf("the manager's Workload says PodsReady %+v, want %s %s", c, status, reason)
	}
}

// dispatched admits the Workload of a job MultiKueue runs as Kueue does once MultiKueue's
// check is Ready: a copy got its reservation on a worker.
func dispatched(wl *kueue.Workload) {
	admit(wl)
	wl.Status.AdmissionChecks = []kueue.AdmissionCheckState{{Name: "multikueue", State: "Ready", Message: `The workload got reservation on "worker1"`}}
}

// admittedElsewhere is a job MultiKueue runs (spec.managedBy), its Workload admitted on the
// manager as decide says (dispatched: through MultiKueue's check).
func admittedElsewhere(t *testing.T, decide func(*kueue.Workload)) *queueTest {
	t.Helper()
	job := queuedJob(map[string]string{kueue.LabelQueueName: "team-a"})
	job.Spec.ManagedBy = batch.MultiKueueControllerName
	s := newQueueTest(t, job, true, Config{}, flavors...)
	s.Step(t)
	s.kueueDecides(t, decide)
	s.Step(t)
	return s
}

// On the manager, the Workload of a job MultiKueue runs says PodsReady as the copied status
// shows the replicas, as a local job's does from its pods: Kueue's waitForPodsReady on the
// manager counts from the admission there, and would evict a job whose copy runs but whose
// Workload never said so. A copy that lost a replica waits for its recovery; an admission
// handed back starts afresh.
func TestMultiKueueManagerSaysPodsReady(t *testing.T) {
	s := admittedElsewhere(t, dispatched)
	s.podsReady(t, metav1.ConditionFalse, "WaitForStart")
	s.copyStatus(t, batch.ReplicaRunning, batch.ReplicaPending, batch.ReplicaRunning)
	s.Step(t)
	s.podsReady(t, metav1.ConditionFalse, "WaitForStart")
	s.copyStatus(t, batch.ReplicaRunning, batch.ReplicaSucceeded, batch.ReplicaRunning)
	s.Step(t)
	s.podsReady(t, metav1.ConditionTrue, "Started")
	s.copyStatus(t, batch.ReplicaRunning, batch.ReplicaSucceeded, batch.ReplicaPending)
	s.Step(t)
	s.podsReady(t, metav1.ConditionFalse, "WaitForRecovery")
	s.copyStarted(t)
	s.Step(t)
	s.podsReady(t, metav1.ConditionTrue, "Recovered")
	s.kueueDecides(t, func(wl *kueue.Workload) {
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: "AdmissionCheck", Message: "Admitting remote lost"})
	})
	s.Step(t)
	s.podsReady(t, metav1.ConditionFalse, "WaitForStart")
	if st := s.Job(t).Status; st.Phase != batch.JobRunning {
		t.Errorf("the controller wrote over the copied status on an eviction: %+v", st)
	}
}

// On a worker: the copy MultiKueue made (naming its prebuilt Workload) adopts that Workload,
// makes none of its own, changes nothing of its spec, and runs once it is admitted. Kueue
// names the Workload in an annotation since v0.18 (feature gate
// WorkloadIdentifierAnnotations, on by default), in a label before, or with the gate off.
func TestPrebuiltWorkloadIsAdopted(t *testing.T) {
	for _, by := range []string{"label", "annotation"} {
		t.Run(by, func(t *testing.T) {
			job := queuedJob(map[string]string{kueue.LabelQueueName: "team-a"})
			if by == "label" {
				job.Labels[kueue.LabelPrebuiltWorkload] = "genericjob-job"
			} else {
				job.Annotations = map[string]string{kueue.AnnotationPrebuiltWorkload: "genericjob-job"}
			}
			testPrebuiltWorkloadIsAdopted(t, job)
		})
	}
}

func testPrebuiltWorkloadIsAdopted(t *testing.T, job *batch.GenericJob) {
	s := newQueueTest(t, job, true, Config{}, flavors...)
	prebuilt := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: "genericjob-job", Namespace: "ns",
		Labels: map[string]string{batch.LabelJobName: "job", batch.LabelControllerUID: "manager-uid", "kueue.x-k8s.io/multikueue-origin": "multikueue"}},
		Spec: kueue.WorkloadSpec{QueueName: "team-a", PodSets: []kueue.PodSet{{Name: "worker", Count: 2, Template: cpuTemplate(0)}, {Name: "ps", Count: 1, Template: cpuTemplate(0)}}}}
	if _, err := s.kueue.KueueV1beta2().Workloads("ns").Create(context.Background(), prebuilt, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Refresh(t)
	s.Step(t)
	wl := s.workload(t)
	if ref := metav1.GetControllerOf(wl); ref == nil || ref.UID != "job-uid" || ref.Kind != "GenericJob" {
		t.Fatalf("the prebuilt Workload's controller is %v, want the job", ref)
	}
	if wl.Labels[batch.LabelControllerUID] != "job-uid" || wl.Labels[kueue.LabelJobUID] != "job-uid" || wl.Labels["kueue.x-k8s.io/multikueue-origin"] != "multikueue" {
		t.Errorf("the adopted Workload's labels %v: want the job's UID, MultiKueue's own kept", wl.Labels)
	}
	if events := drain(s.Events); !strings.Contains(events, "Adopted Workload genericjob-job") {
		t.Errorf("no Adopted event:\n%s", events)
	}
	s.Step(t)
	list, _ := s.kueue.KueueV1beta2().Workloads("ns").List(context.Background(), metav1.ListOptions{})
	if len(list.Items) != 1 || len(s.Pods(t)) != 0 {
		t.Fatalf("%d Workloads and %d pods before the admission: want the prebuilt one alone, no pod", len(list.Items), len(s.Pods(t)))
	}
	s.kueueDecides(t, admit)
	s.Step(t)
	if pods := s.Pods(t); len(pods) != 3 {
		t.Errorf("%d pods once the prebuilt Workload is admitted, want 3", len(pods))
	}
	if wl := s.workload(t); wl.Spec.QueueName != "team-a" || len(wl.Spec.PodSets) != 2 || wl.Spec.PodSets[0].Template.Spec.Containers == nil {
		t.Errorf("the prebuilt Workload's spec changed: %+v", wl.Spec)
	}
}

// On the manager, a paused job MultiKueue runs gives its Workload up (MultiKueue then
// removes the copy), says it is paused once the Workload is gone, and on resume is queued
// anew.
func TestPausedMultiKueueJobSaysSo(t *testing.T) {
	s := admittedElsewhere(t, dispatched)
	s.copyStarted(t)
	s.editSpec(t, func(job *batch.GenericJob) { job.Spec.RunMode = &batch.RunMode{Pause: &batch.PauseMode{Enabled: true}} })
	s.Step(t)
	if wls, _ := s.kueue.KueueV1beta2().Workloads("ns").List(context.Background(), metav1.ListOptions{}); len(wls.Items) != 0 {
		t.Fatalf("a paused job MultiKueue runs keeps its Workload (and its copy on a worker)")
	}
	s.Step(t)
	if got := s.Job(t).Status.Phase; got != batch.JobPaused {
		t.Fatalf("phase %q once the Workload is gone, want Paused", got)
	}
	s.editSpec(t, func(job *batch.GenericJob) { job.Spec.RunMode = nil })
	s.Step(t)
	s.workload(t)
	if st := s.Job(t).Status; st.Phase != batch.JobPending || st.Condition(batch.JobConditionRunning).Reason != reasonQueued {
		t.Errorf("resumed: phase %q, Running %+v; want Pending, Queued", st.Phase, st.Condition(batch.JobConditionRunning))
	}
}

// succeeded sets the job's status to a success that completed an hour ago, as its controller
// (or MultiKueue, copying it) writes it, with a TTL that ran out long since.
func (s *queueTest) succeeded(t *testing.T, ttl int32) {
	t.Helper()
	job := s.Job(t)
	job.Spec.TTLSecondsAfterFinished = &ttl
	job, err := s.Jobs.BatchV1beta1().GenericJobs("ns").Update(context.Background(), job, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ended := metav1.NewTime(now.Add(-time.Hour))
	job.Status = batch.JobStatus{Phase: batch.JobSucceeded, StartTime: &ended, CompletionTime: &ended,
		Conditions: []batch.JobCondition{{Type: batch.JobConditionCompleted, Status: corev1.ConditionTrue, Reason: "Succeeded", LastTransitionTime: ended}},
		Tasks:      []batch.TaskStatus{{Type: "worker", Replicas: []batch.ReplicaStatus{{Name: "job-worker-0", Phase: batch.ReplicaSucceeded}}}}}
	if _, err := s.Jobs.BatchV1beta1().GenericJobs("ns").UpdateStatus(context.Background(), job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range s.Pods(t) { // cleaned up
		if err := s.Kube.CoreV1().Pods("ns").Delete(context.Background(), p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s.Refresh(t)
}

// exists reports whether the job is still there.
func (s *queueTest) exists(t *testing.T) bool {
	t.Helper()
	_, err := s.Jobs.BatchV1beta1().GenericJobs("ns").Get(context.Background(), "job", metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// A finished job MultiKueue runs is not deleted by its TTL before MultiKueue has its end. On
// the manager, the job waits for MultiKueue to finish its Workload (it copies the end first,
// then finishes the Workload); a Workload that holds no quota holds nothing.
func TestMultiKueueManagerTTLWaitsForTheWorkload(t *testing.T) {
	s := admittedElsewhere(t, dispatched)
	s.succeeded(t, 0)
	s.Step(t)
	if !s.exists(t) {
		t.Fatal("the manager's job was deleted by its TTL before MultiKueue finished its Workload")
	}
	if c := meta.FindStatusCondition(s.workload(t).Status.Conditions, kueue.WorkloadFinished); c != nil {
		t.Errorf("the controller finished the Workload of a job MultiKueue runs: %+v", c)
	}
	s.kueueDecides(t, func(wl *kueue.Workload) {
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadFinished, Status: metav1.ConditionTrue, Reason: "Succeeded", Message: "succeeded"})
	})
	s.Sync(t)
	if s.exists(t) {
		t.Error("the manager's job outlived its TTL once its Workload was Finished")
	}
}

// On a worker, the copy MultiKueue made is not deleted by its TTL (the manager's spec, TTL
// included) while its Workload is there: MultiKueue copies its end to the manager, then
// removes it. A copy whose Workload is gone is MultiKueue's no more: its TTL applies.
func TestMultiKueueCopyOutlivesItsTTL(t *testing.T) {
	job := queuedJob(map[string]string{kueue.LabelQueueName: "team-a", kueue.LabelMultiKueueOrigin: "multikueue"})
	job.Annotations = map[string]string{kueue.AnnotationPrebuiltWorkload: "genericjob-job"}
	s := newQueueTest(t, job, true, Config{}, flavors...)
	prebuilt := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: "genericjob-job", Namespace: "ns",
		Labels: map[string]string{kueue.LabelMultiKueueOrigin: "multikueue"}},
		Spec: kueue.WorkloadSpec{QueueName: "team-a", PodSets: []kueue.PodSet{{Name: "worker", Count: 2, Template: cpuTemplate(0)}, {Name: "ps", Count: 1, Template: cpuTemplate(0)}}}}
	if _, err := s.kueue.KueueV1beta2().Workloads("ns").Create(context.Background(), prebuilt, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Refresh(t)
	s.Step(t) // adopted
	s.kueueDecides(t, admit)
	s.Step(t)
	s.succeeded(t, 0)
	s.Step(t)
	if !s.exists(t) {
		t.Fatal("the copy was deleted by its TTL while MultiKueue had yet to see its end")
	}
	c := meta.FindStatusCondition(s.workload(t).Status.Conditions, kueue.WorkloadFinished)
	if c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("the copy's Workload says Finished %+v, want True: MultiKueue finishes the manager's from it", c)
	}
	s.Step(t)
	if !s.exists(t) {
		t.Fatal("the copy was deleted by its TTL once its Workload was Finished, before MultiKueue removed it")
	}
	if err := s.kueue.KueueV1beta2().Workloads("ns").Delete(context.Background(), "genericjob-job", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Refresh(t)
	s.Sync(t)
	if s.exists(t) {
		t.Error("a copy whose Workload is gone outlived its TTL")
	}
}

// rejectedByMultiKueue sets the Workload's status as Kueue does when MultiKueue rejects the
// check of a job without spec.managedBy (Kueue v0.19.2's words): first the check Rejected and
// the Workload marked for deactivation, then deactivated and evicted (the check reset).
func rejectedByMultiKueue(evicted bool) func(*kueue.Workload) {
	const why = `The owner is not managed by Kueue: Expecting .spec.managedBy to be "kueue.x-k8s.io/multikueue" not "", Previously: "Pending"`
	return func(wl *kueue.Workload) {
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "QuotaReserved"})
		if !evicted {
			wl.Status.AdmissionChecks = []kueue.AdmissionCheckState{{Name: "multikueue", State: "Rejected", Message: why}}
			meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadDeactivationTarget, Status: metav1.ConditionTrue, Reason: "AdmissionCheck",
				Message: `AdmissionCheck in Rejected state: "multikueue" (` + why + `)`})
			return
		}
		wl.Status.AdmissionChecks = []kueue.AdmissionCheckState{{Name: "multikueue", State: "Pending", Message: "Reset to Pending after eviction. Previously: Rejected"}}
		meta.RemoveStatusCondition(&wl.Status.Conditions, kueue.WorkloadDeactivationTarget)
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: "DeactivatedDueToAdmissionCheck",
			Message: `The workload is deactivated due to AdmissionCheck in Rejected state: "multikueue" (` + why + `)`})
	}
}

// A job in a MultiKueue queue without spec.managedBy, whose check MultiKueue rejects, fails
// (InvalidSpec), saying why and what to do, whichever of Kueue's steps the controller sees;
// its Workload is Finished, and nothing says it waits to be admitted again.
func TestMultiKueueRejectsAJobWithoutManagedBy(t *testing.T) {
	for _, evicted := range []bool{false, true} {
		job := queuedJob(map[string]string{kueue.LabelQueueName: "mk"})
		if evicted { // this controller's name says the same as none
			job.Spec.ManagedBy = batch.ControllerName
		}
		s := newQueueTest(t, job, true, Config{}, flavors...)
		s.Step(t)
		s.kueueDecides(t, rejectedByMultiKueue(evicted))
		if evicted {
			s.editWorkload(t, func(wl *kueue.Workload) { wl.Spec.Active = new(false) })
		}
		s.Step(t)
		st := s.Job(t).Status
		failed := st.Condition(batch.JobConditionFailed)
		if st.Phase != batch.JobFailed || failed.Reason != "InvalidSpec" {
			t.Fatalf("evicted %v: phase %s, Failed %+v: want Failed, InvalidSpec", evicted, st.Phase, failed)
		}
		for _, want := range []string{`LocalQueue "mk"`, "spec.managedBy: kueue.x-k8s.io/multikueue", "Create the job again", "Kueue: The"} {
			if !strings.Contains(failed.Message, want) {
				t.Errorf("evicted %v: the failure says %q, want %q in it", evicted, failed.Message, want)
			}
		}
		s.Step(t)
		if c := meta.FindStatusCondition(s.workload(t).Status.Conditions, kueue.WorkloadFinished); c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("evicted %v: the Workload says Finished %+v, want True", evicted, c)
		}
		if events := drain(s.Events); strings.Contains(events, "admitted again") || strings.Contains(events, "waits in LocalQueue") {
			t.Errorf("evicted %v: an event says the job waits again:\n%s", evicted, events)
		}
	}
}

// editWorkload changes the Workload's spec as someone would.
func (s *queueTest) editWorkload(t *testing.T, edit func(*kueue.Workload)) {
	t.Helper()
	wl := s.workload(t)
	edit(wl)
	if _, err := s.kueue.KueueV1beta2().Workloads("ns").Update(context.Background(), wl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Refresh(t)
}

// A job with spec.managedBy, or one whose Workload another check rejected, does not fail:
// its Workload deactivated, it waits, saying so rather than that it waits to be admitted
// again, and the admission handed back says the same.
func TestDeactivatedWorkloadSaysSo(t *testing.T) {
	s := admittedJob(t)
	s.kueueDecides(t, func(wl *kueue.Workload) {
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: "DeactivatedDueToRequeuingLimitExceeded",
			Message: "The workload is deactivated due to exceeding the maximum number of re-queuing retries"})
	})
	s.editWorkload(t, func(wl *kueue.Workload) { wl.Spec.Active = new(false) })
	s.Step(t) // its pods go
	s.Step(t) // they are gone: the admission goes back
	st := s.Job(t).Status
	running := st.Condition(batch.JobConditionRunning)
	if st.Phase != batch.JobPending || running.Reason != reasonEvicted || !strings.Contains(running.Message, "is deactivated: the job waits until it is activated again (spec.active: true).") {
		t.Errorf("phase %s, Running %+v: want Pending, Evicted, saying the Workload is deactivated", st.Phase, running)
	}
	events := drain(s.Events)
	if !strings.Contains(events, "Deactivated Every pod is gone: handed the admission back to Kueue; Workload genericjob-job is deactivated") || strings.Contains(events, "waits in LocalQueue") {
		t.Errorf("events:\n%s\nwant the admission handed back, saying the Workload is deactivated", events)
	}
}

// A job MultiKueue is to run (spec.managedBy) that Kueue admits here with no admission check
// (its queue has no MultiKueue check) would never run: no copy is made, and this controller
// runs nothing of it. It fails, saying so and what to do, and its Workload is Finished.
func TestManagedByMultiKueueAdmittedWithoutTheCheckFails(t *testing.T) {
	s := admittedElsewhere(t, admit)
	st := s.Job(t).Status
	failed := st.Condition(batch.JobConditionFailed)
	if st.Phase != batch.JobFailed || failed.Reason != "InvalidSpec" || !strings.Contains(failed.Message, `LocalQueue "team-a" with no admission check`) ||
		!strings.Contains(failed.Message, "MultiKueue admission check") {
		t.Errorf("phase %s, Failed %+v: want Failed, InvalidSpec, naming the queue and the way out", st.Phase, failed)
	}
	if events := drain(s.Events); !strings.Contains(events, "Warning InvalidSpec") {
		t.Errorf("events:\n%s\nwant a Warning InvalidSpec", events)
	}
	if wl := s.workload(t); !meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) {
		t.Errorf("the Workload's conditions %+v: want Finished, its quota released", wl.Status.Conditions)
	}
	if len(s.Pods(t)) != 0 {
		t.Error("pods made for a job another controller is to run")
	}
}

// A prebuilt Workload whose name is not the one the controller would give it is the job's
// all the same: adopted, admitted, and told of the end.
func TestPrebuiltWorkloadOfAnotherName(t *testing.T) {
	job := queuedJob(map[string]string{kueue.LabelQueueName: "team-a"})
	job.Annotations = map[string]string{kueue.AnnotationPrebuiltWorkload: "made-by-the-manager"}
	s := newQueueTest(t, job, true, Config{}, flavors...)
	prebuilt := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: "made-by-the-manager", Namespace: "ns", Labels: map[string]string{batch.LabelJobName: "job"}},
		Spec: kueue.WorkloadSpec{QueueName: "team-a", PodSets: []kueue.PodSet{{Name: "worker", Count: 2, Template: cpuTemplate(0)}, {Name: "ps", Count: 1, Template: cpuTemplate(0)}}}}
	if _, err := s.kueue.KueueV1beta2().Workloads("ns").Create(context.Background(), prebuilt, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Refresh(t)
	s.Step(t)
	s.Step(t)
	if events := drain(s.Events); strings.Count(events, "Adopted Workload made-by-the-manager") != 1 {
		t.Errorf("events %q: want it adopted once", events)
	}
	s.kueueDecidesOn(t, "made-by-the-manager", admit)
	s.Step(t)
	if pods := s.Pods(t); len(pods) != 3 {
		t.Fatalf("%d pods once the prebuilt Workload is admitted, want 3", len(pods))
	}
	for _, name := range []string{"job-ps-0", "job-worker-0", "job-worker-1"} {
		s.endPod(t, name, corev1.PodSucceeded)
	}
	s.Step(t)
	s.Step(t)
	if wl := s.workloadNamed(t, "made-by-the-manager"); wl == nil || !meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) {
		t.Errorf("the prebuilt Workload once the job succeeded: %+v, want Finished", wl)
	}
	if list, _ := s.kueue.KueueV1beta2().Workloads("ns").List(context.Background(), metav1.ListOptions{}); len(list.Items) != 1 {
		t.Errorf("%d Workloads, want the prebuilt one alone", len(list.Items))
	}
}
