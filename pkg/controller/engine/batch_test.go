package engine

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision/decisiontest"
)

// ownedPod is the stall test job's one pod, in the given phase, as its cache shows it.
func (s *stallTest) ownedPod(t *testing.T, phase corev1.PodPhase) *corev1.Pod {
	t.Helper()
	p := decisiontest.Pod("job-worker-0", "pod-uid", phase, 0)
	p.Labels[batch.LabelControllerUID] = "job-uid"
	p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(decisiontest.Job(batch.JobStatus{}), batch.SchemeGroupVersion.WithKind("GenericJob"))}
	if err := s.c.caches[kindIndex(PodKind)].indexer.Update(p); err != nil {
		t.Fatal(err)
	}
	return p
}

func kindIndex(kind ObjectKind) int {
	for i := range childKinds {
		if childKinds[i].Kind == kind {
			return i
		}
	}
	panic(kind)
}

// statusWrites counts the job's status updates sent.
func (s *stallTest) statusWrites() int {
	n := 0
	for _, a := range s.jobs.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

// A status that leaves the phase as it is (a replica scheduled, not yet running) is held
// until the job's batch closes, and written then; one that moves the phase goes at once.
func TestMinorStatusWaitsForTheBatch(t *testing.T) {
	s := newStallTest(t, decisiontest.Job(batch.JobStatus{}))
	s.ownedPod(t, corev1.PodPending)
	wait, err := s.c.sync(context.Background(), "ns/job")
	if err != nil || wait <= 0 || wait > podBatchPeriod {
		t.Fatalf("sync of a pending job returned %s, %v: want to come back within %s", wait, err, podBatchPeriod)
	}
	if n := s.statusWrites(); n != 0 {
		t.Fatalf("a pending status was written at once (%d writes): it should wait for the batch", n)
	}
	s.clock.Step(podBatchPeriod / 2)
	if wait, _ := s.c.sync(context.Background(), "ns/job"); wait != podBatchPeriod/2 {
		t.Fatalf("half-way through the batch the sync asks to come back in %s, want %s (the batch's end, not a new one)", wait, podBatchPeriod/2)
	}
	s.clock.Step(podBatchPeriod / 2)
	if _, err := s.c.sync(context.Background(), "ns/job"); err != nil {
		t.Fatal(err)
	}
	if n := s.statusWrites(); n != 1 {
		t.Fatalf("%d status writes once the batch closed, want 1", n)
	}
	if _, held := s.c.held.Load("ns/job"); held {
		t.Error("the job is still held after its status was written")
	}
}

func TestPhaseChangeIsWrittenAtOnce(t *testing.T) {
	s := newStallTest(t, decisiontest.Job(batch.JobStatus{}))
	s.ownedPod(t, corev1.PodPending)
	if _, err := s.c.sync(context.Background(), "ns/job"); err != nil {
		t.Fatal(err)
	}
	s.ownedPod(t, corev1.PodRunning)
	wait, err := s.c.sync(context.Background(), "ns/job")
	if err != nil || wait != 0 {
		t.Fatalf("sync returned %s, %v", wait, err)
	}
	if n := s.statusWrites(); n != 1 {
		t.Fatalf("%d status writes when the job started running, want 1 at once", n)
	}
	got, err := s.jobs.BatchV1beta1().GenericJobs("ns").Get(context.Background(), "job", metav1.GetOptions{})
	if err != nil || got.Status.Phase != batch.JobRunning {
		t.Fatalf("written phase %q, %v: want Running", got.Status.Phase, err)
	}
	if _, held := s.c.held.Load("ns/job"); held {
		t.Error("the held pending status outlived the write that replaced it")
	}
}

// A pod change that may move the job's phase syncs the job at once; one that cannot (the
// pod scheduled) is batched.
func TestMilestonesSyncAtOnce(t *testing.T) {
	s := newStallTest(t, decisiontest.Job(batch.JobStatus{}))
	pods := &childKinds[kindIndex(PodKind)]
	pending := s.ownedPod(t, corev1.PodPending)
	pending.ResourceVersion = "1"
	scheduled := pending.DeepCopy()
	scheduled.ResourceVersion, scheduled.Spec.NodeName = "2", "node-1"
	s.c.childUpdated(pods, pending, scheduled)
	if n := s.c.queue.Len(); n != 0 {
		t.Fatalf("scheduling a pod queued its job at once (%d queued): it should be batched", n)
	}
	running := scheduled.DeepCopy()
	running.ResourceVersion, running.Status.Phase = "3", corev1.PodRunning
	s.c.childUpdated(pods, scheduled, running)
	if n := s.c.queue.Len(); n != 1 {
		t.Fatalf("a pod that started running left its job waiting for the batch (%d queued, want 1)", n)
	}
	if !s.c.lanes.urgent["ns/job"] {
		t.Error("the job whose pod started running is not in the fast lane")
	}
	key, _ := s.c.queue.Get()
	s.c.queue.Done(key)
	ready := running.DeepCopy()
	ready.ResourceVersion = "4"
	ready.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	s.c.childUpdated(pods, running, ready)
	if n := s.c.queue.Len(); n != 1 {
		t.Fatalf("a pod that became ready left its job waiting for the batch (%d queued, want 1)", n)
	}
	key, _ = s.c.queue.Get()
	s.c.queue.Done(key)
	// A ready pod that ends is no longer ready: still an end, batched with the others.
	ended := ready.DeepCopy()
	ended.ResourceVersion, ended.Status.Phase = "5", corev1.PodSucceeded
	ended.Status.Conditions[0].Status = corev1.ConditionFalse
	s.c.childUpdated(pods, ready, ended)
	if n := s.c.queue.Len(); n != 0 {
		t.Fatalf("a pod that ended queued its job at once (%d queued): the ends of a job's pods are batched", n)
	}
}

// Only a starting job's status is held: once it runs, what a sync decides is written then,
// for the status is also what the next sync decides from.
func TestRunningJobStatusIsNotHeld(t *testing.T) {
	s := newStallTest(t, decisiontest.Job(decisiontest.StatusWith(batch.JobRunning, decisiontest.ReplicaStatus("job-worker-0", "pod-uid", batch.ReplicaRunning, 0))))
	s.ownedPod(t, corev1.PodPending) // its container waits again: the replica is Pending, the job still Running
	wait, err := s.c.sync(context.Background(), "ns/job")
	if err != nil || wait != 0 {
		t.Fatalf("sync returned %s, %v", wait, err)
	}
	if n := s.statusWrites(); n != 1 {
		t.Fatalf("%d status writes of a running job's change, want 1 at once", n)
	}
}

// A finished job keeps no per-pod memory: its pods, kept by the clean-up policy, cost the
// controller nothing beyond its cache.
func TestFinishedJobForgetsItsPodsEnds(t *testing.T) {
	s := newStallTest(t, decisiontest.Job(batch.JobStatus{}))
	ended := s.ownedPod(t, corev1.PodSucceeded)
	s.c.noteEnd(ended)
	if _, ok := s.c.endSeen.Load(ended.UID); !ok {
		t.Fatal("the pod's end was not noted")
	}
	if _, err := s.c.sync(context.Background(), "ns/job"); err != nil {
		t.Fatal(err)
	}
	got, err := s.jobs.BatchV1beta1().GenericJobs("ns").Get(context.Background(), "job", metav1.GetOptions{})
	if err != nil || got.Status.Phase != batch.JobSucceeded {
		t.Fatalf("written phase %q, %v: want Succeeded", got.Status.Phase, err)
	}
	if _, ok := s.c.endSeen.Load(ended.UID); ok {
		t.Error("the finished job's pod is still remembered as ended")
	}
}

// While scheduling gates hold the starting job's pod (Kueue's topology ungater has yet to
// give it its node), and for a batch after they let it go, its status waits, up to
// gatedBatchPeriod in all: the pod goes within it, and the status that says it runs is the
// one written. A gate that stays does not hide the job's status for ever.
func TestGatedPodHoldsTheStatusLonger(t *testing.T) {
	s := newStallTest(t, decisiontest.Job(batch.JobStatus{}))
	p := decisiontest.Pod("job-worker-0", "pod-uid", corev1.PodPending, 0)
	p.Labels[batch.LabelControllerUID] = "job-uid"
	p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(decisiontest.Job(batch.JobStatus{}), batch.SchemeGroupVersion.WithKind("GenericJob"))}
	gatedPod := p.DeepCopy()
	gatedPod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated}}
	show := func(p *corev1.Pod) {
		if err := s.c.caches[kindIndex(PodKind)].indexer.Update(p); err != nil {
			t.Fatal(err)
		}
	}
	sync := func(want time.Duration) {
		t.Helper()
		if wait, err := s.c.sync(context.Background(), "ns/job"); err != nil || wait != want {
			t.Fatalf("sync returned %s, %v: want to come back in %s", wait, err, want)
		}
	}
	show(gatedPod)
	sync(podBatchPeriod)
	s.clock.Step(podBatchPeriod)
	sync(podBatchPeriod) // still gated: the batch starts again
	s.clock.Step(podBatchPeriod / 2)
	show(p) // the gate is gone: one more batch from here
	sync(podBatchPeriod)
	if n := s.statusWrites(); n != 0 {
		t.Fatalf("%d status writes while the gate held the pod and its batch after, want none", n)
	}
	s.clock.Step(podBatchPeriod)
	sync(0)
	if n := s.statusWrites(); n != 1 {
		t.Fatalf("%d status writes once the batch after the gate closed, want 1", n)
	}

	// A gate that stays: the status goes gatedBatchPeriod after it was first held.
	s2 := newStallTest(t, decisiontest.Job(batch.JobStatus{}))
	if err := s2.c.caches[kindIndex(PodKind)].indexer.Update(gatedPod); err != nil {
		t.Fatal(err)
	}
	for range int(gatedBatchPeriod / podBatchPeriod) {
		if _, err := s2.c.sync(context.Background(), "ns/job"); err != nil {
			t.Fatal(err)
		}
		s2.clock.Step(podBatchPeriod)
	}
	if _, err := s2.c.sync(context.Background(), "ns/job"); err != nil {
		t.Fatal(err)
	}
	if n := s2.statusWrites(); n != 1 {
		t.Fatalf("%d status writes %s after a gated pod was first seen, want 1", n, gatedBatchPeriod)
	}
}
