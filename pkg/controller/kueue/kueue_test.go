package kueue

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	kueue "github.com/t9k-jobs/t9k-jobs/pkg/apis/kueue/v1beta2"
	kueuefake "github.com/t9k-jobs/t9k-jobs/pkg/client/kueue/clientset/versioned/fake"
	kueueinformers "github.com/t9k-jobs/t9k-jobs/pkg/client/kueue/informers/externalversions"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/enginetest"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/metrics"
)

// queueTest is a controller of one GenericJob of two replica types (2 workers, 1 ps) with a
// fake Kueue.
type queueTest struct {
	*enginetest.Admission
	admitter *Admitter
	// adapter is the job's adapter, whose plan a test may change.
	adapter *planOverride
	kueue   *kueuefake.Clientset
	// cluster is the informer factory of the cluster-wide Kueue objects (flavors, classes).
	cluster kueueinformers.SharedInformerFactory
}

func cpuTemplate(int32) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "main", Image: "trainer",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
	}}}}
}

// newQueueTest makes the controller; withKueue false is a cluster where Kueue's API is not
// served. config's ForT9kScheduler is the operator's choice; clusterObjs are ResourceFlavors
// and WorkloadPriorityClasses.
func newQueueTest(t *testing.T, job *batch.GenericJob, withKueue bool, config Config, clusterObjs ...metav1.Object) *queueTest {
	t.Helper()
	s := &queueTest{Admission: enginetest.NewAdmission(t, job, now, func(j *batch.GenericJob) (*engine.Plan, error) {
		p := &engine.Plan{Groups: []engine.Group{
			{Type: "worker", Replicas: 2, Restart: batch.RestartOnFailure, Template: cpuTemplate},
			{Type: "ps", Replicas: 1, Restart: batch.RestartNever, Template: cpuTemplate},
		}, Judge: allSucceed}
		p.SetRunMode(j.Spec.RunMode, j.Spec.Scheduler)
		return p, nil
	})}
	s.adapter = &planOverride{Adapter: s.Adapter()}
	config.Recorder = s.Events
	if withKueue {
		s.kueue = kueuefake.NewSimpleClientset()
		config.Client = s.kueue
		config.Workloads = kueueinformers.NewSharedInformerFactory(s.kueue, 0)
		config.Cluster = kueueinformers.NewSharedInformerFactory(s.kueue, 0)
		s.cluster = config.Cluster
		for _, o := range clusterObjs {
			var err error
			switch o := o.(type) {
			case *kueue.ResourceFlavor:
				err = config.Cluster.Kueue().V1beta2().ResourceFlavors().Informer().GetIndexer().Add(o)
			case *kueue.WorkloadPriorityClass:
				err = config.Cluster.Kueue().V1beta2().WorkloadPriorityClasses().Informer().GetIndexer().Add(o)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		s.Shows = append(s.Shows, func(*testing.T) (engine.ObjectKind, []metav1.Object) {
			wls, _ := s.kueue.KueueV1beta2().Workloads("ns").List(context.Background(), metav1.ListOptions{})
			var objs []metav1.Object
			for i := range wls.Items {
				trimmed, _ := TrimWorkload(&wls.Items[i]) // as the controller's cache keeps it
				objs = append(objs, trimmed.(metav1.Object))
			}
			return WorkloadKind, objs
		})
	}
	s.admitter = New(config)
	s.Start(t, s.adapter, s.admitter)
	return s
}

func (s *queueTest) workload(t *testing.T) *kueue.Workload {
	t.Helper()
	wl, err := s.kueue.KueueV1beta2().Workloads("ns").Get(context.Background(), "genericjob-job", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the job's Workload: %v", err)
	}
	return wl
}

// kueueDecides sets the Workload's status as Kueue would.
func (s *queueTest) kueueDecides(t *testing.T, change func(*kueue.Workload)) {
	t.Helper()
	wl := s.workload(t)
	change(wl)
	if _, err := s.kueue.KueueV1beta2().Workloads("ns").UpdateStatus(context.Background(), wl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Refresh(t)
}

func admit(wl *kueue.Workload) {
	wl.Status.Admission = &kueue.Admission{ClusterQueue: "cq", PodSetAssignments: []kueue.PodSetAssignment{
		{Name: "worker", Flavors: map[corev1.ResourceName]string{corev1.ResourceCPU: "gpu-nodes"}},
		{Name: "ps", Flavors: map[corev1.ResourceName]string{corev1.ResourceCPU: "cpu-nodes"}},
	}}
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "QuotaReserved"})
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted"})
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionFalse, Reason: "QuotaReserved"})
}

// admittedJob is a queued job that Kueue admitted, its pods created.
func admittedJob(t *testing.T) *queueTest {
	t.Helper()
	s := newQueueTest(t, queuedJob(map[string]string{kueue.LabelQueueName: "team-a"}), true, Config{}, flavors...)
	s.Step(t)
	s.kueueDecides(t, admit)
	s.Step(t)
	return s
}

func queuedJob(labels map[string]string) *batch.GenericJob {
	job := testJob(batch.JobStatus{})
	job.Labels = labels
	return job
}

var flavors = []metav1.Object{
	&kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "gpu-nodes"}, Spec: kueue.ResourceFlavorSpec{
		NodeLabels:  map[string]string{"pool": "gpu"},
		Tolerations: []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
	}},
	&kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "cpu-nodes"}, Spec: kueue.ResourceFlavorSpec{NodeLabels: map[string]string{"pool": "cpu"}}},
}

