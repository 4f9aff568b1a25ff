package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// TestRealMPIWorkerKilled: a worker SIGKILLed while mpirun runs over it (its sshd, pid 1 of
// its container, killed from this machine) takes OpenMPI's daemon and the rank with it;
// mpirun exits with an error a moment later. The job fails naming the worker, with the exit
// code the kubelet reports (137), however the two ends reach the controller.
func TestRealMPIWorkerKilled(t *testing.T) {
	parallel(t, realNode.all())
	ns := namespace(t)
	needRealNode(t, ns, trainingImage)
	job := exampleMPIJob(t, "mpi-killed")
	job.Spec.Worker.Replicas = ptr.To[int32](2)
	job.Spec.Worker.ExtraMPIArgs = []string{"-N", "1", "--allow-run-as-root"}
	job.Spec.Worker.Cmd = []string{"/bin/sh", "-c", "echo rank running on $(hostname); exec sleep 600"}
	job.Spec.Worker.Template.Spec.Containers[0].VolumeMounts = nil
	job.Spec.Worker.Template.Spec.Volumes = nil
	if _, err := env.jobs.BatchV1beta1().MPIJobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReal(t, "both ranks running", func(ctx context.Context) (bool, error) {
		return strings.Count(containerLogs(ns, "mpi-killed-launcher", "launcher"), "rank running on") == 2, nil
	})
	var worker *corev1.Pod
	waitReal(t, "the worker's container", func(ctx context.Context) (bool, error) {
		p, err := env.kube.CoreV1().Pods(ns).Get(ctx, "mpi-killed-worker-1", metav1.GetOptions{})
		worker = p
		return err == nil && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].ContainerID != "", nil
	})
	pid := containerInit(t, worker, "mpi-worker")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing the worker's process %d: %v", pid, err)
	}
	s := waitStatus(t, "the job's end", mpiStatus(ns, job.Name), func(s *batch.JobStatus) bool {
		return s.Phase == batch.JobFailed || s.Phase == batch.JobSucceeded
	})
	c := s.Condition(batch.JobConditionFailed)
	if s.Phase != batch.JobFailed || !strings.Contains(c.Message, "worker mpi-killed-worker-1 failed with exit code 137") {
		t.Errorf("phase %s, Failed condition %q: want the killed worker named as the cause", s.Phase, c.Message)
	}
}
