package decision

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// These tests pin the engine's decisions under faults and odd timing: each states the exact
// inputs of one sync.

func typed(p *corev1.Pod, replicaType, node string) *corev1.Pod {
	p.Labels[batch.LabelReplicaType] = replicaType
	p.Spec.NodeName = node
	return p
}

// A job whose sync sees a replica fail for good restarts nothing in that sync, though another
// replica that failed at the same moment still has restarts left: the restart would never
// happen (the job is over), so it is not counted, and that replica is reported Failed with its
// exit code, its pod kept (clean-up Unfinished keeps ended pods).
func TestEndingSyncRestartsNothing(t *testing.T) {
	plan := &Plan{
		Groups: []Group{
			{Type: "a", Replicas: 1, Restart: batch.RestartOnFailure, Limit: ptr.To[int32](0), Template: template("train")},
			{Type: "b", Replicas: 2, Restart: batch.RestartOnFailure, Limit: ptr.To[int32](3), Template: template("train")},
		},
		CleanUp: batch.CleanUpUnfinished,
		Judge:   allSucceed,
	}
	status := batch.JobStatus{Phase: batch.JobRunning,
		Conditions: []batch.JobCondition{{Type: batch.JobConditionInitialized, Status: corev1.ConditionTrue}},
		Tasks: []batch.TaskStatus{
			{Type: "a", Replicas: []batch.ReplicaStatus{replicaStatus("job-a-0", "a0", batch.ReplicaRunning, 0)}},
			{Type: "b", Replicas: []batch.ReplicaStatus{replicaStatus("job-b-0", "b0", batch.ReplicaRunning, 0), replicaStatus("job-b-1", "b1", batch.ReplicaRunning, 0)}},
		}}
	pods := []*corev1.Pod{
		typed(pod("job-a-0", "a0", corev1.PodFailed, 1), "a", "node-1"),
		typed(pod("job-b-0", "b0", corev1.PodFailed, 1), "b", "node-2"),
		typed(pod("job-b-1", "b1", corev1.PodFailed, 1), "b", "node-3"),
	}
	d := mustDecide(t, testJob(status), plan, Children{Pods: pods}, nil, now)

	if d.Outcome == nil || d.Outcome.Succeeded || d.Status.Phase != batch.JobFailed {
		t.Fatalf("outcome %+v, phase %s: want the job failed (a has no restart left)", d.Outcome, d.Status.Phase)
	}
	if len(d.Restarted) != 0 || len(d.DeletePods) != 0 || len(d.CreatePods) != 0 {
		t.Errorf("restarted %v, deleted %v, created %v: a sync that ends the job restarts nothing, and Unfinished keeps ended pods",
			d.Restarted, names(d.DeletePods), names(d.CreatePods))
	}
	for _, name := range []string{"job-a-0", "job-b-0", "job-b-1"} {
		r := replicaOf(d.Status, name)
		if r.RestartCount != 0 || r.Phase != batch.ReplicaFailed || len(r.Containers) != 1 || r.Containers[0].ExitCode == nil || *r.Containers[0].ExitCode != 1 {
			t.Errorf("%s: %+v, want Failed with exit code 1 and no restart counted", name, r)
		}
	}
	for _, task := range d.Status.Tasks {
		if task.RestartCount != 0 {
			t.Errorf("task %s counts %d restarts, want 0", task.Type, task.RestartCount)
		}
	}
	if d.Status.Aggregate.Failed != 3 || d.Status.Aggregate.Deleted != 0 {
		t.Errorf("aggregate %+v, want 3 failed", d.Status.Aggregate)
	}
}

