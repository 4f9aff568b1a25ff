package decision

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// The states of a pod that restarts in place, as its kubelet reports them.
const (
	ipRunning = "running" // the agent started, the main container runs
	ipFailing = "failing" // the main container just exited 1: the kubelet is about to restart them all
	ipHeld    = "held"    // every container restarted; the agent runs and holds the main container
	ipStopped = "stopped" // the agent exited to restart them all: nothing runs yet
)

// ipPod is a worker's pod that restarts in place, on node-a: its attempt label and released
// annotation, the agent's restart count and base (the count at the release), and its state.
func ipPod(name string, uid types.UID, label, released int, agentRestarts, base int32, state string) *corev1.Pod {
	p := pod(name, uid, corev1.PodRunning, 0)
	p.Spec.NodeName = "node-a"
	p.Labels[batch.LabelAttempt] = strconv.Itoa(label)
	p.Annotations = map[string]string{batch.AnnotationReleasedAttempt: strconv.Itoa(released), batch.AnnotationAgentRestarts: strconv.Itoa(int(base))}
	agent := corev1.ContainerStatus{Name: AgentContainer, RestartCount: agentRestarts, Started: ptr.To(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	main := &p.Status.ContainerStatuses[0]
	switch state {
	case ipFailing:
		main.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", FinishedAt: metav1.NewTime(now.Add(-2 * time.Second))}}
	case ipHeld:
		agent.Started = ptr.To(false)
		p.Status.Phase = corev1.PodPending
		main.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}
		main.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: restartingAllContainers}}
	case ipStopped:
		agent.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: restartingAllContainers}}
		agent.Started = ptr.To(false)
		main.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: restartingAllContainers}}
	}
	p.Status.InitContainerStatuses = []corev1.ContainerStatus{agent}
	return p
}

// inPlacePlan is three workers restarted together, in place.
func inPlacePlan() *Plan {
	return &Plan{Groups: []Group{workers(3, batch.RestartOnFailure, nil)}, Judge: allSucceed, RestartJob: true,
		InPlace: &InPlacePlan{AgentImage: "registry.example/t9k-job-controller:v1"}}
}

// A job that restarts in place makes its pods with the agent first among their init
// containers, the attempt released, and a rule on every container that holds the pod when
// one fails.
func TestInPlacePodsCarryTheAgent(t *testing.T) {
	plan := inPlacePlan()
	plan.Groups[0].Template = func(int32) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "fetch", Image: "busybox"}},
			Containers:     []corev1.Container{{Name: "main", Image: "busybox"}},
		}}
	}
	d := mustDecide(t, testJob(batch.JobStatus{}), plan, Children{}, nil, now)
	if len(d.CreatePods) != 3 {
		t.Fatalf("created %v, want 3 pods", names(d.CreatePods))
	}
	p := d.CreatePods[0]
	if p.Annotations[batch.AnnotationReleasedAttempt] != "1" {
		t.Errorf("annotations %v: want attempt 1 released", p.Annotations)
	}
	if len(p.Spec.InitContainers) != 2 || p.Spec.InitContainers[0].Name != AgentContainer || p.Spec.InitContainers[1].Name != "fetch" {
		t.Fatalf("init containers %v: want the agent, then the user's", p.Spec.InitContainers)
	}
	agent := p.Spec.InitContainers[0]
	if agent.Image != plan.InPlace.AgentImage || agent.RestartPolicy == nil || *agent.RestartPolicy != corev1.ContainerRestartPolicyAlways ||
		agent.StartupProbe == nil || agent.StartupProbe.Exec == nil {
		t.Errorf("agent %+v: want the controller's image as a native sidecar with an exec startup probe", agent)
	}
	if len(agent.RestartPolicyRules) != 1 || agent.RestartPolicyRules[0].Action != corev1.ContainerRestartRuleActionRestartAllContainers ||
		agent.RestartPolicyRules[0].ExitCodes.Values[0] != AgentRestartExitCode {
		t.Errorf("agent rules %+v: want RestartAllContainers on its exit code", agent.RestartPolicyRules)
	}
	main := p.Spec.Containers[0]
	if main.RestartPolicy == nil || *main.RestartPolicy != corev1.ContainerRestartPolicyNever || len(main.RestartPolicyRules) != 1 ||
		main.RestartPolicyRules[0].ExitCodes.Operator != corev1.ContainerRestartRuleOnExitCodesOpNotIn {
		t.Errorf("main container %+v, rules %+v: want RestartAllContainers on any non-zero exit", main.RestartPolicy, main.RestartPolicyRules)
	}
	checkAttemptPods(t, d.CreatePods, "1")
}

