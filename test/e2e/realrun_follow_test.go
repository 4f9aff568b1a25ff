package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// TestRealMPIJobResizedWhilePaused: an MPIJob of 3 workers, paused, resized to 2 workers and
// resumed, runs mpirun over the 2 workers it has: the hostfile follows the spec before the
// launcher starts, and the ranks land on both hosts and nowhere else.
func TestRealMPIJobResizedWhilePaused(t *testing.T) {
	parallel(t, realNode.all())
	ns := namespace(t)
	needRealNode(t, ns, trainingImage)
	example := filepath.Join(repoRoot, "examples", "mpi")
	if out, err := kubectl("apply", "-n", ns, "-k", example); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// The example's job ran already; this one starts paused, as one paused while it ran.
	if out, err := kubectl("delete", "-n", ns, "mpijob", "mpi-allreduce", "--wait=false"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	job := exampleMPIJob(t, "mpi-resized")
	job.Spec.RunMode = &batch.RunMode{Pause: &batch.PauseMode{Enabled: true}}
	jobs := env.jobs.BatchV1beta1().MPIJobs(ns)
	if _, err := jobs.Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hostfile := func(ctx context.Context) string {
		m, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, "mpi-resized-hostfile", metav1.GetOptions{})
		if err != nil {
			return ""
		}
		return m.Data["hostfile"]
	}
	waitReal(t, "the paused job's hostfile of 3 workers", func(ctx context.Context) (bool, error) {
		return strings.Count(hostfile(ctx), "\n") == 3, nil
	})

	edit := func(change func(*batch.MPIJob)) {
		t.Helper()
		waitReal(t, "an edit of the job", func(ctx context.Context) (bool, error) {
			j, err := jobs.Get(ctx, job.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			change(j)
			_, err = jobs.Update(ctx, j, metav1.UpdateOptions{})
			return err == nil, nil // a conflict with the controller's status write: again
		})
	}
	edit(func(j *batch.MPIJob) { j.Spec.Worker.Replicas = ptr.To[int32](2) })
	waitReal(t, "the hostfile of 2 workers", func(ctx context.Context) (bool, error) {
		return strings.Count(hostfile(ctx), "\n") == 2, nil
	})
	edit(func(j *batch.MPIJob) { j.Spec.RunMode = nil })

	s := waitStatus(t, "the resumed job's end", mpiStatus(ns, job.Name), func(s *batch.JobStatus) bool {
		return s.Phase == batch.JobSucceeded || s.Phase == batch.JobFailed
	})
	if s.Phase != batch.JobSucceeded {
		t.Fatalf("the resized MPIJob ended %s: %+v", s.Phase, s.Conditions)
	}
	log := containerLogs(ns, "mpi-resized-launcher", "launcher")
	if n := strings.Count(log, "all-reduce sum 21, want 21"); n != 6 {
		t.Errorf("the launcher's log shows %d of 6 ranks (-N 3 on 2 workers):\n%s", n, log)
	}
	if hosts := ranksPerHost(rankHosts(t, log)); len(hosts) != 2 || hosts["mpi-resized-worker-0"] == 0 || hosts["mpi-resized-worker-1"] == 0 {
		t.Errorf("ranks ran on %v, want both workers and no other host", hosts)
	}
	if _, err := env.kube.CoreV1().Pods(ns).Get(context.Background(), "mpi-resized-worker-2", metav1.GetOptions{}); err == nil {
		t.Error("a third worker exists after the resize")
	}
}
