package e2e

// Helpers the tests of several features share. The suite's own (env, namespace, waitFor,
// kubectl) are in main_test.go, the controller process's in controller_process_test.go, the
// real node's in realnode_test.go; a helper used by one feature's tests stays in its file.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/test/harness"
)

// jobTimeout is how long a test on the fake nodes waits for a job.
const jobTimeout = 60 * time.Second

// Pod annotations the local cluster's kwok reads (docs/testing.md, "Fake nodes").
const (
	exitCodeAnnotation   = "test.batch.tensorstack.dev/exit-code"
	runTimeAnnotation    = "test.batch.tensorstack.dev/run-time"
	exitReasonAnnotation = "test.batch.tensorstack.dev/exit-reason"
	// deleteTimeAnnotation: a deleted pod goes this long after its deletion.
	deleteTimeAnnotation = "test.batch.tensorstack.dev/delete-time"
)

// The local cluster's launcher annotations (docs/testing.md, "Fake nodes"): workers run until deleted, the
// launcher ends as these say.
const (
	launcherExitCode = "test.batch.tensorstack.dev/launcher-exit-code"
	launcherRunTime  = "test.batch.tensorstack.dev/launcher-run-time"
)

// exits makes every pod of a replica spec end with code after runTime.
func exits(r *batch.GenericReplicaSpec, code int, runTime string) {
	r.Template.Annotations = map[string]string{exitCodeAnnotation: fmt.Sprint(code), runTimeAnnotation: runTime}
}

// annotate makes every pod of a template end with code after runTime (its annotations replaced).
func annotate(t *corev1.PodTemplateSpec, code, runTime string) {
	t.Annotations = map[string]string{exitCodeAnnotation: code, runTimeAnnotation: runTime}
}

// launcherExits makes the launcher of a template end with code after 1s (its annotations replaced).
func launcherExits(t *corev1.PodTemplateSpec, code string) {
	t.Annotations = map[string]string{launcherExitCode: code, launcherRunTime: "1s"}
}

// replica is a replica spec of type name: one pod of image, running "train".
func replica(name, image string) batch.GenericReplicaSpec {
	return batch.GenericReplicaSpec{Type: name, Replicas: ptr.To[int32](1), Template: corev1.PodTemplateSpec{
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: image, Command: []string{"train"}}}},
	}}
}

