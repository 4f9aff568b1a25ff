package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/test/harness"
)

// The lifecycle controls every kind shares (docs/lifecycle.md), on kwok's nodes: TTL after
// finished, the start deadline, and disruptions that are not failures.

// childrenLeft lists the pods and Services of the namespace that are not being deleted.
func childrenLeft(t *testing.T, ns string) []string {
	t.Helper()
	left := podNames(t, ns)
	services, err := env.kube.CoreV1().Services(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range services.Items {
		if s.DeletionTimestamp == nil {
			left = append(left, "service/"+s.Name)
		}
	}
	return left
}

// TestTTLAfterFinished: a job with ttlSecondsAfterFinished 3 is deleted 3 to 5 seconds after
// its completionTime, its pods (kept by its clean-up policy) and Services first.
func TestTTLAfterFinished(t *testing.T) {
	ns := namespace(t)
	r := replica("worker", "trainer")
	r.Replicas = ptr.To[int32](2)
	exits(&r, 0, "1s")
	job := &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: "ttl"}, Spec: batch.GenericJobSpec{
		ReplicaSpecs:  []batch.GenericReplicaSpec{r},
		Service:       &batch.ServiceOption{Ports: []batch.ServicePort{{Name: "http", Port: 8080}}},
		CleanUpPolicy: batch.CleanUpNone,
		Lifecycle:     batch.Lifecycle{TTLSecondsAfterFinished: ptr.To[int32](3)},
	}}
	createJob(t, ns, job)
	done := waitJob(t, ns, job.Name, "Succeeded", inPhase(batch.JobSucceeded))
	if done.Status.CompletionTime == nil {
		t.Fatalf("a Succeeded job has no completionTime: %+v", done.Status)
	}
	completed := done.Status.CompletionTime.Time
	if left := childrenLeft(t, ns); len(left) < 4 {
		t.Fatalf("before its TTL the job has %v, want its 2 pods and 2 Services", left)
	}
	gone := waitDeleted(t, ns, job.Name, 20*time.Second)
	after := gone.Sub(completed)
	t.Logf("deleted %.1fs after its completionTime %s", after.Seconds(), completed.Format(time.TimeOnly))
	if after < 3*time.Second || after > 5*time.Second {
		t.Errorf("the job was deleted %s after its completionTime, want 3-5s (ttlSecondsAfterFinished: 3)", after.Round(100*time.Millisecond))
	}
	if left := childrenLeft(t, ns); len(left) > 0 {
		t.Errorf("the job is gone but not its children: %v", left)
	}
}

