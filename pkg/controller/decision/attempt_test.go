package decision

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// attemptPod is a worker's pod made for an attempt.
func attemptPod(name string, uid types.UID, phase corev1.PodPhase, exitCode int32, attempt string) *corev1.Pod {
	p := pod(name, uid, phase, exitCode)
	p.Labels[batch.LabelAttempt] = attempt
	return p
}

// checkAttemptPods: every pod made carries the attempt as its label, and every container,
// init containers too, reads it as T9K_ATTEMPT.
func checkAttemptPods(t *testing.T, pods []*corev1.Pod, want string) {
	t.Helper()
	for _, p := range pods {
		if got := p.Labels[batch.LabelAttempt]; got != want {
			t.Errorf("%s: attempt label %q, want %q", p.Name, got, want)
		}
		for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
			found := false
			for _, e := range c.Env {
				if e.Name == EnvAttempt {
					found = e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
						e.ValueFrom.FieldRef.FieldPath == "metadata.labels['"+batch.LabelAttempt+"']"
				}
			}
			if !found {
				t.Errorf("%s, container %s: no %s read from the attempt label: %+v", p.Name, c.Name, EnvAttempt, c.Env)
			}
		}
	}
}

// A job's first life is attempt 1; a whole-job restart begins attempt 2, once, however many
// decisions it takes; the ended pods' records keep the attempt they were made for; the new
// pods are made for attempt 2.
func TestAttemptsOfAWholeJobRestart(t *testing.T) {
	plan := &Plan{Groups: []Group{workers(2, batch.RestartOnFailure, nil)}, Judge: allSucceed, RestartJob: true}
	first := mustDecide(t, testJob(batch.JobStatus{}), plan, Children{}, nil, now)
	if first.Status.Attempt != 1 || len(first.CreatePods) != 2 {
		t.Fatalf("a new job: attempt %d, created %v; want attempt 1, both pods", first.Status.Attempt, names(first.CreatePods))
	}
	checkAttemptPods(t, first.CreatePods, "1")

	status := statusWith(batch.JobRunning, replicaStatus("job-worker-0", "w0", batch.ReplicaRunning, 0), replicaStatus("job-worker-1", "w1", batch.ReplicaRunning, 0))
	status.Attempt = 1
	pods := []*corev1.Pod{attemptPod("job-worker-0", "w0", corev1.PodRunning, 0, "1"), attemptPod("job-worker-1", "w1", corev1.PodFailed, 1, "1")}
	restart := mustDecide(t, testJob(status), plan, Children{Pods: pods}, nil, now)
	if restart.Status.Attempt != 2 || restart.Status.Restarts != 1 || restart.JobRestart == "" || restart.JobRestartCause != RestartCauseFailure {
		t.Fatalf("worker-1 failed: attempt %d, restarts %d, restart %q; want attempt 2 begun", restart.Status.Attempt, restart.Status.Restarts, restart.JobRestart)
	}
	for _, name := range []string{"job-worker-0", "job-worker-1"} {
		if r := replicaOf(restart.Status, name); r.LastTermination == nil || r.LastTermination.Attempt != 1 {
			t.Errorf("%s's last termination %+v: want attempt 1, the ended pod's", name, r.LastTermination)
		}
	}
	if status.Tasks[0].Replicas[0].LastTermination != nil {
		t.Errorf("the old status was changed in place: %+v", status.Tasks[0].Replicas[0].LastTermination)
	}

	// A controller that comes back while the old pods terminate, or decides again, begins
	// no other attempt.
	terminating := attemptPod("job-worker-0", "w0", corev1.PodRunning, 0, "1")
	terminating.DeletionTimestamp = ptr.To(metav1.NewTime(now))
	again := mustDecide(t, testJob(*restart.Status), plan, Children{Pods: []*corev1.Pod{terminating}}, nil, now)
	if again.Status.Attempt != 2 || len(again.CreatePods) != 0 {
		t.Errorf("while an old pod remains: attempt %d, created %v; want attempt 2, nothing new", again.Status.Attempt, names(again.CreatePods))
	}
	if r := replicaOf(again.Status, "job-worker-0"); r.LastTermination == nil || r.LastTermination.Attempt != 1 {
		t.Errorf("worker-0's record after another decision: %+v; want attempt 1 kept", r.LastTermination)
	}
	next := mustDecide(t, testJob(*again.Status), plan, Children{}, nil, now)
	if next.Status.Attempt != 2 || len(next.CreatePods) != 2 {
		t.Fatalf("once the old pods are gone: attempt %d, created %v; want both pods of attempt 2", next.Status.Attempt, names(next.CreatePods))
	}
	checkAttemptPods(t, next.CreatePods, "2")
}

