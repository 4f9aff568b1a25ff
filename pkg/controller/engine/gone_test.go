package engine

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision/decisiontest"
)

// The scheduler marks a pod it preempts and deletes it at once: when the deletion is seen
// before the job's sync reads the marked pod, the replica's lastTermination still names the
// preemption, from the deleted pod's last state, and the memory of it goes with the sync.
func TestPodDeletedBeforeItsDisruptionWasRead(t *testing.T) {
	s := newStallTest(t, decisiontest.Job(decisiontest.StatusWith(batch.JobRunning, decisiontest.ReplicaStatus("job-worker-0", "pod-uid", batch.ReplicaRunning, 0))))
	p := s.ownedPod(t, corev1.PodRunning)
	if err := s.c.caches[kindIndex(PodKind)].indexer.Delete(p); err != nil {
		t.Fatal(err)
	}
	s.c.childDeleted(&childKinds[kindIndex(PodKind)], preempted(p))

	r := s.syncedReplica(t)
	if r.Disruptions != 1 || r.RestartCount != 0 || r.LastTermination == nil || r.LastTermination.Reason != "PreemptionByScheduler" {
		t.Fatalf("replica %+v, last termination %+v; want one disruption, PreemptionByScheduler", r, r.LastTermination)
	}
	if gone := s.c.gone.of("job-uid", nil); len(gone) != 0 {
		t.Errorf("the recorded pod is still remembered: %v", gone)
	}
}

// An informer drops a deleted pod from its cache before it tells its handlers: a sync in
// between (woken by another pod of the job, preempted a moment before) finds the pod gone and
// its delete event not yet handled. Its last state is remembered all the same, by the
// informer's transform, which saw it before the cache did.
func TestPodGoneBeforeItsDeleteEventIsHandled(t *testing.T) {
	s := newStallTest(t, decisiontest.Job(decisiontest.StatusWith(batch.JobRunning, decisiontest.ReplicaStatus("job-worker-0", "pod-uid", batch.ReplicaRunning, 0))))
	p := s.ownedPod(t, corev1.PodRunning)
	// Disrupted and not being deleted (a kubelet's eviction ends the pod, which stays): read
	// from the cache, not remembered.
	if _, err := s.c.gone.trimChild(preempted(p)); err != nil {
		t.Fatal(err)
	}
	if got := s.c.gone.of("job-uid", nil); got != nil {
		t.Fatalf("a disrupted pod not being deleted is remembered: %v", got)
	}
	// The informer takes the pod's last state in through its transform, then drops the pod
	// from its cache; its delete handler (childDeleted) has not run.
	deleting := preempted(p)
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	if _, err := s.c.gone.trimChild(deleting); err != nil {
		t.Fatal(err)
	}
	if err := s.c.caches[kindIndex(PodKind)].indexer.Delete(p); err != nil {
		t.Fatal(err)
	}

	r := s.syncedReplica(t)
	if r.Disruptions != 1 || r.LastTermination == nil || r.LastTermination.Reason != "PreemptionByScheduler" {
		t.Fatalf("replica %+v, last termination %+v; want one disruption, PreemptionByScheduler", r, r.LastTermination)
	}
}

// preempted is p as the scheduler marks a pod it preempts.
func preempted(p *corev1.Pod) *corev1.Pod {
	marked := p.DeepCopy()
	marked.Status.Conditions = append(marked.Status.Conditions, corev1.PodCondition{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "PreemptionByScheduler", Message: "preempted by a higher-priority pod"})
	return marked
}

// syncedReplica syncs the job once and returns its replica as the status write left it.
func (s *stallTest) syncedReplica(t *testing.T) batch.ReplicaStatus {
	t.Helper()
	if _, err := s.c.sync(context.Background(), "ns/job"); err != nil {
		t.Fatal(err)
	}
	got, err := s.jobs.BatchV1beta1().GenericJobs("ns").Get(context.Background(), "job", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got.Status.Tasks[0].Replicas[0]
}

// The memory of gone pods answers for one job only, forgets what its job's status recorded
// and everything of a deleted job, and drops what no sync took within goneTTL.
func TestGoneMemoryIsKeptByJob(t *testing.T) {
	var m goneMemory
	podOf := func(uid types.UID) *corev1.Pod { return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}} }
	m.remember("a", podOf("a-0"), now)
	m.remember("a", podOf("a-1"), now)
	m.remember("b", podOf("b-0"), now)
	if got := m.of("a", nil); len(got) != 2 || got["a-0"] == nil || got["a-1"] == nil {
		t.Fatalf("job a's gone pods: %v, want a-0 and a-1", got)
	}
	m.forget("a", map[types.UID]*corev1.Pod{"a-0": m.of("a", nil)["a-0"]})
	if got := m.of("a", nil); len(got) != 1 || got["a-1"] == nil {
		t.Errorf("after a's sync recorded a-0: %v, want a-1 alone", got)
	}
	// A pod still cached is the sync's to read from the cache: not given as gone, nor forgotten.
	if got := m.of("a", []*corev1.Pod{podOf("a-1")}); got != nil {
		t.Errorf("a-1 is cached, yet given as gone: %v", got)
	}
	// A later state of a pod, remembered after a sync read it, outlives the sync's forget.
	read := m.of("a", nil)
	later := podOf("a-1")
	m.remember("a", later, now)
	m.forget("a", read)
	if got := m.of("a", nil); got["a-1"] != later {
		t.Errorf("the state remembered after the sync read a-1 was forgotten: %v", got)
	}
	m.forgetJob("a")
	if got := m.of("a", nil); got != nil {
		t.Errorf("job a deleted: %v remembered", got)
	}
	// b's pod is never synced away (its job was deleted with its pods, unseen): a later
	// deletion past goneTTL sweeps it.
	m.remember("c", podOf("c-0"), now.Add(goneTTL+time.Second))
	if got := m.of("b", nil); got != nil {
		t.Errorf("b-0 remembered past goneTTL: %v", got)
	}
	if len(m.jobs) != 1 {
		t.Errorf("jobs remembered: %v, want c alone", m.jobs)
	}
}
