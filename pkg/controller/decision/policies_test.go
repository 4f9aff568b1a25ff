package decision

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// decided is what a decision does, as the policies' table states it.
type decided struct {
	// Phase is the job's phase in the status decided; Outcome how the job ends, the outcome's
	// reason or, when it gives none, Succeeded or Failed ("": the job goes on); Restarts its
	// status.restarts.
	Phase    batch.JobPhase
	Outcome  string
	Restarts int32
	// Restarted and Disrupted name the replicas restarted, and replaced after a disruption.
	Restarted, Disrupted []string
	// Deleted and Created name the pods deleted and created.
	Deleted, Created []string
	// Excluded names the nodes new pods avoid (status.excludedNodes); Stalled: the job's
	// Stalled condition is True; Requeue: when to look again.
	Excluded []string
	Stalled  bool
	Requeue  time.Duration
	// InPlace names the pods restarted in place, their attempt written to them.
	InPlace []string
}

func decidedOf(d *Decision) decided {
	list := func(names []string) []string {
		if len(names) == 0 {
			return nil
		}
		return names
	}
	var excluded []string
	for _, e := range d.Status.ExcludedNodes {
		excluded = append(excluded, e.Node)
	}
	out := decided{Phase: d.Status.Phase, Restarts: d.Status.Restarts, Restarted: list(d.Restarted), Disrupted: list(d.Disrupted),
		Deleted: list(names(d.DeletePods)), Created: list(names(d.CreatePods)), Excluded: excluded,
		Stalled: d.Status.ConditionTrue(batch.JobConditionStalled), Requeue: d.RequeueAfter}
	for _, r := range d.RestartPods {
		out.InPlace = append(out.InPlace, r.Pod.Name)
	}
	switch {
	case d.Outcome == nil:
	case d.Outcome.Reason != "":
		out.Outcome = d.Outcome.Reason
	case d.Outcome.Succeeded:
		out.Outcome = "Succeeded"
	default:
		out.Outcome = "Failed"
	}
	return out
}