// A disruption that replaces the whole job begins an attempt without counting a restart.
func TestAttemptOfAWholeJobReplacement(t *testing.T) {
	plan := &Plan{Groups: []Group{workers(2, batch.RestartOnFailure, nil)}, Judge: allSucceed, RestartJob: true}
	status := statusWith(batch.JobRunning, replicaStatus("job-worker-0", "w0", batch.ReplicaRunning, 0), replicaStatus("job-worker-1", "w1", batch.ReplicaRunning, 0))
	status.Attempt = 1
	disrupted := disruptedPod("job-worker-1", "w1", "PreemptionByScheduler")
	disrupted.Labels[batch.LabelAttempt] = "1"
	d := mustDecide(t, testJob(status), plan, Children{Pods: []*corev1.Pod{attemptPod("job-worker-0", "w0", corev1.PodRunning, 0, "1"), disrupted}}, nil, now)
	if d.Status.Attempt != 2 || d.Status.Restarts != 0 || d.JobRestartCause != RestartCauseDisruption {
		t.Errorf("a disruption under restartScope Job: attempt %d, restarts %d, cause %q; want attempt 2, no restart counted, cause Disruption", d.Status.Attempt, d.Status.Restarts, d.JobRestartCause)
	}
}

// A replica restarted alone stays in the job's attempt, and so does its new pod.
func TestAttemptOfAReplicaRestart(t *testing.T) {
	plan := &Plan{Groups: []Group{workers(2, batch.RestartOnFailure, nil)}, Judge: allSucceed}
	status := statusWith(batch.JobRunning, replicaStatus("job-worker-0", "w0", batch.ReplicaRunning, 0), replicaStatus("job-worker-1", "w1", batch.ReplicaRunning, 0))
	status.Attempt = 3
	d := mustDecide(t, testJob(status), plan, Children{Pods: []*corev1.Pod{attemptPod("job-worker-0", "w0", corev1.PodRunning, 0, "3"), attemptPod("job-worker-1", "w1", corev1.PodFailed, 1, "3")}}, nil, now)
	if d.Status.Attempt != 3 || d.JobRestart != "" {
		t.Fatalf("worker-1 restarted alone: attempt %d, job restart %q; want attempt 3 kept", d.Status.Attempt, d.JobRestart)
	}
	if r := replicaOf(d.Status, "job-worker-1"); r.LastTermination == nil || r.LastTermination.Attempt != 3 {
		t.Errorf("worker-1's last termination %+v: want attempt 3", r.LastTermination)
	}
	gone := mustDecide(t, testJob(*d.Status), plan, Children{Pods: []*corev1.Pod{attemptPod("job-worker-0", "w0", corev1.PodRunning, 0, "3")}}, nil, now)
	if len(gone.CreatePods) != 1 {
		t.Fatalf("once worker-1's pod is gone: created %v; want its new pod", names(gone.CreatePods))
	}
	checkAttemptPods(t, gone.CreatePods, "3")
}