// A restart counted in an earlier sync whose new pod was not created yet is taken back when
// the job ends first: restartCount stays the number of pods the replica had, minus one, and
// the replica reports how its pod ended.
func TestEndingSyncTakesBackUnfinishedRestart(t *testing.T) {
	plan := &Plan{
		Groups: []Group{
			{Type: "a", Replicas: 1, Restart: batch.RestartNever, Template: template("train")},
			{Type: "b", Replicas: 1, Restart: batch.RestartOnFailure, Template: template("train")},
		},
		Judge: allSucceed,
	}
	code := int32(137)
	restarting := batch.ReplicaStatus{Name: "job-b-0", UID: "b0", Phase: batch.ReplicaDeleted, RestartCount: 2,
		LastTermination: &batch.ReplicaTermination{UID: "b0", Phase: batch.ReplicaFailed, Node: "node-2",
			Containers: []batch.ContainerStatus{{Name: "main", State: batch.ContainerTerminated, ExitCode: &code, Reason: "OOMKilled"}}}}
	status := batch.JobStatus{Phase: batch.JobRunning,
		Conditions: []batch.JobCondition{{Type: batch.JobConditionInitialized, Status: corev1.ConditionTrue}},
		Tasks: []batch.TaskStatus{
			{Type: "a", Replicas: []batch.ReplicaStatus{replicaStatus("job-a-0", "a0", batch.ReplicaRunning, 0)}},
			{Type: "b", RestartCount: 2, Replicas: []batch.ReplicaStatus{restarting}},
		}}
	pods := []*corev1.Pod{typed(pod("job-a-0", "a0", corev1.PodFailed, 1), "a", "node-1")}
	d := mustDecide(t, testJob(status), plan, Children{Pods: pods}, nil, now)

	if d.Outcome == nil || d.Outcome.Succeeded {
		t.Fatalf("outcome %+v: want failed", d.Outcome)
	}
	if len(d.CreatePods) != 0 {
		t.Errorf("created %v for an ended job", names(d.CreatePods))
	}
	r := replicaOf(d.Status, "job-b-0")
	if r.RestartCount != 1 || r.Phase != batch.ReplicaFailed || r.Node != "node-2" || r.LastTermination != nil ||
		len(r.Containers) != 1 || *r.Containers[0].ExitCode != 137 || r.Containers[0].Reason != "OOMKilled" {
		t.Errorf("replica %+v: want its restart taken back, reported Failed 137 OOMKilled on node-2", r)
	}
	if d.Status.Tasks[1].RestartCount != 1 {
		t.Errorf("task b counts %d restarts, want 1", d.Status.Tasks[1].RestartCount)
	}
}

// While the job goes on, a restart counted earlier is finished, not counted again, and not
// taken back.
func TestCountedRestartFinishedWhileRunning(t *testing.T) {
	plan := &Plan{Groups: []Group{workers(1, batch.RestartOnFailure, nil)}, Judge: allSucceed}
	counted := batch.ReplicaStatus{Name: "job-worker-0", UID: "w0", Phase: batch.ReplicaDeleted, RestartCount: 1,
		LastTermination: &batch.ReplicaTermination{UID: "w0", Phase: batch.ReplicaFailed}}
	d := mustDecide(t, testJob(statusWith(batch.JobRunning, counted)), plan, Children{}, nil, now)
	if r := replicaOf(d.Status, "job-worker-0"); len(d.CreatePods) != 1 || r.RestartCount != 1 || r.Phase != batch.ReplicaCreating || r.LastTermination == nil {
		t.Errorf("created %v, replica %+v: want the new pod, restart count 1, last termination kept", names(d.CreatePods), r)
	}
}

// Restart backoff counts from when the pod ended. finishedAt has one-second resolution, so
// the pod ended within the second after it; the controller's sighting of the end pins it
// closer. Here the pod's second restart (backoff 1s) was seen ending 0.9s past its
// finishedAt and it is now 1.2s past: 0.7s are left, not 0.
func TestRestartBackoffCountsFromRealEnd(t *testing.T) {
	plan := &Plan{Groups: []Group{workers(1, batch.RestartOnFailure, nil)}, Judge: allSucceed}
	finished := now.Truncate(time.Second)
	p := pod("job-worker-0", "w0", corev1.PodFailed, 1)
	p.Status.ContainerStatuses[0].State.Terminated.FinishedAt = metav1.NewTime(finished)
	status := statusWith(batch.JobRunning, replicaStatus("job-worker-0", "w0", batch.ReplicaRunning, 1))

	cases := []struct {
		name    string
		seen    map[types.UID]time.Time
		at      time.Time
		restart bool
		wait    time.Duration
	}{
		{name: "seen ending 0.9s past finishedAt", seen: map[types.UID]time.Time{"w0": finished.Add(900 * time.Millisecond)},
			at: finished.Add(1200 * time.Millisecond), wait: 700 * time.Millisecond},
		{name: "not seen ending: the end of finishedAt's second", at: finished.Add(1500 * time.Millisecond), wait: 500 * time.Millisecond},
		{name: "seen late (after a controller restart): the end of finishedAt's second", seen: map[types.UID]time.Time{"w0": finished.Add(5 * time.Second)},
			at: finished.Add(1500 * time.Millisecond), wait: 500 * time.Millisecond},
		{name: "backoff over", seen: map[types.UID]time.Time{"w0": finished.Add(900 * time.Millisecond)},
			at: finished.Add(1900 * time.Millisecond), restart: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := mustDecide(t, testJob(status), plan, Children{Pods: []*corev1.Pod{p}, EndSeen: tc.seen}, nil, tc.at)
			if got := len(d.Restarted) == 1; got != tc.restart || d.RequeueAfter != tc.wait {
				t.Errorf("restarted %v, requeue after %s; want restart %v, wait %s", d.Restarted, d.RequeueAfter, tc.restart, tc.wait)
			}
		})
	}
}