// A job in a queue creates its Workload (a pod set per replica type) and nothing else until
// Kueue admits it; then all its pods at once, on the nodes of the flavors assigned.
func TestQueuedJobWaitsForAdmission(t *testing.T) {
	s := newQueueTest(t, queuedJob(map[string]string{kueue.LabelQueueName: "team-a"}), true, Config{}, flavors...)
	s.Step(t)
	if pods := s.Pods(t); len(pods) != 0 {
		t.Fatalf("a queued job created %d pods before its admission", len(pods))
	}
	wl := s.workload(t)
	if wl.Spec.QueueName != "team-a" || len(wl.Spec.PodSets) != 2 ||
		wl.Spec.PodSets[0].Name != "worker" || wl.Spec.PodSets[0].Count != 2 || wl.Spec.PodSets[1].Name != "ps" || wl.Spec.PodSets[1].Count != 1 {
		t.Fatalf("workload spec %+v: want queue team-a, pod sets worker x2 and ps x1", wl.Spec)
	}
	if got := wl.Spec.PodSets[0].Template.Spec.Containers[0].Resources.Requests.Cpu().String(); got != "1" {
		t.Errorf("the worker pod set asks for %s CPU, want the template's 1", got)
	}
	if ref := metav1.GetControllerOf(wl); ref == nil || ref.UID != "job-uid" {
		t.Errorf("the Workload is not controlled by its job: %v", wl.OwnerReferences)
	}

	s.kueueDecides(t, func(wl *kueue.Workload) {
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionFalse, Reason: "Pending",
			Message: "couldn't assign flavors to pod set worker: insufficient unused quota for cpu in flavor gpu-nodes, 2 more needed"})
	})
	s.Step(t)
	job := s.Job(t)
	running := job.Status.Condition(batch.JobConditionRunning)
	if job.Status.Phase != batch.JobPending || running.Reason != "Queued" ||
		!strings.Contains(running.Message, `LocalQueue "team-a"`) || !strings.Contains(running.Message, "insufficient unused quota") {
		t.Fatalf("queued job: phase %s, Running %+v: want Pending, Queued, naming the queue and Kueue's reason", job.Status.Phase, running)
	}
	if len(s.Pods(t)) != 0 {
		t.Fatal("pods were created for a job Kueue has not admitted")
	}
	if c := job.Status.Condition(batch.JobConditionReplicaFailure); c.Status != corev1.ConditionFalse || c.Message != "No replica has failed." {
		t.Errorf("ReplicaFailure of a job with no pod: %+v, want False, \"No replica has failed.\" (it has no news of pods)", c)
	}

	s.kueueDecides(t, admit)
	s.Step(t)
	pods := s.Pods(t)
	if len(pods) != 3 {
		t.Fatalf("%d pods once admitted, want all 3", len(pods))
	}
	if events := drain(s.Events); !strings.Contains(events, "Normal Admitted Kueue admitted the job to ClusterQueue cq") {
		t.Errorf("no Admitted event naming the ClusterQueue; events:\n%s", events)
	}
	for _, p := range pods {
		want := "gpu"
		if p.Labels[batch.LabelReplicaType] == "ps" {
			want = "cpu"
		}
		if p.Spec.NodeSelector["pool"] != want {
			t.Errorf("pod %s: node selector %v, want the flavor's pool=%s", p.Name, p.Spec.NodeSelector, want)
		}
		if want == "gpu" && (len(p.Spec.Tolerations) != 1 || p.Spec.Tolerations[0].Key != "gpu") {
			t.Errorf("pod %s: tolerations %v, want the flavor's", p.Name, p.Spec.Tolerations)
		}
		if p.Spec.SchedulerName != "" {
			t.Errorf("pod %s: scheduler %q, want the default", p.Name, p.Spec.SchedulerName)
		}
	}
}

// runAll makes every pod of the job run, as the kubelet would report it.
func (s *queueTest) runAll(t *testing.T) {
	t.Helper()
	for _, p := range s.Pods(t) {
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "main", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
		if _, err := s.Kube.CoreV1().Pods("ns").UpdateStatus(context.Background(), &p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s.Refresh(t)
}

// An admitted job tells Kueue when every pod runs (PodsReady). Evicted, its pods go and the
// job waits again, restarts untouched; once they are gone the admission is handed back.
func TestEvictedJobStopsAndRequeues(t *testing.T) {
	s := admittedJob(t)
	s.runAll(t)
	s.Step(t)
	if job := s.Job(t); job.Status.Phase != batch.JobRunning {
		t.Fatalf("phase %s with every pod running, want Running", job.Status.Phase)
	}
	if c := meta.FindStatusCondition(s.workload(t).Status.Conditions, kueue.WorkloadPodsReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("PodsReady %+v once every pod runs, want True", c)
	}

	evictionsBefore := testutil.ToFloat64(metrics.QueueEvictions.WithLabelValues("GenericJob", "Preempted"))
	s.kueueDecides(t, func(wl *kueue.Workload) {
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: "Preempted",
			Message: "Preempted to accommodate a workload (UID: x) due to prioritization in the ClusterQueue"})
	})
	s.Step(t)
	job := s.Job(t)
	running := job.Status.Condition(batch.JobConditionRunning)
	if job.Status.Phase != batch.JobPending || running.Reason != "Preempted" || !strings.Contains(running.Message, "prioritization") {
		t.Fatalf("evicted job: phase %s, Running %+v: want Pending, Preempted, with Kueue's message", job.Status.Phase, running)
	}
	if len(s.Pods(t)) != 0 {
		t.Fatalf("%d pods left after the eviction", len(s.Pods(t)))
	}
	for _, task := range job.Status.Tasks {
		if task.RestartCount != 0 {
			t.Errorf("type %s counts %d restarts after an eviction, want 0", task.Type, task.RestartCount)
		}
	}
	if !strings.Contains(drain(s.Events), "Warning Preempted") {
		t.Error("no Preempted event")
	}
	if n := testutil.ToFloat64(metrics.QueueEvictions.WithLabelValues("GenericJob", "Preempted")); n != evictionsBefore+1 {
		t.Errorf("t9k_job_queue_evictions_total{reason=Preempted} moved by %v, want 1", n-evictionsBefore)
	}

	s.Step(t) // the pods are gone: the admission goes back
	wl := s.workload(t)
	if wl.Status.Admission != nil || meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) ||
		meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted) || !meta.IsStatusConditionTrue(wl.Status.Conditions, "Requeued") {
		t.Fatalf("after the pods went the Workload still holds its admission: %+v", wl.Status)
	}
	if c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPodsReady); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("PodsReady %+v after the eviction, want False", c)
	}

	s.kueueDecides(t, admit)
	s.Step(t)
	if n := len(s.Pods(t)); n != 3 {
		t.Fatalf("%d pods after the job was admitted again, want 3", n)
	}
}

