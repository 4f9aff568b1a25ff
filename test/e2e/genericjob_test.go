package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/t9k-jobs/t9k-jobs/examples"
	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

func readGenericJob(t *testing.T, name string) *batch.GenericJob {
	t.Helper()
	job := &batch.GenericJob{}
	if err := examples.Decode(name, job); err != nil {
		t.Fatal(err)
	}
	return job
}

// TestGenericExample: the documented example runs 4 workers; its rules end it when worker 0
// ends, with the rule named.
func TestGenericExample(t *testing.T) {
	parallel(t)
	for _, tc := range []struct {
		exitCode  int
		phase     batch.JobPhase
		condition batch.JobConditionType
		message   string
	}{
		{0, batch.JobSucceeded, batch.JobConditionCompleted, `The job has finished successfully with rule: {"worker": [0]}`},
		{1, batch.JobFailed, batch.JobConditionFailed, `The job is failed with rule: {"worker": [0]}`},
	} {
		t.Run(fmt.Sprintf("exit code %d", tc.exitCode), func(t *testing.T) {
			ns := namespace(t)
			job := readGenericJob(t, "generic-example.yaml")
			exits(&job.Spec.ReplicaSpecs[0], tc.exitCode, "2s")
			createJob(t, ns, job)
			running := waitJob(t, ns, job.Name, "running 4 replicas", func(j *batch.GenericJob) bool { return j.Status.Aggregate.Running == 4 })
			if running.Status.Phase != batch.JobRunning || running.Status.Condition(batch.JobConditionInitialized).Status != corev1.ConditionTrue {
				t.Errorf("while running: phase %s, Initialized %+v", running.Status.Phase, running.Status.Condition(batch.JobConditionInitialized))
			}
			done := waitJob(t, ns, job.Name, "ended", func(j *batch.GenericJob) bool {
				return j.Status.Phase == batch.JobSucceeded || j.Status.Phase == batch.JobFailed
			})
			if done.Status.Phase != tc.phase {
				t.Fatalf("phase %s, want %s", done.Status.Phase, tc.phase)
			}
			if c := done.Status.Condition(tc.condition); c.Status != corev1.ConditionTrue || c.Message != tc.message {
				t.Errorf("%s condition %+v, want True with %q", tc.condition, c, tc.message)
			}
			if len(done.Status.Tasks) != 1 || len(done.Status.Tasks[0].Replicas) != 4 || done.Status.Tasks[0].Replicas[0].Containers[0].ExitCode == nil {
				t.Errorf("tasks %+v", done.Status.Tasks)
			}
			// The controller caches jobs without managedFields and writes status from that
			// cache: the API server must still hold the creator's entry beside its own.
			var creator, controller bool
			for _, m := range done.ManagedFields {
				creator = creator || (m.Manager != "t9k-job-controller" && m.Subresource == "")
				controller = controller || (m.Manager == "t9k-job-controller" && m.Subresource == "status")
			}
			if !creator || !controller {
				t.Errorf("managedFields lost an owner: %+v", done.ManagedFields)
			}
		})
	}
}

// TestTFConfigExample: as published the job fails with a message naming the variable and the
// fix, and creates nothing; with spec.service its pods carry their TF_CONFIG.
func TestTFConfigExample(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	job := readGenericJob(t, "generic-tf-config.yaml")
	createJob(t, ns, job)
	failed := waitJob(t, ns, job.Name, "failed", inPhase(batch.JobFailed))
	c := failed.Status.Condition(batch.JobConditionFailed)
	if c.Reason != "InvalidSpec" || !strings.Contains(c.Message, "$(service.worker[0].host) needs spec.service") {
		t.Errorf("Failed condition %+v", c)
	}
	if names := podNames(t, ns); len(names) != 0 {
		t.Errorf("pods of an invalid job: %v", names)
	}

	fixed := readGenericJob(t, "generic-tf-config.yaml")
	fixed.Name = "tf-config-fixed"
	fixed.Spec.Service = &batch.ServiceOption{Ports: []batch.ServicePort{{Name: "http", Port: 2222}}}
	createJob(t, ns, fixed)
	waitJob(t, ns, fixed.Name, "running", inPhase(batch.JobRunning))
	pod, err := env.kube.CoreV1().Pods(ns).Get(context.Background(), "tf-config-fixed-worker-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"task":{"type":"worker","index":2},"cluster":{"worker":["tf-config-fixed-worker-0:2222","tf-config-fixed-worker-1:2222","tf-config-fixed-worker-2:2222","tf-config-fixed-worker-3:2222"]}}`
	if got := pod.Spec.Containers[0].Env[0].Value; got != want {
		t.Errorf("TF_CONFIG\n got %s\nwant %s", got, want)
	}
	if pod.Spec.Hostname != "tf-config-fixed-worker-2" || pod.Spec.Subdomain != "tf-config-fixed-worker-2" {
		t.Errorf("hostname %q subdomain %q", pod.Spec.Hostname, pod.Spec.Subdomain)
	}
	svc, err := env.kube.CoreV1().Services(ns).Get(context.Background(), "tf-config-fixed-worker-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || svc.Spec.Ports[0].Port != 2222 {
		t.Errorf("service %+v", svc.Spec)
	}
}

// TestReplicaFailsPastItsLimit: a replica is restarted up to its limit, then the job fails;
// the restart count is exact.
func TestReplicaFailsPastItsLimit(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	r := replica("worker", "trainer")
	r.RestartPolicy = &batch.GenericRestartPolicy{Policy: batch.RestartOnFailure, Limit: ptr.To[int32](2)}
	exits(&r, 3, "1s")
	job := &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: "limit"}, Spec: batch.GenericJobSpec{ReplicaSpecs: []batch.GenericReplicaSpec{r}}}
	createJob(t, ns, job)
	failed := waitJob(t, ns, job.Name, "failed", inPhase(batch.JobFailed))
	task := failed.Status.Tasks[0]
	if task.RestartCount != 2 || task.Replicas[0].RestartCount != 2 {
		t.Errorf("restart count %d (replica %d), want 2", task.RestartCount, task.Replicas[0].RestartCount)
	}
	if c := failed.Status.Condition(batch.JobConditionFailed); !strings.Contains(c.Message, "limit-worker-0 failed with exit code 3 and has no restart left") {
		t.Errorf("Failed condition %+v", c)
	}
}