// A status written before attempts were numbered counts one attempt more than its restarts;
// a pod made before the label leaves its record's attempt out.
func TestAttemptOfAnOlderStatus(t *testing.T) {
	plan := &Plan{Groups: []Group{workers(1, batch.RestartOnFailure, nil)}, Judge: allSucceed}
	status := statusWith(batch.JobRunning, replicaStatus("job-worker-0", "w0", batch.ReplicaRunning, 0))
	status.Restarts = 2
	d := mustDecide(t, testJob(status), plan, Children{Pods: []*corev1.Pod{pod("job-worker-0", "w0", corev1.PodFailed, 1)}}, nil, now)
	if d.Status.Attempt != 3 {
		t.Errorf("restarts 2, no attempt: attempt %d, want 3", d.Status.Attempt)
	}
	if r := replicaOf(d.Status, "job-worker-0"); r.LastTermination == nil || r.LastTermination.Attempt != 0 {
		t.Errorf("a pod without the label: record %+v; want no attempt", r.LastTermination)
	}
}

// A restart asked for by the job's annotation restarts every replica once, behind the
// barrier, counting neither a restart nor a disruption; it begins the next attempt, after
// which the same annotation asks for nothing. A paused job is not restarted.
func TestRestartOnRequest(t *testing.T) {
	plan := &Plan{Groups: []Group{workers(2, batch.RestartNever, nil)}, Judge: allSucceed}
	status := statusWith(batch.JobRunning, replicaStatus("job-worker-0", "w0", batch.ReplicaRunning, 0), replicaStatus("job-worker-1", "w1", batch.ReplicaSucceeded, 0))
	status.Attempt = 2
	asked := func(s batch.JobStatus) *batch.GenericJob {
		j := testJob(s)
		j.Annotations = map[string]string{batch.AnnotationRestartAttempt: "2"}
		return j
	}
	pods := []*corev1.Pod{attemptPod("job-worker-0", "w0", corev1.PodRunning, 0, "2"), attemptPod("job-worker-1", "w1", corev1.PodSucceeded, 0, "2")}
	d := mustDecide(t, asked(status), plan, Children{Pods: pods}, nil, now)
	if d.Status.Attempt != 3 || d.Status.Restarts != 0 || len(d.DeletePods) != 2 || len(d.CreatePods) != 0 || len(d.Restarted) != 0 ||
		d.JobRestartBy != "annotation "+batch.AnnotationRestartAttempt || d.JobRestart != "asked to restart attempt 2" || d.JobRestartCause != RestartCauseRequest {
		t.Fatalf("asked to restart attempt 2: attempt %d, restarts %d, deleted %v, created %v, restarted %v, restart %q by %q; want attempt 3, both deleted, nothing counted",
			d.Status.Attempt, d.Status.Restarts, names(d.DeletePods), names(d.CreatePods), d.Restarted, d.JobRestart, d.JobRestartBy)
	}
	for _, name := range []string{"job-worker-0", "job-worker-1"} {
		r := replicaOf(d.Status, name)
		if r.RestartCount != 0 || r.Disruptions != 0 || r.Phase != batch.ReplicaDeleted || r.LastTermination == nil ||
			r.LastTermination.Reason != ReasonRestartedWithJob || r.LastTermination.Disrupted || r.LastTermination.Attempt != 2 {
			t.Errorf("%s: %+v, last termination %+v; want Deleted, RestartedWithJob in attempt 2, nothing counted", name, r, r.LastTermination)
		}
	}

	// The old pods terminate: the annotation, still 2, asks for nothing more.
	terminating := attemptPod("job-worker-0", "w0", corev1.PodRunning, 0, "2")
	terminating.DeletionTimestamp = ptr.To(metav1.NewTime(now))
	again := mustDecide(t, asked(*d.Status), plan, Children{Pods: []*corev1.Pod{terminating}}, nil, now)
	if again.Status.Attempt != 3 || len(again.CreatePods) != 0 || again.JobRestart != "" {
		t.Errorf("while an old pod remains: attempt %d, created %v, restart %q; want the barrier, nothing new", again.Status.Attempt, names(again.CreatePods), again.JobRestart)
	}
	next := mustDecide(t, asked(*again.Status), plan, Children{}, nil, now)
	if len(next.CreatePods) != 2 || next.JobRestart != "" {
		t.Fatalf("once the old pods are gone: created %v, restart %q; want both pods, no other restart", names(next.CreatePods), next.JobRestart)
	}
	checkAttemptPods(t, next.CreatePods, "3")

	paused := *plan
	paused.Paused = true
	if p := mustDecide(t, asked(status), &paused, Children{Pods: pods}, nil, now); p.Status.Attempt != 2 || p.JobRestart != "" {
		t.Errorf("a paused job asked to restart: attempt %d, restart %q; want nothing", p.Status.Attempt, p.JobRestart)
	}
}