// The Workload carries its job's UID as Kueue's integrations label theirs, which Kueue writes
// into the message of the workloads it preempts for it; a job preempted by a job of the
// controller's kinds names it.
func TestPreemptedJobNamesThePreemptor(t *testing.T) {
	s := admittedJob(t)
	if uid := s.workload(t).Labels[kueue.LabelJobUID]; uid != "job-uid" {
		t.Fatalf("the Workload's %s label is %q, want the job's UID", kueue.LabelJobUID, uid)
	}
	high := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: "mpijob-high", Namespace: "ns", UID: "high-wl-uid",
		Labels:          map[string]string{batch.LabelJobName: "high", batch.LabelControllerUID: "high-uid", kueue.LabelJobUID: "high-uid"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: batch.SchemeGroupVersion.String(), Kind: "MPIJob", Name: "high", UID: "high-uid", Controller: ptr.To(true)}},
	}}
	if _, err := s.kueue.KueueV1beta2().Workloads("ns").Create(context.Background(), high, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.kueueDecides(t, func(wl *kueue.Workload) {
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: "Preempted",
			Message: "Preempted to accommodate a workload (UID: high-wl-uid, JobUID: high-uid) due to prioritization in the ClusterQueue; preemptor path: /cq; preemptee path: /cq"})
	})
	s.Step(t)
	running := s.Job(t).Status.Condition(batch.JobConditionRunning)
	for _, want := range []string{"JobUID: high-uid", "MPIJob ns/high took its place."} {
		if running.Reason != reasonPreempted || !strings.Contains(running.Message, want) {
			t.Errorf("Running %+v: want Preempted, saying %q", running, want)
		}
	}
}

// A job that ends marks its Workload Finished, which releases its quota.
func TestFinishedJobFinishesItsWorkload(t *testing.T) {
	s := admittedJob(t)
	for _, p := range s.Pods(t) {
		p.Status = corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{Name: "main",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, FinishedAt: metav1.NewTime(now)}}}}}
		if _, err := s.Kube.CoreV1().Pods("ns").UpdateStatus(context.Background(), &p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s.Refresh(t)
	s.Step(t)
	if job := s.Job(t); job.Status.Phase != batch.JobSucceeded {
		t.Fatalf("phase %s, want Succeeded", job.Status.Phase)
	}
	c := meta.FindStatusCondition(s.workload(t).Status.Conditions, kueue.WorkloadFinished)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "Succeeded" {
		t.Fatalf("Finished %+v, want True, Succeeded", c)
	}
}

// endPod sets a pod's phase to an end, as the kubelet would report it.
func (s *queueTest) endPod(t *testing.T, name string, phase corev1.PodPhase) {
	t.Helper()
	p, err := s.Kube.CoreV1().Pods("ns").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	code := int32(0)
	if phase == corev1.PodFailed {
		code = 1
	}
	p.Status = corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: "main",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, FinishedAt: metav1.NewTime(now)}}}}}
	if _, err := s.Kube.CoreV1().Pods("ns").UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Refresh(t)
}