// TestTTLPassedWhileControllerDown: a finished job whose TTL runs out while no controller runs
// is deleted within seconds of the controller's start. Its TTL is shortened after it finished,
// while the controller is down: the TTL is read from the job as it is now.
func TestTTLPassedWhileControllerDown(t *testing.T) {
	ns := namespace(t)
	r := replica("worker", "trainer")
	exits(&r, 1, "500ms")
	job := &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: "ttl-down"}, Spec: batch.GenericJobSpec{
		ReplicaSpecs: []batch.GenericReplicaSpec{r},
		Lifecycle:    batch.Lifecycle{TTLSecondsAfterFinished: ptr.To[int32](3600)},
	}}
	createJob(t, ns, job)
	done := waitJob(t, ns, job.Name, "Failed", inPhase(batch.JobFailed))
	if !stopController() {
		t.Fatal("the controller did not stop in time")
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			if err := startController(); err != nil {
				t.Errorf("restarting the controller: %v", err)
			}
		}
	})
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		j, err := env.jobs.BatchV1beta1().GenericJobs(ns).Get(context.Background(), job.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		j.Spec.TTLSecondsAfterFinished = ptr.To[int32](1)
		_, err = env.jobs.BatchV1beta1().GenericJobs(ns).Update(context.Background(), j, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	expired := done.Status.CompletionTime.Add(time.Second)
	waitFor(t, "the TTL to run out while no controller runs", 10*time.Second, func(context.Context) (bool, error) {
		return time.Now().After(expired), nil
	})
	if _, err := env.jobs.BatchV1beta1().GenericJobs(ns).Get(context.Background(), job.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("the job went while no controller ran: %v", err)
	}

	if err := startController(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	started := time.Now() // the controller runs jobs: its caches are synced
	gone := waitDeleted(t, ns, job.Name, 20*time.Second)
	t.Logf("deleted %.1fs after the controller ran jobs again", gone.Sub(started).Seconds())
	if took := gone.Sub(started); took > 5*time.Second {
		t.Errorf("deleted %s after the controller started, want within seconds", took.Round(100*time.Millisecond))
	}
}

// TestStartupDeadline: a job one of whose replicas asks for 10,000 CPUs, with a start deadline
// of 10 s, fails 10 s after its replicas were created, with its own reason, naming the
// replica and quoting the scheduler.
func TestStartupDeadline(t *testing.T) {
	ns := namespace(t)
	small, huge := replica("small", "trainer"), replica("huge", "trainer")
	huge.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10000")}
	job := &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: "late"}, Spec: batch.GenericJobSpec{
		ReplicaSpecs: []batch.GenericReplicaSpec{small, huge},
		Lifecycle:    batch.Lifecycle{StartupDeadlineSeconds: ptr.To[int64](10)},
	}}
	createJob(t, ns, job)
	failed := waitJob(t, ns, job.Name, "Failed", inPhase(batch.JobFailed))
	c := failed.Status.Condition(batch.JobConditionFailed)
	if c.Reason != "StartupDeadlineExceeded" {
		t.Errorf("Failed condition reason %q, want StartupDeadlineExceeded", c.Reason)
	}
	for _, want := range []string{"spec.startupDeadlineSeconds", "huge-0 pending", "Insufficient cpu"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("Failed condition message %q does not say %q", c.Message, want)
		}
	}
	if strings.Contains(c.Message, "small-0") {
		t.Errorf("Failed condition message %q names small-0, which runs", c.Message)
	}
	if start := failed.Status.StartTime; start == nil || failed.Status.CompletionTime == nil {
		t.Errorf("startTime %v, completionTime %v: want both", start, failed.Status.CompletionTime)
	} else if took := failed.Status.CompletionTime.Sub(start.Time); took < 10*time.Second || took > 13*time.Second {
		t.Errorf("failed %s after its replicas were created, want about 10s", took)
	}
	t.Logf("%s: %s", c.Reason, c.Message)
	if events, ok := eventsSaying(t, ns, job.Name, "StartupDeadlineExceeded: "); !ok {
		t.Errorf("no StartupDeadlineExceeded event:\n%s", events)
	}
}

// endPodAs makes a pod end as its kubelet would report it: phase, the containers' exit code,
// the pod's reason, and conditions added.
func endPodAs(t *testing.T, ns, name string, phase corev1.PodPhase, code int32, reason string, conditions ...corev1.PodCondition) types.UID {
	t.Helper()
	pods := env.kube.CoreV1().Pods(ns)
	var uid types.UID
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := pods.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		uid = p.UID
		now := metav1.Now()
		p.Status.Phase, p.Status.Reason = phase, reason
		for i := range p.Status.ContainerStatuses {
			cs := &p.Status.ContainerStatuses[i]
			cs.Ready, cs.State = false, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error", FinishedAt: now}}
		}
		for _, c := range conditions {
			c.LastTransitionTime = now
			p.Status.Conditions = append(p.Status.Conditions, c)
		}
		_, err = pods.UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return uid
}

