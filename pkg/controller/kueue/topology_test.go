package kueue

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	kueue "github.com/t9k-jobs/t9k-jobs/pkg/apis/kueue/v1beta2"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

// A replica type's template annotations become its pod set's topology request, as Kueue's
// integrations read them on a batch Job; the replica-index label is always the pod index.
// What Kueue would refuse fails with the annotation named.
func TestTopologyRequestFromAnnotations(t *testing.T) {
	index := batch.LabelReplicaIndex
	for _, c := range []struct {
		name        string
		annotations map[string]string
		want        *kueue.PodSetTopologyRequest
		err         string
	}{
		{name: "none: implicit TAS, by rank", want: &kueue.PodSetTopologyRequest{PodIndexLabel: &index}},
		{name: "required", annotations: map[string]string{kueue.AnnotationRequiredTopology: "rack"},
			want: &kueue.PodSetTopologyRequest{Required: ptr.To("rack"), PodIndexLabel: &index}},
		{name: "preferred with a group", annotations: map[string]string{kueue.AnnotationPreferredTopology: "block", kueue.AnnotationPodSetGroupName: "g"},
			want: &kueue.PodSetTopologyRequest{Preferred: ptr.To("block"), PodSetGroupName: ptr.To("g"), PodIndexLabel: &index}},
		{name: "unconstrained", annotations: map[string]string{kueue.AnnotationUnconstrainedTopology: "true"},
			want: &kueue.PodSetTopologyRequest{Unconstrained: ptr.To(true), PodIndexLabel: &index}},
		{name: "slices", annotations: map[string]string{kueue.AnnotationRequiredTopology: "block", kueue.AnnotationSliceRequiredTopology: "rack", kueue.AnnotationSliceSize: "2"},
			want: &kueue.PodSetTopologyRequest{Required: ptr.To("block"), PodSetSliceRequiredTopology: ptr.To("rack"), PodSetSliceSize: ptr.To[int32](2), PodIndexLabel: &index}},
		{name: "slice layers", annotations: map[string]string{kueue.AnnotationSliceRequiredTopologyConstraints: `[{"topology":"rack","size":2}]`},
			want: &kueue.PodSetTopologyRequest{PodsetSliceRequiredTopologyConstraints: []kueue.SliceTopologyConstraint{{Topology: "rack", Size: 2}}, PodIndexLabel: &index}},
		{name: "required and preferred", annotations: map[string]string{kueue.AnnotationRequiredTopology: "rack", kueue.AnnotationPreferredTopology: "block"},
			err: "annotations kueue.x-k8s.io/podset-required-topology and kueue.x-k8s.io/podset-preferred-topology: give at most one of them"},
		{name: "unconstrained not a bool", annotations: map[string]string{kueue.AnnotationUnconstrainedTopology: "yes"},
			err: `kueue.x-k8s.io/podset-unconstrained-topology: "yes" is not true or false`},
		{name: "slice size alone", annotations: map[string]string{kueue.AnnotationSliceSize: "2"},
			err: "go together: give both"},
		{name: "slice larger than the type", annotations: map[string]string{kueue.AnnotationSliceRequiredTopology: "rack", kueue.AnnotationSliceSize: "5"},
			err: `kueue.x-k8s.io/podset-slice-size: "5": want a whole number of pods from 1 to the type's 4 replicas`},
		{name: "bad layers", annotations: map[string]string{kueue.AnnotationSliceRequiredTopologyConstraints: `rack`},
			err: "kueue.x-k8s.io/podset-slice-required-topology-constraints: want JSON"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := topologyRequest("worker", 4, c.annotations)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !strings.HasPrefix(err.Error(), "replica type worker") {
					t.Fatalf("error %v, want one naming replica type worker and saying %q", err, c.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("request %+v (error %v), want %+v", got, err, c.want)
			}
		})
	}
}

// A topology assignment decodes into its domains in rank order, across slices, with
// universal and individual values and counts.
func TestTopologyAssignmentDomains(t *testing.T) {
	ta := &kueue.TopologyAssignment{Levels: []string{"rack", "kubernetes.io/hostname"}, Slices: []kueue.TopologyAssignmentSlice{
		{DomainCount: 2, ValuesPerLevel: []kueue.TopologyAssignmentLevelValues{
			{Universal: ptr.To("r1")},
			{Individual: &kueue.TopologyAssignmentValues{Prefix: ptr.To("node-"), Roots: []string{"a", "b"}}},
		}, PodCounts: kueue.TopologyAssignmentPodCounts{Individual: []int32{2, 1}}},
		{DomainCount: 1, ValuesPerLevel: []kueue.TopologyAssignmentLevelValues{
			{Universal: ptr.To("r2")}, {Universal: ptr.To("node-c")},
		}, PodCounts: kueue.TopologyAssignmentPodCounts{Universal: ptr.To[int32](3)}},
	}}
	want := []domain{{[]string{"r1", "node-a"}, 2}, {[]string{"r1", "node-b"}, 1}, {[]string{"r2", "node-c"}, 3}}
	if got := domains(ta); !reflect.DeepEqual(got, want) {
		t.Fatalf("domains %v, want %v", got, want)
	}
	if got := placement(ta); got != "kubernetes.io/hostname: node-a (2), node-b (1), node-c (3)" {
		t.Errorf("placement %q", got)
	}
}

