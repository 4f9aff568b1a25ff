package decision

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// The lifecycle controls every kind shares (docs/lifecycle.md): completion time and TTL, the
// start deadline, disruptions that are not failures, and whole-job restart.

func TestCompletionTimeSetOnceAndKept(t *testing.T) {
	plan := &Plan{Groups: []Group{workers(1, batch.RestartNever, nil)}, Judge: allSucceed}
	d := mustDecide(t, testJob(statusWith(batch.JobRunning, replicaStatus("job-worker-0", "w0", batch.ReplicaRunning, 0))), plan,
		Children{Pods: []*corev1.Pod{pod("job-worker-0", "w0", corev1.PodSucceeded, 0)}}, nil, now)
	if d.Status.Phase != batch.JobSucceeded || d.Status.CompletionTime == nil || !d.Status.CompletionTime.Time.Equal(now) {
		t.Fatalf("phase %s, completionTime %v: want Succeeded, completed now", d.Status.Phase, d.Status.CompletionTime)
	}
	later := mustDecide(t, testJob(*d.Status), plan, Children{}, nil, now.Add(time.Hour))
	if !later.Status.CompletionTime.Time.Equal(now) {
		t.Errorf("a later sync moved completionTime to %v, want it kept at %v", later.Status.CompletionTime, now)
	}

	// A job that ended before status had the field: its ending condition's time.
	ended := *d.Status.DeepCopy()
	ended.CompletionTime = nil
	for i := range ended.Conditions {
		ended.Conditions[i].LastTransitionTime = metav1.NewTime(now.Add(-time.Minute))
	}
	if got := mustDecide(t, testJob(ended), plan, Children{}, nil, now).Status.CompletionTime; got == nil || !got.Time.Equal(now.Add(-time.Minute)) {
		t.Errorf("completionTime of a job that ended a minute ago without one: %v", got)
	}
	if s := mustDecide(t, testJob(statusWith(batch.JobRunning, replicaStatus("job-worker-0", "w0", batch.ReplicaRunning, 0))), plan,
		Children{Pods: []*corev1.Pod{pod("job-worker-0", "w0", corev1.PodRunning, 0)}}, nil, now).Status; s.CompletionTime != nil {
		t.Errorf("a running job has completionTime %v", s.CompletionTime)
	}
}

// A job whose replicas are not all running the start deadline after they were created fails
// with its own reason, naming the waiting replicas and why; before that, it asks to be
// synced when the deadline comes; a job that ran already is past its start.
func TestStartupDeadline(t *testing.T) {
	plan := &Plan{Groups: []Group{workers(2, batch.RestartNever, nil)}, Judge: allSucceed, StartupDeadline: 10 * time.Second}
	status := statusWith(batch.JobPending, replicaStatus("job-worker-0", "w0", batch.ReplicaRunning, 0), replicaStatus("job-worker-1", "w1", batch.ReplicaPending, 0))
	status.StartTime = ptr.To(metav1.NewTime(now.Add(-4 * time.Second)))
	unschedulable := pod("job-worker-1", "w1", corev1.PodPending, 0)
	unschedulable.Status.ContainerStatuses = nil
	unschedulable.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
		Message: "0/4 nodes are available: 4 Insufficient cpu.", LastTransitionTime: metav1.NewTime(now.Add(-4 * time.Second))}}
	pods := []*corev1.Pod{pod("job-worker-0", "w0", corev1.PodRunning, 0), unschedulable}

	d := mustDecide(t, testJob(status), plan, Children{Pods: pods}, nil, now)
	if d.Outcome != nil || d.RequeueAfter != 6*time.Second {
		t.Fatalf("4 s in: outcome %+v, requeue %v; want none, and a sync in 6s", d.Outcome, d.RequeueAfter)
	}
	d = mustDecide(t, testJob(status), plan, Children{Pods: pods}, nil, now.Add(6*time.Second))
	if d.Outcome == nil || d.Outcome.Reason != ReasonStartupDeadlineExceeded || d.Status.Phase != batch.JobFailed {
		t.Fatalf("10 s in: outcome %+v, phase %s; want Failed, %s", d.Outcome, d.Status.Phase, ReasonStartupDeadlineExceeded)
	}
	for _, want := range []string{"spec.startupDeadlineSeconds", "worker-1 pending", "0/4 nodes are available: 4 Insufficient cpu"} {
		if !strings.Contains(d.Outcome.Message, want) {
			t.Errorf("message %q does not say %q", d.Outcome.Message, want)
		}
	}
	if strings.Contains(d.Outcome.Message, "worker-0") {
		t.Errorf("message %q names the running worker-0", d.Outcome.Message)
	}

	status.Phase = batch.JobRunning // ran once: a replica restarting later is no late start
	if d := mustDecide(t, testJob(status), plan, Children{Pods: pods}, nil, now.Add(time.Hour)); d.Outcome != nil {
		t.Errorf("a job that has run failed its start deadline: %+v", d.Outcome)
	}
	status.Phase, status.StartTime = batch.JobPending, nil // paused or unadmitted until now: no count yet
	if d := mustDecide(t, testJob(status), plan, Children{Pods: pods}, nil, now.Add(time.Hour)); d.Outcome != nil {
		t.Errorf("a job without a start time failed its start deadline: %+v", d.Outcome)
	}
}

