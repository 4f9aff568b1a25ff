package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision/decisiontest"
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
	running := decisiontest.ReplicaStatus("job-worker-0", "pod-uid", batch.ReplicaRunning, 0)
	s := newStallTest(t, decisiontest.Job(decisiontest.StatusWith(batch.JobRunning, running)))
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

// A job that finds a child's name held by another object fails, and the pods its sync made
// before it found out stop with it: they were not in the cache the sync started from.
func TestANameTakenStopsThePodsMadeInTheSameSync(t *testing.T) {
	s := newStallTest(t, decisiontest.Job(batch.JobStatus{}))
	s.c.adapter = &planOverride{Adapter: s.c.adapter, plan: func() *Plan {
		return &Plan{Groups: []Group{workers(1, batch.RestartNever, nil)}, Judge: whenAllSucceed,
			ServicePorts: []corev1.ServicePort{{Name: "http", Port: 80}}}
	}}
	kube := s.c.clients.Kube.(*kubefake.Clientset)
	kube.PrependReactor("create", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if obj, ok := action.(k8stesting.CreateAction).GetObject().(metav1.Object); ok && obj.GetUID() == "" {
			obj.SetUID(types.UID("uid-" + obj.GetName())) // as the API server would
		}
		return false, nil, nil
	})
	// Someone else's Service holds the name of the replica's.
	if _, err := kube.CoreV1().Services("ns").Create(context.Background(), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "job-worker-0", Namespace: "ns"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kube.ClearActions()

	if _, err := s.c.sync(context.Background(), "ns/job"); err != nil {
		t.Fatal(err)
	}
	job, err := s.jobs.BatchV1beta1().GenericJobs("ns").Get(context.Background(), "job", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if job.Status.Phase != batch.JobFailed || job.Status.Condition(batch.JobConditionFailed).Reason != "NameTaken" {
		t.Fatalf("status: phase %q, conditions %+v; want Failed, NameTaken", job.Status.Phase, job.Status.Conditions)
	}
	var createdPod, deletedPod bool
	for _, a := range kube.Actions() {
		if a.GetResource().Resource != "pods" {
			continue
		}
		switch a.GetVerb() {
		case "create":
			createdPod = true
		case "delete":
			deletedPod = a.(k8stesting.DeleteAction).GetName() == "job-worker-0"
		}
	}
	if !createdPod || !deletedPod {
		t.Errorf("pod created %v, deleted %v: the pod made beside the Service must stop with the failed job", createdPod, deletedPod)
	}
	if _, err := kube.CoreV1().Pods("ns").Get(context.Background(), "job-worker-0", metav1.GetOptions{}); err == nil {
		t.Error("job-worker-0 still runs on a failed job")
	}
}
