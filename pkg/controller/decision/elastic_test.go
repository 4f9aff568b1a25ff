package decision

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// elasticPlan is a job of n workers, elastic between lo and hi, with a Service for its
// replicas' host names.
func elasticPlan(n, lo, hi int32, restartJob bool) *Plan {
	return &Plan{Groups: []Group{workers(n, batch.RestartOnFailure, nil)}, Judge: allSucceed,
		Elastic: &Elastic{Type: "worker", Min: lo, Max: hi}, RestartJob: restartJob,
		ServicePorts: []corev1.ServicePort{{Name: "http", Port: 80}}}
}

func runningWorkers(n int) []*corev1.Pod {
	var pods []*corev1.Pod
	for i := range n {
		pods = append(pods, pod(fmt.Sprintf("job-worker-%d", i), types.UID(fmt.Sprintf("w%d", i)), corev1.PodRunning, 0))
	}
	return pods
}

// sameNames compares lists of names, an empty one equal to none.
func sameNames(a, b []string) bool { return len(a) == 0 && len(b) == 0 || reflect.DeepEqual(a, b) }

func ranks(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprint(i))
	}
	return out
}

// TestElasticResize: a job resized while it runs makes the new ranks when it grows, deletes
// the highest ranks when it shrinks, and counts neither as a restart nor a disruption.
func TestElasticResize(t *testing.T) {
	cases := []struct {
		name             string
		size, running    int
		created, deleted []string
	}{
		{"grows from 2 to 4", 4, 2, []string{"job-worker-2", "job-worker-3"}, nil},
		{"shrinks from 4 to 2", 2, 4, nil, []string{"job-worker-2", "job-worker-3"}},
		{"stays at 3", 3, 3, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := mustDecide(t, testJob(running(ranks(tc.running)...)), elasticPlan(int32(tc.size), 1, 4, false),
				Children{Pods: runningWorkers(tc.running)}, nil, now)
			if got := names(d.CreatePods); !sameNames(got, tc.created) {
				t.Errorf("created %v, want %v", got, tc.created)
			}
			if got := names(d.DeletePods); !sameNames(got, tc.deleted) {
				t.Errorf("deleted %v, want %v", got, tc.deleted)
			}
			if len(d.Restarted) > 0 || len(d.Disrupted) > 0 || d.Status.Restarts != 0 || d.Outcome != nil {
				t.Errorf("a resize restarted %v, disrupted %v, counted %d, ended %+v", d.Restarted, d.Disrupted, d.Status.Restarts, d.Outcome)
			}
			if n := len(d.Status.Tasks[0].Replicas); n != tc.size {
				t.Errorf("status lists %d replicas, want %d", n, tc.size)
			}
			if resized := tc.size != tc.running; resized != (d.Resized != "") {
				t.Errorf("Resized %q, want one: %v", d.Resized, resized)
			}
			if e := d.Status.Elastic; e == nil || e.Replicas != int32(min(tc.size, tc.running)) {
				t.Errorf("status.elastic %+v, want %d running", e, min(tc.size, tc.running))
			}
		})
	}
}

// TestElasticDisruptionRestartsNothing: under restartScope Job, a disrupted replica of an
// elastic type is replaced alone while the type keeps its minimum; below it, the whole job
// restarts as before.
func TestElasticDisruptionRestartsNothing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		min     int32
		deleted []string
		whole   bool
	}{
		{"at the minimum, replaced alone", 2, []string{"job-worker-2"}, false},
		{"below the minimum, the whole job restarts", 3, []string{"job-worker-0", "job-worker-1", "job-worker-2"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := runningWorkers(2)
			pods = append(pods, disruptedPod("job-worker-2", "w2", "PreemptionByScheduler"))
			d := mustDecide(t, testJob(running("0", "1", "2")), elasticPlan(3, tc.min, 3, true), Children{Pods: pods}, nil, now)
			if got := names(d.DeletePods); !sameNames(got, tc.deleted) {
				t.Errorf("deleted %v, want %v", got, tc.deleted)
			}
			if whole := d.JobRestart != ""; whole != tc.whole {
				t.Errorf("whole-job restart %q, want one: %v", d.JobRestart, tc.whole)
			}
			if !reflect.DeepEqual(d.Disrupted, []string{"job-worker-2"}) {
				t.Errorf("disrupted %v, want job-worker-2", d.Disrupted)
			}
		})
	}
}

// TestElasticAdmittedFewer: an admission of fewer replicas than asked (Kueue's partial
// admission) runs that many, and the status says the size asked for is not reached.
func TestElasticAdmittedFewer(t *testing.T) {
	d := mustDecide(t, testJob(batch.JobStatus{}), elasticPlan(4, 2, 4, false), Children{},
		&Verdict{Admitted: true, Counts: map[string]int32{"worker": 2}}, now)
	if got, want := names(d.CreatePods), []string{"job-worker-0", "job-worker-1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("created %v, want %v", got, want)
	}
}

// TestElasticRendezvous: every pod of the elastic type, and only those, is given torchrun's
// rendezvous settings; a setting of the template's own is kept.
func TestElasticRendezvous(t *testing.T) {
	plan := elasticPlan(2, 1, 3, false)
	plan.Groups = append(plan.Groups, Group{Type: "ps", Replicas: 1, Restart: batch.RestartNever, Template: template("serve")})
	own := plan.Groups[0].Template
	plan.Groups[0].Template = func(rank int32) corev1.PodTemplateSpec {
		t := own(rank)
		t.Spec.Containers[0].Env = append(t.Spec.Containers[0].Env, corev1.EnvVar{Name: EnvElasticBackend, Value: "etcd-v2"})
		return t
	}
	job := testJob(batch.JobStatus{})
	d := mustDecide(t, job, plan, Children{}, nil, now)
	env := map[string]map[string]string{}
	for _, p := range d.CreatePods {
		env[p.Name] = map[string]string{}
		for _, v := range p.Spec.Containers[0].Env {
			env[p.Name][v.Name] = v.Value
		}
	}
	want := map[string]string{EnvElasticNNodes: "1:3", EnvElasticBackend: "etcd-v2", EnvElasticID: string(job.UID),
		EnvElasticEndpoint: "job-worker-0:29400"}
	for _, name := range []string{"job-worker-0", "job-worker-1"} {
		for k, v := range want {
			if env[name][k] != v {
				t.Errorf("%s: %s=%q, want %q", name, k, env[name][k], v)
			}
		}
	}
	if _, ok := env["job-ps-0"][EnvElasticNNodes]; ok {
		t.Errorf("job-ps-0, not elastic, has %s", EnvElasticNNodes)
	}
}

// TestElasticRunningFewerSaysSo: a job running all the replicas its admission holds of its
// elastic type, fewer than asked for, is Running, and its Running condition says how many of
// how many.
func TestElasticRunningFewerSaysSo(t *testing.T) {
	d := mustDecide(t, testJob(running("0", "1")), elasticPlan(4, 2, 4, false), Children{Pods: runningWorkers(2)},
		&Verdict{Admitted: true, Counts: map[string]int32{"worker": 2}}, now)
	c := d.Status.Condition(batch.JobConditionRunning)
	if d.Status.Phase != batch.JobRunning || c.Message != msgRunning+" worker runs 2 of the 4 replicas asked for: its admission holds 2, and the rest waits for quota." {
		t.Errorf("phase %s, Running condition %q", d.Status.Phase, c.Message)
	}
}
