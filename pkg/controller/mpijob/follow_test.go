package mpijob

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/launcher"
)

// Pause, change, resume: the job-level children follow the new spec before the replicas that
// use them start. A resize rewrites the hostfile; a new ssh.authMountPath rewrites the ssh
// config and keeps the keys; the launcher runs over the new workers only.
func TestPauseChangeResumeFollowsTheSpec(t *testing.T) {
	job := seed(t)
	job.Spec.Worker.Replicas = ptr.To[int32](3)
	h := start(t, job)
	h.workersReady(t, 3, 3)
	h.launcher(t)
	secret := func(ctx context.Context) *corev1.Secret {
		s, err := h.Kube.CoreV1().Secrets(ns).Get(ctx, launcher.SecretName("mpi-example"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	hostfile := func(ctx context.Context) string {
		m, err := h.Kube.CoreV1().ConfigMaps(ns).Get(ctx, launcher.HostfileName("mpi-example"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return m.Data["hostfile"]
	}
	before := secret(context.Background()).Data
	if n := strings.Count(hostfile(context.Background()), "\n"); n != 3 {
		t.Fatalf("hostfile of 3 workers has %d lines", n)
	}

	edit := func(change func(*batch.MPIJob)) {
		t.Helper()
		j := h.job(t)
		change(j)
		if _, err := h.Jobs.BatchV1beta1().MPIJobs(ns).Update(context.Background(), j, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	edit(func(j *batch.MPIJob) { j.Spec.RunMode = &batch.RunMode{Pause: &batch.PauseMode{Enabled: true}} })
	h.WaitFor(t, "the job paused, its pods gone", func(context.Context) bool {
		return h.job(t).Status.Phase == batch.JobPaused && len(h.Pods(t, ns)) == 0
	})
	edit(func(j *batch.MPIJob) {
		j.Spec.Worker.Replicas = ptr.To[int32](2)
		j.Spec.SSH.AuthMountPath = "/home/mpi/.ssh"
	})
	h.WaitFor(t, "a hostfile of 2 workers", func(ctx context.Context) bool {
		return hostfile(ctx) == "mpi-example-worker-0.mpi-example slots=3\nmpi-example-worker-1.mpi-example slots=3\n"
	})
	h.WaitFor(t, "the ssh config for the new mount path", func(ctx context.Context) bool {
		return strings.Contains(string(secret(ctx).Data["config"]), "IdentityFile /home/mpi/.ssh/id_ed25519")
	})
	after := secret(context.Background()).Data
	for _, key := range []string{"id_ed25519", "ssh_host_ed25519_key", "authorized_keys", "known_hosts"} {
		if !bytes.Equal(before[key], after[key]) {
			t.Errorf("%s was made again; the keys did not change", key)
		}
	}
	updatesBeforeResume := len(h.Kube.Actions())

	edit(func(j *batch.MPIJob) { j.Spec.RunMode = nil })
	h.workersReady(t, 2, 2)
	l := h.launcher(t)
	for _, m := range l.Spec.Containers[0].VolumeMounts {
		if m.Name == "t9k-ssh" && m.MountPath != "/home/mpi/.ssh" {
			t.Errorf("the launcher mounts the keys at %s", m.MountPath)
		}
	}
	for _, p := range h.Pods(t, ns) {
		if p.Name == "mpi-example-worker-2" {
			t.Error("a third worker after the resize to 2")
		}
	}
	for _, a := range h.Kube.Actions()[updatesBeforeResume:] {
		if a.GetVerb() == "update" && (a.GetResource().Resource == "configmaps" || a.GetResource().Resource == "secrets") {
			t.Errorf("%s updated after the resume: %v", a.GetResource().Resource, a)
		}
	}
}