// TestSuccessAndFailureRules: rules over several types decide the outcome.
func TestSuccessAndFailureRules(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	master, worker := replica("master", "m"), replica("worker", "w")
	worker.Replicas = ptr.To[int32](2)
	exits(&master, 0, "1s") // the master succeeds; the workers run on
	job := &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: "rules"}, Spec: batch.GenericJobSpec{
		ReplicaSpecs: []batch.GenericReplicaSpec{master, worker},
		SuccessRules: []batch.ReplicaRule{{"worker": {0, 1}}, {"master": {0}}},
		FailureRules: []batch.ReplicaRule{{"worker": {1}}},
	}}
	createJob(t, ns, job)
	done := waitJob(t, ns, job.Name, "succeeded", inPhase(batch.JobSucceeded))
	if c := done.Status.Condition(batch.JobConditionCompleted); c.Message != `The job has finished successfully with rule: {"master": [0]}` {
		t.Errorf("Completed %+v", c)
	}
}

// TestPauseAndResume: pausing deletes the replicas; resuming recreates them with the resume
// settings and returns to Running.
func TestPauseAndResume(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	r := replica("worker", "trainer")
	r.Replicas = ptr.To[int32](2)
	r.Template.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
	job := &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: "pause"}, Spec: batch.GenericJobSpec{
		ReplicaSpecs: []batch.GenericReplicaSpec{r},
		RunMode: &batch.RunMode{Pause: &batch.PauseMode{Enabled: false,
			ResumeSpecs: []batch.ResumeSpec{{Type: "worker", SkipInitContainer: true, Command: []string{"/usr/bin/sshd"}}}}},
	}}
	createJob(t, ns, job)
	waitJob(t, ns, job.Name, "running", inPhase(batch.JobRunning))

	setPause(t, ns, job.Name, true)
	paused := waitJob(t, ns, job.Name, "paused with every replica gone", func(j *batch.GenericJob) bool {
		return j.Status.Phase == batch.JobPaused && j.Status.ConditionTrue(batch.JobConditionPaused) && len(podNames(t, ns)) == 0
	})
	if c := paused.Status.Condition(batch.JobConditionRunning); c.Status != corev1.ConditionFalse {
		t.Errorf("Running condition of a paused job: %+v", c)
	}

	setPause(t, ns, job.Name, false)
	resumed := waitJob(t, ns, job.Name, "running again", inPhase(batch.JobRunning))
	if c := resumed.Status.Condition(batch.JobConditionPaused); c.Status != corev1.ConditionFalse || c.Reason != "Resumed" {
		t.Errorf("Paused condition after resume: %+v", c)
	}
	pod, err := env.kube.CoreV1().Pods(ns).Get(context.Background(), "pause-worker-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := pod.Spec.Containers[0].Command; len(got) != 1 || got[0] != "/usr/bin/sshd" || len(pod.Spec.InitContainers) != 0 {
		t.Errorf("resumed pod: command %v, init containers %d", got, len(pod.Spec.InitContainers))
	}
}