// A pod that ended disrupted (DisruptionTarget) is replaced with no restart counted, even
// under Never; the replica says it was disrupted. The same exit without the condition is
// the program's failure, as before.
func TestDisruptedPodIsReplacedNotCounted(t *testing.T) {
	plan := &Plan{Groups: []Group{workers(1, batch.RestartNever, nil)}, Judge: allSucceed, BackoffLimit: ptr.To[int32](0)}
	status := statusWith(batch.JobRunning, replicaStatus("job-worker-0", "w0", batch.ReplicaRunning, 0))
	d := mustDecide(t, testJob(status), plan, Children{Pods: []*corev1.Pod{disruptedPod("job-worker-0", "w0", "TerminationByKubelet")}}, nil, now)
	if d.Outcome != nil {
		t.Fatalf("a disrupted pod ended the job: %+v", d.Outcome)
	}
	r := replicaOf(d.Status, "job-worker-0")
	if r.RestartCount != 0 || r.Disruptions != 1 || r.Phase != batch.ReplicaDeleted || r.LastTermination == nil ||
		!r.LastTermination.Disrupted || r.LastTermination.Reason != "TerminationByKubelet" || r.LastTermination.UID != "w0" {
		t.Fatalf("replica %+v (last termination %+v): want it Deleted, 1 disruption, no restart", r, r.LastTermination)
	}
	if strings.Join(names(d.DeletePods), ",") != "job-worker-0" || strings.Join(d.Disrupted, ",") != "job-worker-0" || len(d.Restarted) != 0 {
		t.Errorf("deleted %v, disrupted %v, restarted %v: want the pod deleted as a disruption", names(d.DeletePods), d.Disrupted, d.Restarted)
	}
	if c := d.Status.Condition(batch.JobConditionReplicaFailure); c.Status == corev1.ConditionTrue {
		t.Errorf("ReplicaFailure is True for a disruption: %+v", c)
	}

	// The controller stopped before the delete: the next sync deletes it, counting nothing.
	again := mustDecide(t, testJob(*d.Status), plan, Children{Pods: []*corev1.Pod{disruptedPod("job-worker-0", "w0", "TerminationByKubelet")}}, nil, now)
	if r := replicaOf(again.Status, "job-worker-0"); r.Disruptions != 1 || len(again.Disrupted) != 0 || len(again.DeletePods) != 1 {
		t.Errorf("a second sync: disruptions %d, disrupted %v, deleted %v; want 1, none, the pod", r.Disruptions, again.Disrupted, names(again.DeletePods))
	}
	// Once it is gone, a new pod.
	gone := mustDecide(t, testJob(*d.Status), plan, Children{}, nil, now)
	if strings.Join(names(gone.CreatePods), ",") != "job-worker-0" || gone.Outcome != nil {
		t.Errorf("created %v, outcome %+v; want the replica's new pod", names(gone.CreatePods), gone.Outcome)
	}
	if r := replicaOf(gone.Status, "job-worker-0"); r.Disruptions != 1 || r.RestartCount != 0 || r.LastTermination == nil || !r.LastTermination.Disrupted {
		t.Errorf("the new pod's replica: %+v; want the disruption kept", r)
	}

	// Exit 137 without DisruptionTarget: the program's failure, Never fails the job.
	killed := pod("job-worker-0", "w0", corev1.PodFailed, 137)
	if d := mustDecide(t, testJob(status), plan, Children{Pods: []*corev1.Pod{killed}}, nil, now); d.Outcome == nil || d.Outcome.Succeeded {
		t.Errorf("exit 137 without DisruptionTarget under Never: outcome %+v, want the job failed", d.Outcome)
	}
}

