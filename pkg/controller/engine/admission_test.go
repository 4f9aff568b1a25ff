package engine

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision/decisiontest"
)

// Several admitters apply to one job: it is held until every one has admitted it, the first
// that waits says why, and its pods carry what each admitter adds, in the admitters' order.
func TestEveryAdmitterMustAdmit(t *testing.T) {
	plan := &Plan{Groups: []Group{workers(2, batch.RestartNever, nil)}, Judge: whenAllSucceed}
	label := func(key, value string) func(string, *corev1.Pod) {
		return func(replicaType string, pod *corev1.Pod) {
			if pod.Labels[batch.LabelReplicaType] != replicaType {
				t.Errorf("pod %s completed as a %s", pod.Name, replicaType)
			}
			pod.Labels[key] = value
		}
	}
	quota := &Verdict{Admitted: true, Pod: label("pool", "gpu"), RequeueAfter: time.Minute}
	gang := &Verdict{Reason: "GangWaiting", Message: "Waiting for the pod group.", RequeueAfter: 10 * time.Second}
	other := &Verdict{Reason: "OtherWaiting", Message: "Waiting for another."}

	d := mustDecide(t, decisiontest.Job(batch.JobStatus{}), plan, Children{}, (&verdicts{list: []*Verdict{quota, gang, other}}).combined(), now)
	running := d.Status.Condition(batch.JobConditionRunning)
	if len(d.CreatePods) != 0 || d.Status.Phase != batch.JobPending || running.Reason != "GangWaiting" ||
		running.Message != gang.Message+" Replicas waiting: worker-0, worker-1 (since 12:00:00)." {
		t.Fatalf("%d pods, phase %s, Running %+v: want none, Pending, the first waiting admitter's reason, the replicas named", len(d.CreatePods), d.Status.Phase, running)
	}
	if d.RequeueAfter != 10*time.Second {
		t.Errorf("RequeueAfter %s, want the soonest an admitter asks for", d.RequeueAfter)
	}

	gang = &Verdict{Admitted: true, Pod: label("group", "job"), Gang: map[string]bool{"worker": true}}
	both := (&verdicts{list: []*Verdict{quota, gang}}).combined()
	if !both.Gang["worker"] {
		t.Errorf("combined gang %v, want the gang admitter's worker type", both.Gang)
	}
	d = mustDecide(t, decisiontest.Job(batch.JobStatus{}), plan, Children{}, both, now)
	if len(d.CreatePods) != 2 {
		t.Fatalf("%d pods once every admitter admitted the job, want 2", len(d.CreatePods))
	}
	for _, p := range d.CreatePods {
		if p.Labels["pool"] != "gpu" || p.Labels["group"] != "job" {
			t.Errorf("pod %s labels %v: want what both admitters add", p.Name, p.Labels)
		}
	}

	if v := (&verdicts{}).combined(); v != nil {
		t.Errorf("no admitter applies, yet the verdict is %+v", v)
	}
}
