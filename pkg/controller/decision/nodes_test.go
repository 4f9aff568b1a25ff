package decision

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// Retries away from bad nodes (spec.failurePolicy.avoidFailedNodes).

func avoidingPlan(maxNodes int32) *Plan {
	return &Plan{Groups: []Group{workers(2, batch.RestartOnFailure, nil)}, Judge: allSucceed,
		FailurePolicy: &batch.FailurePolicy{AvoidFailedNodes: &batch.AvoidFailedNodes{MaxNodes: ptr.To(maxNodes)}}}
}

// excludedBy is the node names a pod's affinity excludes.
func excludedBy(p *corev1.Pod) []string {
	if p.Spec.Affinity == nil || p.Spec.Affinity.NodeAffinity == nil || p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	var out []string
	for _, term := range p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == metav1.ObjectNameField && f.Operator == corev1.NodeSelectorOpNotIn {
				out = append(out, f.Values...)
			}
		}
	}
	return out
}

func TestFailedNodeIsAvoided(t *testing.T) {
	plan := avoidingPlan(8)
	failed := typed(pod("job-worker-1", "w1", corev1.PodFailed, 1), "worker", "node-a")
	d := mustDecide(t, testJob(running("0", "1")), plan, Children{Pods: []*corev1.Pod{typed(pod("job-worker-0", "w0", corev1.PodRunning, 0), "worker", "node-b"), failed}}, nil, now)
	if len(d.Status.ExcludedNodes) != 1 || d.Status.ExcludedNodes[0].Node != "node-a" || d.Status.ExcludedNodes[0].Replica != "job-worker-1" ||
		d.Status.ExcludedNodes[0].Reason != "exit code 1" || len(d.ExcludedNodes) != 1 {
		t.Fatalf("excluded %+v: want node-a, where worker-1 failed with exit code 1", d.Status.ExcludedNodes)
	}
	// The replacement, made once the old pod is gone, avoids it; so does the list after a
	// restart of the controller (it is in status).
	next := mustDecide(t, testJob(*d.Status), plan, Children{Pods: []*corev1.Pod{typed(pod("job-worker-0", "w0", corev1.PodRunning, 0), "worker", "node-b")}}, nil, now)
	if len(next.CreatePods) != 1 || strings.Join(excludedBy(next.CreatePods[0]), ",") != "node-a" || next.CreatePods[0].Annotations[batch.AnnotationExcludedNodes] != "node-a" {
		t.Fatalf("created %v: want worker-1 made to avoid node-a", names(next.CreatePods))
	}
	// Two nodes: one requirement each, as the API server wants of a node field selector.
	two := excludedNodesPod(t, []batch.ExcludedNode{{Node: "node-a"}, {Node: "node-b"}})
	for _, f := range two.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields {
		if len(f.Values) != 1 {
			t.Errorf("a node field requirement with %d values %v: the API server takes one", len(f.Values), f.Values)
		}
	}
	if got := strings.Join(excludedBy(two), ","); got != "node-a,node-b" {
		t.Errorf("two exclusions: %s", got)
	}
	// A template's own required terms each get the exclusion.
	p := &corev1.Pod{Spec: corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpu", Operator: corev1.NodeSelectorOpExists}}}, {}}}}}}}
	excludeNodes(p, d.Status.ExcludedNodes)
	if got := excludedBy(p); len(got) != 2 {
		t.Errorf("a template with two terms: exclusions %v, want one in each", got)
	}
}

func TestWhatPointsAtANode(t *testing.T) {
	code := func(c int32, reason string) []batch.ContainerStatus {
		return []batch.ContainerStatus{{Name: "main", ExitCode: &c, Reason: reason}}
	}
	for _, tc := range []struct {
		name string
		t    batch.ReplicaTermination
		want bool
	}{
		{"a failure after running", batch.ReplicaTermination{Containers: code(1, "Error")}, true},
		{"OOMKilled: its own limit", batch.ReplicaTermination{Containers: code(137, "OOMKilled")}, false},
		{"could not start", batch.ReplicaTermination{Containers: code(128, "StartError")}, false},
		{"succeeded", batch.ReplicaTermination{Containers: code(0, "Completed")}, false},
		{"its kubelet ended it", batch.ReplicaTermination{Disrupted: true, Reason: "TerminationByKubelet"}, true},
		{"its node's taint", batch.ReplicaTermination{Disrupted: true, Reason: "DeletionByTaintManager"}, true},
		{"preempted", batch.ReplicaTermination{Disrupted: true, Reason: "PreemptionByScheduler"}, false},
		{"deleted by hand", batch.ReplicaTermination{Disrupted: true, Reason: ReasonDeleted}, false},
	} {
		if got := pointsAtNode(&tc.t); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestExcludedNodesAreBounded(t *testing.T) {
	plan := avoidingPlan(2)
	status := running("0", "1")
	status.ExcludedNodes = []batch.ExcludedNode{{Node: "node-x", Time: metav1.NewTime(now.Add(-time.Hour))}, {Node: "node-y", Time: metav1.NewTime(now.Add(-time.Minute))}}
	d := mustDecide(t, testJob(status), plan, Children{Pods: []*corev1.Pod{typed(pod("job-worker-0", "w0", corev1.PodRunning, 0), "worker", "node-b"),
		typed(pod("job-worker-1", "w1", corev1.PodFailed, 1), "worker", "node-a")}}, nil, now)
	var got []string
	for _, e := range d.Status.ExcludedNodes {
		got = append(got, e.Node)
	}
	if strings.Join(got, ",") != "node-y,node-a" {
		t.Errorf("excluded %v: want the oldest dropped past maxNodes 2", got)
	}
}

// When a pod that avoids nodes cannot be placed, the scheduler naming node affinity, the
// oldest exclusion is dropped after a grace and the pod made again without it.
func TestExclusionDroppedWhenNothingFits(t *testing.T) {
	plan := avoidingPlan(8)
	status := running("0", "1")
	status.ExcludedNodes = []batch.ExcludedNode{{Node: "node-a", Replica: "job-worker-1", Reason: "exit code 1", Time: metav1.NewTime(now.Add(-time.Minute))}}
	stuck := func(since time.Duration) *corev1.Pod {
		p := pod("job-worker-1", "w1", corev1.PodPending, 0)
		p.Status.ContainerStatuses = nil
		p.Annotations = map[string]string{batch.AnnotationExcludedNodes: "node-a"}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 node(s) had untolerated taint(s).", LastTransitionTime: metav1.NewTime(now.Add(-since))}}
		return p
	}
	w0 := typed(pod("job-worker-0", "w0", corev1.PodRunning, 0), "worker", "node-b")
	early := mustDecide(t, testJob(status), plan, Children{Pods: []*corev1.Pod{w0, stuck(3 * time.Second)}}, nil, now)
	if len(early.DroppedNodes) != 0 || len(early.Status.ExcludedNodes) != 1 || early.RequeueAfter != 7*time.Second {
		t.Fatalf("within the grace: dropped %v, requeue %s; want nothing dropped yet, a sync when the grace ends", early.DroppedNodes, early.RequeueAfter)
	}
	d := mustDecide(t, testJob(status), plan, Children{Pods: []*corev1.Pod{w0, stuck(time.Minute)}}, nil, now)
	if strings.Join(d.DroppedNodes, ",") != "node-a" || len(d.Status.ExcludedNodes) != 0 || strings.Join(names(d.DeletePods), ",") != "job-worker-1" {
		t.Fatalf("dropped %v, excluded %v, deleted %v: want node-a dropped and worker-1's pod made again", d.DroppedNodes, d.Status.ExcludedNodes, names(d.DeletePods))
	}
	if r := replicaOf(d.Status, "job-worker-1"); r.RestartCount != 0 || r.Disruptions != 0 {
		t.Errorf("worker-1 %+v: a pod that never ran is made again counting nothing", r)
	}
	gone := mustDecide(t, testJob(*d.Status), plan, Children{Pods: []*corev1.Pod{w0}}, nil, now)
	if len(gone.CreatePods) != 1 || len(excludedBy(gone.CreatePods[0])) != 0 {
		t.Errorf("created %v: want worker-1 again, avoiding nothing", names(gone.CreatePods))
	}
}

func excludedNodesPod(t *testing.T, excluded []batch.ExcludedNode) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{}
	excludeNodes(p, excluded)
	return p
}

// A job its queue evicts (an admitter holds it: its pods go) keeps the nodes it avoids, and
// its pods, once it is admitted again, avoid them: the list is in status, not in its pods.
func TestExcludedNodesSurviveARequeue(t *testing.T) {
	plan := avoidingPlan(8)
	status := running("0", "1")
	status.ExcludedNodes = []batch.ExcludedNode{{Node: "node-a", Replica: "job-worker-1", Reason: "exit code 1", Time: metav1.NewTime(now.Add(-time.Minute))}}
	evicted := mustDecide(t, testJob(status), plan, runningPods(), &Verdict{Reason: "Evicted", Message: "Preempted in its queue."}, now)
	if len(evicted.DeletePods) != 2 || len(evicted.Status.ExcludedNodes) != 1 {
		t.Fatalf("evicted: deleted %v, excluded %+v; want its pods gone, node-a kept", names(evicted.DeletePods), evicted.Status.ExcludedNodes)
	}
	admitted := mustDecide(t, testJob(*evicted.Status), plan, Children{}, &Verdict{Admitted: true}, now)
	if len(admitted.CreatePods) != 2 {
		t.Fatalf("admitted again: created %v", names(admitted.CreatePods))
	}
	for _, p := range admitted.CreatePods {
		if strings.Join(excludedBy(p), ",") != "node-a" {
			t.Errorf("%s avoids %v, want node-a", p.Name, excludedBy(p))
		}
	}
}
