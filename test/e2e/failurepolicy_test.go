package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/test/harness"
)

// The failure policy (spec.failurePolicy; docs/failures.md) on kwok's pods: rules by exit
// code and by termination reason decide what a replica's failure does (FailJob, Ignore,
// RestartJob, RestartReplica), and a job that avoids failed nodes makes its new pods
// elsewhere until only those nodes are left. The rules refused at admission are cases of
// test/apivalidation (TestAdmissionRulesOnServer).

// exitPod has kwok end one running pod, as its annotations ask (docs/testing.md, "Fake
// nodes"): its containers exit with code, with reason when not "" (Completed or Error
// otherwise). The patch carries the pod's UID, which cannot change: a replica's next pod of
// the same name is never the one ended.
func exitPod(t *testing.T, ns, name string, uid types.UID, code int, reason string) {
	t.Helper()
	annotations := map[string]string{exitCodeAnnotation: fmt.Sprint(code)}
	if reason != "" {
		annotations[exitReasonAnnotation] = reason
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": uid, "annotations": annotations}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.kube.CoreV1().Pods(ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("ending pod %s (%s): %v", name, uid, err)
	}
}

// genericStatus reads a GenericJob's status, for waitJobStatus.
func genericStatus(ns, name string) func(context.Context) (*batch.JobStatus, error) {
	return func(ctx context.Context) (*batch.JobStatus, error) {
		j, err := env.jobs.BatchV1beta1().GenericJobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return &j.Status, nil
	}
}

// waitJobStatus waits until the status that get reads satisfies cond and returns it; when it
// does not in time, the test fails with the status and the job's events.
func waitJobStatus(t *testing.T, ns, job, what string, get func(context.Context) (*batch.JobStatus, error), cond func(*batch.JobStatus) bool) *batch.JobStatus {
	t.Helper()
	var s *batch.JobStatus
	err := harness.WaitFor(context.Background(), job+" "+what, 100*time.Millisecond, jobTimeout, func(ctx context.Context) (bool, error) {
		got, err := get(ctx)
		if err != nil {
			return false, nil
		}
		s = got
		return cond(s), nil
	})
	if err != nil {
		status, _ := json.MarshalIndent(s, "", "  ")
		t.Fatalf("%v; the job's status:\n%s\nevents:\n%s", err, status, eventsOf(t, ns, job))
	}
	return s
}

// runningAnew: every named replica runs a pod other than the one old gives it ("" for a
// replica that had none), on a node.
func runningAnew(old map[string]types.UID, names ...string) func(*batch.JobStatus) bool {
	return func(s *batch.JobStatus) bool {
		for _, name := range names {
			r := s.Replica(name)
			if r.Phase != batch.ReplicaRunning || r.UID == "" || r.UID == old[name] || r.Node == "" {
				return false
			}
		}
		return true
	}
}