// A running pod deleted by someone else (an eviction through the API) is a disruption,
// recorded once; its replica gets a new pod once it is gone.
func TestPodDeletedByOthersIsADisruption(t *testing.T) {
	plan := &Plan{Groups: []Group{workers(1, batch.RestartNever, nil)}, Judge: allSucceed}
	status := statusWith(batch.JobRunning, replicaStatus("job-worker-0", "w0", batch.ReplicaRunning, 0))
	evicted := pod("job-worker-0", "w0", corev1.PodRunning, 0)
	evicted.DeletionTimestamp = ptr.To(metav1.NewTime(now))
	evicted.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting"}}
	d := mustDecide(t, testJob(status), plan, Children{Pods: []*corev1.Pod{evicted}}, nil, now)
	r := replicaOf(d.Status, "job-worker-0")
	if d.Outcome != nil || r.Disruptions != 1 || r.RestartCount != 0 || r.LastTermination == nil || r.LastTermination.Reason != "EvictionByEvictionAPI" {
		t.Fatalf("outcome %+v, replica %+v: want a disruption recorded, no restart", d.Outcome, r)
	}
	again := mustDecide(t, testJob(*d.Status), plan, Children{Pods: []*corev1.Pod{evicted}}, nil, now)
	if r := replicaOf(again.Status, "job-worker-0"); r.Disruptions != 1 || len(again.CreatePods) != 0 {
		t.Errorf("while the pod terminates: disruptions %d, created %v; want 1 and nothing", r.Disruptions, names(again.CreatePods))
	}
	gone := mustDecide(t, testJob(*again.Status), plan, Children{}, nil, now)
	if r := replicaOf(gone.Status, "job-worker-0"); r.Disruptions != 1 || len(gone.CreatePods) != 1 {
		t.Errorf("once gone: disruptions %d, created %v; want 1 and the new pod", r.Disruptions, names(gone.CreatePods))
	}

	// Deleted unseen: known only from status.
	unseen := mustDecide(t, testJob(status), plan, Children{}, nil, now)
	if r := replicaOf(unseen.Status, "job-worker-0"); r.Disruptions != 1 || r.LastTermination == nil || r.LastTermination.Reason != ReasonDeleted || len(unseen.CreatePods) != 1 {
		t.Errorf("a pod gone unseen: %+v, created %v; want a Deleted disruption and a new pod", r, names(unseen.CreatePods))
	}
}

// With restartScope Job, one replica's failure restarts every replica: all counted once
// each, the job's restart once, and no new pod before every old one is gone.
func TestWholeJobRestart(t *testing.T) {
	plan := &Plan{Groups: []Group{workers(3, batch.RestartOnFailure, ptr.To[int32](1))}, Judge: allSucceed, RestartJob: true, BackoffLimit: ptr.To[int32](1)}
	status := statusWith(batch.JobRunning, replicaStatus("job-worker-0", "w0", batch.ReplicaRunning, 0),
		replicaStatus("job-worker-1", "w1", batch.ReplicaRunning, 0), replicaStatus("job-worker-2", "w2", batch.ReplicaRunning, 0))
	pods := []*corev1.Pod{pod("job-worker-0", "w0", corev1.PodRunning, 0), pod("job-worker-1", "w1", corev1.PodFailed, 1), pod("job-worker-2", "w2", corev1.PodSucceeded, 0)}
	d := mustDecide(t, testJob(status), plan, Children{Pods: pods}, nil, now)
	if d.Outcome != nil || d.Status.Restarts != 1 || len(d.CreatePods) != 0 || len(d.DeletePods) != 3 || !strings.Contains(d.JobRestart, "job-worker-1 failed with exit code 1") {
		t.Fatalf("outcome %+v, restarts %d, created %v, deleted %v, why %q: want all three deleted, nothing created, one job restart caused by worker-1",
			d.Outcome, d.Status.Restarts, names(d.CreatePods), names(d.DeletePods), d.JobRestart)
	}
	for _, name := range []string{"job-worker-0", "job-worker-1", "job-worker-2"} {
		if r := replicaOf(d.Status, name); r.RestartCount != 1 || r.Phase != batch.ReplicaDeleted || r.LastTermination == nil {
			t.Errorf("%s: %+v, want restarted once, Deleted", name, r)
		}
	}
	if r := replicaOf(d.Status, "job-worker-0"); r.LastTermination.Reason != ReasonRestartedWithJob || r.LastTermination.Phase != batch.ReplicaRunning {
		t.Errorf("worker-0's last termination %+v: want it deleted Running, RestartedWithJob", r.LastTermination)
	}

	// The barrier: worker-0's old pod still terminates, the others are gone.
	terminating := pod("job-worker-0", "w0", corev1.PodRunning, 0)
	terminating.DeletionTimestamp = ptr.To(metav1.NewTime(now))
	waiting := mustDecide(t, testJob(*d.Status), plan, Children{Pods: []*corev1.Pod{terminating}}, nil, now)
	if len(waiting.CreatePods) != 0 || waiting.Status.Restarts != 1 || len(waiting.Restarted) != 0 {
		t.Errorf("while an old pod remains: created %v, restarts %d, restarted %v; want nothing new", names(waiting.CreatePods), waiting.Status.Restarts, waiting.Restarted)
	}
	for _, r := range waiting.Status.Tasks[0].Replicas {
		if r.RestartCount != 1 || r.Disruptions != 0 {
			t.Errorf("while an old pod remains, %s: %+v; want its one restart kept, no disruption", r.Name, r)
		}
	}
	all := mustDecide(t, testJob(*waiting.Status), plan, Children{}, nil, now)
	if strings.Join(names(all.CreatePods), ",") != "job-worker-0,job-worker-1,job-worker-2" {
		t.Errorf("once every old pod is gone, created %v; want all three together", names(all.CreatePods))
	}

	// backoffLimit 1 bounds the job's restarts: a second failure fails the job.
	second := statusWith(batch.JobRunning, replicaStatus("job-worker-0", "x0", batch.ReplicaRunning, 1),
		replicaStatus("job-worker-1", "x1", batch.ReplicaRunning, 1), replicaStatus("job-worker-2", "x2", batch.ReplicaRunning, 1))
	second.Restarts = 1
	plan.Groups[0].Limit = nil
	failed := mustDecide(t, testJob(second), plan, Children{Pods: []*corev1.Pod{pod("job-worker-0", "x0", corev1.PodFailed, 1),
		pod("job-worker-1", "x1", corev1.PodRunning, 0), pod("job-worker-2", "x2", corev1.PodRunning, 0)}}, nil, now)
	if failed.Outcome == nil || failed.Outcome.Succeeded || failed.Status.Restarts != 1 {
		t.Errorf("a second failure with backoffLimit 1: outcome %+v, restarts %d; want the job failed", failed.Outcome, failed.Status.Restarts)
	}
}

