package engine

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision/decisiontest"
)

// The attempts a decision orders are written to the pods: the label and when, then the release
// with the agent's restart count.
func TestRestartInPlaceWritesAttempts(t *testing.T) {
	s := newStallTest(t, decisiontest.Job(decisiontest.Running("0")))
	p := s.ownedPod(t, corev1.PodRunning)
	kube := s.c.clients.Kube
	if _, err := kube.CoreV1().Pods("ns").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	job := decisiontest.Job(decisiontest.Running("0"))
	d := &Decision{Status: &batch.JobStatus{Attempt: 2}, RestartPods: []decision.PodRestart{{Pod: p, Attempt: 2}}}
	if err := s.c.restartInPlace(context.Background(), job, d); err != nil {
		t.Fatal(err)
	}
	got, err := kube.CoreV1().Pods("ns").Get(context.Background(), p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels[batch.LabelAttempt] != "2" || got.Annotations[batch.AnnotationRestartedAt] == "" {
		t.Fatalf("labels %v, annotations %v: want attempt 2, the time it was written", got.Labels, got.Annotations)
	}
	d = &Decision{Status: &batch.JobStatus{Attempt: 2}, ReleasePods: []decision.PodRelease{{Pod: p, Attempt: 2, AgentRestarts: 3}}}
	if err := s.c.restartInPlace(context.Background(), job, d); err != nil {
		t.Fatal(err)
	}
	got, _ = kube.CoreV1().Pods("ns").Get(context.Background(), p.Name, metav1.GetOptions{})
	if got.Annotations[batch.AnnotationReleasedAttempt] != "2" || got.Annotations[batch.AnnotationAgentRestarts] != "3" {
		t.Fatalf("annotations %v: want attempt 2 released at 3 agent restarts", got.Annotations)
	}
	// Asked again by a sync on a cache that has not shown the writes yet: nothing is sent.
	kube.(*kubefake.Clientset).ClearActions()
	d = &Decision{Status: &batch.JobStatus{Attempt: 2}, RestartPods: []decision.PodRestart{{Pod: p, Attempt: 2}}, ReleasePods: []decision.PodRelease{{Pod: p, Attempt: 2}}}
	if err := s.c.restartInPlace(context.Background(), job, d); err != nil {
		t.Fatal(err)
	}
	if n := len(kube.(*kubefake.Clientset).Actions()); n != 0 {
		t.Errorf("%d writes for attempts written a moment ago, want none", n)
	}
	// A pod already gone needs nothing.
	gone := p.DeepCopy()
	gone.Name = "gone"
	d = &Decision{Status: &batch.JobStatus{Attempt: 3}, RestartPods: []decision.PodRestart{{Pod: gone, Attempt: 3}}}
	if err := s.c.restartInPlace(context.Background(), job, d); err != nil {
		t.Errorf("restarting a pod that is gone: %v, want nothing done", err)
	}
}

// The informers' transform remembers a pod that restarts in place as one of its containers
// fails, and nothing of its other states, nor of other pods; the sync gives it to the
// decision.
func TestFailingInPlaceIsRemembered(t *testing.T) {
	m := &goneMemory{}
	pod := func(code int32) *corev1.Pod {
		p := decisiontest.Pod("job-worker-0", "w0", corev1.PodRunning, 0)
		p.Labels[batch.LabelControllerUID] = "job-uid"
		p.Annotations = map[string]string{batch.AnnotationReleasedAttempt: "1"}
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: decision.AgentContainer, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		if code != 0 {
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error"}}
		}
		return p
	}
	plain := decisiontest.Pod("job-worker-1", "w1", corev1.PodRunning, 0)
	plain.Labels[batch.LabelControllerUID] = "job-uid"
	plain.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3}}
	for _, p := range []*corev1.Pod{pod(0), plain} {
		trimmed, _ := TrimChild(p)
		m.rememberFailing(trimmed, now)
	}
	if got := m.all("job-uid"); got != nil {
		t.Fatalf("remembered %v: want nothing of a running pod, nor of one that does not restart in place", got)
	}
	trimmed, _ := TrimChild(pod(42))
	m.rememberFailing(trimmed, now)
	got := m.all("job-uid")["w0"]
	if got == nil || got.Status.ContainerStatuses[0].State.Terminated == nil || got.Status.ContainerStatuses[0].State.Terminated.ExitCode != 42 {
		t.Fatalf("remembered %+v: want the failing state, exit code 42", got)
	}
}