// A whole-job restart in place: the failed pod and the others keep their UIDs; the attempt
// is written to their labels; none is released until every one is down; then every one is.
func TestRestartInPlace(t *testing.T) {
	plan := inPlacePlan()
	status := running("0", "1", "2")
	status.Attempt = 1
	pods := []*corev1.Pod{
		ipPod("job-worker-0", "0", 1, 1, 0, 0, ipRunning),
		ipPod("job-worker-1", "1", 1, 1, 0, 0, ipFailing),
		ipPod("job-worker-2", "2", 1, 1, 0, 0, ipRunning),
	}
	d := mustDecide(t, testJob(status), plan, Children{Pods: pods}, nil, now)
	if d.Status.Attempt != 2 || d.Status.Restarts != 1 || d.JobRestartCause != RestartCauseFailure {
		t.Fatalf("worker-1 failed: attempt %d, restarts %d, cause %q; want attempt 2 by a failure", d.Status.Attempt, d.Status.Restarts, d.JobRestartCause)
	}
	if len(d.DeletePods) != 0 || len(d.CreatePods) != 0 || len(d.RestartPods) != 3 || d.InPlaceFallback != "" {
		t.Fatalf("deleted %v, created %v, restarted %d in place (fallback %q): want all three restarted in place", names(d.DeletePods), names(d.CreatePods), len(d.RestartPods), d.InPlaceFallback)
	}
	for _, r := range d.RestartPods {
		if r.Attempt != 2 {
			t.Errorf("%s restarted for attempt %d, want 2", r.Pod.Name, r.Attempt)
		}
	}
	failed := replicaOf(d.Status, "job-worker-1").LastTermination
	if failed == nil || failed.UID != "1" || len(failed.Containers) != 1 || *failed.Containers[0].ExitCode != 1 {
		t.Errorf("worker-1's last termination %+v: want its pod's exit code 1", failed)
	}
	if t0 := replicaOf(d.Status, "job-worker-0").LastTermination; t0 == nil || !strings.HasPrefix(t0.Message, "Restarted in place") {
		t.Errorf("worker-0's last termination %+v: want restarted in place with the job", t0)
	}

	// The labels are written; two pods are down, one still runs its first attempt.
	status = *d.Status
	pods = []*corev1.Pod{
		ipPod("job-worker-0", "0", 2, 1, 1, 0, ipHeld),
		ipPod("job-worker-1", "1", 2, 1, 2, 0, ipHeld),
		ipPod("job-worker-2", "2", 2, 1, 0, 0, ipRunning),
	}
	d = mustDecide(t, testJob(status), plan, Children{Pods: pods}, nil, now)
	if len(d.DeletePods)+len(d.CreatePods)+len(d.RestartPods)+len(d.ReleasePods) != 0 {
		t.Fatalf("one pod still runs attempt 1: deleted %v, created %v, restarted %d, released %d; want nothing", names(d.DeletePods), names(d.CreatePods), len(d.RestartPods), len(d.ReleasePods))
	}
	if d.Status.Attempt != 2 || d.Status.Restarts != 1 {
		t.Errorf("attempt %d, restarts %d: want 2 and 1, counted once", d.Status.Attempt, d.Status.Restarts)
	}
	// A pod between its agent's exit and its restart is not down either.
	pods[2] = ipPod("job-worker-2", "2", 2, 1, 0, 0, ipStopped)
	d = mustDecide(t, testJob(status), plan, Children{Pods: pods}, nil, now)
	if len(d.ReleasePods) != 0 {
		t.Fatalf("released %d pods while worker-2's containers restart: want none", len(d.ReleasePods))
	}

	// Every pod is down: every pod is released, none made.
	pods[2] = ipPod("job-worker-2", "2", 2, 1, 1, 0, ipHeld)
	d = mustDecide(t, testJob(status), plan, Children{Pods: pods}, nil, now)
	if len(d.CreatePods) != 0 || len(d.DeletePods) != 0 || len(d.ReleasePods) != 3 {
		t.Fatalf("every pod down: created %v, deleted %v, released %d; want all three released", names(d.CreatePods), names(d.DeletePods), len(d.ReleasePods))
	}
	for _, r := range d.ReleasePods {
		if want := agentStatus(r.Pod).RestartCount; r.Attempt != 2 || r.AgentRestarts != want {
			t.Errorf("%s released for attempt %d with agent restarts %d, want 2 and %d", r.Pod.Name, r.Attempt, r.AgentRestarts, want)
		}
	}

	// Released: the pods run attempt 2, as the same pods.
	status = *d.Status
	for i, p := range pods {
		pods[i] = ipPod(p.Name, p.UID, 2, 2, agentStatus(p).RestartCount, agentStatus(p).RestartCount, ipRunning)
	}
	d = mustDecide(t, testJob(status), plan, Children{Pods: pods}, nil, now)
	if len(d.CreatePods)+len(d.DeletePods)+len(d.RestartPods)+len(d.ReleasePods) != 0 || d.Status.Phase != batch.JobRunning {
		t.Fatalf("attempt 2 runs: created %v, deleted %v, restarted %d, released %d, phase %s; want nothing done, Running",
			names(d.CreatePods), names(d.DeletePods), len(d.RestartPods), len(d.ReleasePods), d.Status.Phase)
	}
	for _, task := range d.Status.Tasks {
		for _, r := range task.Replicas {
			if r.Phase != batch.ReplicaRunning || r.RestartCount != 1 {
				t.Errorf("%s: %s, %d restarts; want Running, 1", r.Name, r.Phase, r.RestartCount)
			}
		}
	}
}