// A launcher kind restarted on request: the launcher goes with its workers, and comes back
// only once the new workers are ready, as at the job's start.
func TestRestartOnRequestOfALauncherKind(t *testing.T) {
	plan := &Plan{Groups: []Group{{Type: "launcher", Replicas: 1, Restart: batch.RestartNever, After: []string{"worker"}, Template: template("run")},
		workers(2, batch.RestartNever, nil)}, Judge: allSucceed}
	status := statusWith(batch.JobRunning, replicaStatus("job-worker-0", "w0", batch.ReplicaRunning, 0), replicaStatus("job-worker-1", "w1", batch.ReplicaRunning, 0))
	status.Tasks = append([]batch.TaskStatus{{Type: "launcher", Replicas: []batch.ReplicaStatus{replicaStatus("job-launcher-0", "l0", batch.ReplicaRunning, 0)}}}, status.Tasks...)
	status.Attempt = 1
	job := testJob(status)
	job.Annotations = map[string]string{batch.AnnotationRestartAttempt: "1"}
	launcher := attemptPod("job-launcher-0", "l0", corev1.PodRunning, 0, "1")
	launcher.Labels[batch.LabelReplicaType] = "launcher"
	d := mustDecide(t, job, plan, Children{Pods: []*corev1.Pod{launcher, attemptPod("job-worker-0", "w0", corev1.PodRunning, 0, "1"), attemptPod("job-worker-1", "w1", corev1.PodRunning, 0, "1")}}, nil, now)
	if d.Status.Attempt != 2 || len(d.DeletePods) != 3 {
		t.Fatalf("asked to restart: attempt %d, deleted %v; want attempt 2, the launcher and both workers", d.Status.Attempt, names(d.DeletePods))
	}
	job = testJob(*d.Status)
	job.Annotations = map[string]string{batch.AnnotationRestartAttempt: "1"}
	next := mustDecide(t, job, plan, Children{}, nil, now)
	if got := names(next.CreatePods); len(got) != 2 || got[0] != "job-worker-0" || got[1] != "job-worker-1" {
		t.Fatalf("once the old pods are gone: created %v; want the workers first, the launcher once they are ready", got)
	}
	checkAttemptPods(t, next.CreatePods, "2")
	if r := replicaOf(next.Status, "job-launcher-0"); r.LastTermination == nil || r.LastTermination.Reason != ReasonRestartedWithJob {
		t.Errorf("the held launcher lost the record of its restart: %+v", r)
	}
	job = testJob(*next.Status)
	job.Annotations = map[string]string{batch.AnnotationRestartAttempt: "1"}
	workersReady := []*corev1.Pod{ready(attemptPod("job-worker-0", "x0", corev1.PodRunning, 0, "2")), ready(attemptPod("job-worker-1", "x1", corev1.PodRunning, 0, "2"))}
	last := mustDecide(t, job, plan, Children{Pods: workersReady}, nil, now)
	if got := names(last.CreatePods); len(got) != 1 || got[0] != "job-launcher-0" {
		t.Fatalf("once the new workers are ready: created %v; want the launcher", got)
	}
	checkAttemptPods(t, last.CreatePods, "2")
}
