package decision

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// Elastic jobs (docs/elastic.md): one replica type, spec.elastic.replicaType, may change its
// size while the job runs. Its group's Replicas is the size the job asks for; a decision runs
// fewer when its admitters admitted fewer (Kueue's partial admission: Verdict.Counts).
// Growing makes the new ranks; shrinking deletes the highest ranks, which the plan no longer
// has (Decide's step 8), with their grace period. A replica of the type that is disrupted is
// replaced alone and never restarts the whole job while the type keeps its minimum; the
// program re-forms its group around the members it has (torchrun's elastic rendezvous, whose
// settings every pod of the type is given).

// Elastic is the plan's elastic replica type and its bounds.
type Elastic struct {
	Type     string
	Min, Max int32
}

// The environment of an elastic type's pods: torchrun reads its options from PET_<OPTION>
// when they are not on its command line, so `torchrun train.py` joins the job's rendezvous.
const (
	EnvElasticNNodes      = "PET_NNODES"
	EnvElasticBackend     = "PET_RDZV_BACKEND"
	EnvElasticID          = "PET_RDZV_ID"
	EnvElasticEndpoint    = "PET_RDZV_ENDPOINT"
	ElasticRendezvousPort = 29400 // torchrun's own default for its c10d store
)

// ElasticOf is a job's elastic type and bounds, from its spec (nil: none), as its plan has
// them.
func ElasticOf(l *batch.Lifecycle) *Elastic {
	e := l.Elastic
	if e == nil {
		return nil
	}
	return &Elastic{Type: e.ReplicaType, Min: e.MinReplicas, Max: e.MaxReplicas}
}

// isElastic reports whether g is the plan's elastic type.
func (p *Plan) isElastic(g *Group) bool {
	return p.Elastic != nil && p.Elastic.Type == g.Type
}

// size is how many replicas of g a decision runs: its Replicas, or fewer when the admitters
// admitted fewer.
func (x *decider) size(g *Group) int32 {
	n := g.Replicas
	if x.admission != nil {
		if c, ok := x.admission.Counts[g.Type]; ok && c < n {
			n = c
		}
	}
	return n
}

// admittedFewer says, for the Running condition, that the elastic type runs fewer replicas
// than asked for because its admission holds fewer (Kueue's partial admission; a slice for
// the rest waits): " worker runs 2 of the 4 replicas asked for: its admission holds 2, and
// the rest waits for quota."; "" when it runs them all.
func (x *decider) admittedFewer() string {
	e := x.plan.Elastic
	if e == nil {
		return ""
	}
	for i := range x.plan.Groups {
		g := &x.plan.Groups[i]
		if g.Type == e.Type {
			if n := x.size(g); n < g.Replicas {
				return fmt.Sprintf(" %s runs %d of the %d replicas asked for: its admission holds %d, and the rest waits for quota.", g.Type, n, g.Replicas, n)
			}
		}
	}
	return ""
}

// elasticHolds reports whether the elastic type keeps its minimum of replicas that are not
// lost: a disruption of one of them is then replaced alone, not a reason to restart the job.
func (x *decider) elasticHolds(all []*replica) bool {
	e := x.plan.Elastic
	if e == nil {
		return false
	}
	var left int32
	for _, r := range all {
		if r.group.Type == e.Type && r.action != replaceNow && !r.disrupted && !r.view.Lost {
			left++
		}
	}
	return left >= e.Min
}

// elasticStatus is the size the job runs at: its elastic type's running replicas, and the
// selector of its pods (the scale subresource's).
func elasticStatus(job Job, plan *Plan, tasks []batch.TaskStatus) *batch.ElasticStatus {
	e := plan.Elastic
	if e == nil {
		return nil
	}
	s := &batch.ElasticStatus{Selector: labels.SelectorFromSet(labels.Set{
		batch.LabelControllerUID: string(job.GetUID()), batch.LabelReplicaType: e.Type}).String()}
	for _, t := range tasks {
		if t.Type != e.Type {
			continue
		}
		for _, r := range t.Replicas {
			if r.Phase == batch.ReplicaRunning {
				s.Replicas++
			}
		}
	}
	return s
}

// injectElastic gives a pod of the elastic type the rendezvous settings of torchrun: the
// bounds, the c10d backend, the job's UID as the run's id and, when the replicas have host
// names (spec.service), rank 0's host as the endpoint. A setting the container has already
// is kept.
func injectElastic(pod *corev1.Pod, job Job, plan *Plan, g *Group) {
	if !plan.isElastic(g) {
		return
	}
	e := plan.Elastic
	env := []corev1.EnvVar{
		{Name: EnvElasticNNodes, Value: fmt.Sprintf("%d:%d", e.Min, e.Max)},
		{Name: EnvElasticBackend, Value: "c10d"},
		{Name: EnvElasticID, Value: string(job.GetUID())},
	}
	if len(plan.ServicePorts) > 0 {
		env = append(env, corev1.EnvVar{Name: EnvElasticEndpoint,
			Value: g.podName(job.GetName(), 0) + ":" + strconv.Itoa(ElasticRendezvousPort)})
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		for _, v := range env {
			if !hasEnv(c, v.Name) {
				c.Env = append(c.Env, v)
			}
		}
	}
}

// resized says how a decision changes the number of replicas of the elastic type, from the
// old status's to the new, and why ("": no change, or the job's first decision).
func (x *decider) resized(old, now *batch.JobStatus) string {
	e := x.plan.Elastic
	if e == nil || x.finished || x.paused {
		return ""
	}
	count := func(s *batch.JobStatus) (int, bool) {
		for _, t := range s.Tasks {
			if t.Type == e.Type {
				return len(t.Replicas), true
			}
		}
		return 0, false
	}
	from, had := count(old)
	to, _ := count(now)
	if !had || from == to {
		return ""
	}
	why := "spec.elastic.replicas"
	for _, g := range x.plan.Groups {
		if g.Type == e.Type && int32(to) < g.Replicas {
			why = fmt.Sprintf("spec.elastic.replicas asks for %d; the admission gave %d", g.Replicas, to)
		}
	}
	return fmt.Sprintf("Resized %s from %d to %d replicas (%s)", e.Type, from, to, why)
}