// A controller that stopped after the status that restarts the job in place, and after
// writing the attempt to one pod of two, finishes the restart when it comes back: the other
// pod's attempt is written, nothing is counted again.
func TestRestartInPlaceFinishedAfterACrash(t *testing.T) {
	plan, status := twoWorkersInPlace()
	restarted := restartedBy(t, plan, status, 1)

	pods := []*corev1.Pod{ipPod("job-worker-0", "0", 1, 1, 0, 0, ipRunning), ipPod("job-worker-1", "1", 2, 1, 1, 0, ipHeld)}
	d := mustDecide(t, testJob(restarted), plan, Children{Pods: pods}, nil, now)
	if d.Status.Attempt != 2 || d.Status.Restarts != 1 || d.JobRestart != "" {
		t.Fatalf("attempt %d, restarts %d, restart %q: want attempt 2, one restart, none begun again", d.Status.Attempt, d.Status.Restarts, d.JobRestart)
	}
	if len(d.RestartPods) != 1 || d.RestartPods[0].Pod.Name != "job-worker-0" || len(d.DeletePods)+len(d.CreatePods)+len(d.ReleasePods) != 0 {
		t.Fatalf("restarted %d, deleted %v, created %v, released %d: want worker-0's attempt written, nothing else",
			len(d.RestartPods), names(d.DeletePods), names(d.CreatePods), len(d.ReleasePods))
	}
	for _, task := range d.Status.Tasks {
		for _, r := range task.Replicas {
			if r.RestartCount != 1 {
				t.Errorf("%s: %d restarts, want 1", r.Name, r.RestartCount)
			}
		}
	}
}

