package decision

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// A launcher-shaped plan: one launcher that waits for its workers, a job-wide Service, a
// Secret and a ConfigMap.
func launcherPlan(workersN int32) *Plan {
	secret := func(metav1.Object) (metav1.Object, error) { return &corev1.Secret{}, nil }
	return &Plan{
		Groups: []Group{
			{Type: "launcher", Replicas: 1, Restart: batch.RestartNever, Template: template("mpirun"), After: []string{"worker"},
				PodName: func(int32) string { return "job-launcher" }},
			workers(workersN, batch.RestartNever, nil),
		},
		Objects: []PlannedChild{
			{Kind: SecretKind, Name: "job-ssh", Build: secret},
			{Kind: ConfigMapKind, Name: "job-hostfile", Build: func(metav1.Object) (metav1.Object, error) { return &corev1.ConfigMap{}, nil }},
			{Kind: ServiceKind, Name: "job", Build: func(metav1.Object) (metav1.Object, error) { return &corev1.Service{}, nil }},
		},
		Judge: func(Replicas) *Outcome { return nil },
	}
}

func launcherStatus(replicas ...batch.ReplicaStatus) batch.JobStatus {
	s := batch.JobStatus{Phase: batch.JobPending, Tasks: []batch.TaskStatus{{Type: "launcher", Replicas: replicas[:1]}, {Type: "worker", Replicas: replicas[1:]}}}
	return s
}

func TestLauncherWaitsForReadyWorkers(t *testing.T) {
	plan := launcherPlan(2)
	first := mustDecide(t, testJob(batch.JobStatus{}), plan, Children{}, nil, now)
	if got := names(first.CreatePods); strings.Join(got, ",") != "job-worker-0,job-worker-1" {
		t.Errorf("first sync created %v, want the workers only", got)
	}
	if len(first.CreateObjects) != 3 {
		t.Errorf("objects to create: %+v, want the Secret, ConfigMap and Service", first.CreateObjects)
	}
	if r := replicaOf(first.Status, "job-launcher"); r.Phase != "" || r.UID != "" {
		t.Errorf("held-back launcher reported as %+v", r)
	}

	pods := []*corev1.Pod{ready(pod("job-worker-0", "w0", corev1.PodRunning, 0)), pod("job-worker-1", "w1", corev1.PodRunning, 0)}
	children := Children{Pods: pods, Objects: []metav1.Object{&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "job-ssh"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "job-hostfile"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "job"}}}}
	second := mustDecide(t, testJob(*first.Status), plan, children, nil, now)
	if len(second.CreatePods) != 0 || len(second.CreateObjects) != 0 || len(second.DeleteObjects) != 0 {
		t.Errorf("one worker not ready: created %v, objects %v, deleted services %v", names(second.CreatePods), second.CreateObjects, names(second.DeleteObjects))
	}
	c := second.Status.Condition(batch.JobConditionInitialized)
	if c.Status != corev1.ConditionFalse || c.Reason != "Waiting" || !strings.Contains(c.Message, "launcher is created once every worker is ready: 1 of 2 ready") {
		t.Errorf("Initialized = %+v: want the wait explained", c)
	}

	ready(pods[1])
	third := mustDecide(t, testJob(*second.Status), plan, children, nil, now)
	if got := names(third.CreatePods); len(got) != 1 || got[0] != "job-launcher" || third.Waiting != "" {
		t.Errorf("all workers ready: created %v, waiting %q", got, third.Waiting)
	}
}

func TestDebugModeDoesNotWait(t *testing.T) {
	plan := launcherPlan(2)
	plan.Debug = true
	d := mustDecide(t, testJob(batch.JobStatus{}), plan, Children{}, nil, now)
	if len(d.CreatePods) != 3 {
		t.Errorf("debug mode created %v, want the launcher too", names(d.CreatePods))
	}
}