// A job that ends while some of its pods still run (its clean-up policy keeps them: an
// MPIJob's sshd workers with cleanUpWorkers false) keeps its quota until none runs: Kueue
// must never count less than what runs. A pod that ended holds nothing; nor does one gone.
func TestFinishedJobKeepsQuotaWhilePodsRun(t *testing.T) {
	s := admittedJob(t)
	s.adapter.override(func() *engine.Plan {
		// The ps ends the job, as a launcher does; the workers run on.
		return &engine.Plan{Groups: []engine.Group{
			{Type: "worker", Replicas: 2, Restart: batch.RestartOnFailure, Template: cpuTemplate},
			{Type: "ps", Replicas: 1, Restart: batch.RestartNever, Template: cpuTemplate},
		}, CleanUp: batch.CleanUpNone, Judge: func(rs engine.Replicas) *engine.Outcome {
			if rs["ps"][0].Final {
				return &engine.Outcome{Succeeded: true, Message: "ps done"}
			}
			return nil
		}}
	})
	s.runAll(t)
	s.Step(t)
	drain(s.Events)
	s.endPod(t, "job-ps-0", corev1.PodSucceeded)
	s.Step(t)
	if job := s.Job(t); job.Status.Phase != batch.JobSucceeded {
		t.Fatalf("phase %s, want Succeeded", job.Status.Phase)
	}
	finished := func() bool {
		return meta.IsStatusConditionTrue(s.workload(t).Status.Conditions, kueue.WorkloadFinished)
	}
	if finished() {
		t.Fatal("the Workload is Finished while 2 workers still run: Kueue would count their quota free")
	}
	want := "Normal QuotaKept Kueue keeps the quota of the 2 replicas of the job that still run (job-worker-0, job-worker-1)"
	if events := drain(s.Events); !strings.Contains(events, want) {
		t.Errorf("no event saying the quota is kept; want %q in:\n%s", want, events)
	}
	reclaimable := func(want ...kueue.ReclaimablePod) {
		t.Helper()
		if got := s.workload(t).Status.ReclaimablePods; !slices.Equal(got, want) {
			t.Errorf("reclaimablePods %+v, want %+v", got, want)
		}
	}
	// The ps ended: its quota goes back at once; the workers' stays.
	reclaimable(kueue.ReclaimablePod{Name: "ps", Count: 1})
	if err := s.Kube.CoreV1().Pods("ns").Delete(context.Background(), "job-worker-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Refresh(t)
	s.Step(t)
	if finished() {
		t.Fatal("the Workload is Finished while a worker still runs")
	}
	reclaimable(kueue.ReclaimablePod{Name: "worker", Count: 1}, kueue.ReclaimablePod{Name: "ps", Count: 1})
	if events := drain(s.Events); strings.Contains(events, "QuotaKept") {
		t.Errorf("the QuotaKept event again on a later sync:\n%s", events)
	}
	s.endPod(t, "job-worker-1", corev1.PodFailed)
	s.Step(t)
	if !finished() {
		t.Fatalf("the Workload is not Finished once no pod runs: %+v", s.workload(t).Status.Conditions)
	}
	// Finished releases all: the counts are left as they were.
	reclaimable(kueue.ReclaimablePod{Name: "worker", Count: 1}, kueue.ReclaimablePod{Name: "ps", Count: 1})
	if n := len(s.Pods(t)); n != 2 {
		t.Errorf("%d pods, want the ps and the worker that ended, kept by the clean-up policy", n)
	}
}

// Without Kueue's API a job that asks for a queue waits, saying so; nothing is created.
func TestQueuedJobWithoutKueueWaits(t *testing.T) {
	s := newQueueTest(t, queuedJob(map[string]string{kueue.LabelQueueName: "team-a"}), false, Config{})
	s.Step(t)
	job := s.Job(t)
	running := job.Status.Condition(batch.JobConditionRunning)
	if running.Reason != reasonKueueNotInstalled || !strings.Contains(running.Message, "team-a") || len(s.Pods(t)) != 0 {
		t.Fatalf("Running %+v and %d pods: want KueueNotInstalled naming the queue, and no pod", running, len(s.Pods(t)))
	}
	if !strings.Contains(drain(s.Events), "Warning KueueNotInstalled") {
		t.Error("no KueueNotInstalled event")
	}
	if s.St.Watches(WorkloadKind) || s.admitter.installed() {
		t.Error("Kueue's API is not served, yet the controller watches it")
	}
}

// With --scheduler=kueue, spec.scheduler.t9kScheduler names the LocalQueue and gives the
// priority; the pods keep the default scheduler. A WorkloadPriorityClass named by the label
// wins over the priority.
func TestT9kSchedulerAsKueue(t *testing.T) {
	job := queuedJob(nil)
	job.Spec.Scheduler = &batch.SchedulePolicy{T9kScheduler: &batch.T9kScheduler{Queue: "default", Priority: 50}}
	s := newQueueTest(t, job, true, Config{ForT9kScheduler: true}, flavors...)
	s.Step(t)
	wl := s.workload(t)
	if wl.Spec.QueueName != "default" || wl.Spec.Priority == nil || *wl.Spec.Priority != 50 {
		t.Fatalf("workload queue %q priority %v, want default and 50", wl.Spec.QueueName, wl.Spec.Priority)
	}
	s.kueueDecides(t, admit)
	s.Step(t)
	for _, p := range s.Pods(t) {
		if p.Spec.SchedulerName != "" || p.Labels[batch.LabelQueue] != "" {
			t.Errorf("pod %s asks for T9k Scheduler (%q, labels %v) though Kueue queues the job", p.Name, p.Spec.SchedulerName, p.Labels)
		}
	}

	job = queuedJob(map[string]string{kueue.LabelPriorityClass: "urgent"})
	job.Spec.Scheduler = &batch.SchedulePolicy{T9kScheduler: &batch.T9kScheduler{Queue: "default", Priority: 50}}
	s = newQueueTest(t, job, true, Config{ForT9kScheduler: true},
		&kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "urgent"}, Value: 1000})
	s.Step(t)
	wl = s.workload(t)
	if wl.Spec.Priority == nil || *wl.Spec.Priority != 1000 || wl.Spec.PriorityClassRef == nil || wl.Spec.PriorityClassRef.Name != "urgent" {
		t.Fatalf("workload priority %v class %+v, want 1000 from WorkloadPriorityClass urgent", wl.Spec.Priority, wl.Spec.PriorityClassRef)
	}
}