// jobEventOf waits for an event of the job with the given reason whose message holds want,
// and returns it; the test fails, and goes on, when there is none.
func jobEventOf(t *testing.T, ns, job, reason, want string) (corev1.Event, bool) {
	t.Helper()
	var found corev1.Event
	err := harness.WaitFor(context.Background(), "a "+reason+" event of "+job, 100*time.Millisecond, jobTimeout, func(ctx context.Context) (bool, error) {
		list, err := env.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + job})
		if err != nil {
			return false, nil
		}
		for _, e := range list.Items {
			if e.Reason == reason && strings.Contains(e.Message, want) {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("%v: want one saying %q; the job's events:\n%s", err, want, eventsOf(t, ns, job))
		return found, false
	}
	return found, true
}

// exitCodesIn is an onExitCodes requirement with operator In.
func exitCodesIn(codes ...int32) *batch.ExitCodesRequirement {
	return &batch.ExitCodesRequirement{Operator: batch.ExitCodesIn, Values: codes}
}

// checkRule checks that a replica's lastTermination names the rule that decided it: its
// index and action (its name is in the messages and events that say it).
func checkRule(t *testing.T, r batch.ReplicaStatus, index int32, action batch.FailurePolicyAction) {
	t.Helper()
	if tm := r.LastTermination; tm == nil || tm.Rule == nil || tm.Rule.Index != index || tm.Rule.Action != action {
		t.Errorf("%s's lastTermination %+v: want it to name rule %d, action %s", r.Name, r.LastTermination, index, action)
	}
}

// exitOf is the exit code and reason of a termination's first container.
func exitOf(tm *batch.ReplicaTermination) (int32, string) {
	if tm == nil || len(tm.Containers) == 0 || tm.Containers[0].ExitCode == nil {
		return -1, ""
	}
	return *tm.Containers[0].ExitCode, tm.Containers[0].Reason
}

// TestFailurePolicyFailJob: under restartPolicy OnFailure, worker 1 exits 42, which the
// second rule (FailJob) matches and the first (Ignore on 143) does not: the job fails at
// once, with reason FailurePolicy and a message naming the rule and the exit; nothing is
// restarted or replaced; the replica's lastTermination names the rule, and a Warning
// FailurePolicyRule event says it.
func TestFailurePolicyFailJob(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	r := replica("worker", "trainer")
	r.Replicas = ptr.To[int32](2)
	r.RestartPolicy = &batch.GenericRestartPolicy{Policy: batch.RestartOnFailure}
	job := &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: "exit42"}, Spec: batch.GenericJobSpec{
		ReplicaSpecs: []batch.GenericReplicaSpec{r},
		Lifecycle: batch.Lifecycle{FailurePolicy: &batch.FailurePolicy{Rules: []batch.FailurePolicyRule{
			{Name: "spot", Action: batch.Ignore, OnExitCodes: exitCodesIn(143)},
			{Name: "bad-input", Action: batch.FailJob, OnExitCodes: exitCodesIn(42)},
		}}},
	}}
	createJob(t, ns, job)
	const w1 = "exit42-worker-1"
	running := waitJobStatus(t, ns, job.Name, "running", genericStatus(ns, job.Name), runningAnew(nil, "exit42-worker-0", w1))
	uid := running.Replica(w1).UID
	exitPod(t, ns, w1, uid, 42, "")

	s := waitJobStatus(t, ns, job.Name, "Failed", genericStatus(ns, job.Name), func(s *batch.JobStatus) bool { return s.Phase == batch.JobFailed })
	c := s.Condition(batch.JobConditionFailed)
	if c.Reason != "FailurePolicy" {
		t.Errorf("Failed condition reason %q, want FailurePolicy", c.Reason)
	}
	for _, want := range []string{`spec.failurePolicy.rules[1] ("bad-input")`, w1 + " failed with exit code 42"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("Failed condition message %q does not say %q", c.Message, want)
		}
	}
	t.Logf("%s: %s", c.Reason, c.Message)
	rs := s.Replica(w1)
	if rs.RestartCount != 0 || rs.Disruptions != 0 || s.Tasks[0].RestartCount != 0 || s.Restarts != 0 {
		t.Errorf("%s: restartCount %d, disruptions %d; the job's restarts %d, %d: want none, though the restart policy is OnFailure",
			w1, rs.RestartCount, rs.Disruptions, s.Tasks[0].RestartCount, s.Restarts)
	}
	if rs.UID != uid || rs.Phase != batch.ReplicaFailed {
		t.Errorf("%s: %s, pod %s; want Failed, its pod %s never replaced", w1, rs.Phase, rs.UID, uid)
	}
	checkRule(t, rs, 1, batch.FailJob)
	if code, _ := exitOf(rs.LastTermination); code != 42 || rs.LastTermination.UID != uid {
		t.Errorf("%s's lastTermination %+v: want its pod %s's exit 42", w1, rs.LastTermination, uid)
	}
	if e, ok := jobEventOf(t, ns, job.Name, "FailurePolicyRule", `Replica `+w1+` failed with exit code 42: spec.failurePolicy.rules[1] ("bad-input") decides FailJob.`); ok && e.Type != corev1.EventTypeWarning {
		t.Errorf("the FailurePolicyRule event is of type %s, want Warning", e.Type)
	}
	if events := eventsOf(t, ns, job.Name); strings.Contains(events, "Restarting") {
		t.Errorf("a restart was announced:\n%s", events)
	}
}