// rackTemplate is cpuTemplate asking for one rack.
func rackTemplate(rank int32) corev1.PodTemplateSpec {
	tmpl := cpuTemplate(rank)
	tmpl.Annotations = map[string]string{kueue.AnnotationRequiredTopology: "rack"}
	return tmpl
}

// admitByTopology admits the job as Kueue's TAS does: the workers in one rack, over two
// nodes; the ps without a topology.
func admitByTopology(wl *kueue.Workload) {
	admit(wl)
	wl.Status.Admission.PodSetAssignments[0].TopologyAssignment = &kueue.TopologyAssignment{Levels: []string{"kubernetes.io/hostname"},
		Slices: []kueue.TopologyAssignmentSlice{{DomainCount: 2,
			ValuesPerLevel: []kueue.TopologyAssignmentLevelValues{{Individual: &kueue.TopologyAssignmentValues{Prefix: ptr.To("rack1-"), Roots: []string{"a", "b"}}}},
			PodCounts:      kueue.TopologyAssignmentPodCounts{Universal: ptr.To[int32](1)}}}}
}

// A pod set placed by topology: its Workload asks for the rack by the replica index; once
// admitted, its pods are made gated and marked as Kueue's ungater finds them, the others
// as before. The ungater's patch (gate gone, nodeSelector set) is left alone: no write of
// the controller's follows it. A restarted replica is made gated again.
func TestTopologyPlacedPodsWaitForTheUngater(t *testing.T) {
	s := newQueueTest(t, queuedJob(map[string]string{kueue.LabelQueueName: "team-a"}), true, Config{}, flavors...)
	s.adapter.override(func() *engine.Plan {
		return &engine.Plan{Groups: []engine.Group{
			{Type: "worker", Replicas: 2, Restart: batch.RestartOnFailure, Limit: ptr.To[int32](3), Template: rackTemplate},
			{Type: "ps", Replicas: 1, Restart: batch.RestartNever, Template: cpuTemplate},
		}, Judge: allSucceed}
	})
	s.Step(t)
	wl := s.workload(t)
	if r := wl.Spec.PodSets[0].TopologyRequest; r == nil || ptr.Deref(r.Required, "") != "rack" || ptr.Deref(r.PodIndexLabel, "") != batch.LabelReplicaIndex {
		t.Fatalf("worker pod set's topology request %+v: want required rack, by %s", r, batch.LabelReplicaIndex)
	}
	if r := wl.Spec.PodSets[1].TopologyRequest; r == nil || r.Required != nil || ptr.Deref(r.PodIndexLabel, "") != batch.LabelReplicaIndex {
		t.Fatalf("ps pod set's topology request %+v: want only the pod index label (Kueue's implicit TAS)", r)
	}

	s.kueueDecides(t, func(wl *kueue.Workload) {
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionFalse, Reason: "Pending", Message: "waiting"})
	})
	s.Step(t)
	s.kueueDecides(t, admitByTopology)
	s.Step(t)
	if events := drain(s.Events); !strings.Contains(events, "placed by topology: worker in kubernetes.io/hostname: rack1-a (1), rack1-b (1)") {
		t.Errorf("the Admitted event does not say where the workers go; events:\n%s", events)
	}
	pods := s.Pods(t)
	if len(pods) != 3 {
		t.Fatalf("%d pods once admitted, want 3", len(pods))
	}
	for _, p := range pods {
		gated := slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == kueue.TopologySchedulingGate })
		worker := p.Labels[batch.LabelReplicaType] == "worker"
		if gated != worker {
			t.Errorf("pod %s: gated %v, want %v (only the pod set placed by topology)", p.Name, gated, worker)
		}
		if !worker {
			if _, ok := p.Labels[kueue.LabelPodSet]; ok {
				t.Errorf("pod %s not placed by topology is labelled %s", p.Name, kueue.LabelPodSet)
			}
			continue
		}
		if p.Labels[kueue.LabelPodSet] != "worker" || p.Annotations[kueue.AnnotationWorkload] != "genericjob-job" ||
			p.Annotations[kueue.AnnotationRequiredTopology] != "rack" || p.Spec.NodeSelector["pool"] != "gpu" {
			t.Errorf("pod %s: labels %v, annotations %v, nodeSelector %v: want the pod set, the Workload, the template's topology annotation and the flavor's labels",
				p.Name, p.Labels, p.Annotations, p.Spec.NodeSelector)
		}
	}

	// The ungater gives each worker its node; the kubelet runs them.
	writes := len(s.Kube.Actions())
	for _, p := range pods {
		if p.Labels[batch.LabelReplicaType] != "worker" {
			continue
		}
		p.Spec.SchedulingGates = nil
		p.Spec.NodeSelector["kubernetes.io/hostname"] = "rack1-" + map[string]string{"0": "a", "1": "b"}[p.Labels[batch.LabelReplicaIndex]]
		if _, err := s.Kube.CoreV1().Pods("ns").Update(context.Background(), &p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ungated := len(s.Kube.Actions())
	s.Refresh(t)
	s.runAll(t)
	s.Step(t)
	for _, a := range s.Kube.Actions()[ungated:] {
		if a.GetResource().Resource == "pods" && a.GetVerb() != "list" && a.GetVerb() != "get" && a.GetSubresource() != "status" {
			t.Errorf("the controller wrote a pod after the ungater did: %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
	if ungated == writes {
		t.Fatal("the ungater's updates were not made")
	}

	// worker-1 fails: its replacement waits for the ungater again, which gives its rank the
	// same node while the assignment holds.
	s.endPod(t, "job-worker-1", corev1.PodFailed)
	for range 3 {
		s.Step(t)
		s.Clock.Step(time.Minute) // past the restart's backoff
	}
	var again *corev1.Pod
	for _, p := range s.Pods(t) {
		if p.Name == "job-worker-1" {
			again = &p
		}
	}
	if again == nil || again.Status.Phase != "" {
		t.Fatalf("worker-1 was not made again: %v", again)
	}
	if !slices.ContainsFunc(again.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == kueue.TopologySchedulingGate }) ||
		again.Labels[kueue.LabelPodSet] != "worker" || again.Labels[batch.LabelReplicaIndex] != "1" {
		t.Errorf("restarted worker-1: gates %v, labels %v: want it gated, in pod set worker, rank 1", again.Spec.SchedulingGates, again.Labels)
	}
	for _, task := range s.Job(t).Status.Tasks {
		if task.Type == "worker" && task.RestartCount != 1 {
			t.Errorf("the workers count %d restarts, want 1", task.RestartCount)
		}
	}
}

// A pod set admitted by Kueue's implicit TAS (a flavor with a topology, no annotation) is
// marked unconstrained on its pods, as Kueue's integrations mark theirs: Kueue counts a
// pod without a topology annotation as using its node outside the topology.
func TestImplicitTopologyMarksPodsUnconstrained(t *testing.T) {
	s2 := newQueueTest(t, queuedJob(map[string]string{kueue.LabelQueueName: "team-a"}), true, Config{}, flavors...)
	s2.Step(t)
	s2.kueueDecides(t, admitByTopology)
	s2.Step(t)
	// Admitted before its status ever said it waited: the event says so all the same.
	if events := drain(s2.Events); !strings.Contains(events, "Normal Admitted Kueue admitted the job to ClusterQueue cq") {
		t.Errorf("no Admitted event for a job admitted at once; events:\n%s", events)
	}
	for _, p := range s2.Pods(t) {
		want := ""
		if p.Labels[batch.LabelReplicaType] == "worker" {
			want = "true"
		}
		if got := p.Annotations[kueue.AnnotationUnconstrainedTopology]; got != want {
			t.Errorf("pod %s: %s %q, want %q", p.Name, kueue.AnnotationUnconstrainedTopology, got, want)
		}
	}
}

// Bad topology annotations fail the job before anything is made, naming the replica type and
// the annotation.
func TestBadTopologyAnnotationFailsTheJob(t *testing.T) {
	s := newQueueTest(t, queuedJob(map[string]string{kueue.LabelQueueName: "team-a"}), true, Config{}, flavors...)
	s.adapter.override(func() *engine.Plan {
		return &engine.Plan{Groups: []engine.Group{{Type: "worker", Replicas: 2, Template: func(r int32) corev1.PodTemplateSpec {
			tmpl := cpuTemplate(r)
			tmpl.Annotations = map[string]string{kueue.AnnotationSliceSize: "2"}
			return tmpl
		}}}, Judge: allSucceed}
	})
	s.Step(t)
	job := s.Job(t)
	failed := job.Status.Condition(batch.JobConditionFailed)
	want := fmt.Sprintf("replica type worker: annotations %s and %s go together", kueue.AnnotationSliceRequiredTopology, kueue.AnnotationSliceSize)
	if job.Status.Phase != batch.JobFailed || !strings.Contains(failed.Message, want) {
		t.Fatalf("phase %s, Failed %+v: want Failed saying %q", job.Status.Phase, failed, want)
	}
	if wls, _ := s.kueue.KueueV1beta2().Workloads("ns").List(context.Background(), metav1.ListOptions{}); len(wls.Items) != 0 {
		t.Errorf("a Workload was made for a job that cannot be placed: %v", wls.Items)
	}
}
