package decision

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision/decisiontest"
)

// The jobs, pods and statuses the tests decide on, shared with the engine's tests.
var (
	now               = decisiontest.Now
	testJob           = decisiontest.Job
	template          = decisiontest.Template
	pod               = decisiontest.Pod
	ready             = decisiontest.Ready
	unschedulable     = decisiontest.Unschedulable
	disruptedPod      = decisiontest.DisruptedPod
	terminatedByKueue = decisiontest.TerminatedByKueue
	replicaStatus     = decisiontest.ReplicaStatus
	statusWith        = decisiontest.StatusWith
	running           = decisiontest.Running
)

const noCPU = decisiontest.NoCPU

func names[T metav1.Object](objs []T) []string { return decisiontest.Names(objs) }

func workers(n int32, policy batch.RestartPolicy, limit *int32) Group {
	return Group{Type: "worker", Replicas: n, Restart: policy, Limit: limit, Template: template("train")}
}

// allSucceed is the default outcome: success once every replica has succeeded, failure once
// any has failed for good.
func allSucceed(rs Replicas) *Outcome {
	done := true
	for _, list := range rs {
		for _, r := range list {
			if r.Final && r.Phase == batch.ReplicaFailed {
				return &Outcome{Message: "failed"}
			}
			done = done && r.Final && r.Phase == batch.ReplicaSucceeded
		}
	}
	if done {
		return &Outcome{Succeeded: true, Message: "succeeded"}
	}
	return nil
}

func replicaOf(s *batch.JobStatus, name string) batch.ReplicaStatus {
	return s.Replica(name)
}