// TestFailurePolicyIgnore: under restartPolicy Never, a replica whose pod exits 143, which an
// Ignore rule matches, is replaced counting nothing but a disruption; twice over, so nothing
// adds up either. Its third pod succeeds, and so does the job, with no restart counted.
func TestFailurePolicyIgnore(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	r := replica("worker", "trainer")
	r.RestartPolicy = &batch.GenericRestartPolicy{Policy: batch.RestartNever}
	job := &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: "spot"}, Spec: batch.GenericJobSpec{
		ReplicaSpecs: []batch.GenericReplicaSpec{r},
		Lifecycle: batch.Lifecycle{FailurePolicy: &batch.FailurePolicy{Rules: []batch.FailurePolicyRule{
			{Name: "spot-reclaimed", Action: batch.Ignore, OnExitCodes: exitCodesIn(143)},
		}}},
	}}
	createJob(t, ns, job)
	const w0 = "spot-worker-0"
	status := genericStatus(ns, job.Name)
	cur := waitJobStatus(t, ns, job.Name, "running", status, runningAnew(nil, w0)).Replica(w0)
	for i := int32(1); i <= 2; i++ {
		exitPod(t, ns, w0, cur.UID, 143, "")
		old := cur.UID
		s := waitJobStatus(t, ns, job.Name, fmt.Sprintf("replacement %d running", i), status, func(s *batch.JobStatus) bool {
			return runningAnew(map[string]types.UID{w0: old}, w0)(s) && s.Replica(w0).Disruptions == i
		})
		cur = s.Replica(w0)
		if cur.RestartCount != 0 || s.Restarts != 0 || s.Phase != batch.JobRunning {
			t.Errorf("replacement %d: restartCount %d, the job's restarts %d, phase %s; want no restart, the job Running", i, cur.RestartCount, s.Restarts, s.Phase)
		}
		tm := cur.LastTermination
		if code, _ := exitOf(tm); tm == nil || tm.UID != old || !tm.Disrupted || tm.Reason != "FailurePolicy" || code != 143 {
			t.Errorf("replacement %d: lastTermination %+v; want pod %s's exit 143, disrupted, reason FailurePolicy", i, tm, old)
		}
		checkRule(t, cur, 0, batch.Ignore)
	}
	if e, ok := jobEventOf(t, ns, job.Name, "FailurePolicyRule", `Replica `+w0+` failed with exit code 143: spec.failurePolicy.rules[0] ("spot-reclaimed") decides Ignore.`); ok && e.Type != corev1.EventTypeNormal {
		t.Errorf("the FailurePolicyRule event is of type %s, want Normal", e.Type)
	}

	exitPod(t, ns, w0, cur.UID, 0, "")
	s := waitJobStatus(t, ns, job.Name, "Succeeded", status, func(s *batch.JobStatus) bool { return s.Phase == batch.JobSucceeded })
	if done := s.Replica(w0); done.RestartCount != 0 || done.Disruptions != 2 || s.Restarts != 0 || s.Tasks[0].RestartCount != 0 {
		t.Errorf("succeeded with %s %+v, the job's restarts %d: want no restart, 2 disruptions", w0, done, s.Restarts)
	}
}