// A pod lost during an in-place restart (its node went, it was evicted) is made again, and
// released with the pods that restarted in place: the others keep theirs.
func TestPodLostDuringInPlaceRestart(t *testing.T) {
	plan, status := twoWorkersInPlace()
	restarted := restartedBy(t, plan, status, 0)

	// worker-1's pod is gone before it was down; worker-0's is down.
	down := []*corev1.Pod{ipPod("job-worker-0", "0", 2, 1, 1, 0, ipHeld)}
	d := mustDecide(t, testJob(restarted), plan, Children{Pods: down}, nil, now)
	if len(d.ReleasePods) != 1 || d.ReleasePods[0].Pod.Name != "job-worker-0" || len(d.CreatePods) != 1 || d.CreatePods[0].Name != "job-worker-1" {
		t.Fatalf("released %d, created %v: want worker-0 released, worker-1 made again", len(d.ReleasePods), names(d.CreatePods))
	}
	if got := d.CreatePods[0].Annotations[batch.AnnotationReleasedAttempt]; got != "2" || d.CreatePods[0].Labels[batch.LabelAttempt] != "2" {
		t.Errorf("the new pod: attempt %q released %q, want 2 and 2", d.CreatePods[0].Labels[batch.LabelAttempt], got)
	}
	if d.Status.Restarts != 1 || len(d.Disrupted) != 0 {
		t.Errorf("restarts %d, disrupted %v: want the one restart, no disruption of a pod the restart was taking", d.Status.Restarts, d.Disrupted)
	}
}

// A pod whose failure the controller did not see as it happened is held: its agent restarted
// since the attempt was released while nothing runs. It is read as failed, with the
// kubelet's exit code, and the job restarts.
func TestHeldPodIsAFailure(t *testing.T) {
	plan, status := twoWorkersInPlace()
	pods := []*corev1.Pod{ipPod("job-worker-0", "0", 1, 1, 0, 0, ipRunning), ipPod("job-worker-1", "1", 1, 1, 1, 0, ipHeld)}
	d := mustDecide(t, testJob(status), plan, Children{Pods: pods}, nil, now)
	if d.Status.Attempt != 2 || len(d.RestartPods) != 2 {
		t.Fatalf("worker-1 held: attempt %d, restarted %d in place; want attempt 2, both", d.Status.Attempt, len(d.RestartPods))
	}
	if c := replicaOf(d.Status, "job-worker-1").LastTermination.Containers; len(c) != 1 || *c[0].ExitCode != 137 || c[0].Reason != restartingAllContainers {
		t.Errorf("worker-1's containers %+v: want the kubelet's 137, RestartingAllContainers", c)
	}

	// The engine saw the pod failing before the kubelet restarted its containers: the exit
	// code is the failed container's.
	failing := ipPod("job-worker-1", "1", 1, 1, 0, 0, ipFailing)
	d = mustDecide(t, testJob(status), plan, Children{Pods: pods, Failing: map[types.UID]*corev1.Pod{"1": failing}}, nil, now)
	if c := replicaOf(d.Status, "job-worker-1").LastTermination.Containers; len(c) != 1 || *c[0].ExitCode != 1 || c[0].Reason != "Error" {
		t.Errorf("worker-1's containers %+v: want the failed container's exit code 1, Error", c)
	}
	// A failure remembered of an earlier life is not this one's.
	old := ipPod("job-worker-1", "1", 0, 0, 0, 0, ipFailing)
	d = mustDecide(t, testJob(status), plan, Children{Pods: pods, Failing: map[types.UID]*corev1.Pod{"1": old}}, nil, now)
	if c := replicaOf(d.Status, "job-worker-1").LastTermination.Containers; len(c) != 1 || *c[0].ExitCode != 137 {
		t.Errorf("worker-1's containers %+v: want the kubelet's 137, not an earlier life's code", c)
	}

	// Just released, before the agent's probe passed, a pod looks held too, but its agent has
	// not restarted since: it is not a failure.
	pods[1] = ipPod("job-worker-1", "1", 1, 1, 1, 1, ipHeld)
	if d := mustDecide(t, testJob(status), plan, Children{Pods: pods}, nil, now); d.JobRestart != "" || len(d.RestartPods) != 0 {
		t.Fatalf("a pod just released: restart %q, restarted %d; want none", d.JobRestart, len(d.RestartPods))
	}
}

// twoWorkersInPlace is a job of two workers that restart in place, running its attempt 1.
func twoWorkersInPlace() (*Plan, batch.JobStatus) {
	plan := inPlacePlan()
	plan.Groups[0].Replicas = 2
	status := running("0", "1")
	status.Attempt = 1
	return plan, status
}