// A replica's node and its containers' exit codes and reasons stay in status after its pod is
// gone: cleaned up, restarted or paused.
func TestForensicsSurvivePodDeletion(t *testing.T) {
	oom := func(name string, uid types.UID) *corev1.Pod {
		p := typed(pod(name, uid, corev1.PodFailed, 137), "worker", "node-7")
		p.Status.ContainerStatuses[0].State.Terminated.Reason = "OOMKilled"
		return p
	}
	t.Run("clean-up All", func(t *testing.T) {
		plan := &Plan{Groups: []Group{workers(2, batch.RestartNever, nil)}, CleanUp: batch.CleanUpAll, Judge: allSucceed}
		status := statusWith(batch.JobRunning, replicaStatus("job-worker-0", "w0", batch.ReplicaRunning, 0), replicaStatus("job-worker-1", "w1", batch.ReplicaRunning, 0))
		running := typed(pod("job-worker-1", "w1", corev1.PodRunning, 0), "worker", "node-8")
		first := mustDecide(t, testJob(status), plan, Children{Pods: []*corev1.Pod{oom("job-worker-0", "w0"), running}}, nil, now)
		if got := names(first.DeletePods); len(got) != 2 {
			t.Fatalf("clean-up All deleted %v", got)
		}
		// The pods are gone.
		second := mustDecide(t, testJob(*first.Status), plan, Children{}, nil, now.Add(time.Second))
		r := replicaOf(second.Status, "job-worker-0")
		if r.Phase != batch.ReplicaFailed || r.Node != "node-7" || len(r.Containers) != 1 || *r.Containers[0].ExitCode != 137 || r.Containers[0].Reason != "OOMKilled" {
			t.Errorf("failed replica after clean-up: %+v", r)
		}
		if r := replicaOf(second.Status, "job-worker-1"); r.Phase != batch.ReplicaDeleted || r.Node != "node-8" || len(r.Containers) != 1 {
			t.Errorf("deleted running replica after clean-up: %+v, want its node and containers kept", r)
		}
		if !strings.Contains(second.Status.Condition(batch.JobConditionReplicaFailure).Message, "job-worker-0 with exit code 137") {
			t.Errorf("ReplicaFailure = %+v", second.Status.Condition(batch.JobConditionReplicaFailure))
		}
	})
	t.Run("restart", func(t *testing.T) {
		plan := &Plan{Groups: []Group{workers(1, batch.RestartOnFailure, nil)}, Judge: allSucceed}
		status := statusWith(batch.JobRunning, replicaStatus("job-worker-0", "w0", batch.ReplicaRunning, 0))
		first := mustDecide(t, testJob(status), plan, Children{Pods: []*corev1.Pod{oom("job-worker-0", "w0")}}, nil, now)
		second := mustDecide(t, testJob(*first.Status), plan, Children{}, nil, now.Add(time.Second))
		third := mustDecide(t, testJob(*second.Status), plan, Children{Pods: []*corev1.Pod{typed(pod("job-worker-0", "w1", corev1.PodRunning, 0), "worker", "node-9")}}, nil, now.Add(2*time.Second))
		r := replicaOf(third.Status, "job-worker-0")
		last := r.LastTermination
		if r.UID != "w1" || r.Node != "node-9" || r.RestartCount != 1 || last == nil || last.UID != "w0" || last.Node != "node-7" ||
			last.Phase != batch.ReplicaFailed || len(last.Containers) != 1 || *last.Containers[0].ExitCode != 137 || last.Containers[0].Reason != "OOMKilled" {
			t.Errorf("replica after restart: %+v, last termination %+v", r, last)
		}
	})
	t.Run("pause", func(t *testing.T) {
		plan := &Plan{Groups: []Group{workers(1, batch.RestartNever, nil)}, Paused: true, Judge: allSucceed}
		status := statusWith(batch.JobPaused, replicaStatus("job-worker-0", "w0", batch.ReplicaRunning, 0))
		status.Tasks[0].Replicas[0].Node = "node-3"
		status.Tasks[0].Replicas[0].Containers = []batch.ContainerStatus{{Name: "main", State: batch.ContainerRunning}}
		d := mustDecide(t, testJob(status), plan, Children{}, nil, now)
		if r := replicaOf(d.Status, "job-worker-0"); r.Phase != batch.ReplicaDeleted || r.Node != "node-3" || len(r.Containers) != 1 {
			t.Errorf("paused replica %+v, want Deleted with its node and containers kept", r)
		}
	})
}

