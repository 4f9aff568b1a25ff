package e2e

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/t9k-jobs/t9k-jobs/examples"
	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// TestMPIExample: the documented MPIJob ends as its launcher does; cleanUpWorkers removes the
// workers and keeps the launcher; `kubectl get mj` shows the launcher's progress.
func TestMPIExample(t *testing.T) {
	parallel(t)
	for _, tc := range []struct {
		code    string
		phase   batch.JobPhase
		cond    batch.JobConditionType
		message string
	}{
		{"0", batch.JobSucceeded, batch.JobConditionCompleted, "The job has ended: mpirun exited with code 0."},
		{"1", batch.JobFailed, batch.JobConditionFailed, "The job exited with an error code: mpi-example-launcher failed with exit code 1."},
	} {
		t.Run("launcher exits "+tc.code, func(t *testing.T) {
			ns := namespace(t)
			job := &batch.MPIJob{}
			if err := examples.Decode("mpi-example.yaml", job); err != nil {
				t.Fatal(err)
			}
			launcherExits(&job.Spec.Worker.Template, tc.code)
			if _, err := env.jobs.BatchV1beta1().MPIJobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			s := waitStatus(t, "the outcome", mpiStatus(ns, job.Name), func(s *batch.JobStatus) bool { return s.Phase == tc.phase })
			if c := s.Condition(tc.cond); c.Status != corev1.ConditionTrue || !strings.HasPrefix(c.Message, tc.message) {
				t.Errorf("%s condition %+v, want %q", tc.cond, c, tc.message)
			}
			if len(s.Tasks) != 2 || s.Tasks[0].Type != "launcher" || s.Tasks[1].Type != "worker" || len(s.Tasks[1].Replicas) != 5 {
				t.Errorf("tasks %+v: want the launcher, then 5 workers", s.Tasks)
			}
			waitFor(t, "the workers cleaned up, the launcher kept", jobTimeout, func(ctx context.Context) (bool, error) {
				names := podNames(t, ns)
				return len(names) == 1 && names[0] == "mpi-example-launcher", nil
			})
			out, err := kubectl("get", "mj", "-n", ns)
			if err != nil || !strings.Contains(out, string(tc.phase)) || !strings.Contains(out, "LAUNCHER") {
				t.Errorf("kubectl get mj (%v):\n%s", err, out)
			}
		})
	}
}

// TestColossalAIExample: the documented ColossalAIJob (with the PVC it names) ends as its
// launcher does; cleanUpWorkers is off, so every pod stays.
func TestColossalAIExample(t *testing.T) {
	parallel(t)
	for _, tc := range []struct {
		code  string
		phase batch.JobPhase
		cond  batch.JobConditionType
	}{
		{"0", batch.JobSucceeded, batch.JobConditionCompleted},
		{"1", batch.JobFailed, batch.JobConditionFailed},
	} {
		t.Run("launcher exits "+tc.code, func(t *testing.T) {
			ns := namespace(t)
			ctx := context.Background()
			boundClaim(t, ns, "colossalai") // the example mounts it

			job := &batch.ColossalAIJob{}
			if err := examples.Decode("colossalai-example.yaml", job); err != nil {
				t.Fatal(err)
			}
			launcherExits(&job.Spec.Worker.Template, tc.code)
			if _, err := env.jobs.BatchV1beta1().ColossalAIJobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			s := waitStatus(t, "the outcome", func(ctx context.Context) (*batch.JobStatus, error) {
				j, err := env.jobs.BatchV1beta1().ColossalAIJobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
				if err != nil {
					return nil, err
				}
				return &j.Status, nil
			}, func(s *batch.JobStatus) bool { return s.Phase == tc.phase })
			if c := s.Condition(tc.cond); c.Status != corev1.ConditionTrue {
				t.Errorf("%s %+v", tc.cond, c)
			}
			if names := podNames(t, ns); len(names) != 3 {
				t.Errorf("pods %v: want the launcher and both workers kept", names)
			}
		})
	}
}

// TestMPIPauseAndResume: pausing deletes the launcher and workers and keeps the Secret,
// hostfile and Service; resuming starts the workers, then the launcher once they are Ready.
func TestMPIPauseAndResume(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	ctx := context.Background()
	job := &batch.MPIJob{}
	if err := examples.Decode("mpi-example.yaml", job); err != nil {
		t.Fatal(err)
	}
	mpi := env.jobs.BatchV1beta1().MPIJobs(ns)
	if _, err := mpi.Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, "running", mpiStatus(ns, job.Name), func(s *batch.JobStatus) bool { return s.Phase == batch.JobRunning })
	patch := func(enabled string) {
		t.Helper()
		if _, err := mpi.Patch(ctx, job.Name, "application/merge-patch+json", []byte(`{"spec":{"runMode":{"pause":{"enabled":`+enabled+`}}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patch("true")
	waitStatus(t, "paused", mpiStatus(ns, job.Name), func(s *batch.JobStatus) bool {
		return s.Phase == batch.JobPaused && s.Condition(batch.JobConditionPaused).Reason == "Paused"
	})
	waitFor(t, "no pod left", jobTimeout, func(context.Context) (bool, error) { return len(podNames(t, ns)) == 0, nil })
	if _, err := env.kube.CoreV1().Secrets(ns).Get(ctx, "mpi-example-ssh", metav1.GetOptions{}); err != nil {
		t.Errorf("the Secret went with the pause: %v", err)
	}
	if _, err := env.kube.CoreV1().Services(ns).Get(ctx, "mpi-example", metav1.GetOptions{}); err != nil {
		t.Errorf("the Service went with the pause: %v", err)
	}
	patch("false")
	waitStatus(t, "running again", mpiStatus(ns, job.Name), func(s *batch.JobStatus) bool {
		return s.Phase == batch.JobRunning && s.Tasks[0].Replicas[0].Phase == batch.ReplicaRunning
	})
}