// A priority class that does not exist keeps the job waiting, saying which, with no timer:
// the class's creation syncs the job, which then makes its Workload.
func TestMissingPriorityClassWaits(t *testing.T) {
	s := newQueueTest(t, queuedJob(map[string]string{kueue.LabelQueueName: "team-a", kueue.LabelPriorityClass: "nope"}), true, Config{})
	if wait := s.Sync(t); wait != 0 {
		t.Fatalf("sync returned %s: want no timer, the class's creation syncs the job", wait)
	}
	s.Refresh(t)
	running := s.Job(t).Status.Condition(batch.JobConditionRunning)
	if !strings.Contains(running.Message, `WorkloadPriorityClass "nope"`) {
		t.Fatalf("Running %+v: want the missing class named", running)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.cluster.Start(ctx.Done())
	s.cluster.WaitForCacheSync(ctx.Done())
	class := &kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "nope"}, Value: 7}
	if err := s.kueue.Tracker().Add(class); err != nil { // the client only reads classes
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return s.St.Queue().Len() > 0, nil
	})
	if err != nil {
		t.Fatal("the job was not synced when the class it waits for was created")
	}
	if key, _ := s.St.Queue().Get(); key != s.Key {
		t.Fatalf("synced %q, want the job %q", key, s.Key)
	}
	s.Step(t)
	if wl := s.workload(t); wl.Spec.Priority == nil || *wl.Spec.Priority != 7 {
		t.Fatalf("Workload priority %v, want the class's 7", wl.Spec.Priority)
	}
}

// A paused job hands its quota back once its pods are gone: its Workload goes then, and
// comes back on resume.
func TestPausedQueuedJobDeletesItsWorkload(t *testing.T) {
	s := admittedJob(t)
	s.runAll(t)
	s.editSpec(t, func(job *batch.GenericJob) { job.Spec.RunMode = &batch.RunMode{Pause: &batch.PauseMode{Enabled: true}} })
	s.Step(t) // deletes the pods
	if len(s.Pods(t)) != 0 {
		t.Fatalf("%d pods left by the pause", len(s.Pods(t)))
	}
	s.workload(t) // kept while the pods ran: their quota was in use
	s.Step(t)
	if wls, _ := s.kueue.KueueV1beta2().Workloads("ns").List(context.Background(), metav1.ListOptions{}); len(wls.Items) != 0 {
		t.Fatalf("a paused job whose pods are gone keeps its Workload (and its quota)")
	}
	if got := s.Job(t).Status.Phase; got != batch.JobPaused {
		t.Fatalf("phase %s, want Paused", got)
	}

	s.editSpec(t, func(job *batch.GenericJob) { job.Spec.RunMode = nil })
	s.Step(t)
	if wl := s.workload(t); len(wl.Spec.PodSets) != 2 || len(s.Pods(t)) != 0 {
		t.Fatalf("resumed: Workload %+v and %d pods, want a new Workload and no pod before its admission", wl.Spec, len(s.Pods(t)))
	}
}

// A running job whose replicas change stops, and is queued anew with a Workload that holds
// the new replicas, once its pods are gone.
func TestChangedQueuedJobIsQueuedAnew(t *testing.T) {
	s := admittedJob(t)
	s.runAll(t)
	s.Step(t) // Running
	s.adapter.override(func() *engine.Plan {
		return &engine.Plan{Groups: []engine.Group{{Type: "worker", Replicas: 4, Restart: batch.RestartOnFailure, Template: cpuTemplate}}, Judge: allSucceed}
	})
	s.Step(t)
	running := s.Job(t).Status.Condition(batch.JobConditionRunning)
	if running.Reason != "Queued" || len(s.Pods(t)) != 0 {
		t.Fatalf("Running %+v and %d pods: want the job stopped and queued", running, len(s.Pods(t)))
	}
	if want := "The job's replicas changed (worker: 2 to 4; ps: removed): it is queued anew"; !strings.HasPrefix(running.Message, want) {
		t.Errorf("Running message %q, want it to start %q", running.Message, want)
	}
	if wl := s.workload(t); len(wl.Spec.PodSets) != 2 {
		t.Fatalf("the old Workload went before the pods were gone: %+v", wl.Spec)
	}
	// The pods are gone: the old Workload goes, and the new one is made.
	var wl *kueue.Workload
	for range 4 {
		s.Step(t)
		if wl, _ = s.kueue.KueueV1beta2().Workloads("ns").Get(context.Background(), "genericjob-job", metav1.GetOptions{}); wl != nil && len(wl.Spec.PodSets) == 1 {
			break
		}
	}
	if wl == nil || len(wl.Spec.PodSets) != 1 || wl.Spec.PodSets[0].Count != 4 || wl.Status.Admission != nil {
		t.Fatalf("new Workload %+v, want one pod set of 4, not admitted", wl)
	}
	if len(s.Pods(t)) != 0 {
		t.Fatal("pods of a job waiting for its new admission")
	}
}

// A job re-queued for a change says what changed: its LocalQueue, or its pod templates.
func TestRequeuedJobSaysWhatChanged(t *testing.T) {
	s := admittedJob(t)
	s.runAll(t)
	s.Step(t)
	s.editSpec(t, func(job *batch.GenericJob) { job.Labels[kueue.LabelQueueName] = "team-b" })
	s.Step(t)
	running := s.Job(t).Status.Condition(batch.JobConditionRunning)
	if want := `The job's LocalQueue changed from "team-a" to "team-b": it is queued anew`; running.Reason != "Queued" || !strings.HasPrefix(running.Message, want) {
		t.Fatalf("Running %+v: want Queued, starting %q", running, want)
	}

	s = admittedJob(t)
	s.adapter.override(func() *engine.Plan {
		other := func(rank int32) corev1.PodTemplateSpec {
			tmpl := cpuTemplate(rank)
			tmpl.Spec.Containers[0].Image = "trainer:2"
			return tmpl
		}
		return &engine.Plan{Groups: []engine.Group{
			{Type: "worker", Replicas: 2, Restart: batch.RestartOnFailure, Template: other},
			{Type: "ps", Replicas: 1, Restart: batch.RestartNever, Template: cpuTemplate},
		}, Judge: allSucceed}
	})
	s.Step(t)
	running = s.Job(t).Status.Condition(batch.JobConditionRunning)
	if want := "The job's pod templates changed: it is queued anew"; !strings.HasPrefix(running.Message, want) {
		t.Fatalf("Running %+v: want it to start %q", running, want)
	}
}