// Status says what the pods run: the debug message only when the pods were created in debug
// mode, whatever the spec says now, and then the plan's debug hint, which the decision that
// first says it gives for an event.
func TestRunningMessageFollowsThePods(t *testing.T) {
	const hint = "Start the run with: go."
	plan := &Plan{Groups: []Group{workers(2, batch.RestartNever, nil)}, Debug: true, DebugHint: hint, Judge: allSucceed}
	status := statusWith(batch.JobRunning, replicaStatus("job-worker-0", "w0", batch.ReplicaRunning, 0), replicaStatus("job-worker-1", "w1", batch.ReplicaRunning, 0))
	debugPod := func(p *corev1.Pod) *corev1.Pod {
		p.Annotations = map[string]string{batch.AnnotationRunMode: batch.RunModeDebug}
		return p
	}
	cases := []struct {
		name string
		pods []*corev1.Pod
		want string
	}{
		{"pods created before debug was switched on", []*corev1.Pod{pod("job-worker-0", "w0", corev1.PodRunning, 0), pod("job-worker-1", "w1", corev1.PodRunning, 0)}, msgRunning},
		{"pods created in debug mode", []*corev1.Pod{debugPod(pod("job-worker-0", "w0", corev1.PodRunning, 0)), debugPod(pod("job-worker-1", "w1", corev1.PodRunning, 0))}, "The job is running in debug mode: replicas run their debug command. " + hint},
		{"some of each", []*corev1.Pod{debugPod(pod("job-worker-0", "w0", corev1.PodRunning, 0)), pod("job-worker-1", "w1", corev1.PodRunning, 0)}, "The job is running; 1 of 2 replicas run their debug command, the others their own."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := mustDecide(t, testJob(status), plan, Children{Pods: tc.pods}, nil, now)
			if c := d.Status.Condition(batch.JobConditionRunning); c.Message != tc.want {
				t.Errorf("Running = %q, want %q", c.Message, tc.want)
			}
			if said := strings.HasSuffix(tc.want, hint); (d.DebugHint == hint) != said || (!said && d.DebugHint != "") {
				t.Errorf("decision's DebugHint %q for Running %q", d.DebugHint, tc.want)
			}
			if again := mustDecide(t, testJob(*d.Status), plan, Children{Pods: tc.pods}, nil, now); again.DebugHint != "" {
				t.Errorf("the hint said again once status says it: %q", again.DebugHint)
			}
		})
	}
	created := mustDecide(t, testJob(batch.JobStatus{}), plan, Children{}, nil, now).CreatePods
	if len(created) != 2 || created[0].Annotations[batch.AnnotationRunMode] != batch.RunModeDebug {
		t.Errorf("debug pods are not marked: %+v", created[0].Annotations)
	}
}

// An ended pod seen while it is being deleted (clean-up All: the API server marks it, then
// removes it) is reported as it ended, not as Deleted, so that status keeps saying Failed
// once it is gone.
func TestEndedPodBeingDeletedKeepsItsEnding(t *testing.T) {
	plan := &Plan{Groups: []Group{workers(1, batch.RestartNever, nil)}, CleanUp: batch.CleanUpAll, Judge: allSucceed}
	status := statusWith(batch.JobFailed, replicaStatus("job-worker-0", "w0", batch.ReplicaFailed, 0))
	status.Conditions = append(status.Conditions, batch.JobCondition{Type: batch.JobConditionFailed, Status: corev1.ConditionTrue})
	deleting := typed(pod("job-worker-0", "w0", corev1.PodFailed, 3), "worker", "node-1")
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	first := mustDecide(t, testJob(status), plan, Children{Pods: []*corev1.Pod{deleting}}, nil, now)
	second := mustDecide(t, testJob(*first.Status), plan, Children{}, nil, now.Add(time.Second))
	for i, d := range []*Decision{first, second} {
		if r := replicaOf(d.Status, "job-worker-0"); r.Phase != batch.ReplicaFailed || statusExitCode(r) != 3 || r.Node != "node-1" {
			t.Errorf("sync %d: replica %+v, want Failed with exit code 3 on node-1", i+1, r)
		}
	}
}

