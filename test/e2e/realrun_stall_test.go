package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// stallDeadline is the stall test's spec.progressDeadlineSeconds.
const stallDeadline = 10

// TestRealStalledJobRestartsWhole: examples/pytorch with 2 workers (gloo) reporting every step,
// whose rank 1 hangs after step 3 in its first life, reporting nothing more (rank 0 waits for
// it in the next all-reduce, silent too): once the deadline passes, the job is Stalled (the
// condition and a Warning naming the silent replicas), restarts whole as a stall does without
// a rule where the replicas may restart, and its second life runs through to Succeeded, the
// Stalled condition False again, each replica restarted once and the job once. The pods
// have no probes and change nothing once silent: the clock alone finds the stall.
func TestRealStalledJobRestartsWhole(t *testing.T) {
	parallel(t, realNode.all())
	ns := namespace(t)
	needRealNode(t, ns, trainingImage)
	marker := filepath.Join(os.TempDir(), "t9k-e2e-stall-"+ns)
	t.Cleanup(func() { os.RemoveAll(marker) })

	job := pytorchWithProgress(t, ns, 2)
	job.Spec.ProgressDeadlineSeconds = ptr.To[int64](stallDeadline)
	r := &job.Spec.ReplicaSpecs[0]
	r.RestartPolicy = &batch.GenericRestartPolicy{Policy: batch.RestartOnFailure, Limit: ptr.To[int32](1)}
	spec := &r.Template.Spec
	spec.TerminationGracePeriodSeconds = ptr.To[int64](2) // rank 0, blocked in gloo, ends at the SIGKILL
	c := &spec.Containers[0]
	c.Env = append(c.Env, corev1.EnvVar{Name: "STALL_AFTER_STEP", Value: "3"}, corev1.EnvVar{Name: "STALL_MARKER", Value: "/work/stalled"})
	// Only rank 1 stalls: rank 0's marker is its own, made on its first life too.
	c.Command = []string{"sh", "-c", `[ "$RANK" = 1 ] || export STALL_AFTER_STEP=0; exec /usr/bin/python3 /scripts/allreduce.py`}
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "work", MountPath: "/work"})
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "work", VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: marker, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}})
	// A watch sees the status that says Stalled: the restart that follows turns it False
	// within a sync or two.
	events := watchGenericJob(t, ns, job.Name)
	createJob(t, ns, job)
	var stalled *batch.GenericJob
	for ev := range events {
		if j, ok := ev.Object.(*batch.GenericJob); ok && (j.Status.ConditionTrue(batch.JobConditionStalled) || j.Status.Finished()) {
			stalled = j
			break
		}
	}
	if stalled == nil {
		t.Fatalf("the job was not called stalled within %s", realTimeout)
	}
	c0 := stalled.Status.Condition(batch.JobConditionStalled)
	if c0.Status != corev1.ConditionTrue || c0.Reason != "ProgressDeadlineExceeded" || !strings.Contains(c0.Message, job.Name+"-worker-1") || stalled.Status.Finished() {
		t.Fatalf("the Stalled condition %+v (phase %s, conditions %+v; events:\n%s): want True, ProgressDeadlineExceeded, naming worker-1, the job going on",
			c0, stalled.Status.Phase, stalled.Status.Conditions, eventsOf(t, ns, job.Name))
	}
	var lastReport time.Time
	for _, p := range stalled.Status.Progress.Replicas {
		if p.ReportTime.After(lastReport) {
			lastReport = p.ReportTime.Time
		}
	}
	if silent := c0.LastTransitionTime.Sub(lastReport); silent < stallDeadline*time.Second || silent > stallDeadline*time.Second+stallLag+5*time.Second {
		t.Errorf("called stalled %s after the last report, want the %d s deadline, plus at most %s for the report lag and a sync", silent, stallDeadline, stallLag+5*time.Second)
	}
	t.Logf("stalled: %s (%s after the last report)", c0.Message, c0.LastTransitionTime.Sub(lastReport))

	done := waitGenericPhase(t, ns, job.Name, batch.JobSucceeded)
	if done.Status.Restarts != 1 {
		t.Errorf("status.restarts %d, want the one whole-job restart", done.Status.Restarts)
	}
	for _, name := range []string{job.Name + "-worker-0", job.Name + "-worker-1"} {
		rs := replicaStatusOf(done, name)
		if rs.Phase != batch.ReplicaSucceeded || rs.LastTermination == nil {
			t.Errorf("%s: %+v, want Succeeded after a restart", name, rs)
		}
	}
	if rs := replicaStatusOf(done, job.Name+"-worker-1"); rs.LastTermination == nil || rs.LastTermination.Reason != string(batch.ReasonStalled) {
		t.Errorf("worker-1's last termination %+v, want Stalled", rs.LastTermination)
	}
	if c := done.Status.Condition(batch.JobConditionStalled); c.Status != corev1.ConditionFalse {
		t.Errorf("the Stalled condition once the job ran on: %+v, want False", c)
	}
	if told, ok := eventsSaying(t, ns, job.Name, "Stalled: ", "RestartingJob: Restarting every replica together as attempt 2 (spec.progressDeadlineSeconds)"); !ok {
		t.Errorf("events:\n%s\nwant a Stalled Warning and the whole job's restart by the progress deadline", told)
	}
	if log := containerLogs(ns, job.Name+"-worker-1", "worker"); !strings.Contains(log, "all-reduce sum 3, want 3") {
		t.Errorf("worker-1's second life:\n%s", log)
	}
}
