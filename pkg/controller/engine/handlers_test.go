package engine

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision/decisiontest"
)

// Stalls (spec.progressDeadlineSeconds) as the handlers see them: a report alone syncs
// nothing, and arms the timer of the sync that would find the stall.

// A report changes only status.progress: the job is not synced for it.
func TestProgressAloneDoesNotSyncTheJob(t *testing.T) {
	s := newStallTest(t, decisiontest.Job(decisiontest.Running("0")))
	old := decisiontest.Job(decisiontest.Running("0"))
	old.ResourceVersion = "1"
	cur := old.DeepCopy()
	cur.ResourceVersion = "2"
	cur.Status.Progress = &batch.JobProgress{Replicas: []batch.ReplicaProgress{{UID: "w0", ReportTime: metav1.NewTime(now)}}}
	s.c.updateJob(old, cur)
	if n := s.c.queue.Len(); n != 0 {
		t.Fatalf("a progress report queued the job (%d queued)", n)
	}
	changed := cur.DeepCopy()
	changed.ResourceVersion = "3"
	changed.Status.Phase = batch.JobFailed
	changed.Status.Progress.Replicas[0].ReportTime = metav1.NewTime(now.Add(time.Second))
	s.c.updateJob(cur, changed)
	if n := s.c.queue.Len(); n != 1 {
		t.Fatalf("a change beside the progress: %d queued, want the job", n)
	}
}

// A job whose replicas report once and then fall silent is found stalled with no other event:
// the report itself syncs nothing, yet the handler that sees it asks for the sync that finds
// the stall, at the deadline plus the time a report may take to show (Plan.ProgressLag).
func TestAReportAloneArmsTheStallCheck(t *testing.T) {
	old := decisiontest.Job(decisiontest.StatusWith(batch.JobRunning, decisiontest.ReplicaStatus("job-worker-0", "pod-uid", batch.ReplicaRunning, 0)))
	old.Spec.ProgressDeadlineSeconds = ptr.To[int64](6)
	s := newStallTest(t, old)
	s.c.adapter = &planOverride{Adapter: s.c.adapter, plan: func() *Plan {
		return &Plan{Groups: []Group{workers(1, batch.RestartNever, nil)}, Judge: whenAllSucceed, ProgressDeadline: 6 * time.Second, ProgressLag: s.c.reportLag()}
	}}
	p := s.ownedPod(t, corev1.PodRunning)
	cur := old.DeepCopy()
	cur.ResourceVersion = "2"
	cur.Status.Progress = &batch.JobProgress{Replicas: []batch.ReplicaProgress{{UID: p.UID, ProgressPercentage: ptr.To[int32](20), ReportTime: metav1.NewTime(now)}}}
	if err := s.c.adapter.Informer().GetIndexer().Update(cur); err != nil {
		t.Fatal(err)
	}
	s.c.updateJob(old, cur)
	if n := s.c.queue.Len(); n != 0 {
		t.Fatalf("a report alone queued the job at once (%d keys): it decides nothing now", n)
	}
	if !s.comesBack(t, 6*time.Second+s.c.reportLag()) {
		t.Fatal("the job was not synced at its progress deadline: a replica that reports once and hangs would never be called stalled")
	}
	if !s.c.processNext(context.Background()) {
		t.Fatal("queue shut down")
	}
	job, err := s.jobs.BatchV1beta1().GenericJobs("ns").Get(context.Background(), "job", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if job.Status.Phase != batch.JobFailed || job.Status.Condition(batch.JobConditionFailed).Reason != string(batch.ReasonStalled) ||
		!job.Status.ConditionTrue(batch.JobConditionStalled) {
		t.Errorf("after the deadline: phase %s, conditions %+v; want Failed, Stalled", job.Status.Phase, job.Status.Conditions)
	}
}