// TestFailurePolicyRestartJob: a TensorFlowTrainingJob of 3 workers, restartPolicy Never,
// backoffLimit 1, restartScope left as Replica, whose rule restarts the whole job on exit 3 of
// any rank. Worker 1 exits 3: the job restarts once (status.restarts 1), every worker gets a
// new pod, counted as a restart of worker 1 only, and in the API server's order of events no
// new pod is made before every old one is gone. A second exit 3, of worker 2, is past
// backoffLimit: the job fails.
func TestFailurePolicyRestartJob(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	w := batch.TrainingReplicaSpec{Type: "worker", Replicas: ptr.To[int32](3), RestartPolicy: batch.RestartNever,
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "tensorflow", Image: "tf", Command: []string{"train"}}}}}}
	job := &batch.TensorFlowTrainingJob{ObjectMeta: metav1.ObjectMeta{Name: "nccl"}, Spec: batch.TensorFlowTrainingJobSpec{
		ReplicaSpecs: []batch.TrainingReplicaSpec{w}, RunPolicy: batch.TrainingRunPolicy{BackoffLimit: ptr.To[int32](1)},
		Lifecycle: batch.Lifecycle{FailurePolicy: &batch.FailurePolicy{Rules: []batch.FailurePolicyRule{
			{Name: "nccl-timeout", Action: batch.RestartJob, OnExitCodes: exitCodesIn(3)},
		}}},
	}}
	events := watchPods(t, ns)
	if _, err := env.jobs.BatchV1beta1().TensorFlowTrainingJobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	names := []string{"nccl-worker-0", "nccl-worker-1", "nccl-worker-2"}
	status := tfStatus(ns, job.Name)
	s := waitJobStatus(t, ns, job.Name, "running", status, runningAnew(nil, names...))
	first := map[string]types.UID{}
	for _, name := range names {
		first[name] = s.Replica(name).UID
	}
	exitPod(t, ns, "nccl-worker-1", first["nccl-worker-1"], 3, "")

	s = waitJobStatus(t, ns, job.Name, "restarted whole", status, runningAnew(first, names...))
	if s.Restarts != 1 || s.Phase != batch.JobRunning {
		t.Errorf("status.restarts %d, phase %s; want 1, Running", s.Restarts, s.Phase)
	}
	second := map[types.UID]bool{}
	for _, name := range names {
		r := s.Replica(name)
		second[r.UID] = true
		tm := r.LastTermination
		if tm == nil || tm.UID != first[name] {
			t.Errorf("%s's lastTermination %+v: want its first pod %s", name, tm, first[name])
			continue
		}
		if name == "nccl-worker-1" {
			if code, _ := exitOf(tm); r.RestartCount != 1 || code != 3 {
				t.Errorf("%s: restartCount %d, lastTermination %+v; want one restart, after exit 3", name, r.RestartCount, tm)
			}
			checkRule(t, r, 0, batch.RestartJob)
			continue
		}
		if r.RestartCount != 0 || tm.Reason != "RestartedWithJob" {
			t.Errorf("%s: restartCount %d, lastTermination %+v; want it deleted with the job (RestartedWithJob), no restart of its own", name, r.RestartCount, tm)
		}
	}
	// The barrier: no pod of the second life was made before every pod of the first was gone.
	lastGone, firstMade, all := -1, -1, events()
	for i, e := range all {
		switch {
		case e.kind == watch.Deleted && slices.Contains(names, e.name) && e.uid == first[e.name]:
			lastGone = i
		case e.kind == watch.Added && second[e.uid] && firstMade < 0:
			firstMade = i
		}
	}
	if lastGone < 0 || firstMade < 0 || firstMade < lastGone {
		t.Errorf("pod events: the first new pod at %d, the last old one gone at %d; want every old pod gone first:\n%v", firstMade, lastGone, all)
	}
	jobEventOf(t, ns, job.Name, "FailurePolicyRule", `Replica nccl-worker-1 failed with exit code 3: spec.failurePolicy.rules[0] ("nccl-timeout") decides RestartJob.`)
	jobEventOf(t, ns, job.Name, "RestartingJob", `Restarting every replica together as attempt 2 (spec.failurePolicy.rules[0] ("nccl-timeout")): nccl-worker-1 failed with exit code 3.`)

	// backoffLimit 1 is spent: a second exit 3 fails the job.
	exitPod(t, ns, "nccl-worker-2", s.Replica("nccl-worker-2").UID, 3, "")
	s = waitJobStatus(t, ns, job.Name, "Failed", status, func(s *batch.JobStatus) bool { return s.Phase == batch.JobFailed })
	if c := s.Condition(batch.JobConditionFailed); !strings.Contains(c.Message, "nccl-worker-2 failed with exit code 3") || !strings.Contains(c.Message, "no restart left") {
		t.Errorf("Failed condition %+v: want worker 2's exit 3 with no restart left", c)
	}
	if s.Restarts != 1 || s.Replica("nccl-worker-2").RestartCount != 0 {
		t.Errorf("status.restarts %d, worker 2's restartCount %d: want 1 and 0, no restart past backoffLimit", s.Restarts, s.Replica("nccl-worker-2").RestartCount)
	}
}

