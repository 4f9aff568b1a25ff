package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// TestControllerKilledWhileCreating: the controller is killed while 50 jobs are being
// created and started again. Every job ends up with exactly its pods, and every restart is
// counted once: a replica that fails twice with a limit of one restart must show exactly one.
func TestControllerKilledWhileCreating(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	const jobs = 50
	for i := range jobs {
		r := replica("worker", "trainer")
		if i%2 == 0 {
			r.Replicas = ptr.To[int32](3) // runs on
		} else {
			exits(&r, 1, "500ms") // fails, is restarted once, fails for good
			r.RestartPolicy = &batch.GenericRestartPolicy{Policy: batch.RestartOnFailure, Limit: ptr.To[int32](1)}
		}
		job := &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("crash-%02d", i)},
			Spec: batch.GenericJobSpec{ReplicaSpecs: []batch.GenericReplicaSpec{r}, CleanUpPolicy: batch.CleanUpNone}}
		createJob(t, ns, job)
		if i == jobs/2 {
			killController()
		}
	}
	// While no controller runs, the kubelet goes on: let a failing pod end unseen.
	waitFor(t, "a pod to fail while the controller is down", jobTimeout, func(ctx context.Context) (bool, error) {
		pods, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodFailed {
				return true, nil
			}
		}
		return false, nil
	})
	if err := startController(); err != nil {
		t.Fatal(err)
	}

	// unsettled names the jobs not yet where they end, with what they show, so that a
	// timeout says which job stuck and how.
	var unsettled []string
	waitForOrReport(t, "every job settled", 2*jobTimeout, func(ctx context.Context) (bool, error) {
		list, err := env.jobs.BatchV1beta1().GenericJobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		unsettled = unsettled[:0]
		for _, j := range list.Items {
			want := batch.JobRunning
			if j.Spec.ReplicaSpecs[0].RestartPolicy != nil {
				want = batch.JobFailed
			}
			if j.Status.Phase != want || (want == batch.JobRunning && j.Status.Aggregate.Running != 3) {
				unsettled = append(unsettled, fmt.Sprintf("%s: phase %q (want %s), running %d, tasks %+v",
					j.Name, j.Status.Phase, want, j.Status.Aggregate.Running, j.Status.Tasks))
			}
		}
		return len(list.Items) == jobs && len(unsettled) == 0, nil
	}, func() string { return strings.Join(unsettled, "\n") })

	pods, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	perJob := map[string]int{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			perJob[p.Labels[batch.LabelJobName]]++
		}
	}
	list, err := env.jobs.BatchV1beta1().GenericJobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range list.Items {
		want := int(*j.Spec.ReplicaSpecs[0].Replicas)
		if perJob[j.Name] != want {
			t.Errorf("%s has %d pods, want %d", j.Name, perJob[j.Name], want)
		}
		if j.Spec.ReplicaSpecs[0].RestartPolicy == nil {
			continue
		}
		r := j.Status.Tasks[0].Replicas[0]
		if r.RestartCount != 1 || j.Status.Tasks[0].RestartCount != 1 || r.Phase != batch.ReplicaFailed {
			t.Errorf("%s: replica %s restarted %d times (task %d), phase %s; want exactly 1 and Failed",
				j.Name, r.Name, r.RestartCount, j.Status.Tasks[0].RestartCount, r.Phase)
		}
	}
}

// TestControllerKilledDuringInPlaceRestart: on the real node, a job that restarts in place
// has its controller killed as soon as its status begins attempt 2 (before or after it wrote
// the attempt to the pods), and started again once the failed rank's pod is held. The new
// controller finishes the restart: it writes what was not written, releases the pods, counts
// the restart once, and the job succeeds in the same pods.
// (A kill between two pods' attempt writes is TestRestartInPlaceFinishedAfterACrash's, in
// the decision: a window of milliseconds.)
func TestControllerKilledDuringInPlaceRestart(t *testing.T) {
	ns := namespace(t)
	needRealNode(t, ns, trainingImage, agentImage)
	r := replica("worker", trainingImage)
	r.Replicas = ptr.To[int32](2)
	r.RestartPolicy = &batch.GenericRestartPolicy{Policy: batch.RestartOnFailure, Limit: ptr.To[int32](1)}
	c := &r.Template.Spec.Containers[0]
	c.Command = []string{"sh", "-c", `if [ "$T9K_ATTEMPT" = 1 ]; then if [ "$RANK" = 1 ]; then sleep 2; exit 1; fi; exec sleep 600; fi; sleep 3`}
	c.Env = []corev1.EnvVar{{Name: "RANK", Value: "$(rank)"}}
	onRealNode(&r.Template.Spec)
	job := &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: "killed-in-place"}, Spec: batch.GenericJobSpec{
		ReplicaSpecs: []batch.GenericReplicaSpec{r},
		Lifecycle:    batch.Lifecycle{RestartScope: batch.RestartScopeJob, RestartStrategy: batch.RestartInPlace},
	}}
	createJob(t, ns, job)
	before := podsByName(t, ns, job.Name, 2)
	waitReal(t, "attempt 2 begun", func(ctx context.Context) (bool, error) {
		j, err := env.jobs.BatchV1beta1().GenericJobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		return err == nil && j.Status.Attempt == 2, nil
	})
	killController()
	restarted := false
	defer func() {
		if !restarted {
			if err := startController(); err != nil {
				t.Error(err)
			}
		}
	}()
	waitReal(t, "the failed rank's pod held", func(ctx context.Context) (bool, error) {
		p, err := env.kube.CoreV1().Pods(ns).Get(ctx, job.Name+"-worker-1", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		agent := p.Status.InitContainerStatuses
		return len(agent) > 0 && agent[0].State.Running != nil && !ptr.Deref(agent[0].Started, false) &&
			len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Running == nil, nil
	})
	restarted = true
	if err := startController(); err != nil {
		t.Fatal(err)
	}
	done := waitGenericPhase(t, ns, job.Name, batch.JobSucceeded)
	if done.Status.Restarts != 1 || done.Status.Attempt != 2 {
		t.Errorf("restarts %d, attempt %d: want the one restart, attempt 2", done.Status.Restarts, done.Status.Attempt)
	}
	for _, rs := range done.Status.Tasks[0].Replicas {
		if rs.RestartCount != 1 || rs.UID != before[rs.Name].UID {
			t.Errorf("%s: pod %s, %d restarts; want its pod %s kept, one restart", rs.Name, rs.UID, rs.RestartCount, before[rs.Name].UID)
		}
	}
}
