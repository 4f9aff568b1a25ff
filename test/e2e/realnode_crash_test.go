package e2e

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

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