// A failed pod that is gone before its restart (deleted by hand or by a node's clean-up) is
// restarted all the same: counted once, with a new pod, its ending kept.
func TestFailedPodGoneBeforeItsRestart(t *testing.T) {
	plan := &Plan{Groups: []Group{workers(1, batch.RestartOnFailure, ptr.To[int32](2))}, Judge: allSucceed}
	code := int32(137)
	failed := replicaStatus("job-worker-0", "w0", batch.ReplicaFailed, 0)
	failed.Containers = []batch.ContainerStatus{{Name: "main", State: batch.ContainerTerminated, ExitCode: &code}}
	d := mustDecide(t, testJob(statusWith(batch.JobRunning, failed)), plan, Children{}, nil, now)
	r := replicaOf(d.Status, "job-worker-0")
	if d.Outcome != nil || len(d.CreatePods) != 1 || len(d.Restarted) != 1 || r.RestartCount != 1 || r.Phase != batch.ReplicaCreating ||
		r.LastTermination == nil || r.LastTermination.UID != "w0" || statusExitCode(batch.ReplicaStatus{Containers: r.LastTermination.Containers}) != 137 {
		t.Errorf("outcome %+v, created %v, restarted %v, replica %+v", d.Outcome, names(d.CreatePods), d.Restarted, r)
	}
}

// Pause deletes every replica, ended ones too, and resume recreates every one.
func TestPauseAndResumeRecreateEndedReplicas(t *testing.T) {
	paused := &Plan{Groups: []Group{workers(2, batch.RestartNever, nil)}, Paused: true, Judge: func(Replicas) *Outcome { return nil }}
	status := statusWith(batch.JobRunning, replicaStatus("job-worker-0", "w0", batch.ReplicaSucceeded, 0), replicaStatus("job-worker-1", "w1", batch.ReplicaRunning, 0))
	ended := pod("job-worker-0", "w0", corev1.PodSucceeded, 0)
	first := mustDecide(t, testJob(status), paused, Children{Pods: []*corev1.Pod{ended, pod("job-worker-1", "w1", corev1.PodRunning, 0)}}, nil, now)
	if got := names(first.DeletePods); len(got) != 2 {
		t.Fatalf("pause deleted %v, want both pods", got)
	}
	ended.DeletionTimestamp = &metav1.Time{Time: now}
	second := mustDecide(t, testJob(*first.Status), paused, Children{Pods: []*corev1.Pod{ended}}, nil, now.Add(time.Second))
	third := mustDecide(t, testJob(*second.Status), paused, Children{}, nil, now.Add(2*time.Second))
	if r := replicaOf(third.Status, "job-worker-0"); r.Phase != batch.ReplicaDeleted {
		t.Errorf("paused replica %+v, want Deleted", r)
	}
	resumed := *paused
	resumed.Paused = false
	fourth := mustDecide(t, testJob(*third.Status), &resumed, Children{}, nil, now.Add(3*time.Second))
	if got := names(fourth.CreatePods); len(got) != 2 {
		t.Errorf("resume created %v, want both replicas", got)
	}
}