// TestDebugMode: replicas run the debug command and the job does not end on its own.
func TestDebugMode(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	r := replica("worker", "trainer")
	exits(&r, 0, "1s") // the fake kubelet ends the pod; in debug mode that ends nothing
	job := &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: "debug"}, Spec: batch.GenericJobSpec{
		ReplicaSpecs: []batch.GenericReplicaSpec{r},
		RunMode:      &batch.RunMode{Debug: &batch.DebugMode{Enabled: true}},
	}}
	createJob(t, ns, job)
	waitJob(t, ns, job.Name, "its replica to end", func(j *batch.GenericJob) bool { return j.Status.Aggregate.Succeeded == 1 })
	pod, err := env.kube.CoreV1().Pods(ns).Get(context.Background(), "debug-worker-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := pod.Spec.Containers[0].Command; strings.Join(got, " ") != "sleep inf" {
		t.Errorf("debug command %v, want sleep inf", got)
	}
	if j := getJob(t, ns, job.Name); j.Status.Phase != batch.JobRunning || j.Status.ConditionTrue(batch.JobConditionCompleted) {
		t.Errorf("a debug job ended: phase %s", j.Status.Phase)
	}
}

// TestCleanUpPolicies: when the job ends, All deletes every replica, Unfinished the running
// ones, None none. The pods left are checked once the controller has done all it will do
// after the end (see settled), and must be the very pods the job ran, not replacements.
func TestCleanUpPolicies(t *testing.T) {
	parallel(t)
	for _, tc := range []struct {
		policy batch.CleanUpPolicy
		left   []string
	}{
		{batch.CleanUpAll, nil},
		{batch.CleanUpUnfinished, []string{"cleanup-master-0"}},
		{batch.CleanUpNone, []string{"cleanup-master-0", "cleanup-worker-0"}},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			ns := namespace(t)
			master, worker := replica("master", "m"), replica("worker", "w")
			exits(&master, 0, "1s")
			job := &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: "cleanup"}, Spec: batch.GenericJobSpec{
				ReplicaSpecs:  []batch.GenericReplicaSpec{master, worker},
				SuccessRules:  []batch.ReplicaRule{{"master": {0}}},
				CleanUpPolicy: tc.policy,
			}}
			createJob(t, ns, job)
			uids := map[string]types.UID{}
			waitFor(t, "both pods", jobTimeout, func(ctx context.Context) (bool, error) {
				pods, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
				if err != nil {
					return false, nil
				}
				for _, p := range pods.Items {
					uids[p.Name] = p.UID
				}
				return len(uids) == 2, nil
			})
			waitJob(t, ns, job.Name, "succeeded", inPhase(batch.JobSucceeded))
			settled(t, ns, job.Name)
			pods, err := env.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var left []string
			for _, p := range pods.Items {
				switch {
				case p.DeletionTimestamp != nil:
				case p.UID != uids[p.Name]:
					t.Errorf("pod %s was replaced after the job ended", p.Name)
				default:
					left = append(left, p.Name)
				}
			}
			if strings.Join(left, ",") != strings.Join(tc.left, ",") {
				t.Errorf("pods left after the clean-up: %v, want %v", left, tc.left)
			}
		})
	}
}

