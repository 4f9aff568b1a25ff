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