// editSpec changes the job as a user would.
func (s *queueTest) editSpec(t *testing.T, edit func(*batch.GenericJob)) {
	t.Helper()
	job := s.Job(t)
	edit(job)
	if _, err := s.Jobs.BatchV1beta1().GenericJobs("ns").Update(context.Background(), job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Refresh(t)
}

// More replica types than the cluster's Workloads have pod sets: the job fails, saying the
// limit and the Kueue versions that have it; up to the limit, it queues.
func TestTooManyTypesForKueueFails(t *testing.T) {
	for _, c := range []struct {
		limit, types int
		want         string
	}{
		{0, 19, "at most 18 replica types (Kueue v0.19 and later take 18 pod sets), and this job has 19"},
		{8, 9, "at most 8 replica types (Kueue before v0.19 takes 8 pod sets), and this job has 9"},
		{0, 18, ""},
	} {
		t.Run(fmt.Sprintf("limit %d, %d types", c.limit, c.types), func(t *testing.T) {
			s := newQueueTest(t, queuedJob(map[string]string{kueue.LabelQueueName: "team-a"}), true, Config{MaxPodSets: c.limit})
			s.adapter.override(func() *engine.Plan {
				p := &engine.Plan{}
				for j := range c.types {
					p.Groups = append(p.Groups, engine.Group{Type: fmt.Sprintf("type%d", j), Replicas: 1, Template: cpuTemplate})
				}
				return p
			})
			s.Step(t)
			job := s.Job(t)
			failed := job.Status.Condition(batch.JobConditionFailed)
			if c.want == "" {
				if job.Status.Phase == batch.JobFailed || len(s.workload(t).Spec.PodSets) != c.types {
					t.Fatalf("phase %s, Failed %+v: want the job queued with %d pod sets", job.Status.Phase, failed, c.types)
				}
				return
			}
			if job.Status.Phase != batch.JobFailed || !strings.Contains(failed.Message, c.want) {
				t.Fatalf("phase %s, Failed %+v: want Failed saying %q", job.Status.Phase, failed, c.want)
			}
		})
	}
}

// planOverride is an adapter whose plan a test may give: plan, or the error err.
type planOverride struct {
	engine.Adapter
	plan func() *engine.Plan
	err  error
}

func (p *planOverride) override(plan func() *engine.Plan) { p.plan = plan }

func (p *planOverride) Plan(job engine.Job) (*engine.Plan, error) {
	switch {
	case p.err != nil:
		return nil, p.err
	case p.plan != nil:
		return p.plan(), nil
	}
	return p.Adapter.Plan(job)
}

func drain(r *record.FakeRecorder) string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return strings.Join(out, "\n")
		}
	}
}

// A queued job that fails as written (its spec edited into one that cannot run) gives its
// quota back: its Workload is marked Finished once its pods, which the failure deletes, are
// gone.
func TestInvalidJobFinishesItsWorkload(t *testing.T) {
	s := admittedJob(t)
	s.adapter.err = fmt.Errorf("spec.replicaSpecs[0]: cannot run")
	s.Step(t)
	if job := s.Job(t); job.Status.Phase != batch.JobFailed {
		t.Fatalf("phase %s, want Failed", job.Status.Phase)
	}
	if meta.IsStatusConditionTrue(s.workload(t).Status.Conditions, kueue.WorkloadFinished) {
		t.Fatal("the Workload is Finished while the failed job's pods are still going")
	}
	s.Step(t) // the pods are gone
	c := meta.FindStatusCondition(s.workload(t).Status.Conditions, kueue.WorkloadFinished)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "Failed" || !strings.Contains(c.Message, "cannot run") {
		t.Fatalf("Finished %+v, want True, Failed, with the job's message", c)
	}
}

// The priority class's value is taken when the Workload is made: the class deleted later
// leaves the Workload, and the job running, as they are.
func TestPriorityClassIsReadOnce(t *testing.T) {
	class := &kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "urgent"}, Value: 1000}
	s := newQueueTest(t, queuedJob(map[string]string{kueue.LabelQueueName: "team-a", kueue.LabelPriorityClass: "urgent"}), true, Config{},
		append([]metav1.Object{class}, flavors...)...)
	s.Step(t)
	s.kueueDecides(t, admit)
	s.Step(t)
	if err := s.cluster.Kueue().V1beta2().WorkloadPriorityClasses().Informer().GetIndexer().Delete(class); err != nil {
		t.Fatal(err)
	}
	s.Step(t)
	for _, a := range s.kueue.Actions() {
		if a.GetVerb() == "delete" {
			t.Fatalf("the Workload was deleted once its priority class was: %v", a)
		}
	}
	if wl := s.workload(t); *wl.Spec.Priority != 1000 {
		t.Fatalf("the Workload's priority is %d once its class was deleted, want 1000 still", *wl.Spec.Priority)
	}
	if n := len(s.Pods(t)); n != 3 {
		t.Fatalf("%d pods once the class was deleted, want the 3 the job had", n)
	}
}