// A worker whose pod is gone though it had not ended is reported lost to the outcome (a
// launcher kind fails the job with it); other objects are kept at pause and at the end.
func TestLostWorkerAndKeptObjects(t *testing.T) {
	plan := launcherPlan(1)
	var seen Replicas
	plan.Judge = func(rs Replicas) *Outcome { seen = rs; return nil }
	status := launcherStatus(replicaStatus("job-launcher", "l0", batch.ReplicaRunning, 0), replicaStatus("job-worker-0", "w0", batch.ReplicaRunning, 0))
	mustDecide(t, testJob(status), plan, Children{Pods: []*corev1.Pod{pod("job-launcher", "l0", corev1.PodRunning, 0)}}, nil, now)
	if w := seen["worker"][0]; !w.Lost {
		t.Errorf("worker view %+v, want lost", w)
	}

	plan.Paused = true
	services := []metav1.Object{&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "job"}}}
	d := mustDecide(t, testJob(status), plan, Children{Objects: services}, nil, now)
	if len(d.DeleteObjects) != 0 {
		t.Errorf("pause deleted %v: the job's Service is kept", names(d.DeleteObjects))
	}
	if w := replicaOf(d.Status, "job-worker-0"); w.Phase != batch.ReplicaDeleted {
		t.Errorf("paused worker %+v", w)
	}
}

// Replicas the engine itself deleted (pause) are not lost when the job resumes.
func TestResumedReplicasAreNotLost(t *testing.T) {
	plan := launcherPlan(1)
	var seen Replicas
	plan.Judge = func(rs Replicas) *Outcome { seen = rs; return nil }
	status := launcherStatus(replicaStatus("job-launcher", "l0", batch.ReplicaDeleted, 0), replicaStatus("job-worker-0", "w0", batch.ReplicaDeleted, 0))
	status.Conditions = []batch.JobCondition{{Type: batch.JobConditionPaused, Status: corev1.ConditionFalse, Reason: "Resumed"}}
	mustDecide(t, testJob(status), plan, Children{}, nil, now)
	if seen["launcher"][0].Lost || seen["worker"][0].Lost {
		t.Errorf("views after resume %+v: nothing was lost", seen)
	}
}

// A job-level child follows what the plan builds for it now: one built the same is left
// alone, one built differently is updated as seen (its resourceVersion), one the plan no
// longer lists is deleted, and a deleted one is made again.
func TestObjectsFollowThePlan(t *testing.T) {
	hostfile := func(lines string) PlannedChild {
		return PlannedChild{Kind: ConfigMapKind, Name: "job-hostfile", Build: func(metav1.Object) (metav1.Object, error) {
			return &corev1.ConfigMap{Data: map[string]string{"hostfile": lines}}, nil
		}}
	}
	job := testJob(batch.JobStatus{})
	made, err := BuildChild(job, hostfile("w0\nw1\nw2\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	made.SetResourceVersion("41")
	made.SetUID("cm-uid")
	stray := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "job-old", UID: "s-uid"}}

	plan := &Plan{Groups: []Group{workers(2, batch.RestartNever, nil)}, Objects: []PlannedChild{hostfile("w0\nw1\nw2\n")}}
	same := mustDecide(t, testJob(batch.JobStatus{}), plan, Children{Objects: []metav1.Object{made}}, nil, now)
	if len(same.CreateObjects)+len(same.UpdateObjects)+len(same.DeleteObjects) != 0 {
		t.Errorf("nothing changed, yet created %v, updated %v, deleted %v", names(same.CreateObjects), names(same.UpdateObjects), names(same.DeleteObjects))
	}

	plan.Objects = []PlannedChild{hostfile("w0\nw1\n")}
	d := mustDecide(t, testJob(batch.JobStatus{}), plan, Children{Objects: []metav1.Object{made, stray}}, nil, now)
	if len(d.UpdateObjects) != 1 {
		t.Fatalf("updated %v, want the hostfile", names(d.UpdateObjects))
	}
	u := d.UpdateObjects[0].(*corev1.ConfigMap)
	if u.Data["hostfile"] != "w0\nw1\n" || u.ResourceVersion != "41" || u.UID != "cm-uid" || u.Annotations[AnnotationChildHash] == made.GetAnnotations()[AnnotationChildHash] {
		t.Errorf("update %+v: want the new content, as seen, with a new hash", u)
	}
	if got := names(d.DeleteObjects); len(got) != 1 || got[0] != "job-old" {
		t.Errorf("deleted %v, want the object the plan no longer lists", got)
	}

	gone := mustDecide(t, testJob(batch.JobStatus{}), plan, Children{}, nil, now)
	if got := names(gone.CreateObjects); len(got) != 1 || got[0] != "job-hostfile" {
		t.Errorf("created %v, want the deleted hostfile again", got)
	}
}