// restartedBy is the status of the decision that restarts such a job in place, worker rank
// having failed and the other running.
func restartedBy(t *testing.T, plan *Plan, status batch.JobStatus, rank int) batch.JobStatus {
	t.Helper()
	pods := []*corev1.Pod{ipPod("job-worker-0", "0", 1, 1, 0, 0, ipRunning), ipPod("job-worker-1", "1", 1, 1, 0, 0, ipRunning)}
	pods[rank] = ipPod(pods[rank].Name, pods[rank].UID, 1, 1, 0, 0, ipFailing)
	return *mustDecide(t, testJob(status), plan, Children{Pods: pods}, nil, now).Status
}

// A pod with the agent that no node can take (kube-scheduler's NodeDeclaredFeatures filter:
// no kubelet declares RestartAllContainersOnContainerExits) is made again without it, never
// counted; the job says so in its InPlaceUnavailable condition, and makes its pods without the
// agent from then on.
func TestUnplacedWithAgentMadeWithout(t *testing.T) {
	plan := inPlacePlan()
	plan.Groups[0].Replicas = 1
	p := ipPod("job-worker-0", "0", 1, 1, 0, 0, ipRunning)
	p.Spec.NodeName, p.Status.Phase, p.Status.ContainerStatuses, p.Status.InitContainerStatuses = "", corev1.PodPending, nil, nil
	unschedulable(p, "0/4 nodes are available: 4 node(s) didn't match Pod's required features. preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling.")
	status := statusWith(batch.JobPending, replicaStatus("job-worker-0", "0", batch.ReplicaPending, 0))
	status.Attempt = 1
	d := mustDecide(t, testJob(status), plan, Children{Pods: []*corev1.Pod{p}}, nil, now)
	if names(d.DeletePods) == nil || d.DeletePods[0].Name != "job-worker-0" || !strings.Contains(d.InPlaceFallback, "without the restart agent") {
		t.Fatalf("deleted %v, fallback %q: want the pod made again without the agent, said so", names(d.DeletePods), d.InPlaceFallback)
	}
	c := d.Status.Condition(batch.JobConditionInPlaceUnavailable)
	if c.Status != corev1.ConditionTrue || !strings.Contains(c.Message, "job-worker-0") {
		t.Fatalf("condition %+v: want InPlaceUnavailable True, naming the pod", c)
	}
	if r := replicaOf(d.Status, "job-worker-0"); r.RestartCount != 0 || r.Disruptions != 0 {
		t.Errorf("worker-0: %d restarts, %d disruptions; want nothing counted", r.RestartCount, r.Disruptions)
	}

	// Gone: made again, without the agent.
	d = mustDecide(t, testJob(*d.Status), plan, Children{}, nil, now)
	if len(d.CreatePods) != 1 {
		t.Fatalf("created %v, want worker-0 again", names(d.CreatePods))
	}
	made := d.CreatePods[0]
	if slices.ContainsFunc(made.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == AgentContainer }) ||
		made.Annotations[batch.AnnotationReleasedAttempt] != "" || made.Spec.Containers[0].RestartPolicyRules != nil {
		t.Errorf("made with init containers %v, annotations %v, rules %v: want none of the agent's", made.Spec.InitContainers, made.Annotations, made.Spec.Containers[0].RestartPolicyRules)
	}
	if len(d.Status.Conditions) == 0 || !d.Status.ConditionTrue(batch.JobConditionInPlaceUnavailable) {
		t.Error("the condition did not stay")
	}
}

