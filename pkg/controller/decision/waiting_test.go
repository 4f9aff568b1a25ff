package decision

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// pendingPod is replica i's pod, created at now-time.Minute and pending.
func pendingPod(i int) *corev1.Pod {
	p := pod(fmt.Sprintf("job-worker-%d", i), types.UID(fmt.Sprintf("w%d", i)), corev1.PodPending, 0)
	p.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute))
	p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	return p
}

// pullBackOff is replica i's pod, its container waiting for an image it cannot pull.
func pullBackOff(i int) *corev1.Pod {
	p := pendingPod(i)
	p.Status.ContainerStatuses[0].State.Waiting = &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "nope:1"`}
	return p
}

// pendingStatus is a job of n workers whose pods are all made and pending.
func pendingStatus(n int) batch.JobStatus {
	var rs []batch.ReplicaStatus
	for i := range n {
		rs = append(rs, replicaStatus(fmt.Sprintf("job-worker-%d", i), types.UID(fmt.Sprintf("w%d", i)), batch.ReplicaPending, 0))
	}
	return statusWith(batch.JobPending, rs...)
}

func decideWaits(t *testing.T, n int, pods []*corev1.Pod, at time.Time) batch.JobCondition {
	t.Helper()
	plan := &Plan{Groups: []Group{workers(int32(n), batch.RestartNever, nil)}, Judge: allSucceed}
	d := mustDecide(t, testJob(pendingStatus(n)), plan, Children{Pods: pods}, nil, at)
	if len(d.CreatePods) != 0 {
		t.Fatalf("created %d pods, want none", len(d.CreatePods))
	}
	return d.Status.Condition(batch.JobConditionRunning)
}

// Replicas that wait for the same reason are named together, with the scheduler's words and
// since when; replicas whose pods start as every pod does are not named.
func TestWaitingReplicasOfOneReason(t *testing.T) {
	pods := []*corev1.Pod{unschedulable(pendingPod(0), noCPU), pendingPod(1), unschedulable(pendingPod(2), noCPU)}
	pods[2].Status.Conditions[0].LastTransitionTime = metav1.NewTime(time.Date(2026, 1, 1, 11, 58, 30, 0, time.UTC))
	running := decideWaits(t, 3, pods, now)
	want := "0 of 3 replicas are running. worker-0, worker-2: " + strings.TrimSuffix(noCPU, ".") + " (since 11:58:30)."
	if running.Status != corev1.ConditionFalse || running.Reason != "Unschedulable" || running.Message != want {
		t.Errorf("Running %s %s %q\nwant False Unschedulable %q", running.Status, running.Reason, running.Message, want)
	}
	// A later sync says the same: the message does not count time, so it costs no write.
	if later := decideWaits(t, 3, pods, now.Add(time.Hour)); later.Message != running.Message || later.Reason != running.Reason {
		t.Errorf("an hour later the Running condition says %q, want it unchanged", later.Message)
	}
}

// Replicas that wait for different reasons: one part each, in the order of their first
// replica, separated by "; ", the first one's reason the condition's.
func TestWaitingReplicasOfSeveralReasons(t *testing.T) {
	pods := []*corev1.Pod{pullBackOff(0), unschedulable(pendingPod(1), noCPU), pullBackOff(2)}
	config := pendingPod(3)
	config.Status.ContainerStatuses[0].State.Waiting = &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: `secret "keys" not found`}
	pods = append(pods, config, ready(pod("job-worker-4", "w4", corev1.PodRunning, 0)))
	running := decideWaits(t, 5, pods, now)
	want := `1 of 5 replicas are running. worker-0, worker-2: ImagePullBackOff: Back-off pulling image "nope:1" (since 11:59:00); ` +
		"worker-1: " + strings.TrimSuffix(noCPU, ".") + " (since 11:59:00); " +
		`worker-3: CreateContainerConfigError: secret "keys" not found (since 11:59:00).`
	if running.Reason != "ImagePullBackOff" || running.Message != want {
		t.Errorf("Running %s %q\nwant ImagePullBackOff %q", running.Reason, running.Message, want)
	}
}

// 750 replicas, each of its own reason with a long message: the message stays bounded.
func TestWaitingMessageIsBounded(t *testing.T) {
	const n = 750
	var pods []*corev1.Pod
	for i := range n {
		pods = append(pods, unschedulable(pendingPod(i), fmt.Sprintf("%d: %s", i, strings.Repeat("node(s) didn't match Pod's node affinity/selector, ", 40))))
	}
	running := decideWaits(t, n, pods, now)
	if len(running.Message) > 1200 {
		t.Errorf("the Running message of %d waiting replicas is %d bytes: %q", n, len(running.Message), running.Message)
	}
	if !strings.Contains(running.Message, "747 more replicas wait for other reasons") {
		t.Errorf("Running message %q: want the replicas of the reasons not told counted", running.Message)
	}
	same := make([]*corev1.Pod, n)
	for i := range same {
		same[i] = unschedulable(pendingPod(i), noCPU)
	}
	if m := decideWaits(t, n, same, now).Message; len(m) > 600 || !strings.Contains(m, "worker-9 and 740 more:") {
		t.Errorf("the Running message of %d replicas of one reason is %d bytes: %q", n, len(m), m)
	}
}

// Once the pods run, the condition no longer names them; a running job whose restarted
// replica waits says so without leaving Running.
func TestWaitingClearedWhenReplicasRun(t *testing.T) {
	plan := &Plan{Groups: []Group{workers(2, batch.RestartNever, nil)}, Judge: allSucceed}
	runningPods := []*corev1.Pod{ready(pod("job-worker-0", "w0", corev1.PodRunning, 0)), ready(pod("job-worker-1", "w1", corev1.PodRunning, 0))}
	d := mustDecide(t, testJob(pendingStatus(2)), plan, Children{Pods: runningPods}, nil, now)
	running := d.Status.Condition(batch.JobConditionRunning)
	if running.Status != corev1.ConditionTrue || running.Reason != "-" || running.Message != msgRunning || len(d.Waits) != 0 {
		t.Errorf("Running %+v with its pods running, waits %v: want True, -, %q", running, d.Waits, msgRunning)
	}
	status := statusWith(batch.JobRunning, replicaStatus("job-worker-0", "w0", batch.ReplicaRunning, 0), replicaStatus("job-worker-1", "w1", batch.ReplicaPending, 0))
	d = mustDecide(t, testJob(status), plan, Children{Pods: []*corev1.Pod{runningPods[0], unschedulable(pendingPod(1), noCPU)}}, nil, now)
	running = d.Status.Condition(batch.JobConditionRunning)
	if d.Status.Phase != batch.JobRunning || running.Status != corev1.ConditionTrue || running.Reason != "Unschedulable" || !strings.Contains(running.Message, "worker-1: 0/4 nodes") {
		t.Errorf("phase %s, Running %+v: want Running, True, Unschedulable, worker-1 named", d.Status.Phase, running)
	}
}

// A job its admitter holds names its replicas after the admitter's reason, since the
// Running condition turned False.
func TestAdmissionWaitNamesReplicas(t *testing.T) {
	plan := &Plan{Groups: []Group{workers(2, batch.RestartNever, nil)}, Judge: allSucceed}
	status := batch.JobStatus{Phase: batch.JobPending, Conditions: []batch.JobCondition{{Type: batch.JobConditionRunning,
		Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 1, 11, 0, 5, 0, time.UTC))}}}
	v := &Verdict{Reason: "Queued", Message: "Waiting for quota."}
	running := mustDecide(t, testJob(status), plan, Children{}, v, now).Status.Condition(batch.JobConditionRunning)
	if want := "Waiting for quota. Replicas waiting: worker-0, worker-1 (since 11:00:05)."; running.Reason != "Queued" || running.Message != want {
		t.Errorf("Running %s %q, want Queued %q", running.Reason, running.Message, want)
	}
}

// A pod its scheduling gates hold (Kueue's topology gate, until its ungater gives it its
// node) is no news: the job says what it says of any pod that starts, and so a job placed by
// topology costs no status write more than one that is not.
func TestGatedReplicasAreNoNews(t *testing.T) {
	gated := unschedulable(pendingPod(1), "Scheduling is blocked due to non-empty scheduling gates")
	gated.Status.Conditions[0].Reason = corev1.PodReasonSchedulingGated
	running := decideWaits(t, 2, []*corev1.Pod{pendingPod(0), gated}, now)
	plain := decideWaits(t, 2, []*corev1.Pod{pendingPod(0), pendingPod(1)}, now)
	if running.Reason != plain.Reason || running.Message != plain.Message {
		t.Errorf("Running with a gated pod: %s %q; want what a starting pod gives, %s %q", running.Reason, running.Message, plain.Reason, plain.Message)
	}
}
