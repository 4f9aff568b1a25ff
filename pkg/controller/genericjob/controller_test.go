package genericjob

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned/fake"
	jobinformers "github.com/t9k-jobs/t9k-jobs/pkg/client/informers/externalversions"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/enginetest"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/metrics"
)

type harness struct {
	*enginetest.Harness
	kube *kubefake.Clientset
	jobs *fake.Clientset
}

// start runs a GenericJob controller on fake clientsets until the test ends.
func start(t *testing.T, jobs []runtime.Object, kubeObjects ...runtime.Object) *harness {
	t.Helper()
	h := enginetest.Start(t, func(c versioned.Interface, f jobinformers.SharedInformerFactory) engine.Adapter {
		return New(c, f.Batch().V1beta1().GenericJobs())
	}, jobs, kubeObjects...)
	return &harness{Harness: h, kube: h.Kube, jobs: h.Jobs}
}

func (h *harness) waitFor(t *testing.T, what string, cond func(ctx context.Context) bool) {
	t.Helper()
	h.WaitFor(t, what, cond)
}

func (h *harness) job(t *testing.T) *batch.GenericJob {
	t.Helper()
	job, err := h.jobs.BatchV1beta1().GenericJobs("ns").Get(context.Background(), "gj", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return job
}

func (h *harness) count(verb, resource string) int { return h.Count(verb, resource) }

func (h *harness) setPodPhase(t *testing.T, name string, phase corev1.PodPhase, exitCode int32) {
	t.Helper()
	pods := h.kube.CoreV1().Pods("ns")
	p, err := pods.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = phase
	state := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	if phase == corev1.PodFailed || phase == corev1.PodSucceeded {
		state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode, FinishedAt: metav1.Now()}}
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: state}}
	if _, err := pods.UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func genericJob(replicas int32, restart *batch.GenericRestartPolicy) *batch.GenericJob {
	return &batch.GenericJob{
		ObjectMeta: metav1.ObjectMeta{Name: "gj", Namespace: "ns", UID: "gj-uid"},
		Spec: batch.GenericJobSpec{ReplicaSpecs: []batch.GenericReplicaSpec{{
			Type: "worker", Replicas: ptr.To(replicas), RestartPolicy: restart,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}},
		}}},
	}
}

// TestCreatesEachPodOnceAndRests: every replica's pod is created exactly once, the job
// reaches Running, and a sync of a steady job writes nothing.
func TestCreatesEachPodOnceAndRests(t *testing.T) {
	h := start(t, []runtime.Object{genericJob(4, nil)})
	h.waitFor(t, "4 pods", func(ctx context.Context) bool {
		pods, _ := h.kube.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{})
		return len(pods.Items) == 4
	})
	for i := range 4 {
		h.setPodPhase(t, fmt.Sprintf("gj-worker-%d", i), corev1.PodRunning, 0)
	}
	h.waitFor(t, "phase Running", func(context.Context) bool { return h.job(t).Status.Phase == batch.JobRunning })
	if n := h.count("create", "pods"); n != 4 {
		t.Errorf("%d pod creations, want 4", n)
	}

	writes := h.count("update", "genericjobs")
	syncs := syncCount()
	job := h.job(t)
	job.Annotations = map[string]string{"touch": "1"} // an event, no change that matters
	if _, err := h.jobs.BatchV1beta1().GenericJobs("ns").Update(context.Background(), job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitFor(t, "a sync of the steady job", func(context.Context) bool {
		return syncCount() > syncs
	})
	if n := h.count("update", "genericjobs"); n != writes {
		t.Errorf("a steady job's sync wrote its status (%d writes, had %d)", n, writes)
	}
}

// TestRestartCountNotLostNorDoubled: a controller that stopped after counting a restart but
// before deleting the pod finishes the restart without counting it again.
func TestRestartCountNotLostNorDoubled(t *testing.T) {
	job := genericJob(1, &batch.GenericRestartPolicy{Policy: batch.RestartOnFailure, Limit: ptr.To[int32](3)})
	job.Status = batch.JobStatus{Phase: batch.JobRunning, Tasks: []batch.TaskStatus{{Type: "worker", RestartCount: 1, Replicas: []batch.ReplicaStatus{
		{Name: "gj-worker-0", UID: "old-pod", Phase: batch.ReplicaDeleted, RestartCount: 1},
	}}}}
	failed := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gj-worker-0", Namespace: "ns", UID: types.UID("old-pod"),
			Labels:          map[string]string{batch.LabelJobName: "gj", batch.LabelControllerUID: "gj-uid"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batch.SchemeGroupVersion.WithKind("GenericJob"))}},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "main",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}}},
	}
	h := start(t, []runtime.Object{job}, failed)
	h.waitFor(t, "a new pod", func(ctx context.Context) bool {
		p, err := h.kube.CoreV1().Pods("ns").Get(ctx, "gj-worker-0", metav1.GetOptions{})
		return err == nil && p.UID != "old-pod"
	})
	h.waitFor(t, "the status to show the new pod", func(context.Context) bool {
		r := h.job(t).Status.Tasks[0].Replicas[0]
		return r.UID != "old-pod" && r.UID != ""
	})
	if got := h.job(t).Status.Tasks[0]; got.RestartCount != 1 || got.Replicas[0].RestartCount != 1 {
		t.Fatalf("restart count %d (replica %d), want 1: counted twice or lost", got.RestartCount, got.Replicas[0].RestartCount)
	}
}

