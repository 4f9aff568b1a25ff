package engine

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision/decisiontest"
)

func finishedJob(completed time.Time, ttl int32) *batch.GenericJob {
	job := decisiontest.Job(batch.JobStatus{Phase: batch.JobSucceeded, CompletionTime: ptr.To(metav1.NewTime(completed)),
		Tasks:      []batch.TaskStatus{{Type: "worker", Replicas: []batch.ReplicaStatus{decisiontest.ReplicaStatus("job-worker-0", "w0", batch.ReplicaSucceeded, 0)}}},
		Conditions: []batch.JobCondition{{Type: batch.JobConditionCompleted, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(completed)}}})
	job.Spec.TTLSecondsAfterFinished = ptr.To(ttl)
	job.ResourceVersion = "7"
	return job
}

// A finished job is deleted when its TTL runs out, not before: its key comes back with the
// time left, counted from status.completionTime.
func TestTTLDeletesWhenItRunsOut(t *testing.T) {
	s := newStallTest(t, finishedJob(now.Add(-time.Second), 3))
	s.processOnce(t)
	if _, err := s.jobs.BatchV1beta1().GenericJobs("ns").Get(context.Background(), "job", metav1.GetOptions{}); err != nil {
		t.Fatalf("deleted 1 s after completion with a TTL of 3 s: %v", err)
	}
	if s.comesBack(t, 1900*time.Millisecond) {
		t.Fatal("the key came back before the TTL ran out")
	}
	if !s.comesBack(t, 100*time.Millisecond) {
		t.Fatal("the key did not come back when the TTL ran out")
	}
	if !s.c.processNext(context.Background()) {
		t.Fatal("queue shut down")
	}
	if _, err := s.jobs.BatchV1beta1().GenericJobs("ns").Get(context.Background(), "job", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the job is still there once its TTL ran out: %v", err)
	}
	for _, a := range s.jobs.Actions() {
		if a.GetVerb() == "delete" {
			return
		}
	}
	t.Error("no delete was sent")
}

// A TTL that ran out while the controller was down deletes the job on its first sync; one
// lengthened on the API server since the cache saw it keeps the job.
func TestTTLPastAtStartAndLengthened(t *testing.T) {
	s := newStallTest(t, finishedJob(now.Add(-time.Hour), 3))
	s.processOnce(t)
	if _, err := s.jobs.BatchV1beta1().GenericJobs("ns").Get(context.Background(), "job", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a job whose TTL ran out an hour ago is still there after a sync: %v", err)
	}

	cached := finishedJob(now.Add(-time.Hour), 3)
	s = newStallTest(t, cached)
	fresh := cached.DeepCopy()
	fresh.Spec.TTLSecondsAfterFinished = ptr.To[int32](7200)
	if _, err := s.jobs.BatchV1beta1().GenericJobs("ns").Update(context.Background(), fresh, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.processOnce(t)
	if _, err := s.jobs.BatchV1beta1().GenericJobs("ns").Get(context.Background(), "job", metav1.GetOptions{}); err != nil {
		t.Errorf("a job whose TTL was lengthened to 2 h was deleted an hour after it finished: %v", err)
	}
}

func TestTTLLeft(t *testing.T) {
	job := decisiontest.Job(batch.JobStatus{Phase: batch.JobSucceeded, CompletionTime: ptr.To(metav1.NewTime(now)),
		Conditions: []batch.JobCondition{{Type: batch.JobConditionCompleted, Status: corev1.ConditionTrue}}})
	if _, ok := ttlLeft(job, now); ok {
		t.Errorf("a job without ttlSecondsAfterFinished has a TTL")
	}
	job.Spec.TTLSecondsAfterFinished = ptr.To[int32](3)
	if left, ok := ttlLeft(job, now.Add(time.Second)); !ok || left != 2*time.Second {
		t.Errorf("1 s after completion with TTL 3 s: %v left (%v), want 2s", left, ok)
	}
	if left, _ := ttlLeft(job, now.Add(time.Hour)); left >= 0 {
		t.Errorf("an hour after completion: %v left, want it past", left)
	}
	job.Status = batch.JobStatus{Phase: batch.JobRunning}
	if _, ok := ttlLeft(job, now); ok {
		t.Errorf("a running job's TTL runs")
	}
}
