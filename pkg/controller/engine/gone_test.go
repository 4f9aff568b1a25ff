package engine

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// The scheduler marks a pod it preempts and deletes it at once: when the deletion is seen
// before the job's sync reads the marked pod, the replica's lastTermination still names the
// preemption, from the deleted pod's last state, and the memory of it goes with the sync.
func TestPodDeletedBeforeItsDisruptionWasRead(t *testing.T) {
	s := newStallTest(t, testJob(statusWith(batch.JobRunning, replicaStatus("job-worker-0", "pod-uid", batch.ReplicaRunning, 0))))
	p := s.ownedPod(t, corev1.PodRunning)
	if err := s.c.caches[kindIndex(PodKind)].indexer.Delete(p); err != nil {
		t.Fatal(err)
	}
	preempted := p.DeepCopy()
	preempted.Status.Conditions = append(preempted.Status.Conditions, corev1.PodCondition{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "PreemptionByScheduler", Message: "preempted by a higher-priority pod"})
	s.c.childDeleted(&childKinds[kindIndex(PodKind)], preempted)

	if _, err := s.c.sync(context.Background(), "ns/job"); err != nil {
		t.Fatal(err)
	}
	got, err := s.jobs.BatchV1beta1().GenericJobs("ns").Get(context.Background(), "job", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := got.Status.Tasks[0].Replicas[0]
	if r.Disruptions != 1 || r.RestartCount != 0 || r.LastTermination == nil || r.LastTermination.Reason != "PreemptionByScheduler" {
		t.Fatalf("replica %+v, last termination %+v; want one disruption, PreemptionByScheduler", r, r.LastTermination)
	}
	if gone := s.c.goneOf("job-uid"); len(gone) != 0 {
		t.Errorf("the recorded pod is still remembered: %v", gone)
	}
}