// TestFailurePolicyOOMKilled: a TensorFlowTrainingJob with a ps (restartPolicy OnFailure)
// and a worker (Never), and rules on the reason OOMKilled by replica type. The ps killed for
// its memory (exit 137, OOMKilled) fails the job, by rule ps-oom; in a second job alike, the
// worker killed so is restarted, by rule worker-oom, and its new pod succeeds the job.
func TestFailurePolicyOOMKilled(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	oom := []batch.FailureReason{batch.ReasonOOMKilled}
	tfJob := func(name string) *batch.TensorFlowTrainingJob {
		tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "tensorflow", Image: "tf", Command: []string{"train"}}}}}
		return &batch.TensorFlowTrainingJob{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: batch.TensorFlowTrainingJobSpec{
			ReplicaSpecs: []batch.TrainingReplicaSpec{
				{Type: "ps", Replicas: ptr.To[int32](1), RestartPolicy: batch.RestartOnFailure, Template: *tmpl.DeepCopy()},
				{Type: "worker", Replicas: ptr.To[int32](1), RestartPolicy: batch.RestartNever, Template: *tmpl.DeepCopy()},
			},
			Lifecycle: batch.Lifecycle{FailurePolicy: &batch.FailurePolicy{Rules: []batch.FailurePolicyRule{
				{Name: "ps-oom", Action: batch.FailJob, ReplicaTypes: []string{"ps"}, OnReasons: oom},
				{Name: "worker-oom", Action: batch.RestartReplica, ReplicaTypes: []string{"worker"}, OnReasons: oom},
			}}},
		}}
	}
	// The ps's pods, from the template, are killed 500 ms after they start.
	psJob := tfJob("oom-ps")
	psJob.Spec.ReplicaSpecs[0].Template.Annotations = map[string]string{exitCodeAnnotation: "137", exitReasonAnnotation: "OOMKilled", runTimeAnnotation: "500ms"}
	workerJob := tfJob("oom-worker")
	for _, j := range []*batch.TensorFlowTrainingJob{psJob, workerJob} {
		if _, err := env.jobs.BatchV1beta1().TensorFlowTrainingJobs(ns).Create(context.Background(), j, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	const ps, worker = "oom-ps-ps-0", "oom-worker-worker-0"
	s := waitJobStatus(t, ns, psJob.Name, "Failed", tfStatus(ns, psJob.Name), func(s *batch.JobStatus) bool { return s.Phase == batch.JobFailed })
	c := s.Condition(batch.JobConditionFailed)
	for _, want := range []string{`spec.failurePolicy.rules[0] ("ps-oom")`, ps + " failed with exit code 137 (OOMKilled)"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("Failed condition message %q does not say %q", c.Message, want)
		}
	}
	if c.Reason != "FailurePolicy" {
		t.Errorf("Failed condition reason %q, want FailurePolicy", c.Reason)
	}
	r := s.Replica(ps)
	if code, reason := exitOf(r.LastTermination); r.RestartCount != 0 || code != 137 || reason != "OOMKilled" {
		t.Errorf("%s: restartCount %d, lastTermination %+v; want no restart, after exit 137 OOMKilled", ps, r.RestartCount, r.LastTermination)
	}
	checkRule(t, r, 0, batch.FailJob)

	status := tfStatus(ns, workerJob.Name)
	s = waitJobStatus(t, ns, workerJob.Name, "running", status, runningAnew(nil, worker, "oom-worker-ps-0"))
	old := s.Replica(worker).UID
	exitPod(t, ns, worker, old, 137, "OOMKilled")
	s = waitJobStatus(t, ns, workerJob.Name, "the worker restarted", status, runningAnew(map[string]types.UID{worker: old}, worker))
	r = s.Replica(worker)
	if code, reason := exitOf(r.LastTermination); r.RestartCount != 1 || r.LastTermination.UID != old || code != 137 || reason != "OOMKilled" {
		t.Errorf("%s: restartCount %d, lastTermination %+v; want one restart, after its pod %s's exit 137 OOMKilled", worker, r.RestartCount, r.LastTermination, old)
	}
	checkRule(t, r, 1, batch.RestartReplica)
	if s.Phase != batch.JobRunning {
		t.Errorf("%s is %s after its worker's restart, want Running", workerJob.Name, s.Phase)
	}
	jobEventOf(t, ns, workerJob.Name, "FailurePolicyRule", `Replica `+worker+` failed with exit code 137 (OOMKilled): spec.failurePolicy.rules[1] ("worker-oom") decides RestartReplica.`)
	exitPod(t, ns, worker, r.UID, 0, "")
	waitJobStatus(t, ns, workerJob.Name, "Succeeded", status, func(s *batch.JobStatus) bool { return s.Phase == batch.JobSucceeded })
}