// With restartScope Job, a disruption replaces every replica, counting no restart.
func TestWholeJobReplacedOnDisruption(t *testing.T) {
	plan := &Plan{Groups: []Group{workers(2, batch.RestartOnFailure, nil)}, Judge: allSucceed, RestartJob: true}
	status := statusWith(batch.JobRunning, replicaStatus("job-worker-0", "w0", batch.ReplicaRunning, 0), replicaStatus("job-worker-1", "w1", batch.ReplicaRunning, 0))
	d := mustDecide(t, testJob(status), plan, Children{Pods: []*corev1.Pod{pod("job-worker-0", "w0", corev1.PodRunning, 0), disruptedPod("job-worker-1", "w1", "PreemptionByScheduler")}}, nil, now)
	if d.Status.Restarts != 0 || len(d.Restarted) != 0 || len(d.DeletePods) != 2 || len(d.CreatePods) != 0 {
		t.Fatalf("restarts %d, restarted %v, deleted %v, created %v: want both replaced, nothing counted", d.Status.Restarts, d.Restarted, names(d.DeletePods), names(d.CreatePods))
	}
	for _, name := range []string{"job-worker-0", "job-worker-1"} {
		if r := replicaOf(d.Status, name); r.RestartCount != 0 || r.Disruptions != 1 || !r.LastTermination.Disrupted {
			t.Errorf("%s: %+v, want one disruption, no restart", name, r)
		}
	}
}

// A pod Kueue's topology-aware scheduling failed before it ran, because the node its domain
// gave it went bad (TerminatedByKueue), is a disruption too: replaced on the node Kueue
// assigns instead, no restart counted. (The engine's TestTrimmedChildrenDecideAlike decides
// the same on it as the pod cache keeps it.)
func TestPodTerminatedByKueueIsADisruption(t *testing.T) {
	plan := &Plan{Groups: []Group{workers(1, batch.RestartNever, nil)}, Judge: allSucceed, BackoffLimit: ptr.To[int32](0)}
	status := statusWith(batch.JobRunning, replicaStatus("job-worker-0", "w0", batch.ReplicaPending, 0))
	d := mustDecide(t, testJob(status), plan, Children{Pods: []*corev1.Pod{terminatedByKueue()}}, nil, now)
	if d.Outcome != nil {
		t.Fatalf("a pod Kueue terminated ended the job: %+v", d.Outcome)
	}
	r := replicaOf(d.Status, "job-worker-0")
	if r.RestartCount != 0 || r.Disruptions != 1 || r.LastTermination == nil || r.LastTermination.Reason != "UnschedulableOnAssignedNode" {
		t.Fatalf("replica %+v (last termination %+v): want 1 disruption by UnschedulableOnAssignedNode, no restart", r, r.LastTermination)
	}
}
