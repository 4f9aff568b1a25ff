package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// waitSaysWhy is how soon a job whose replicas wait must say why.
const waitSaysWhy = 5 * time.Second

// waitingSaid waits until the job's Running condition has the reason and names every one of
// replicas with text, and fails if that took longer than waitSaysWhy from since.
func waitingSaid(t *testing.T, ns, name string, since time.Time, reason, text string, replicas ...string) batch.JobCondition {
	t.Helper()
	says := func(j *batch.GenericJob) bool {
		c := j.Status.Condition(batch.JobConditionRunning)
		if c.Status != corev1.ConditionFalse || c.Reason != reason || !strings.Contains(c.Message, text) {
			return false
		}
		for _, r := range replicas {
			if !strings.Contains(c.Message, r) {
				return false
			}
		}
		return true
	}
	running := waitJob(t, ns, name, "saying why its replicas wait", says).Status.Condition(batch.JobConditionRunning)
	took := time.Since(since)
	if took > waitSaysWhy {
		t.Errorf("the job said why its replicas wait %s after they began to, want within %s", took.Round(100*time.Millisecond), waitSaysWhy)
	}
	t.Logf("after %s, Running %s %s: %s", took.Round(100*time.Millisecond), running.Status, running.Reason, running.Message)
	return running
}

// waitingReplicas is the start of the huge job's wait as its event says it.
var waitingReplicas = regexp.MustCompile(`^(worker-0|worker-1|worker-0, worker-1): 0/\d+ nodes are available`)

// TestWaitingUnschedulable: a replica asking for 10,000 CPUs is never placed; the job's
// Running condition names it and quotes the scheduler, and one Warning event says it.
func TestWaitingUnschedulable(t *testing.T) {
	ns := namespace(t)
	r := replica("worker", "trainer")
	r.Replicas = ptr.To[int32](2)
	r.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10000")}
	job := &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: "huge"}, Spec: batch.GenericJobSpec{ReplicaSpecs: []batch.GenericReplicaSpec{r}}}
	start := time.Now()
	createJob(t, ns, job)
	running := waitingSaid(t, ns, job.Name, start, "Unschedulable", "Insufficient cpu", "worker-0, worker-1: 0/")
	if !strings.Contains(running.Message, "(since ") {
		t.Errorf("Running message %q does not say since when", running.Message)
	}
	// The event is the wait's part of the condition when the reason was first seen: the
	// scheduler may mark one replica unschedulable a sync before the other, and a reason is
	// announced once (docs/jobs.md, "One event per reason"), so it names one or both.
	said := jobEvent(t, ns, job.Name, "Unschedulable")
	if !waitingReplicas.MatchString(said) || !strings.Contains(said, "Insufficient cpu") {
		t.Errorf("Unschedulable event %q, want it to name the waiting replicas and quote the scheduler", said)
	}
	time.Sleep(3 * time.Second) // syncs come and go; the status and the event stay as they are
	if again := getJob(t, ns, job.Name).Status.Condition(batch.JobConditionRunning); again.Message != running.Message {
		t.Errorf("the Running message changed while nothing did: %q, then %q", running.Message, again.Message)
	}
	if n := strings.Count(eventsOf(t, ns, job.Name), "Unschedulable:"); n != 1 {
		t.Errorf("%d Unschedulable events, want 1:\n%s", n, eventsOf(t, ns, job.Name))
	}
}

// TestWaitingForImage: a pod whose container waits in ImagePullBackOff, as a kubelet says
// it. Its pod is bound to a node that kwok does not manage, so nothing overwrites the status
// the test writes.
func TestWaitingForImage(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "no-kubelet-" + ns}}
	if _, err := env.kube.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.kube.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{}) })
	r := replica("worker", "registry.invalid/nope:1")
	r.Template.Spec.NodeName = node.Name
	job := &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: "pull"}, Spec: batch.GenericJobSpec{ReplicaSpecs: []batch.GenericReplicaSpec{r}}}
	createJob(t, ns, job)
	var pod *corev1.Pod
	waitFor(t, "the job's pod", jobTimeout, func(ctx context.Context) (bool, error) {
		var err error
		pod, err = env.kube.CoreV1().Pods(ns).Get(ctx, "pull-worker-0", metav1.GetOptions{})
		return err == nil, nil
	})
	pod.Status.Phase = corev1.PodPending
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", Image: "registry.invalid/nope:1", State: corev1.ContainerState{
		Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "registry.invalid/nope:1"`}}}}
	start := time.Now()
	if _, err := env.kube.CoreV1().Pods(ns).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitingSaid(t, ns, job.Name, start, "ImagePullBackOff", `worker-0: ImagePullBackOff: Back-off pulling image "registry.invalid/nope:1"`)
}

// TestWaitingForKueue: a job in a Kueue queue whose quota it exceeds has no pod; its Running
// condition quotes Kueue and names the replicas.
func TestWaitingForKueue(t *testing.T) {
	useKueue(t)
	parallel(t)
	ns := namespace(t)
	queue := queueFor(t, ns, 2)
	job := queuedJob("over", queue, 3, "1s")
	start := time.Now()
	createJob(t, ns, job)
	waitingSaid(t, ns, job.Name, start, "Queued", "quota", "Replicas waiting: worker-0, worker-1, worker-2 (since ")
	if names := podNames(t, ns); len(names) != 0 {
		t.Errorf("a job over its quota has pods %v", names)
	}
}