// TestFailurePolicyAvoidsFailedNodes: a job that avoids failed nodes, on three nodes of its
// own, one replica restarted OnFailure. Its pod fails (exit 1, after running) on one node:
// the replacement is made to avoid it and goes elsewhere, the status lists the node (replica,
// reason, time) and a NodeExcluded event says it; a second failure adds the second node, and
// the third pod goes to the third node. That node is then cordoned and the pod evicted (a
// drain, which does not point at the node): only excluded nodes are left, so once the
// replacement has found no node for a while, the oldest exclusion is dropped with an
// ExcludedNodeDropped Warning and the pod, made again, runs on the node first failed on.
func TestFailurePolicyAvoidsFailedNodes(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	ctx := context.Background()
	nodes := newGangNodes(t, ns)
	for range 3 {
		nodes.add()
	}
	r := replica("worker", "trainer")
	r.RestartPolicy = &batch.GenericRestartPolicy{Policy: batch.RestartOnFailure}
	nodes.place(&r.Template.Spec, "1")
	job := &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: "avoid"}, Spec: batch.GenericJobSpec{
		ReplicaSpecs: []batch.GenericReplicaSpec{r},
		Lifecycle:    batch.Lifecycle{FailurePolicy: &batch.FailurePolicy{AvoidFailedNodes: &batch.AvoidFailedNodes{}}},
	}}
	createJob(t, ns, job)
	const w0 = "avoid-worker-0"
	status := genericStatus(ns, job.Name)
	cur := waitJobStatus(t, ns, job.Name, "running", status, runningAnew(nil, w0)).Replica(w0)

	var failedOn []string
	for i := 1; i <= 2; i++ {
		ended := time.Now().Truncate(time.Second) // the status's times are whole seconds
		exitPod(t, ns, w0, cur.UID, 1, "")
		failedOn = append(failedOn, cur.Node)
		old := cur.UID
		s := waitJobStatus(t, ns, job.Name, fmt.Sprintf("pod %d running", i+1), status, runningAnew(map[string]types.UID{w0: old}, w0))
		cur = s.Replica(w0)
		t.Logf("pod %d failed on %s; pod %d runs on %s", i, failedOn[i-1], i+1, cur.Node)
		if slices.Contains(failedOn, cur.Node) || !slices.Contains(nodes.names, cur.Node) {
			t.Fatalf("pod %d runs on %s, want one of %v other than %v", i+1, cur.Node, nodes.names, failedOn)
		}
		if cur.RestartCount != int32(i) {
			t.Errorf("restartCount %d, want %d", cur.RestartCount, i)
		}
		var listed []string
		for _, e := range s.ExcludedNodes {
			listed = append(listed, e.Node)
		}
		if !slices.Equal(listed, failedOn) {
			t.Fatalf("status.excludedNodes %+v, want %v, oldest first", s.ExcludedNodes, failedOn)
		}
		if e := s.ExcludedNodes[i-1]; e.Replica != w0 || e.Reason != "exit code 1" || e.Time.Time.Before(ended) {
			t.Errorf("excluded %+v: want %s's failure, exit code 1, at %s or later", e, w0, ended.Format(time.TimeOnly))
		}
		pod, err := env.kube.CoreV1().Pods(ns).Get(ctx, w0, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := pod.Annotations[batch.AnnotationExcludedNodes]; got != strings.Join(failedOn, ",") {
			t.Errorf("pod %d's %s: %q, want %q", i+1, batch.AnnotationExcludedNodes, got, strings.Join(failedOn, ","))
		}
		if got := excludedByAffinity(pod); !slices.Equal(got, failedOn) {
			t.Errorf("pod %d's node affinity excludes %v, want %v", i+1, got, failedOn)
		}
		jobEventOf(t, ns, job.Name, "NodeExcluded", fmt.Sprintf("New pods avoid node %s, where %s failed (exit code 1) (spec.failurePolicy.avoidFailedNodes).", failedOn[i-1], w0))
	}

	// Only the excluded nodes are left: the third is cordoned and drained of the pod (at
	// once, as kwok would otherwise delete by name, late, the replica's next pod).
	third := cur.Node
	if _, err := env.kube.CoreV1().Nodes().Patch(ctx, third, types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := env.kube.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: w0, Namespace: ns},
		DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &cur.UID}}}); err != nil {
		t.Fatal(err)
	}
	evicted := time.Now()
	s := waitJobStatus(t, ns, job.Name, "running on "+failedOn[0]+" again", status, func(s *batch.JobStatus) bool {
		r := s.Replica(w0)
		return r.Phase == batch.ReplicaRunning && r.UID != cur.UID && r.Node == failedOn[0]
	})
	t.Logf("the pod runs on %s again %.1fs after the eviction", failedOn[0], time.Since(evicted).Seconds())
	if len(s.ExcludedNodes) != 1 || s.ExcludedNodes[0].Node != failedOn[1] {
		t.Errorf("status.excludedNodes %+v, want only %s: the oldest, %s, dropped", s.ExcludedNodes, failedOn[1], failedOn[0])
	}
	if r := s.Replica(w0); r.RestartCount != 2 || r.Disruptions != 1 {
		t.Errorf("%s: restartCount %d, disruptions %d; want 2 and 1 (the eviction): making the pod again counts nothing", w0, r.RestartCount, r.Disruptions)
	}
	if e, ok := jobEventOf(t, ns, job.Name, "ExcludedNodeDropped", "without node "+failedOn[0]+","); ok && e.Type != corev1.EventTypeWarning {
		t.Errorf("the ExcludedNodeDropped event is of type %s, want Warning", e.Type)
	}
	if events := eventsOf(t, ns, job.Name); strings.Contains(events, "without node "+failedOn[1]+",") || strings.Contains(events, "avoid node "+third+",") {
		t.Errorf("%s dropped, or %s excluded:\n%s", failedOn[1], third, events)
	}
	pod, err := env.kube.CoreV1().Pods(ns).Get(ctx, w0, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := excludedByAffinity(pod); !slices.Equal(got, failedOn[1:]) {
		t.Errorf("the last pod's node affinity excludes %v, want %v", got, failedOn[1:])
	}

	exitPod(t, ns, w0, pod.UID, 0, "")
	waitJobStatus(t, ns, job.Name, "Succeeded", status, func(s *batch.JobStatus) bool { return s.Phase == batch.JobSucceeded })
}

// excludedByAffinity is the node names a pod's required node affinity excludes.
func excludedByAffinity(p *corev1.Pod) []string {
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	var out []string
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == metav1.ObjectNameField && f.Operator == corev1.NodeSelectorOpNotIn {
				out = append(out, f.Values...)
			}
		}
	}
	return out
}