// PodsReady follows the pods' readiness, as Kueue's waitForPodsReady counts it: a job that
// loses a replica waits for its recovery, and recovers; once it is no longer admitted, its
// next start is a start again.
func TestPodsReadyFollowsReadiness(t *testing.T) {
	s := admittedJob(t)
	podsReady := func() metav1.Condition {
		t.Helper()
		c := meta.FindStatusCondition(s.workload(t).Status.Conditions, kueue.WorkloadPodsReady)
		if c == nil {
			t.Fatal("no PodsReady condition")
		}
		return *c
	}
	if c := podsReady(); c.Status != metav1.ConditionFalse || c.Reason != "WaitForStart" {
		t.Fatalf("PodsReady %+v before the pods run, want False WaitForStart", c)
	}
	s.runAll(t)
	s.Step(t)
	if c := podsReady(); c.Status != metav1.ConditionTrue || c.Reason != "Started" {
		t.Fatalf("PodsReady %+v with every pod ready, want True Started", c)
	}
	worker := s.Pods(t)[0]
	worker.Status.Conditions[0].Status = corev1.ConditionFalse // running, no longer ready
	if _, err := s.Kube.CoreV1().Pods("ns").UpdateStatus(context.Background(), &worker, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Refresh(t)
	s.Step(t)
	if c := podsReady(); c.Status != metav1.ConditionFalse || c.Reason != "WaitForRecovery" {
		t.Fatalf("PodsReady %+v with a pod not ready, want False WaitForRecovery", c)
	}
	s.runAll(t)
	s.Step(t)
	if c := podsReady(); c.Status != metav1.ConditionTrue || c.Reason != "Recovered" {
		t.Fatalf("PodsReady %+v once ready again, want True Recovered", c)
	}
	s.kueueDecides(t, func(wl *kueue.Workload) {
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: "Preempted", Message: "preempted"})
	})
	s.Step(t)
	s.Step(t)
	if c := podsReady(); c.Status != metav1.ConditionFalse || c.Reason != "WaitForStart" {
		t.Fatalf("PodsReady %+v after the eviction, want False WaitForStart", c)
	}
}

// Changing the priority-class label of a job whose Workload exists changes the Workload's
// priority in place, as Kueue's integrations do: the running job keeps its pods.
func TestPriorityClassLabelChangesThePriority(t *testing.T) {
	low := &kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "low"}, Value: 10}
	high := &kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}
	s := newQueueTest(t, queuedJob(map[string]string{kueue.LabelQueueName: "team-a", kueue.LabelPriorityClass: "low"}), true, Config{},
		append([]metav1.Object{low, high}, flavors...)...)
	s.Step(t)
	s.kueueDecides(t, admit)
	s.Step(t)
	s.editSpec(t, func(job *batch.GenericJob) { job.Labels[kueue.LabelPriorityClass] = "high" })
	s.Step(t)
	wl := s.workload(t)
	if wl.Spec.Priority == nil || *wl.Spec.Priority != 1000 || wl.Spec.PriorityClassRef == nil || wl.Spec.PriorityClassRef.Name != "high" {
		t.Fatalf("Workload priority %v class %+v after the label changed, want 1000 from high", wl.Spec.Priority, wl.Spec.PriorityClassRef)
	}
	for _, a := range s.kueue.Actions() {
		if a.GetVerb() == "delete" {
			t.Fatalf("the Workload was replaced for a priority change: %v", a)
		}
	}
	if n := len(s.Pods(t)); n != 3 {
		t.Fatalf("%d pods after the priority changed, want the job's 3", n)
	}
	if events := drain(s.Events); !strings.Contains(events, "PriorityChanged") {
		t.Errorf("no PriorityChanged event; events:\n%s", events)
	}
}

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func testJob(status batch.JobStatus) *batch.GenericJob {
	return &batch.GenericJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: batch.SchemeGroupVersion.String(), Kind: "GenericJob"},
		ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns", UID: "job-uid", Generation: 1},
		Status:     status,
	}
}

// allSucceed is the outcome: success once every replica has succeeded, failure once any has
// failed for good.
func allSucceed(rs engine.Replicas) *engine.Outcome {
	done := true
	for _, list := range rs {
		for _, r := range list {
			if r.Final && r.Phase == batch.ReplicaFailed {
				return &engine.Outcome{Message: "failed"}
			}
			done = done && r.Final && r.Phase == batch.ReplicaSucceeded
		}
	}
	if done {
		return &engine.Outcome{Succeeded: true, Message: "succeeded"}
	}
	return nil
}

// Every create, update and patch the controller sends names it as the field manager: pods,
// Services, the Workload and its status, the job's status.
func TestEveryWriteNamesTheFieldManager(t *testing.T) {
	s := admittedJob(t)
	s.runAll(t)
	s.Step(t)
	var actions []k8stesting.Action
	actions = append(actions, s.Kube.Actions()...)
	actions = append(actions, s.Jobs.Actions()...)
	actions = append(actions, s.kueue.Actions()...)
	writes := 0
	for _, a := range actions {
		var manager string
		switch a := a.(type) {
		case k8stesting.CreateActionImpl:
			manager = a.GetCreateOptions().FieldManager
		case k8stesting.UpdateActionImpl:
			manager = a.GetUpdateOptions().FieldManager
		case k8stesting.PatchActionImpl:
			manager = a.GetPatchOptions().FieldManager
		default:
			continue
		}
		if a.GetSubresource() == "status" && (a.GetResource().Resource == "pods" || a.GetVerb() == "update" && a.GetResource().Resource == "workloads") {
			continue // the test's own kubelet and Kueue
		}
		writes++
		if manager != engine.FieldManager {
			t.Errorf("%s %s/%s names field manager %q, want %q", a.GetVerb(), a.GetResource().Resource, a.GetSubresource(), manager, engine.FieldManager)
		}
	}
	if writes < 5 {
		t.Fatalf("only %d writes seen", writes)
	}
}