// createJob creates a GenericJob.
func createJob(t *testing.T, ns string, job *batch.GenericJob) {
	t.Helper()
	if _, err := env.jobs.BatchV1beta1().GenericJobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// getJob reads a GenericJob.
func getJob(t *testing.T, ns, name string) *batch.GenericJob {
	t.Helper()
	job, err := env.jobs.BatchV1beta1().GenericJobs(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return job
}

// waitJob waits until the job satisfies cond and returns it.
func waitJob(t *testing.T, ns, name, what string, cond func(*batch.GenericJob) bool) *batch.GenericJob {
	t.Helper()
	return waitJobWithin(t, ns, name, what, jobTimeout, cond)
}

// waitJobWithin is waitJob with a timeout of its own.
func waitJobWithin(t *testing.T, ns, name, what string, timeout time.Duration, cond func(*batch.GenericJob) bool) *batch.GenericJob {
	t.Helper()
	var job *batch.GenericJob
	waitFor(t, name+" "+what, timeout, func(ctx context.Context) (bool, error) {
		var err error
		job, err = env.jobs.BatchV1beta1().GenericJobs(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && cond(job), nil
	})
	return job
}

// inPhase is a condition for waitJob: the job is in phase.
func inPhase(phase batch.JobPhase) func(*batch.GenericJob) bool {
	return func(j *batch.GenericJob) bool { return j.Status.Phase == phase }
}

// setPause sets a GenericJob's spec.runMode.pause.enabled.
func setPause(t *testing.T, ns, name string, enabled bool) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"runMode":{"pause":{"enabled":%v}}}}`, enabled)
	if _, err := env.jobs.BatchV1beta1().GenericJobs(ns).Patch(context.Background(), name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// deleteJob deletes a GenericJob and waits for its pods to go.
func deleteJob(t *testing.T, ns, name string) {
	t.Helper()
	if err := env.jobs.BatchV1beta1().GenericJobs(ns).Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, name+"'s pods gone", jobTimeout, func(context.Context) (bool, error) { return len(jobPods(t, ns, name+"-")) == 0, nil })
}

// waitDeleted waits until the job is gone and returns when the test first saw it gone.
func waitDeleted(t *testing.T, ns, name string, timeout time.Duration) time.Time {
	t.Helper()
	var gone time.Time
	waitFor(t, name+" deleted", timeout, func(ctx context.Context) (bool, error) {
		_, err := env.jobs.BatchV1beta1().GenericJobs(ns).Get(ctx, name, metav1.GetOptions{})
		gone = time.Now()
		return apierrors.IsNotFound(err), nil
	})
	return gone
}

// replicaStatusOf is a replica's entry in a GenericJob's status.
func replicaStatusOf(j *batch.GenericJob, name string) batch.ReplicaStatus {
	return j.Status.Replica(name)
}

// waitStatus waits until the status that get reads satisfies cond, and returns it.
func waitStatus(t *testing.T, what string, get func(ctx context.Context) (*batch.JobStatus, error), cond func(*batch.JobStatus) bool) *batch.JobStatus {
	t.Helper()
	var s *batch.JobStatus
	waitFor(t, what, jobTimeout, func(ctx context.Context) (bool, error) {
		var err error
		s, err = get(ctx)
		return err == nil && cond(s), nil
	})
	return s
}

// mpiStatus reads an MPIJob's status, for waitStatus.
func mpiStatus(ns, name string) func(context.Context) (*batch.JobStatus, error) {
	return func(ctx context.Context) (*batch.JobStatus, error) {
		j, err := env.jobs.BatchV1beta1().MPIJobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return &j.Status, nil
	}
}

// tfStatus reads a TensorFlowTrainingJob's status, for waitStatus.
func tfStatus(ns, name string) func(context.Context) (*batch.JobStatus, error) {
	return func(ctx context.Context) (*batch.JobStatus, error) {
		j, err := env.jobs.BatchV1beta1().TensorFlowTrainingJobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return &j.Status.JobStatus, nil
	}
}

// exampleMPIJob is the MPIJob of examples/mpi under another name (its script's ConfigMap comes
// with `kubectl apply -k examples/mpi`).
func exampleMPIJob(t *testing.T, name string) *batch.MPIJob {
	t.Helper()
	job := &batch.MPIJob{}
	data, err := os.ReadFile(filepath.Join(repoRoot, "examples", "mpi", "allreduce.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, job); err != nil {
		t.Fatal(err)
	}
	job.Name = name
	return job
}

// createMPIScript creates in ns the ConfigMap examples/mpi's MPIJob mounts its program from,
// as `kubectl apply -k examples/mpi` does.
func createMPIScript(t *testing.T, ns string) {
	t.Helper()
	allreduceConfigMap(t, ns, "mpi-allreduce-script", "mpi")
}

// allreduceConfigMap creates in ns the ConfigMap name holding examples/<example>'s
// allreduce.py, the program the jobs of the real runs mount.
func allreduceConfigMap(t *testing.T, ns, name, example string) {
	t.Helper()
	script, err := os.ReadFile(filepath.Join(repoRoot, "examples", example, "allreduce.py"))
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"allreduce.py": string(script)}}
	if _, err := env.kube.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// podNames lists the pods of ns that are not being deleted.
func podNames(t *testing.T, ns string) []string {
	t.Helper()
	pods, err := env.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			names = append(names, p.Name)
		}
	}
	return names
}

// jobPods are the pods of ns whose names start with prefix, not being deleted.
func jobPods(t *testing.T, ns, prefix string) []corev1.Pod {
	t.Helper()
	list, err := env.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	for _, p := range list.Items {
		if strings.HasPrefix(p.Name, prefix) && p.DeletionTimestamp == nil {
			pods = append(pods, p)
		}
	}
	return pods
}

// eventsOf lists the reasons and messages of an object's events.
func eventsOf(t *testing.T, ns, name string) string {
	t.Helper()
	list, err := env.kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range list.Items {
		lines = append(lines, e.Reason+": "+e.Message)
	}
	return strings.Join(lines, "\n")
}

// eventsSaying waits until the events of the object name say every one of wants, and returns
// them and whether they did within jobTimeout. Events are written after the status that
// shows what they tell, by a client of their own: a listing taken at the status can miss them.
func eventsSaying(t *testing.T, ns, name string, wants ...string) (string, bool) {
	t.Helper()
	var events string
	err := harness.WaitFor(context.Background(), "events of "+name, 100*time.Millisecond, jobTimeout, func(context.Context) (bool, error) {
		events = eventsOf(t, ns, name)
		for _, want := range wants {
			if !strings.Contains(events, want) {
				return false, nil
			}
		}
		return true, nil
	})
	return events, err == nil
}

// jobEvent waits for an event of the job with the given reason, and returns its message.
func jobEvent(t *testing.T, ns, job, reason string) string {
	t.Helper()
	var message string
	waitFor(t, "a "+reason+" event of "+job, jobTimeout, func(ctx context.Context) (bool, error) {
		list, err := env.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.InvolvedObject.Name == job && e.Reason == reason {
				message = e.Message
				return true, nil
			}
		}
		return false, nil
	})
	return message
}

// boundClaim makes a PersistentVolumeClaim of a namespace, bound by the cluster to a volume
// made for it (pods that mount it can then be scheduled).
func boundClaim(t *testing.T, ns, name string) {
	t.Helper()
	boundClaimOn(t, env.kube, ns, name)
}

// boundClaimOn is boundClaim on the cluster of kube.
func boundClaimOn(t *testing.T, kube kubernetes.Interface, ns, name string) {
	t.Helper()
	ctx := context.Background()
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name}, Spec: corev1.PersistentVolumeSpec{
		Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
		PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + ns + "-" + name}},
		ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: name},
		PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
	}}
	if _, err := kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, StorageClassName: new(string), VolumeName: pv.Name,
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
	if _, err := kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// watchGenericJob watches one GenericJob, from before it is made, for the real runs' time:
// every status it is written with, where polling would miss one that lasts a sync.
func watchGenericJob(t *testing.T, ns, name string) <-chan watch.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), realTimeout)
	w, err := env.jobs.BatchV1beta1().GenericJobs(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(); cancel() })
	return w.ResultChan()
}