// A pod restarted in place whose containers do not stop within the grace (a kubelet that does
// not restart them after all) is deleted and made again, and the decision says why.
func TestInPlaceFallsBackToRecreate(t *testing.T) {
	plan, status := twoWorkersInPlace()
	status = restartedBy(t, plan, status, 1)
	late := ipPod("job-worker-0", "0", 2, 1, 0, 0, ipRunning)
	late.Annotations[batch.AnnotationRestartedAt] = now.Add(-InPlaceStopGrace / 2).Format(time.RFC3339)
	pods := []*corev1.Pod{late, ipPod("job-worker-1", "1", 2, 1, 2, 0, ipHeld)}
	d := mustDecide(t, testJob(status), plan, Children{Pods: pods}, nil, now)
	if len(d.DeletePods) != 0 || d.RequeueAfter <= 0 || d.RequeueAfter > InPlaceStopGrace/2 {
		t.Fatalf("within the grace: deleted %v, requeue after %s; want nothing deleted, a look at the grace's end", names(d.DeletePods), d.RequeueAfter)
	}
	late.Annotations[batch.AnnotationRestartedAt] = now.Add(-InPlaceStopGrace - time.Second).Format(time.RFC3339)
	d = mustDecide(t, testJob(status), plan, Children{Pods: pods}, nil, now)
	if len(d.DeletePods) != 1 || d.DeletePods[0].Name != "job-worker-0" || !strings.Contains(d.InPlaceFallback, "did not stop") {
		t.Fatalf("past the grace: deleted %v, fallback %q; want worker-0 made again, the reason said", names(d.DeletePods), d.InPlaceFallback)
	}
}

// A job that ends deletes its pods held after a failure, whatever its clean-up policy: they
// run nothing and hold their node's resources.
func TestEndedJobDeletesHeldPods(t *testing.T) {
	plan, status := twoWorkersInPlace()
	plan.Groups[0] = workers(2, batch.RestartNever, nil)
	plan.CleanUp = batch.CleanUpNone
	pods := []*corev1.Pod{ipPod("job-worker-0", "0", 1, 1, 0, 0, ipRunning), ipPod("job-worker-1", "1", 1, 1, 1, 0, ipHeld)}
	d := mustDecide(t, testJob(status), plan, Children{Pods: pods}, nil, now)
	if d.Outcome == nil || d.Outcome.Succeeded {
		t.Fatalf("outcome %+v: want failed", d.Outcome)
	}
	if got := names(d.DeletePods); len(got) != 1 || got[0] != "job-worker-1" {
		t.Errorf("deleted %v: want the held worker-1 only (clean-up None keeps worker-0)", got)
	}
}

// An elastic job that restarts in place: a shrink deletes its highest rank (a resize is not
// a restart, so the pod is not kept); a failure under restartScope Job restarts every pod in
// place; a disrupted replica at the type's minimum is replaced alone, the others untouched.
func TestElasticJobRestartsInPlace(t *testing.T) {
	ipPods := func(states ...string) []*corev1.Pod {
		var pods []*corev1.Pod
		for i, s := range states {
			pods = append(pods, ipPod(fmt.Sprintf("job-worker-%d", i), types.UID(fmt.Sprint(i)), 1, 1, 0, 0, s))
		}
		return pods
	}
	for _, tc := range []struct {
		name               string
		size, min          int32
		pods               []*corev1.Pod
		deleted            []string
		restarted, attempt int32
	}{
		{"shrunk from 3 to 2", 2, 1, ipPods(ipRunning, ipRunning, ipRunning), []string{"job-worker-2"}, 0, 1},
		{"a failure restarts the job in place", 3, 2, ipPods(ipRunning, ipFailing, ipRunning), nil, 3, 2},
		{"a disruption at the minimum", 3, 2, append(ipPods(ipRunning, ipRunning), disruptedPod("job-worker-2", "2", "PreemptionByScheduler")), []string{"job-worker-2"}, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := elasticPlan(tc.size, tc.min, 3, true)
			plan.InPlace = inPlacePlan().InPlace
			status := running("0", "1", "2")
			status.Attempt = 1
			d := mustDecide(t, testJob(status), plan, Children{Pods: tc.pods}, nil, now)
			if got := names(d.DeletePods); !sameNames(got, tc.deleted) {
				t.Errorf("deleted %v, want %v", got, tc.deleted)
			}
			if len(d.RestartPods) != int(tc.restarted) || d.Status.Attempt != tc.attempt {
				t.Errorf("restarted %d pods in place, attempt %d; want %d, attempt %d", len(d.RestartPods), d.Status.Attempt, tc.restarted, tc.attempt)
			}
		})
	}
}
