package decision

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// preemptedOn is a worker's pod the scheduler preempted on a node, being deleted: its
// deletion is due at the time given (its grace period's end).
func preemptedOn(rank, node string, due time.Time) *corev1.Pod {
	p := disruptedPod("job-worker-"+rank, types.UID("w"+rank), "PreemptionByScheduler")
	p.Spec.NodeName = node
	p.DeletionTimestamp = ptr.To(metav1.NewTime(due))
	return p
}

// A gang preempted whole: the replica whose old pod is gone first waits for the others' to go
// too, so that the gang's new pods are made, and placed, together (gangwait.go).
func TestGangNewPodsWaitForTheOldToGo(t *testing.T) {
	plan := &Plan{Groups: []Group{workers(3, batch.RestartNever, nil)}, Judge: allSucceed}
	gang := &Verdict{Admitted: true, Gang: map[string]bool{"worker": true}}
	due := now.Add(20 * time.Second)
	// The first sync sees the three preempted pods being deleted: it records the disruptions.
	first := mustDecide(t, testJob(running("0", "1", "2")), plan, Children{Pods: []*corev1.Pod{
		preemptedOn("0", "node-a", due), preemptedOn("1", "node-a", due), preemptedOn("2", "node-b", due)}}, gang, now)
	if len(first.Disrupted) != 3 || len(first.CreatePods) != 0 {
		t.Fatalf("first sync: disrupted %v, created %v; want 3 disrupted, none created", first.Disrupted, names(first.CreatePods))
	}
	oneGone := []*corev1.Pod{preemptedOn("1", "node-a", due), preemptedOn("2", "node-b", due)}
	unbound := func(p *corev1.Pod) *corev1.Pod { p.Spec.NodeName = ""; return p }

	cases := []struct {
		what      string
		admission *Verdict
		pods      []*corev1.Pod
		at        time.Time
		created   []string
		requeue   time.Duration
	}{
		{"worker-0's pod gone, the others' going: nothing made, looked at again once theirs are past due",
			gang, oneGone, now, nil, 20*time.Second + gangStuckAfter},
		{"the same without a gang: worker-0's pod made at once (the scheduler places each alone)",
			nil, oneGone, now, []string{"job-worker-0"}, 0},
		{"the same when the gang is another type's",
			&Verdict{Admitted: true, Gang: map[string]bool{"ps": true}}, oneGone, now, []string{"job-worker-0"}, 0},
		{"an unbound pod that goes holds nothing: it counts toward no minCount",
			gang, []*corev1.Pod{unbound(preemptedOn("1", "", due)), unbound(preemptedOn("2", "", due))}, now, []string{"job-worker-0"}, 0},
		{"a pod stuck past its due time (its node does not answer) holds the gang no more",
			gang, oneGone, due.Add(gangStuckAfter), []string{"job-worker-0"}, 0},
		{"a pod a little past due still holds it, until gangStuckAfter",
			gang, oneGone, due.Add(time.Second), nil, gangStuckAfter - time.Second},
		{"every old pod gone: the gang's pods are made together",
			gang, nil, now, []string{"job-worker-0", "job-worker-1", "job-worker-2"}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.what, func(t *testing.T) {
			d := mustDecide(t, testJob(*first.Status), plan, Children{Pods: tc.pods}, tc.admission, tc.at)
			if got := names(d.CreatePods); !sameNames(got, tc.created) {
				t.Errorf("created %v, want %v", got, tc.created)
			}
			if d.RequeueAfter != tc.requeue {
				t.Errorf("requeue after %v, want %v", d.RequeueAfter, tc.requeue)
			}
			if tc.created == nil {
				r := replicaOf(d.Status, "job-worker-0")
				if r.Phase != batch.ReplicaDeleted || r.Disruptions != 1 {
					t.Errorf("worker-0 waiting for its gang: %+v, want Deleted with its disruption counted", r)
				}
			}
		})
	}
}
