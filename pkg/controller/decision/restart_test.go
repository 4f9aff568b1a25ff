package decision

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// A decided status is a fixed point: deciding again on the same children, later and without
// the controller's memory (EndSeen), as a restarted controller does, decides the same status
// and no writes. So a restart re-writes no job that did not change.
func TestRestartedControllerDecidesTheSame(t *testing.T) {
	ended := func(name string, phase corev1.PodPhase, code int32) *corev1.Pod {
		return pod(name, types.UID("uid-"+name), phase, code)
	}
	cases := []struct {
		name string
		plan Plan
		pods []*corev1.Pod
	}{
		{"running", Plan{Groups: []Group{workers(2, batch.RestartNever, nil)}, Judge: allSucceed},
			[]*corev1.Pod{ended("job-worker-0", corev1.PodRunning, 0), ended("job-worker-1", corev1.PodRunning, 0)}},
		{"pending", Plan{Groups: []Group{workers(2, batch.RestartNever, nil)}, Judge: allSucceed},
			[]*corev1.Pod{ended("job-worker-0", corev1.PodPending, 0), ended("job-worker-1", corev1.PodRunning, 0)}},
		{"succeeded, pods kept", Plan{Groups: []Group{workers(2, batch.RestartNever, nil)}, Judge: allSucceed, CleanUp: batch.CleanUpNone},
			[]*corev1.Pod{ended("job-worker-0", corev1.PodSucceeded, 0), ended("job-worker-1", corev1.PodSucceeded, 0)}},
		{"failed, pods kept", Plan{Groups: []Group{workers(2, batch.RestartNever, nil)}, Judge: allSucceed, CleanUp: batch.CleanUpNone},
			[]*corev1.Pod{ended("job-worker-0", corev1.PodFailed, 3), ended("job-worker-1", corev1.PodRunning, 0)}},
		{"failed, running pods cleaned up", Plan{Groups: []Group{workers(2, batch.RestartNever, nil)}, Judge: allSucceed, CleanUp: batch.CleanUpUnfinished},
			[]*corev1.Pod{ended("job-worker-0", corev1.PodFailed, 3)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := testJob(batch.JobStatus{})
			pods := tc.pods
			endSeen := map[types.UID]time.Time{}
			for _, p := range pods {
				if PodEnded(p) {
					endSeen[p.UID] = now.Add(-time.Minute)
				}
			}
			// Settle as a running controller would: write each status, carry out each
			// deletion, until a decision changes nothing.
			for range 5 {
				d := mustDecide(t, job, &tc.plan, Children{Pods: pods, EndSeen: endSeen}, nil, now)
				if len(d.CreatePods)+len(d.DeletePods) == 0 && equality.Semantic.DeepEqual(job.Status, *d.Status) {
					break
				}
				job.Status = *d.Status
				pods = slices.DeleteFunc(slices.Clone(pods), func(p *corev1.Pod) bool { return slices.Contains(d.DeletePods, p) })
			}
			later := mustDecide(t, job.DeepCopy(), &tc.plan, Children{Pods: pods}, nil, now.Add(time.Hour))
			if !equality.Semantic.DeepEqual(job.Status, *later.Status) {
				t.Errorf("a restarted controller decides another status:\n%s", diff(job.Status, *later.Status))
			}
			if w := len(later.CreatePods) + len(later.DeletePods) + len(later.CreateObjects) + len(later.UpdateObjects) + len(later.DeleteObjects); w != 0 {
				t.Errorf("a restarted controller decides %d writes", w)
			}
		})
	}
}

// diff shows two statuses side by side, as YAML.
func diff(want, got batch.JobStatus) string {
	w, _ := yaml.Marshal(want)
	g, _ := yaml.Marshal(got)
	return "was:\n" + string(w) + "now:\n" + string(g)
}