// replacedAfterDisruption waits until the replica's pod is a new one, running, with one more
// disruption and no restart, and returns its status.
func replacedAfterDisruption(t *testing.T, ns, job, name string, old types.UID, disruptions int32) batch.ReplicaStatus {
	t.Helper()
	var j *batch.GenericJob
	err := harness.WaitFor(context.Background(), name+" replaced after its disruption", 100*time.Millisecond, jobTimeout, func(ctx context.Context) (bool, error) {
		got, err := env.jobs.BatchV1beta1().GenericJobs(ns).Get(ctx, job, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		j = got
		r := replicaStatusOf(j, name)
		return r.UID != "" && r.UID != old && r.Phase == batch.ReplicaRunning && r.Disruptions == disruptions, nil
	})
	if err != nil {
		status, _ := json.MarshalIndent(j.Status, "", "  ")
		t.Fatalf("%v; the job's status:\n%s\nevents:\n%s", err, status, eventsOf(t, ns, job))
	}
	r := replicaStatusOf(j, name)
	if r.RestartCount != 0 || j.Status.Phase != batch.JobRunning {
		t.Errorf("%s: restartCount %d, job %s; want no restart, the job Running", name, r.RestartCount, j.Status.Phase)
	}
	if e := r.LastTermination; e == nil || !e.Disrupted || e.UID != old {
		t.Errorf("%s's lastTermination %+v: want its old pod %s, disrupted", name, e, old)
	}
	return r
}

// TestDisruptionsAreNotFailures: under restartPolicy Never, a replica evicted through the
// Eviction API and one its kubelet evicted (Failed, exit 137, DisruptionTarget) are both
// replaced without a restart, and the job goes on to succeed.
func TestDisruptionsAreNotFailures(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	ctx := context.Background()
	r := replica("worker", "trainer") // runs until the test ends it
	r.Replicas = ptr.To[int32](2)
	job := &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: "disrupted"}, Spec: batch.GenericJobSpec{ReplicaSpecs: []batch.GenericReplicaSpec{r}}}
	createJob(t, ns, job)
	running := waitJob(t, ns, job.Name, "Running", inPhase(batch.JobRunning))

	evicted := replicaStatusOf(running, "disrupted-worker-1").UID
	// At once (grace 0), as kwok would otherwise delete by name, late, the replica's next pod.
	if err := env.kube.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "disrupted-worker-1", Namespace: ns},
		DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}}); err != nil {
		t.Fatal(err)
	}
	r1 := replacedAfterDisruption(t, ns, job.Name, "disrupted-worker-1", evicted, 1)
	if reason := r1.LastTermination.Reason; reason != "EvictionByEvictionAPI" && reason != "Deleted" {
		t.Errorf("the evicted pod's reason is %q, want EvictionByEvictionAPI (or Deleted, had its deletion gone unseen)", reason)
	}

	pressured := endPodAs(t, ns, "disrupted-worker-0", corev1.PodFailed, 137, "Evicted", corev1.PodCondition{Type: corev1.DisruptionTarget,
		Status: corev1.ConditionTrue, Reason: "TerminationByKubelet", Message: "The node was low on resource: memory."})
	r0 := replacedAfterDisruption(t, ns, job.Name, "disrupted-worker-0", pressured, 1)
	if e := r0.LastTermination; e.Reason != "TerminationByKubelet" || len(e.Containers) == 0 || e.Containers[0].ExitCode == nil || *e.Containers[0].ExitCode != 137 {
		t.Errorf("worker-0's lastTermination %+v: want TerminationByKubelet with exit code 137", e)
	}
	if events, ok := eventsSaying(t, ns, job.Name, "Disrupted: Replacing replica disrupted-worker-0, no restart counted: its pod was disrupted (TerminationByKubelet"); !ok {
		t.Errorf("no Disrupted event for worker-0:\n%s", events)
	}

	for _, name := range []string{"disrupted-worker-0", "disrupted-worker-1"} {
		endPodAs(t, ns, name, corev1.PodSucceeded, 0, "")
	}
	done := waitJob(t, ns, job.Name, "Succeeded", inPhase(batch.JobSucceeded))
	if n := done.Status.Tasks[0].RestartCount; n != 0 {
		t.Errorf("the job counts %d restarts, want none", n)
	}
}