// TestPolicies is the policies in one table: each case names the file of the policy it
// shows, a job as the policy finds it (its plan, status and pods), and what the decision
// does. A new policy is a file of the package, its step in Decide, and a case here; the
// policy's own tests (rules_test.go, stall_test.go ...) then say the rest.
func TestPolicies(t *testing.T) {
	failedOn := func(rank int, code int32, node string) *corev1.Pod {
		p := pod(fmt.Sprintf("job-worker-%d", rank), types.UID(fmt.Sprintf("w%d", rank)), corev1.PodFailed, code)
		p.Spec.NodeName = node
		return p
	}
	runningPod := func(rank int) *corev1.Pod {
		return pod(fmt.Sprintf("job-worker-%d", rank), types.UID(fmt.Sprintf("w%d", rank)), corev1.PodRunning, 0)
	}
	plan := func(n int32, policy batch.RestartPolicy, change func(*Plan)) *Plan {
		p := &Plan{Groups: []Group{workers(n, policy, nil)}, Judge: allSucceed}
		if change != nil {
			change(p)
		}
		return p
	}
	rule := func(action batch.FailurePolicyAction, code int32) func(*Plan) {
		return func(p *Plan) {
			p.FailurePolicy = &batch.FailurePolicy{Rules: []batch.FailurePolicyRule{{Name: "rule", Action: action, OnExitCodes: exitCodes(batch.ExitCodesIn, code)}}}
		}
	}
	started := func(ago time.Duration, s batch.JobStatus) batch.JobStatus {
		s.StartTime = ptr.To(metav1.NewTime(now.Add(-ago)))
		return s
	}
	justEnded := failedOn(0, 1, "")
	justEnded.Status.ContainerStatuses[0].State.Terminated.FinishedAt = metav1.NewTime(now.Add(-time.Second))
	launcher := func(p *Plan) {
		p.Groups = append([]Group{{Type: "launcher", Replicas: 1, Restart: batch.RestartNever, After: []string{"worker"}, Template: template("run")}}, p.Groups...)
	}

	cases := []struct {
		policy, what string
		plan         *Plan
		status       batch.JobStatus
		pods         []*corev1.Pod
		want         decided
		annotations  map[string]string // the job's
		admission    *Verdict          // the admitters' (nil: none applies)
	}{
		{"replicas.go", "a new job's replicas are created",
			plan(2, batch.RestartNever, nil), batch.JobStatus{}, nil,
			decided{Phase: batch.JobPending, Created: []string{"job-worker-0", "job-worker-1"}}, nil, nil},
		{"restart.go", "OnFailure restarts a failed replica",
			plan(2, batch.RestartOnFailure, nil), running("0", "1"), []*corev1.Pod{failedOn(0, 1, ""), runningPod(1)},
			decided{Phase: batch.JobRunning, Restarted: []string{"job-worker-0"}, Deleted: []string{"job-worker-0"}}, nil, nil},
		{"restart.go", "a second restart waits for its backoff",
			plan(1, batch.RestartOnFailure, nil), statusWith(batch.JobRunning, replicaStatus("job-worker-0", "w0", batch.ReplicaRunning, 1)), []*corev1.Pod{justEnded},
			decided{Phase: batch.JobRunning, Requeue: time.Second}, nil, nil},
		{"rules.go", "a FailJob rule fails the job on its exit code",
			plan(2, batch.RestartOnFailure, rule(batch.FailJob, 42)), running("0", "1"), []*corev1.Pod{failedOn(0, 42, ""), runningPod(1)},
			decided{Phase: batch.JobFailed, Outcome: ReasonFailurePolicy, Deleted: []string{"job-worker-1"}}, nil, nil},
		{"rules.go", "a RestartJob rule restarts every replica, once",
			plan(2, batch.RestartNever, rule(batch.RestartJob, 3)), running("0", "1"), []*corev1.Pod{runningPod(0), failedOn(1, 3, "")},
			decided{Phase: batch.JobRunning, Restarts: 1, Restarted: []string{"job-worker-1"}, Deleted: []string{"job-worker-0", "job-worker-1"}}, nil, nil},
		{"disruption.go", "a preempted pod is replaced, no restart counted",
			plan(1, batch.RestartNever, nil), running("0"), []*corev1.Pod{disruptedPod("job-worker-0", "w0", "PreemptionByScheduler")},
			decided{Phase: batch.JobRunning, Disrupted: []string{"job-worker-0"}, Deleted: []string{"job-worker-0"}}, nil, nil},
		{"nodes.go", "the node a replica failed on is avoided",
			plan(1, batch.RestartOnFailure, func(p *Plan) {
				p.FailurePolicy = &batch.FailurePolicy{AvoidFailedNodes: &batch.AvoidFailedNodes{}}
			}), running("0"), []*corev1.Pod{failedOn(0, 1, "node-a")},
			decided{Phase: batch.JobRunning, Restarted: []string{"job-worker-0"}, Deleted: []string{"job-worker-0"}, Excluded: []string{"node-a"}}, nil, nil},
		{"stall.go", "a silent replica restarts the whole job",
			stallPlan(batch.RestartOnFailure), reported(map[string]time.Duration{"job-worker-1": 2 * time.Minute}, nil), runningPods().Pods,
			decided{Phase: batch.JobRunning, Restarts: 1, Restarted: []string{"job-worker-1"}, Deleted: []string{"job-worker-0", "job-worker-1"}, Stalled: true}, nil, nil},
		{"restartjob.go", "restartScope Job restarts every replica with the one that failed",
			plan(2, batch.RestartOnFailure, func(p *Plan) { p.RestartJob = true }), running("0", "1"), []*corev1.Pod{failedOn(0, 1, ""), runningPod(1)},
			decided{Phase: batch.JobRunning, Restarts: 1, Restarted: []string{"job-worker-0", "job-worker-1"}, Deleted: []string{"job-worker-0", "job-worker-1"}}, nil, nil},
		{"inplace.go", "restartStrategy InPlace keeps the pods, writing the next attempt to them",
			plan(2, batch.RestartOnFailure, func(p *Plan) { p.RestartJob, p.InPlace = true, &InPlacePlan{AgentImage: "agent"} }),
			func() batch.JobStatus { s := running("w0", "w1"); s.Attempt = 1; return s }(),
			[]*corev1.Pod{ipPod("job-worker-0", "w0", 1, 1, 0, 0, ipFailing), ipPod("job-worker-1", "w1", 1, 1, 0, 0, ipRunning)},
			decided{Phase: batch.JobRunning, Restarts: 1, Restarted: []string{"job-worker-0", "job-worker-1"}, InPlace: []string{"job-worker-0", "job-worker-1"}}, nil, nil},
		{"requested.go", "a restart asked for the current attempt restarts every replica, counting nothing",
			plan(2, batch.RestartNever, nil), func() batch.JobStatus { s := running("0", "1"); s.Attempt = 2; return s }(), []*corev1.Pod{runningPod(0), runningPod(1)},
			decided{Phase: batch.JobRunning, Deleted: []string{"job-worker-0", "job-worker-1"}}, map[string]string{batch.AnnotationRestartAttempt: "2"}, nil},
		{"requested.go", "a restart asked for a past attempt does nothing",
			plan(2, batch.RestartNever, nil), func() batch.JobStatus { s := running("0", "1"); s.Attempt = 3; return s }(), []*corev1.Pod{runningPod(0), runningPod(1)},
			decided{Phase: batch.JobRunning}, map[string]string{batch.AnnotationRestartAttempt: "2"}, nil},
		{"elastic.go", "an elastic type asked to grow makes its new ranks, restarting nothing",
			plan(3, batch.RestartOnFailure, func(p *Plan) { p.Elastic = &Elastic{Type: "worker", Min: 1, Max: 3} }),
			running("0", "1"), []*corev1.Pod{runningPod(0), runningPod(1)},
			decided{Phase: batch.JobRunning, Created: []string{"job-worker-2"}}, nil, nil},
		{"gangwait.go", "a gang's replica whose pod is gone waits while another of the gang's goes",
			plan(2, batch.RestartNever, nil),
			statusWith(batch.JobRunning, replicaStatus("job-worker-0", "", batch.ReplicaDeleted, 0), replicaStatus("job-worker-1", "w1", batch.ReplicaRunning, 0)),
			[]*corev1.Pod{preemptedOn("1", "node-a", now.Add(time.Second))},
			decided{Phase: batch.JobRunning, Disrupted: []string{"job-worker-1"}, Requeue: time.Second + gangStuckAfter}, nil,
			&Verdict{Admitted: true, Gang: map[string]bool{"worker": true}}},
		{"after.go", "a launcher waits for its workers to be ready",
			plan(2, batch.RestartNever, launcher), batch.JobStatus{}, nil,
			decided{Phase: batch.JobPending, Created: []string{"job-worker-0", "job-worker-1"}}, nil, nil},
		{"deadlines.go", "a job past activeDeadlineSeconds fails",
			plan(1, batch.RestartNever, func(p *Plan) { p.Deadline = time.Hour }), started(2*time.Hour, running("0")), []*corev1.Pod{runningPod(0)},
			decided{Phase: batch.JobFailed, Outcome: "DeadlineExceeded", Deleted: []string{"job-worker-0"}}, nil, nil},
		{"deadlines.go", "a job within startupDeadlineSeconds is looked at again when it runs out",
			plan(1, batch.RestartNever, func(p *Plan) { p.StartupDeadline = time.Hour }),
			started(time.Minute, statusWith(batch.JobPending, replicaStatus("job-worker-0", "w0", batch.ReplicaPending, 0))), []*corev1.Pod{pendingPod(0)},
			decided{Phase: batch.JobPending, Requeue: 59 * time.Minute}, nil, nil},
		{"pods.go", "an ended job's clean-up deletes the pods that still run",
			plan(2, batch.RestartNever, func(p *Plan) { p.CleanUp = batch.CleanUpUnfinished }), running("0", "1"), []*corev1.Pod{failedOn(0, 1, ""), runningPod(1)},
			decided{Phase: batch.JobFailed, Outcome: "Failed", Deleted: []string{"job-worker-1"}}, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.policy+": "+tc.what, func(t *testing.T) {
			job := testJob(tc.status)
			job.Annotations = tc.annotations
			d := mustDecide(t, job, tc.plan, Children{Pods: tc.pods}, tc.admission, now)
			if got := decidedOf(d); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("decided %+v\nwant    %+v", got, tc.want)
			}
		})
	}
}