// runPolicy.activeDeadlineSeconds: counted from the replicas' first creation, failing the job
// with DeadlineExceeded once passed, asking for a sync when it will be; a pause stops the
// clock, and a resume starts it again.
func TestDeadline(t *testing.T) {
	plan := &Plan{Groups: []Group{workers(1, batch.RestartNever, nil)}, Deadline: time.Minute, Judge: allSucceed}
	p := pod("job-worker-0", "w0", corev1.PodRunning, 0)
	p.CreationTimestamp = metav1.NewTime(now.Add(-20 * time.Second))
	first := mustDecide(t, testJob(statusWith(batch.JobRunning, replicaStatus("job-worker-0", "w0", batch.ReplicaRunning, 0))), plan, Children{Pods: []*corev1.Pod{p}}, nil, now)
	if st := first.Status.StartTime; st == nil || !st.Time.Equal(p.CreationTimestamp.Time) || first.RequeueAfter != 40*time.Second {
		t.Fatalf("start %v, requeue after %s: want the pod's creation time and 40s left", st, first.RequeueAfter)
	}
	late := mustDecide(t, testJob(*first.Status), plan, Children{Pods: []*corev1.Pod{p}}, nil, now.Add(41*time.Second))
	if late.Outcome == nil || late.Outcome.Reason != "DeadlineExceeded" || late.Status.Phase != batch.JobFailed ||
		!strings.Contains(late.Status.Condition(batch.JobConditionFailed).Message, "activeDeadlineSeconds (60 s)") {
		t.Errorf("outcome %+v, phase %s, Failed %+v", late.Outcome, late.Status.Phase, late.Status.Condition(batch.JobConditionFailed))
	}

	paused := *plan
	paused.Paused = true
	pausedStatus := mustDecide(t, testJob(*first.Status), &paused, Children{}, nil, now.Add(time.Hour)).Status
	if pausedStatus.StartTime != nil {
		t.Errorf("a paused job keeps its start time %v", pausedStatus.StartTime)
	}
	resumed := mustDecide(t, testJob(*pausedStatus), plan, Children{}, nil, now.Add(2*time.Hour))
	if st := resumed.Status.StartTime; st == nil || !st.Time.Equal(now.Add(2*time.Hour)) || resumed.Outcome != nil {
		t.Errorf("after resume: start %v, outcome %+v", st, resumed.Outcome)
	}
}

// A paused job whose pods are still being deleted (their programs run until their grace
// period ends) says Pausing with how many, and Paused only once they are gone.
func TestPausingUntilPodsAreGone(t *testing.T) {
	paused := &Plan{Groups: []Group{workers(2, batch.RestartNever, nil)}, Paused: true, Judge: allSucceed}
	status := statusWith(batch.JobRunning, replicaStatus("job-worker-0", "w0", batch.ReplicaRunning, 0), replicaStatus("job-worker-1", "w1", batch.ReplicaRunning, 0))
	going := []*corev1.Pod{pod("job-worker-0", "w0", corev1.PodRunning, 0), pod("job-worker-1", "w1", corev1.PodRunning, 0)}
	for _, p := range going {
		p.DeletionTimestamp = &metav1.Time{Time: now}
	}
	d := mustDecide(t, testJob(status), paused, Children{Pods: going}, nil, now)
	if c := d.Status.Condition(batch.JobConditionPaused); d.Status.Phase != batch.JobPaused || c.Reason != "Pausing" || !strings.Contains(c.Message, "2 replicas are being deleted") {
		t.Errorf("phase %s, Paused %+v: want Pausing while 2 pods are being deleted", d.Status.Phase, c)
	}
	gone := mustDecide(t, testJob(*d.Status), paused, Children{}, nil, now.Add(time.Second))
	if c := gone.Status.Condition(batch.JobConditionPaused); c.Reason != "Paused" {
		t.Errorf("Paused %+v once the pods are gone", c)
	}
}

// A job resumed while the pods its pause deleted are still going: a pod killed by that
// deletion (exit code 137) did not fail, and its replica is made again once it is gone.
func TestResumedBeforePausedPodsAreGone(t *testing.T) {
	plan := &Plan{Groups: []Group{workers(1, batch.RestartNever, nil)}, Judge: allSucceed}
	paused := *plan
	paused.Paused = true
	running := statusWith(batch.JobRunning, replicaStatus("job-worker-0", "w0", batch.ReplicaRunning, 0))
	p := pod("job-worker-0", "w0", corev1.PodRunning, 0)
	pause := mustDecide(t, testJob(running), &paused, Children{Pods: []*corev1.Pod{p}}, nil, now)
	killed := pod("job-worker-0", "w0", corev1.PodFailed, 137)
	killed.DeletionTimestamp = &metav1.Time{Time: now}
	resumed := mustDecide(t, testJob(*pause.Status), plan, Children{Pods: []*corev1.Pod{killed}}, nil, now.Add(time.Second))
	if resumed.Outcome != nil || resumed.Status.Phase == batch.JobFailed {
		t.Fatalf("outcome %+v, phase %s: the pause's own kill is no failure", resumed.Outcome, resumed.Status.Phase)
	}
	again := mustDecide(t, testJob(*resumed.Status), plan, Children{}, nil, now.Add(2*time.Second))
	if got := names(again.CreatePods); len(got) != 1 || again.Outcome != nil {
		t.Errorf("created %v, outcome %+v: want the replica made again", got, again.Outcome)
	}
}