// TestProgramFailuresStillFail: under Never, a program's exit 1, and an exit 137 without
// DisruptionTarget (the program killed, not the pod disrupted), fail the job as before.
func TestProgramFailuresStillFail(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	for _, tc := range []struct {
		name string
		code int32
	}{{"exit-1", 1}, {"exit-137", 137}} {
		r := replica("worker", "trainer")
		createJob(t, ns, &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: tc.name}, Spec: batch.GenericJobSpec{ReplicaSpecs: []batch.GenericReplicaSpec{r}}})
		waitJob(t, ns, tc.name, "Running", inPhase(batch.JobRunning))
		endPodAs(t, ns, tc.name+"-worker-0", corev1.PodFailed, tc.code, "")
		failed := waitJob(t, ns, tc.name, "Failed", inPhase(batch.JobFailed))
		if r := replicaStatusOf(failed, tc.name+"-worker-0"); r.Disruptions != 0 || r.Phase != batch.ReplicaFailed {
			t.Errorf("%s: replica %+v, want Failed, no disruption", tc.name, r)
		}
	}
}

// TestInPlaceFallsBackOnFakeNodes: a job that restarts in place, on nodes whose kubelets do
// not declare RestartAllContainersOnContainerExits (kwok's): kube-scheduler places its pods,
// made with the restart agent, on no node; the controller makes them again without it, says so
// once (a Warning event, the InPlaceUnavailable condition), and the job runs, its whole-job
// restarts recreating its pods.
func TestInPlaceFallsBackOnFakeNodes(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	ctx := context.Background()
	r := replica("worker", "trainer") // runs until the test ends it
	r.Replicas = ptr.To[int32](2)
	r.RestartPolicy = &batch.GenericRestartPolicy{Policy: batch.RestartOnFailure, Limit: ptr.To[int32](1)}
	job := &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: "in-place"}, Spec: batch.GenericJobSpec{ReplicaSpecs: []batch.GenericReplicaSpec{r},
		Lifecycle: batch.Lifecycle{RestartScope: batch.RestartScopeJob, RestartStrategy: batch.RestartInPlace}}}
	createJob(t, ns, job)
	running := waitJob(t, ns, job.Name, "Running", inPhase(batch.JobRunning))
	if c := running.Status.Condition(batch.JobConditionInPlaceUnavailable); c.Status != corev1.ConditionTrue || c.Reason != "NoNodeRestartsInPlace" {
		t.Errorf("condition InPlaceUnavailable %+v: want True, NoNodeRestartsInPlace", c)
	}
	if ev, ok := eventsSaying(t, ns, job.Name, "InPlaceRestartUnavailable: No node that could take in-place-worker-"); !ok {
		t.Errorf("no InPlaceRestartUnavailable event:\n%s", ev)
	}
	pod, err := env.kube.CoreV1().Pods(ns).Get(ctx, "in-place-worker-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.InitContainers) != 0 {
		t.Fatalf("init containers %+v: want the restart agent gone", pod.Spec.InitContainers)
	}

	endPodAs(t, ns, "in-place-worker-1", corev1.PodFailed, 1, "")
	restarted := waitJob(t, ns, job.Name, "attempt 2 running", func(j *batch.GenericJob) bool {
		if j.Status.Attempt != 2 || j.Status.Phase != batch.JobRunning {
			return false
		}
		for _, rs := range j.Status.Tasks[0].Replicas {
			if rs.Phase != batch.ReplicaRunning {
				return false
			}
		}
		return true
	})
	for _, rs := range restarted.Status.Tasks[0].Replicas {
		if rs.UID == replicaStatusOf(running, rs.Name).UID || rs.RestartCount != 1 {
			t.Errorf("%s: pod %s, %d restarts; want a new pod, restarted once", rs.Name, rs.UID, rs.RestartCount)
		}
	}
}
