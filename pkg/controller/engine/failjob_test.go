package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// failingPlan is an adapter whose plan cannot be made.
type failingPlan struct{ Adapter }

func (failingPlan) Plan(Job) (*Plan, error) {
	return nil, errors.New("spec.replicaSpecs[0].template is not valid")
}

// A running job whose spec can no longer run fails through the sync's one write path: the
// Failed status goes first, then its unfinished replica stops, and a Warning event says why.
// The cached job is left as it was: the sync works on the job apply returns.
func TestAFailureFoundWhilePlanningIsADecision(t *testing.T) {
	running := replicaStatus("job-worker-0", "pod-uid", batch.ReplicaRunning, 0)
	s := newStallTest(t, testJob(statusWith(batch.JobRunning, running)))
	s.c.adapter = failingPlan{s.c.adapter}
	p := s.ownedPod(t, corev1.PodRunning)
	if _, err := s.c.clients.Kube.CoreV1().Pods("ns").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.c.clients.Kube.(*kubefake.Clientset).ClearActions()

	if _, err := s.c.sync(context.Background(), "ns/job"); err != nil {
		t.Fatal(err)
	}

	job, err := s.jobs.BatchV1beta1().GenericJobs("ns").Get(context.Background(), "job", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	failed := job.Status.Condition(batch.JobConditionFailed)
	if job.Status.Phase != batch.JobFailed || failed.Reason != "InvalidSpec" || !strings.Contains(failed.Message, "template is not valid") {
		t.Errorf("status: phase %q, Failed %+v; want Failed, InvalidSpec, the plan's error", job.Status.Phase, failed)
	}
	if s.statusWrites() != 1 {
		t.Errorf("%d status writes, want 1", s.statusWrites())
	}
	deleted := false
	for _, a := range s.c.clients.Kube.(*kubefake.Clientset).Actions() {
		if a.GetVerb() == "delete" && a.GetResource().Resource == "pods" {
			deleted = true
		}
	}
	if !deleted {
		t.Error("the running replica's pod was not deleted")
	}
	var events []string
	for len(s.c.recorder.(*record.FakeRecorder).Events) > 0 {
		events = append(events, <-s.c.recorder.(*record.FakeRecorder).Events)
	}
	if !slices.ContainsFunc(events, func(e string) bool { return strings.HasPrefix(e, "Warning InvalidSpec ") }) {
		t.Errorf("events %q, want a Warning InvalidSpec", events)
	}
	cached, _ := s.c.adapter.Get("ns", "job")
	if cached.JobStatus().Phase != batch.JobRunning {
		t.Errorf("the cached job's phase became %q: a sync must not write into the cache", cached.JobStatus().Phase)
	}
}