func TestDecide(t *testing.T) {
	running := func(i int) *corev1.Pod {
		return pod(fmt.Sprintf("job-worker-%d", i), types.UID(fmt.Sprintf("uid-%d", i)), corev1.PodRunning, 0)
	}
	cases := []struct {
		name     string
		plan     Plan
		status   batch.JobStatus
		pods     []*corev1.Pod
		services []*corev1.Service
		check    func(t *testing.T, d *Decision)
	}{
		{
			name: "new job creates every replica",
			plan: Plan{Groups: []Group{workers(3, batch.RestartNever, nil)}, Judge: allSucceed},
			check: func(t *testing.T, d *Decision) {
				if got := names(d.CreatePods); !reflect.DeepEqual(got, []string{"job-worker-0", "job-worker-1", "job-worker-2"}) {
					t.Errorf("created %v", got)
				}
				if d.Status.Phase != batch.JobPending || d.Status.Aggregate.Creating != 3 {
					t.Errorf("phase %s, aggregate %+v", d.Status.Phase, d.Status.Aggregate)
				}
				if c := d.Status.Condition(batch.JobConditionInitialized); c.Status != corev1.ConditionFalse {
					t.Errorf("Initialized = %+v before the pods exist", c)
				}
				if len(d.Status.Conditions) != 6 {
					t.Errorf("want all six condition types, got %d", len(d.Status.Conditions))
				}
			},
		},
		{
			name: "all replicas running",
			plan: Plan{Groups: []Group{workers(2, batch.RestartNever, nil)}, Judge: allSucceed},
			pods: []*corev1.Pod{running(0), running(1)},
			check: func(t *testing.T, d *Decision) {
				if len(d.CreatePods)+len(d.DeletePods) != 0 {
					t.Errorf("writes on a running job: create %v delete %v", names(d.CreatePods), names(d.DeletePods))
				}
				if d.Status.Phase != batch.JobRunning || d.Status.Condition(batch.JobConditionRunning).Status != corev1.ConditionTrue {
					t.Errorf("phase %s, Running %+v", d.Status.Phase, d.Status.Condition(batch.JobConditionRunning))
				}
				if c := d.Status.Condition(batch.JobConditionInitialized); c.Status != corev1.ConditionTrue || c.Message != msgInitialized {
					t.Errorf("Initialized = %+v", c)
				}
				if r := replicaOf(d.Status, "job-worker-1"); r.UID != "uid-1" || r.Phase != batch.ReplicaRunning || len(r.Containers) != 1 || r.Containers[0].State != batch.ContainerRunning {
					t.Errorf("replica status %+v", r)
				}
			},
		},
		{
			name:   "failed replica with restarts left is restarted and counted",
			plan:   Plan{Groups: []Group{workers(2, batch.RestartOnFailure, ptr.To[int32](2))}, Judge: allSucceed},
			status: statusWith(batch.JobRunning, replicaStatus("job-worker-0", "uid-0", batch.ReplicaRunning, 0), replicaStatus("job-worker-1", "uid-1", batch.ReplicaRunning, 1)),
			pods:   []*corev1.Pod{running(0), pod("job-worker-1", "uid-1", corev1.PodFailed, 1)},
			check: func(t *testing.T, d *Decision) {
				if got := names(d.DeletePods); !reflect.DeepEqual(got, []string{"job-worker-1"}) {
					t.Errorf("deleted %v, want the failed pod", got)
				}
				r := replicaOf(d.Status, "job-worker-1")
				if r.RestartCount != 2 || r.Phase != batch.ReplicaDeleted || r.UID != "uid-1" {
					t.Errorf("replica %+v: want restart 2 counted against uid-1, phase Deleted", r)
				}
				if d.Status.Tasks[0].RestartCount != 2 || !reflect.DeepEqual(d.Restarted, []string{"job-worker-1"}) {
					t.Errorf("task restarts %d, restarted %v", d.Status.Tasks[0].RestartCount, d.Restarted)
				}
				if d.Outcome != nil || d.Status.Phase != batch.JobRunning {
					t.Errorf("a restart ended the job: %+v, phase %s", d.Outcome, d.Status.Phase)
				}
			},
		},
		{
			name:   "restart already counted is not counted again",
			plan:   Plan{Groups: []Group{workers(1, batch.RestartOnFailure, ptr.To[int32](3))}, Judge: allSucceed},
			status: statusWith(batch.JobRunning, replicaStatus("job-worker-0", "uid-0", batch.ReplicaDeleted, 1)),
			pods:   []*corev1.Pod{pod("job-worker-0", "uid-0", corev1.PodFailed, 1)},
			check: func(t *testing.T, d *Decision) {
				if got := names(d.DeletePods); !reflect.DeepEqual(got, []string{"job-worker-0"}) {
					t.Errorf("deleted %v, want the pod whose restart was counted", got)
				}
				if r := replicaOf(d.Status, "job-worker-0"); r.RestartCount != 1 || len(d.Restarted) != 0 {
					t.Errorf("restart counted twice: %+v, restarted %v", r, d.Restarted)
				}
			},
		},
		{
			name:   "pod of a counted restart gone: recreated without counting",
			plan:   Plan{Groups: []Group{workers(1, batch.RestartOnFailure, ptr.To[int32](3))}, Judge: allSucceed},
			status: statusWith(batch.JobRunning, replicaStatus("job-worker-0", "uid-0", batch.ReplicaDeleted, 1)),
			check: func(t *testing.T, d *Decision) {
				if got := names(d.CreatePods); !reflect.DeepEqual(got, []string{"job-worker-0"}) {
					t.Errorf("created %v", got)
				}
				if r := replicaOf(d.Status, "job-worker-0"); r.RestartCount != 1 || r.Phase != batch.ReplicaCreating {
					t.Errorf("replica %+v", r)
				}
			},
		},
		{
			name:   "failed replica at its limit fails the job; clean-up deletes unfinished pods",
			plan:   Plan{Groups: []Group{workers(2, batch.RestartOnFailure, ptr.To[int32](1))}, CleanUp: batch.CleanUpUnfinished, Judge: allSucceed},
			status: statusWith(batch.JobRunning, replicaStatus("job-worker-0", "uid-0", batch.ReplicaRunning, 0), replicaStatus("job-worker-1", "uid-1", batch.ReplicaRunning, 1)),
			pods:   []*corev1.Pod{running(0), pod("job-worker-1", "uid-1", corev1.PodFailed, 1)},
			check: func(t *testing.T, d *Decision) {
				if d.Outcome == nil || d.Outcome.Succeeded || d.Status.Phase != batch.JobFailed {
					t.Fatalf("outcome %+v, phase %s: want failed", d.Outcome, d.Status.Phase)
				}
				if got := names(d.DeletePods); !reflect.DeepEqual(got, []string{"job-worker-0"}) {
					t.Errorf("clean-up deleted %v, want only the running pod", got)
				}
				if c := d.Status.Condition(batch.JobConditionFailed); c.Status != corev1.ConditionTrue || c.Message != "failed" {
					t.Errorf("Failed = %+v", c)
				}
				if c := d.Status.Condition(batch.JobConditionCompleted); c.Status != corev1.ConditionFalse || c.Reason != "Failed" || c.Message != "failed" {
					t.Errorf("Completed = %+v: want False with the failure's reason and message", c)
				}
				if c := d.Status.Condition(batch.JobConditionReplicaFailure); c.Status != corev1.ConditionTrue || !strings.Contains(c.Message, "job-worker-1 with exit code 1") {
					t.Errorf("ReplicaFailure = %+v", c)
				}
			},
		},
		{
			name:   "a job that ends creates no missing replica",
			plan:   Plan{Groups: []Group{workers(2, batch.RestartNever, nil)}, CleanUp: batch.CleanUpNone, Judge: allSucceed},
			status: statusWith(batch.JobRunning, replicaStatus("job-worker-0", "uid-0", batch.ReplicaRunning, 0), replicaStatus("job-worker-1", "uid-1", batch.ReplicaRunning, 0)),
			pods:   []*corev1.Pod{pod("job-worker-0", "uid-0", corev1.PodFailed, 1)},
			check: func(t *testing.T, d *Decision) {
				if d.Outcome == nil || len(d.CreatePods) != 0 {
					t.Errorf("outcome %+v, created %v", d.Outcome, names(d.CreatePods))
				}
			},
		},
		{
			name:   "ExitCode restarts a retryable exit code",
			plan:   Plan{Groups: []Group{workers(1, batch.RestartExitCode, nil)}, Judge: allSucceed},
			status: statusWith(batch.JobRunning, replicaStatus("job-worker-0", "uid-0", batch.ReplicaRunning, 0)),
			pods:   []*corev1.Pod{pod("job-worker-0", "uid-0", corev1.PodFailed, 137)},
			check: func(t *testing.T, d *Decision) {
				if len(d.Restarted) != 1 || d.Outcome != nil {
					t.Errorf("restarted %v, outcome %+v: want a restart after exit code 137", d.Restarted, d.Outcome)
				}
			},
		},
		{
			name:   "ExitCode does not restart a code error",
			plan:   Plan{Groups: []Group{workers(1, batch.RestartExitCode, nil)}, Judge: allSucceed},
			status: statusWith(batch.JobRunning, replicaStatus("job-worker-0", "uid-0", batch.ReplicaRunning, 0)),
			pods:   []*corev1.Pod{pod("job-worker-0", "uid-0", corev1.PodFailed, 1)},
			check: func(t *testing.T, d *Decision) {
				if len(d.Restarted) != 0 || d.Outcome == nil || d.Outcome.Succeeded {
					t.Errorf("restarted %v, outcome %+v: want the job failed after exit code 1", d.Restarted, d.Outcome)
				}
			},
		},
		{
			name:   "Always restarts a succeeded replica",
			plan:   Plan{Groups: []Group{workers(1, batch.RestartAlways, ptr.To[int32](5))}, Judge: allSucceed},
			status: statusWith(batch.JobRunning, replicaStatus("job-worker-0", "uid-0", batch.ReplicaRunning, 0)),
			pods:   []*corev1.Pod{pod("job-worker-0", "uid-0", corev1.PodSucceeded, 0)},
			check: func(t *testing.T, d *Decision) {
				if len(d.Restarted) != 1 || d.Outcome != nil {
					t.Errorf("restarted %v, outcome %+v", d.Restarted, d.Outcome)
				}
			},
		},
		{
			name:   "Never leaves a failed replica failed",
			plan:   Plan{Groups: []Group{workers(1, batch.RestartNever, nil)}, Judge: allSucceed},
			status: statusWith(batch.JobRunning, replicaStatus("job-worker-0", "uid-0", batch.ReplicaRunning, 0)),
			pods:   []*corev1.Pod{pod("job-worker-0", "uid-0", corev1.PodFailed, 2)},
			check: func(t *testing.T, d *Decision) {
				if len(d.Restarted) != 0 || d.Outcome == nil {
					t.Errorf("restarted %v, outcome %+v", d.Restarted, d.Outcome)
				}
			},
		},
		{
			name:   "backoff limit counts restarts of all replicas",
			plan:   Plan{Groups: []Group{workers(2, batch.RestartOnFailure, nil)}, BackoffLimit: ptr.To[int32](3), Judge: allSucceed},
			status: statusWith(batch.JobRunning, replicaStatus("job-worker-0", "uid-0", batch.ReplicaRunning, 2), replicaStatus("job-worker-1", "uid-1", batch.ReplicaRunning, 1)),
			pods:   []*corev1.Pod{running(0), pod("job-worker-1", "uid-1", corev1.PodFailed, 1)},
			check: func(t *testing.T, d *Decision) {
				if len(d.Restarted) != 0 || d.Outcome == nil || d.Outcome.Succeeded {
					t.Errorf("restarted %v, outcome %+v: 3 restarts used, none left", d.Restarted, d.Outcome)
				}
			},
		},
		{
			name:   "second restart waits for its backoff",
			plan:   Plan{Groups: []Group{workers(1, batch.RestartOnFailure, nil)}, Judge: allSucceed},
			status: statusWith(batch.JobRunning, replicaStatus("job-worker-0", "uid-0", batch.ReplicaRunning, 3)),
			pods: func() []*corev1.Pod {
				p := pod("job-worker-0", "uid-0", corev1.PodFailed, 1)
				// finishedAt is truncated to the second: the pod ended by now-1s at the latest.
				p.Status.ContainerStatuses[0].State.Terminated.FinishedAt = metav1.NewTime(now.Add(-2 * time.Second))
				return []*corev1.Pod{p}
			}(),
			check: func(t *testing.T, d *Decision) {
				if len(d.Restarted) != 0 || len(d.DeletePods) != 0 || d.RequeueAfter != 3*time.Second {
					t.Errorf("restarted %v, requeue after %s: want a wait of 4s-1s", d.Restarted, d.RequeueAfter)
				}
			},
		},
		{
			name:   "success: clean-up All deletes every pod and service",
			plan:   Plan{Groups: []Group{workers(2, batch.RestartNever, nil)}, CleanUp: batch.CleanUpAll, ServicePorts: []corev1.ServicePort{{Name: "http", Port: 80}}, Judge: allSucceed},
			status: statusWith(batch.JobRunning),
			pods:   []*corev1.Pod{pod("job-worker-0", "uid-0", corev1.PodSucceeded, 0), pod("job-worker-1", "uid-1", corev1.PodSucceeded, 0)},
			services: []*corev1.Service{
				{ObjectMeta: metav1.ObjectMeta{Name: "job-worker-0", UID: "s0"}},
				{ObjectMeta: metav1.ObjectMeta{Name: "job-worker-1", UID: "s1"}},
			},
			check: func(t *testing.T, d *Decision) {
				if d.Outcome == nil || !d.Outcome.Succeeded || d.Status.Phase != batch.JobSucceeded {
					t.Fatalf("outcome %+v, phase %s", d.Outcome, d.Status.Phase)
				}
				if len(d.DeletePods) != 2 || len(d.DeleteObjects) != 2 || len(d.CreateObjects) != 0 {
					t.Errorf("deleted pods %v services %v", names(d.DeletePods), names(d.DeleteObjects))
				}
				if c := d.Status.Condition(batch.JobConditionCompleted); c.Status != corev1.ConditionTrue || c.Reason != "Succeeded" {
					t.Errorf("Completed = %+v", c)
				}
			},
		},
		{
			name:   "success: clean-up None keeps everything",
			plan:   Plan{Groups: []Group{workers(1, batch.RestartNever, nil)}, CleanUp: batch.CleanUpNone, Judge: allSucceed},
			status: statusWith(batch.JobRunning),
			pods:   []*corev1.Pod{pod("job-worker-0", "uid-0", corev1.PodSucceeded, 0)},
			check: func(t *testing.T, d *Decision) {
				if d.Outcome == nil || len(d.DeletePods) != 0 {
					t.Errorf("outcome %+v, deleted %v", d.Outcome, names(d.DeletePods))
				}
			},
		},
		{
			name: "clean-up limited to some types",
			plan: Plan{Groups: []Group{workers(1, batch.RestartNever, nil), {Type: "launcher", Replicas: 1, Template: template("run")}}, CleanUp: batch.CleanUpAll, CleanUpTypes: []string{"worker"},
				Judge: func(Replicas) *Outcome { return &Outcome{Succeeded: true, Message: "done"} }},
			status: statusWith(batch.JobRunning),
			pods: func() []*corev1.Pod {
				l := pod("job-launcher-0", "uid-l", corev1.PodSucceeded, 0)
				l.Labels[batch.LabelReplicaType] = "launcher"
				return []*corev1.Pod{running(0), l}
			}(),
			check: func(t *testing.T, d *Decision) {
				if got := names(d.DeletePods); !reflect.DeepEqual(got, []string{"job-worker-0"}) {
					t.Errorf("deleted %v, want the worker only", got)
				}
			},
		},
		{
			name: "ended job creates nothing and keeps its outcome",
			plan: Plan{Groups: []Group{workers(2, batch.RestartOnFailure, nil)}, CleanUp: batch.CleanUpUnfinished, Judge: allSucceed},
			status: func() batch.JobStatus {
				s := statusWith(batch.JobSucceeded, replicaStatus("job-worker-0", "uid-0", batch.ReplicaSucceeded, 0), replicaStatus("job-worker-1", "uid-1", batch.ReplicaRunning, 0))
				s.Conditions = append(s.Conditions, batch.JobCondition{Type: batch.JobConditionCompleted, Status: corev1.ConditionTrue, Reason: "Succeeded", Message: "rule"})
				return s
			}(),
			pods: []*corev1.Pod{pod("job-worker-0", "uid-0", corev1.PodSucceeded, 0)},
			check: func(t *testing.T, d *Decision) {
				if len(d.CreatePods) != 0 || d.Status.Phase != batch.JobSucceeded {
					t.Errorf("created %v, phase %s", names(d.CreatePods), d.Status.Phase)
				}
				if r := replicaOf(d.Status, "job-worker-1"); r.Phase != batch.ReplicaDeleted {
					t.Errorf("cleaned-up replica: %+v, want Deleted", r)
				}
				if c := d.Status.Condition(batch.JobConditionCompleted); c.Message != "rule" {
					t.Errorf("Completed = %+v, want the outcome kept", c)
				}
			},
		},
		{
			name:     "pause deletes pods and services",
			plan:     Plan{Groups: []Group{workers(2, batch.RestartNever, nil)}, Paused: true, ServicePorts: []corev1.ServicePort{{Name: "http", Port: 80}}, Judge: allSucceed},
			status:   statusWith(batch.JobRunning),
			pods:     []*corev1.Pod{running(0), running(1)},
			services: []*corev1.Service{{ObjectMeta: metav1.ObjectMeta{Name: "job-worker-0", UID: "s0"}}},
			check: func(t *testing.T, d *Decision) {
				if len(d.DeletePods) != 2 || len(d.DeleteObjects) != 1 || len(d.CreatePods) != 0 {
					t.Errorf("deleted pods %v services %v, created %v", names(d.DeletePods), names(d.DeleteObjects), names(d.CreatePods))
				}
				if d.Status.Phase != batch.JobPaused || d.Status.Condition(batch.JobConditionPaused).Status != corev1.ConditionTrue {
					t.Errorf("phase %s, Paused %+v", d.Status.Phase, d.Status.Condition(batch.JobConditionPaused))
				}
			},
		},
		{
			name: "resume recreates replicas with the resume settings",
			plan: Plan{Groups: []Group{func() Group {
				g := workers(1, batch.RestartNever, nil)
				g.Resume = &batch.ResumeSpec{Type: "worker", SkipInitContainer: true, Command: []string{"resume"}}
				return g
			}()}, Judge: allSucceed},
			status: func() batch.JobStatus {
				s := statusWith(batch.JobPaused, replicaStatus("job-worker-0", "uid-0", batch.ReplicaDeleted, 0))
				s.Conditions = append(s.Conditions, batch.JobCondition{Type: batch.JobConditionPaused, Status: corev1.ConditionTrue})
				return s
			}(),
			check: func(t *testing.T, d *Decision) {
				if len(d.CreatePods) != 1 {
					t.Fatalf("created %v", names(d.CreatePods))
				}
				p := d.CreatePods[0]
				if !reflect.DeepEqual(p.Spec.Containers[0].Command, []string{"resume"}) || p.Spec.InitContainers != nil {
					t.Errorf("resumed pod: command %v, init containers %v", p.Spec.Containers[0].Command, p.Spec.InitContainers)
				}
				if d.Status.Phase != batch.JobResuming {
					t.Errorf("phase %s, want Resuming", d.Status.Phase)
				}
				if c := d.Status.Condition(batch.JobConditionPaused); c.Status != corev1.ConditionFalse || c.Reason != "Resumed" {
					t.Errorf("Paused = %+v", c)
				}
			},
		},
		{
			name: "debug mode runs the debug command and never ends",
			plan: Plan{Groups: []Group{func() Group {
				g := workers(2, batch.RestartNever, nil)
				g.Debug = &batch.ReplicaDebugSet{Type: "worker", Command: []string{"sleep", "inf"}}
				return g
			}()}, Debug: true, Judge: allSucceed},
			status: statusWith(batch.JobRunning),
			pods:   []*corev1.Pod{pod("job-worker-0", "uid-0", corev1.PodSucceeded, 0)},
			check: func(t *testing.T, d *Decision) {
				if d.Outcome != nil {
					t.Errorf("a debug job ended: %+v", d.Outcome)
				}
				if len(d.CreatePods) != 1 {
					t.Fatalf("created %v", names(d.CreatePods))
				}
				c := d.CreatePods[0].Spec.Containers[0]
				if !reflect.DeepEqual(c.Command, []string{"sleep", "inf"}) || c.Args != nil || d.CreatePods[0].Spec.InitContainers == nil {
					t.Errorf("debug pod: command %v args %v, init containers %v", c.Command, c.Args, d.CreatePods[0].Spec.InitContainers)
				}
			},
		},
		{
			name:   "scale down deletes the surplus pod",
			plan:   Plan{Groups: []Group{workers(1, batch.RestartNever, nil)}, Judge: allSucceed},
			status: statusWith(batch.JobRunning),
			pods:   []*corev1.Pod{running(0), running(1)},
			check: func(t *testing.T, d *Decision) {
				if got := names(d.DeletePods); !reflect.DeepEqual(got, []string{"job-worker-1"}) {
					t.Errorf("deleted %v", got)
				}
			},
		},
		{
			name:   "a pod deleted by hand is recreated, not counted as a restart",
			plan:   Plan{Groups: []Group{workers(2, batch.RestartNever, nil)}, Judge: allSucceed},
			status: statusWith(batch.JobRunning, replicaStatus("job-worker-0", "uid-0", batch.ReplicaRunning, 0), replicaStatus("job-worker-1", "uid-1", batch.ReplicaRunning, 0)),
			pods:   []*corev1.Pod{running(0)},
			check: func(t *testing.T, d *Decision) {
				if got := names(d.CreatePods); !reflect.DeepEqual(got, []string{"job-worker-1"}) {
					t.Errorf("created %v", got)
				}
				if d.Status.Tasks[0].RestartCount != 0 || d.Status.Phase != batch.JobRunning {
					t.Errorf("restarts %d, phase %s", d.Status.Tasks[0].RestartCount, d.Status.Phase)
				}
			},
		},
		{
			name: "services per replica, and a stray one deleted",
			plan: Plan{Groups: []Group{workers(2, batch.RestartNever, nil)}, ServicePorts: []corev1.ServicePort{{Name: "http", Port: 2222}}, Judge: allSucceed},
			services: []*corev1.Service{
				{ObjectMeta: metav1.ObjectMeta{Name: "job-worker-0", UID: "s0"}},
				{ObjectMeta: metav1.ObjectMeta{Name: "job-worker-7", UID: "s7"}},
			},
			check: func(t *testing.T, d *Decision) {
				if got := names(d.CreateObjects); !reflect.DeepEqual(got, []string{"job-worker-1"}) {
					t.Errorf("created services %v", got)
				}
				if got := names(d.DeleteObjects); !reflect.DeepEqual(got, []string{"job-worker-7"}) {
					t.Errorf("deleted services %v", got)
				}
				s := d.CreateObjects[0].(*corev1.Service)
				if s.Spec.ClusterIP != corev1.ClusterIPNone || s.Spec.Selector[batch.LabelReplicaIndex] != "1" || s.Spec.Ports[0].Port != 2222 {
					t.Errorf("service %+v", s.Spec)
				}
				if p := d.CreatePods[1]; p.Spec.Hostname != "job-worker-1" || p.Spec.Subdomain != "job-worker-1" {
					t.Errorf("pod host name %q subdomain %q", p.Spec.Hostname, p.Spec.Subdomain)
				}
			},
		},
		{
			name: "pods carry labels, owner, restartPolicy Never and the scheduler",
			plan: Plan{Groups: []Group{workers(1, batch.RestartOnFailure, nil)}, Scheduler: &batch.T9kScheduler{Queue: "default", Priority: 50}, Judge: allSucceed},
			check: func(t *testing.T, d *Decision) {
				p := d.CreatePods[0]
				if p.Spec.RestartPolicy != corev1.RestartPolicyNever || p.Spec.SchedulerName != "t9k-scheduler" {
					t.Errorf("restartPolicy %s, schedulerName %s", p.Spec.RestartPolicy, p.Spec.SchedulerName)
				}
				want := map[string]string{batch.LabelJobName: "job", batch.LabelReplicaType: "worker", batch.LabelReplicaIndex: "0", batch.LabelControllerUID: "job-uid", batch.LabelQueue: "default", batch.LabelAttempt: "1"}
				if !reflect.DeepEqual(p.Labels, want) || p.Annotations[batch.AnnotationPriority] != "50" {
					t.Errorf("labels %v, annotations %v", p.Labels, p.Annotations)
				}
				if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != "job-uid" || ref.Kind != "GenericJob" {
					t.Errorf("controller ref %+v", ref)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			children := Children{Pods: tc.pods}
			for _, s := range tc.services {
				children.Objects = append(children.Objects, s)
			}
			tc.check(t, mustDecide(t, testJob(tc.status), &tc.plan, children, nil, now))
		})
	}
}

// TestConditionTimesHold: deciding again on an unchanged job gives the same status, so the
// controller writes nothing, and lastTransitionTime moves only when a status flips.
func TestConditionTimesHold(t *testing.T) {
	plan := &Plan{Groups: []Group{workers(1, batch.RestartNever, nil)}, Judge: allSucceed}
	pods := []*corev1.Pod{pod("job-worker-0", "uid-0", corev1.PodRunning, 0)}
	first := mustDecide(t, testJob(batch.JobStatus{}), plan, Children{Pods: pods}, nil, now)
	second := mustDecide(t, testJob(*first.Status), plan, Children{Pods: pods}, nil, now.Add(time.Minute))
	if !reflect.DeepEqual(first.Status, second.Status) {
		t.Fatalf("status changed on a steady job:\n%+v\n%+v", first.Status, second.Status)
	}
	pods[0] = pod("job-worker-0", "uid-0", corev1.PodSucceeded, 0)
	third := mustDecide(t, testJob(*second.Status), plan, Children{Pods: pods}, nil, now.Add(2*time.Minute))
	if got := third.Status.Condition(batch.JobConditionCompleted).LastTransitionTime.Time; !got.Equal(now.Add(2 * time.Minute)) {
		t.Errorf("Completed flipped at %s, want the time of the flip", got)
	}
	if got := third.Status.Condition(batch.JobConditionInitialized).LastTransitionTime.Time; !got.Equal(now) {
		t.Errorf("Initialized moved to %s though it held", got)
	}
}

func TestRestartBackoff(t *testing.T) {
	for restarts, want := range map[int32]time.Duration{0: 0, 1: time.Second, 2: 2 * time.Second, 4: 8 * time.Second, 10: time.Minute, 100: time.Minute} {
		if got := restartBackoff(restarts); got != want {
			t.Errorf("restartBackoff(%d) = %s, want %s", restarts, got, want)
		}
	}
}

func TestListed(t *testing.T) {
	names := []string{"a", "b", "c", "d"}
	if got := Listed(names, 4); got != "a, b, c, d" {
		t.Errorf("listed(4 names, 4) = %q", got)
	}
	if got := Listed(names, 2); got != "a, b and 2 more" {
		t.Errorf("listed(4 names, 2) = %q", got)
	}
}

// mustDecide is Decide for a test whose plan builds every child.
func mustDecide(t testing.TB, job Job, plan *Plan, children Children, admission *Verdict, now time.Time) *Decision {
	t.Helper()
	d, err := Decide(job, plan, children, admission, now)
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	return d
}