// settled returns once the controller has finished every sync of an ended job up to now,
// the one that ended it and its clean-up included. It changes the job's spec harmlessly (a
// failure rule, which an ended job no longer reads) and waits for status.observedGeneration
// to show the change: the controller syncs one job at a time, writes that status only once a
// sync's deletes are done, and decides the clean-up again in that sync.
func settled(t *testing.T, ns, name string) {
	t.Helper()
	job := getJob(t, ns, name)
	if !jobEnded(job) {
		t.Fatalf("%s has not ended: phase %s", name, job.Status.Phase)
	}
	rules, err := json.Marshal(append(job.Spec.FailureRules, batch.ReplicaRule{job.Spec.ReplicaSpecs[0].Type: {0}}))
	if err != nil {
		t.Fatal(err)
	}
	patched, err := env.jobs.BatchV1beta1().GenericJobs(ns).Patch(context.Background(), name, "application/merge-patch+json",
		[]byte(`{"spec":{"failureRules":`+string(rules)+`}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if patched.Generation == job.Generation {
		t.Fatalf("the patch did not change %s's generation (%d)", name, job.Generation)
	}
	settledJob := waitJob(t, ns, name, "observed the spec change", func(j *batch.GenericJob) bool {
		return j.Status.ObservedGeneration >= patched.Generation
	})
	if settledJob.Status.Phase != job.Status.Phase {
		t.Fatalf("%s went from %s to %s after it had ended", name, job.Status.Phase, settledJob.Status.Phase)
	}
}

func jobEnded(j *batch.GenericJob) bool {
	return j.Status.Phase == batch.JobSucceeded || j.Status.Phase == batch.JobFailed
}

// TestDeletingAJobDeletesItsChildren: pods and services are owned by the job.
func TestDeletingAJobDeletesItsChildren(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	job := readGenericJob(t, "generic-tf-config.yaml")
	job.Spec.Service = &batch.ServiceOption{Ports: []batch.ServicePort{{Name: "http", Port: 2222}}}
	createJob(t, ns, job)
	waitJob(t, ns, job.Name, "running", inPhase(batch.JobRunning))
	if err := env.jobs.BatchV1beta1().GenericJobs(ns).Delete(context.Background(), job.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job and its children gone", jobTimeout, func(ctx context.Context) (bool, error) {
		_, err := env.jobs.BatchV1beta1().GenericJobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		services, _ := env.kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		pods, _ := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return apierrors.IsNotFound(err) && len(services.Items) == 0 && len(pods.Items) == 0, nil
	})
}

// TestRepairsChildrenDeletedByHand: a running job's deleted pod and service come back.
func TestRepairsChildrenDeletedByHand(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	r := replica("worker", "trainer")
	job := &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: "repair"}, Spec: batch.GenericJobSpec{
		ReplicaSpecs: []batch.GenericReplicaSpec{r},
		Service:      &batch.ServiceOption{Ports: []batch.ServicePort{{Name: "http", Port: 80}}},
	}}
	createJob(t, ns, job)
	waitJob(t, ns, job.Name, "running", inPhase(batch.JobRunning))
	old, err := env.kube.CoreV1().Pods(ns).Get(context.Background(), "repair-worker-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := env.kube.CoreV1().Pods(ns).Delete(ctx, "repair-worker-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := env.kube.CoreV1().Services(ns).Delete(ctx, "repair-worker-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a new pod and service", jobTimeout, func(ctx context.Context) (bool, error) {
		p, err := env.kube.CoreV1().Pods(ns).Get(ctx, "repair-worker-0", metav1.GetOptions{})
		if err != nil || p.UID == old.UID {
			return false, nil
		}
		_, err = env.kube.CoreV1().Services(ns).Get(ctx, "repair-worker-0", metav1.GetOptions{})
		return err == nil, nil
	})
	if j := getJob(t, ns, job.Name); j.Status.Tasks[0].RestartCount != 0 {
		t.Errorf("a repair counted as a restart: %d", j.Status.Tasks[0].RestartCount)
	}
}

// TestSchedulerSettings: T9k Scheduler's name, queue and priority reach the pods. It runs
// alone, before Kueue starts (kueue_test.go): with --scheduler=kueue the queue is Kueue's.
func TestSchedulerSettings(t *testing.T) {
	ns := namespace(t)
	job := &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: "sched"}, Spec: batch.GenericJobSpec{
		ReplicaSpecs: []batch.GenericReplicaSpec{replica("worker", "trainer")},
		Scheduler:    &batch.SchedulePolicy{T9kScheduler: &batch.T9kScheduler{Queue: "default", Priority: 50}},
	}}
	createJob(t, ns, job)
	var pod *corev1.Pod
	waitFor(t, "the pod", jobTimeout, func(ctx context.Context) (bool, error) {
		var err error
		pod, err = env.kube.CoreV1().Pods(ns).Get(ctx, "sched-worker-0", metav1.GetOptions{})
		return err == nil, nil
	})
	if pod.Spec.SchedulerName != "t9k-scheduler" || pod.Labels[batch.LabelQueue] != "default" || pod.Annotations[batch.AnnotationPriority] != "50" {
		t.Errorf("schedulerName %q, labels %v, annotations %v", pod.Spec.SchedulerName, pod.Labels, pod.Annotations)
	}
}

// TestMetrics: the controller serves its metrics.
func TestMetrics(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	createJob(t, ns, &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: "metrics"}, Spec: batch.GenericJobSpec{
		ReplicaSpecs: []batch.GenericReplicaSpec{replica("worker", "trainer")}}})
	waitJob(t, ns, "metrics", "running", inPhase(batch.JobRunning))
	page := controllerMetrics(t)
	// The first status write may find the pods running already (kwok starts them within the
	// status batch): the transition into Running is counted from None or from Pending.
	into := 0.0
	for _, s := range page.Samples("t9k_job_phase_transitions_total") {
		if l := s.Labels; l["kind"] == "GenericJob" && l["to"] == "Running" && (l["from"] == "None" || l["from"] == "Pending") {
			into += s.Value
		}
	}
	if into < 1 {
		t.Errorf("/metrics counts no transition of a GenericJob into Running")
	}
	for _, want := range []string{
		`t9k_jobs{kind="GenericJob",phase=`,
		`t9k_job_sync_duration_seconds_bucket{kind="GenericJob"`,
		`t9k_job_children_created_total{kind="GenericJob",resource="pods"}`,
		`t9k_api_requests_total{code="201",resource="pods",verb="create"}`,
		`workqueue_adds_total{name="GenericJob"}`,
		`rest_client_requests_total{code="200"`,
	} {
		if !page.Has(want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