// TestInvalidVariableFailsBeforeCreating: nothing is created for a job whose variables cannot
// be resolved; it fails with the message.
func TestInvalidVariableFailsBeforeCreating(t *testing.T) {
	job := genericJob(2, nil)
	job.Spec.ReplicaSpecs[0].Template.Spec.Containers[0].Args = []string{"$(service.worker[0].host)"}
	h := start(t, []runtime.Object{job})
	h.waitFor(t, "phase Failed", func(context.Context) bool { return h.job(t).Status.Phase == batch.JobFailed })
	if n := h.count("create", "pods") + h.count("create", "services"); n != 0 {
		t.Errorf("%d children created for an invalid job", n)
	}
	if c := h.job(t).Status.Condition(batch.JobConditionFailed); c.Reason != "InvalidSpec" || c.Message == "" {
		t.Errorf("Failed condition %+v", c)
	}
}

// TestCleanUpSparesPodThatJustEnded: the end-of-job clean-up (Unfinished) decided on a cached
// pod that was still Running must not delete it once it has ended: the delete carries the
// cached resourceVersion, the API server refuses it, and a fresh decision keeps the pod and
// reports its exit code.
func TestCleanUpSparesPodThatJustEnded(t *testing.T) {
	job := genericJob(2, nil)
	job.Spec.SuccessRules = []batch.ReplicaRule{{"worker": {0}}}
	h := start(t, []runtime.Object{job})
	h.waitFor(t, "2 pods", func(ctx context.Context) bool {
		pods, _ := h.kube.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{})
		return len(pods.Items) == 2
	})
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	stored := func(name string) *corev1.Pod {
		obj, err := h.kube.Tracker().Get(pods, "ns", name)
		if err != nil {
			return nil
		}
		return obj.(*corev1.Pod)
	}
	setPhase := func(p *corev1.Pod, phase corev1.PodPhase, exitCode int32, rv string) {
		p.Status.Phase, p.ResourceVersion = phase, rv
		state := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
		if phase != corev1.PodRunning {
			state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode, Reason: "Error"}}
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: state}}
		if err := h.kube.Tracker().Update(pods, p, "ns"); err != nil {
			t.Error(err)
		}
	}
	raced := false
	h.kube.PrependReactor("delete", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		name := action.(k8stesting.DeleteAction).GetName()
		pre := action.(k8stesting.DeleteAction).GetDeleteOptions().Preconditions
		p := stored(name)
		if name == "gj-worker-1" && !raced && p != nil {
			raced = true // the pod ends now, after the decision made on its Running copy
			setPhase(p, corev1.PodFailed, 1, "3")
		}
		if p != nil && pre != nil && pre.ResourceVersion != nil && *pre.ResourceVersion != p.ResourceVersion {
			return true, nil, apierrors.NewConflict(pods.GroupResource(), name, fmt.Errorf("the object has been modified"))
		}
		return false, nil, nil
	})
	setPhase(stored("gj-worker-0"), corev1.PodRunning, 0, "2")
	setPhase(stored("gj-worker-1"), corev1.PodRunning, 0, "2")
	h.waitFor(t, "phase Running", func(context.Context) bool { return h.job(t).Status.Phase == batch.JobRunning })
	setPhase(stored("gj-worker-0"), corev1.PodSucceeded, 0, "3")

	h.waitFor(t, "the job Succeeded with worker 1 reported Failed", func(context.Context) bool {
		s := h.job(t).Status
		if s.Phase != batch.JobSucceeded {
			return false
		}
		r := s.Tasks[0].Replicas[1]
		return r.Phase == batch.ReplicaFailed && len(r.Containers) == 1 && r.Containers[0].ExitCode != nil && *r.Containers[0].ExitCode == 1
	})
	if !raced {
		t.Fatal("the clean-up never tried to delete gj-worker-1")
	}
	if stored("gj-worker-1") == nil {
		t.Error("gj-worker-1 ended before its delete was sent, and was deleted all the same")
	}
}

// syncCount is how many GenericJob syncs have succeeded so far.
func syncCount() uint64 {
	m := &dto.Metric{}
	_ = metrics.SyncDuration.WithLabelValues("GenericJob", "success").(prometheus.Metric).Write(m)
	return m.GetHistogram().GetSampleCount()
}