// elasticQueueTest is a queued job of 4 elastic workers (at least min) and a ps, planned as
// the engine plans it: the workers' size from spec.elastic, the plan's elastic type set.
func elasticQueueTest(t *testing.T, min int32) *queueTest {
	job := queuedJob(map[string]string{kueue.LabelQueueName: "team-a"})
	job.Spec.Elastic = &batch.ElasticPolicy{ReplicaType: "worker", Replicas: 4, MinReplicas: min, MaxReplicas: 4}
	s := newQueueTest(t, job, true, Config{}, flavors...)
	s.adapter.override(func() *engine.Plan {
		p := &engine.Plan{Groups: []engine.Group{
			{Type: "worker", Replicas: s.Job(t).Spec.Elastic.Replicas, Restart: batch.RestartOnFailure, Template: cpuTemplate},
			{Type: "ps", Replicas: 1, Restart: batch.RestartNever, Template: cpuTemplate},
		}, Judge: allSucceed}
		p.SetLifecycle(&s.Job(t).Spec.Lifecycle)
		return p
	})
	return s
}

// admitWorkers is Kueue's admission of only n of the workers (partial admission).
func admitWorkers(n int32) func(*kueue.Workload) {
	return func(wl *kueue.Workload) {
		admit(wl)
		wl.Status.Admission.PodSetAssignments[0].Count = ptr.To(n)
	}
}

// An elastic job asks Kueue for the size it wants and takes what Kueue admits down to its
// minimum (partial admission); a resize leaves its Workload, and its admission, as they are.
func TestElasticJobIsAdmittedPartly(t *testing.T) {
	s := elasticQueueTest(t, 2)
	s.Step(t)
	wl := s.workload(t)
	if ps := wl.Spec.PodSets[0]; ps.Count != 4 || ps.MinCount == nil || *ps.MinCount != 2 {
		t.Fatalf("pod set %s asks for %d, at least %v; want 4, at least 2", ps.Name, ps.Count, ps.MinCount)
	}
	s.kueueDecides(t, admitWorkers(2))
	s.Step(t)
	if got, want := podNames(s.Pods(t)), "job-ps-0 job-worker-0 job-worker-1"; got != want {
		t.Fatalf("pods %v, want %v: the two workers Kueue admitted, and the ps", got, want)
	}
	if events := drain(s.Events); !strings.Contains(events, "its replicas are created; worker: 2 of 4 (partial admission)") {
		t.Errorf("events %q: want the Admitted event to say the admission is partial", events)
	}
	s.editSpec(t, func(j *batch.GenericJob) { j.Spec.Elastic.Replicas = 3 })
	s.Step(t)
	if after := s.workload(t); after.UID != wl.UID || !meta.IsStatusConditionTrue(after.Status.Conditions, kueue.WorkloadAdmitted) {
		t.Errorf("a resize made the Workload again or lost its admission: %s, %+v", after.UID, after.Status.Conditions)
	}
	if got := len(s.Pods(t)); got != 3 {
		t.Errorf("%d pods after the resize, want 3: Kueue admitted two workers", got)
	}
}

// podNames lists pods' names, sorted, in one string.
func podNames(pods []corev1.Pod) string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// A shrink of an admitted elastic job hands the removed pods' quota back to Kueue at once
// (reclaimablePods), and the job runs no more than it still holds while the slice it asks
// for the rest with waits (slices_test.go).
func TestElasticShrinkReleasesQuota(t *testing.T) {
	s := elasticQueueTest(t, 1)
	s.Step(t)
	s.kueueDecides(t, admit)
	s.Step(t)
	if n := len(s.Pods(t)); n != 5 {
		t.Fatalf("%d pods, want 4 workers and the ps", n)
	}
	s.editSpec(t, func(j *batch.GenericJob) { j.Spec.Elastic.Replicas = 2 })
	s.Step(t)
	s.Step(t)
	if got := s.workload(t).Status.ReclaimablePods; !reflect.DeepEqual(got, []kueue.ReclaimablePod{{Name: "worker", Count: 2}}) {
		t.Errorf("reclaimable pods %+v after shrinking from 4 to 2, want worker: 2", got)
	}
	s.editSpec(t, func(j *batch.GenericJob) { j.Spec.Elastic.Replicas = 4 })
	s.Step(t)
	if got, want := podNames(s.Pods(t)), "job-ps-0 job-worker-0 job-worker-1"; got != want {
		t.Errorf("pods %s after asking for 4 again, want %s: the Workload holds quota for 2 workers", got, want)
	}
	if got := s.workload(t).Status.ReclaimablePods; len(got) != 1 || got[0].Count != 2 {
		t.Errorf("reclaimable pods %+v, want worker: 2 kept", got)
	}
}

// A shrink of a partly admitted elastic job hands back what it no longer runs: Kueue counts
// reclaimable pods off the pod set's count (4), not off the count it admitted (2), so a
// shrink to 1 reclaims 3.
func TestElasticShrinkOfAPartlyAdmittedJob(t *testing.T) {
	s := elasticQueueTest(t, 1)
	s.Step(t)
	s.kueueDecides(t, admitWorkers(2))
	s.Step(t)
	s.editSpec(t, func(j *batch.GenericJob) { j.Spec.Elastic.Replicas = 1 })
	s.Step(t)
	s.Step(t)
	if got := s.workload(t).Status.ReclaimablePods; !reflect.DeepEqual(got, []kueue.ReclaimablePod{{Name: "worker", Count: 3}}) {
		t.Errorf("reclaimable pods %+v after shrinking from 2 of 4 to 1, want worker: 3", got)
	}
	if got, want := podNames(s.Pods(t)), "job-ps-0 job-worker-0"; got != want {
		t.Errorf("pods %s, want %s", got, want)
	}
}
