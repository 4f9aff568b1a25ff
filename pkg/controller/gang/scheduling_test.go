package gang

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/enginetest"
)

// withScheduling is a job of the test with spec.scheduling s.
func withScheduling(annotations map[string]string, scheduler *batch.SchedulePolicy, s *batch.SchedulingConfiguration) *batch.GenericJob {
	job := testJob(annotations, scheduler)
	job.Spec.Scheduling = s
	return job
}

func gangOf(minCount *int32) *batch.PodGroupSchedulingPolicy {
	return &batch.PodGroupSchedulingPolicy{Gang: &batch.GangSchedulingPolicy{MinCount: minCount}}
}

// placement is the documented spec.scheduling (docs/gang.md, "Placement"): a gang in one
// rack, disrupted only whole, sharing a claim made from a template.
func placement() *batch.SchedulingConfiguration {
	return &batch.SchedulingConfiguration{
		SchedulingPolicy:      gangOf(nil),
		SchedulingConstraints: &batch.PodGroupSchedulingConstraints{Topology: []batch.TopologyConstraint{{Key: "example.com/rack"}}},
		DisruptionMode:        &batch.PodGroupDisruptionMode{All: &batch.AllDisruptionMode{}},
		ResourceClaims:        []batch.PodGroupResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To("gpus")}},
	}
}

// TestPodGroupForEachRequest: the PodGroup made for each way of asking, and for each field
// of spec.scheduling, as golden files (testdata/podgroup-*.yaml): the annotation and the flag
// are a gang of every worker (the launcher outside); spec.scheduling is carried over, its
// policy winning over the annotation, a gang of every worker without one.
func TestPodGroupForEachRequest(t *testing.T) {
	t9k := &batch.SchedulePolicy{T9kScheduler: &batch.T9kScheduler{Queue: "team-a", Priority: 50}}
	for _, tc := range []struct {
		name   string
		job    *batch.GenericJob
		config Config
	}{
		{"annotation", testJob(gangAnnotation, nil), Config{}},
		{"flag", testJob(nil, t9k), Config{ForT9kScheduler: true}},
		{"empty-scheduling", withScheduling(nil, nil, &batch.SchedulingConfiguration{}), Config{}},
		{"gang-mincount", withScheduling(nil, nil, &batch.SchedulingConfiguration{SchedulingPolicy: gangOf(ptr.To[int32](2))}), Config{}},
		{"basic-over-annotation", withScheduling(gangAnnotation, nil, &batch.SchedulingConfiguration{
			SchedulingPolicy: &batch.PodGroupSchedulingPolicy{Basic: &batch.BasicSchedulingPolicy{}}}), Config{}},
		{"disruption-single-with-flag", withScheduling(nil, t9k, &batch.SchedulingConfiguration{
			DisruptionMode: &batch.PodGroupDisruptionMode{Single: &batch.SingleDisruptionMode{}}}), Config{ForT9kScheduler: true}},
		{"claim-by-name", withScheduling(nil, nil, &batch.SchedulingConfiguration{
			ResourceClaims: []batch.PodGroupResourceClaim{{Name: "nics", ResourceClaimName: ptr.To("shared-nics")}}}), Config{Features: AllFeatures}},
		{"placement", withScheduling(gangAnnotation, nil, placement()), Config{Features: AllFeatures}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newGangTest(t, tc.job, true, tc.config)
			s.Step(t)
			pg := s.podGroup(t)
			pods := s.Pods(t)
			if len(pods) != 3 {
				t.Fatalf("%d pods, want the 3 workers", len(pods))
			}
			worker := pods[0]
			for i := range pods {
				if pods[i].Name == "job-worker-0" {
					worker = pods[i]
				}
			}
			// What the pod gets of its gang: its group, and the shared claims.
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: worker.Name},
				Spec: corev1.PodSpec{SchedulingGroup: worker.Spec.SchedulingGroup, ResourceClaims: worker.Spec.ResourceClaims}}
			enginetest.Golden(t, "podgroup-"+tc.name, pg, pod)
		})
	}
}

// Every worker of a gang that shares claims gets them in spec.resourceClaims, an entry its
// template has already (of the same source) once; the launcher, outside the gang, none.
func TestSharedClaimsJoinEveryMember(t *testing.T) {
	own := corev1.PodResourceClaim{Name: "gpus", ResourceClaimTemplateName: ptr.To("gpus")}
	scratch := corev1.PodResourceClaim{Name: "scratch", ResourceClaimTemplateName: ptr.To("scratch")}
	s := newGangTest(t, withScheduling(nil, nil, placement()), true, Config{Features: AllFeatures}, func(pt *corev1.PodTemplateSpec) {
		pt.Spec.ResourceClaims = []corev1.PodResourceClaim{own, scratch}
	})
	s.Step(t)
	s.runAll(t)
	s.Step(t)
	pods := s.Pods(t)
	if len(pods) != 4 {
		t.Fatalf("%d pods, want 3 workers and the launcher", len(pods))
	}
	for _, p := range pods {
		var names []string
		for _, c := range p.Spec.ResourceClaims {
			names = append(names, c.Name)
		}
		if got := strings.Join(names, ","); got != "gpus,scratch" {
			t.Errorf("pod %s claims %s, want gpus,scratch: the template's own entries, the shared one not added twice", p.Name, got)
		}
	}
	s2 := newGangTest(t, withScheduling(nil, nil, placement()), true, Config{Features: AllFeatures})
	s2.Step(t)
	s2.runAll(t)
	s2.Step(t)
	for _, p := range s2.Pods(t) {
		launcher := strings.Contains(p.Name, "launcher")
		switch {
		case launcher && len(p.Spec.ResourceClaims) != 0:
			t.Errorf("the launcher claims %+v, want nothing of the gang's", p.Spec.ResourceClaims)
		case !launcher && (len(p.Spec.ResourceClaims) != 1 || p.Spec.ResourceClaims[0].Name != "gpus" || *p.Spec.ResourceClaims[0].ResourceClaimTemplateName != "gpus"):
			t.Errorf("worker %s claims %+v, want the shared gpus from template gpus", p.Name, p.Spec.ResourceClaims)
		}
	}
}

// failedWith steps the job once and checks that it failed, made nothing, and says each of want.
func failedWith(t *testing.T, s *gangTest, want ...string) {
	t.Helper()
	s.Step(t)
	job := s.Job(t)
	if job.Status.Phase != batch.JobFailed || len(s.Pods(t)) != 0 {
		t.Fatalf("phase %q with %d pods, want Failed with none", job.Status.Phase, len(s.Pods(t)))
	}
	if pgs, _ := s.Kube.SchedulingV1beta1().PodGroups("ns").List(context.Background(), metav1.ListOptions{}); len(pgs.Items) != 0 {
		t.Errorf("a PodGroup was made: %+v", pgs.Items)
	}
	var message string
	for _, c := range job.Status.Conditions {
		if c.Status == corev1.ConditionTrue {
			message += c.Message
		}
	}
	for _, w := range want {
		if !strings.Contains(message, w) {
			t.Errorf("the job's conditions say %q, want %q in it", message, w)
		}
	}
}

// A minCount larger than the gang could never be met: the job fails as written, naming the
// field, the count and the pods the gang has (the launcher outside).
func TestMinCountLargerThanTheGangFails(t *testing.T) {
	s := newGangTest(t, withScheduling(nil, nil, &batch.SchedulingConfiguration{SchedulingPolicy: gangOf(ptr.To[int32](4))}), true, Config{})
	failedWith(t, s, "spec.scheduling.schedulingPolicy.gang.minCount is 4", "has 3 pods (worker: 3; launcher made only once they are Ready, outside the gang)")
}

// A pod template whose claim of a shared claim's name has another source cannot be made: the
// pod would use its own claim, not the group's.
func TestTemplateClaimOfAnotherSourceFails(t *testing.T) {
	s := newGangTest(t, withScheduling(nil, nil, placement()), true, Config{Features: AllFeatures}, func(pt *corev1.PodTemplateSpec) {
		pt.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To("my-gpus")}}
	})
	failedWith(t, s, `resourceClaims entry "gpus" from resourceClaimName my-gpus`, "from resourceClaimTemplateName gpus")
}

// spec.scheduling and T9k Scheduler without --scheduler=gang: a pod has one scheduler.
func TestSchedulingAndT9kSchedulerConflict(t *testing.T) {
	policy := &batch.SchedulePolicy{T9kScheduler: &batch.T9kScheduler{Queue: "team-a"}}
	s := newGangTest(t, withScheduling(nil, policy, &batch.SchedulingConfiguration{}), true, Config{})
	failedWith(t, s, "spec.scheduler.t9kScheduler", "spec.scheduling", "a pod has one scheduler")
}

// A job that asks for what the API server would drop from its PodGroup waits, with no pod and
// no PodGroup, saying which gate to turn on where: in its Running condition, and in one event.
func TestPlacementNotServedWaits(t *testing.T) {
	for _, tc := range []struct {
		name       string
		features   Features
		scheduling *batch.SchedulingConfiguration
		reason     string
		want       []string
	}{
		{"topology", Features{ResourceClaims: true}, &batch.SchedulingConfiguration{
			SchedulingConstraints: &batch.PodGroupSchedulingConstraints{Topology: []batch.TopologyConstraint{{Key: "example.com/rack"}}}},
			reasonTopologyNotServed, []string{"TopologyAwareWorkloadScheduling", "API server and kube-scheduler", "spec.scheduling.schedulingConstraints"}},
		{"claims", Features{Topology: true}, placement(), reasonResourceClaimsNotServed,
			[]string{"DRAWorkloadResourceClaims", "kube-controller-manager and the kubelets", "spec.scheduling.resourceClaims"}},
		{"both", Features{}, placement(), reasonTopologyNotServed, []string{"TopologyAwareWorkloadScheduling", "DRAWorkloadResourceClaims"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newGangTest(t, withScheduling(nil, nil, tc.scheduling), true, Config{Features: tc.features})
			s.Step(t)
			if n := len(s.Pods(t)); n != 0 {
				t.Fatalf("%d pods, want none", n)
			}
			if pgs, _ := s.Kube.SchedulingV1beta1().PodGroups("ns").List(context.Background(), metav1.ListOptions{}); len(pgs.Items) != 0 {
				t.Fatalf("a PodGroup was made: %+v", pgs.Items)
			}
			job := s.Job(t)
			c := job.Status.Condition(batch.JobConditionRunning)
			if job.Status.Phase != batch.JobPending || c.Status != corev1.ConditionFalse || c.Reason != tc.reason {
				t.Fatalf("phase %q, Running %+v; want Pending, Running False with %s", job.Status.Phase, c, tc.reason)
			}
			for _, w := range tc.want {
				if !strings.Contains(c.Message, w) {
					t.Errorf("Running says %q, want %q in it", c.Message, w)
				}
			}
			if events := drain(s.Events); strings.Count(events, "Warning "+tc.reason) != 1 {
				t.Errorf("events %q, want one Warning %s", events, tc.reason)
			}
			s.Step(t)
			if events := drain(s.Events); strings.Contains(events, tc.reason) {
				t.Errorf("the event again on a later sync: %q", events)
			}
		})
	}
}

// gang.minCount may change while the job exists (the only field of spec.scheduling that may).
// Before the gang is placed, its pods and PodGroup are made again with the new count, though
// the API server keeps a PodGroup that pods join (protectPodGroups): the change must not wait
// for a group that can never go.
func TestMinCountChangeBeforeTheGangIsPlaced(t *testing.T) {
	s := newGangTest(t, withScheduling(nil, nil, &batch.SchedulingConfiguration{SchedulingPolicy: gangOf(ptr.To[int32](3))}), true, Config{})
	s.protectPodGroups(t)
	s.Step(t)
	old := s.podGroup(t)
	s.setMinCount(t, 2)
	for range 4 {
		s.Step(t)
	}
	pg := s.podGroup(t)
	if pg.Spec.SchedulingPolicy.Gang.MinCount != 2 || pg.DeletionTimestamp != nil || pg.Annotations[engine.AnnotationChildHash] == old.Annotations[engine.AnnotationChildHash] {
		t.Fatalf("PodGroup minCount %d, deleted %v after the change, want it made again with 2", pg.Spec.SchedulingPolicy.Gang.MinCount, pg.DeletionTimestamp)
	}
	if n := len(s.Pods(t)); n != 3 {
		t.Errorf("%d pods after the change, want the 3 workers made again", n)
	}
	job := s.Job(t)
	if job.Status.Phase != batch.JobPending || job.Status.Finished() || job.Status.Tasks[0].RestartCount != 0 {
		t.Errorf("job %s, restarts %d: want it pending still, nothing counted", job.Status.Phase, job.Status.Tasks[0].RestartCount)
	}
	if events := drain(s.Events); !strings.Contains(events, reasonRegrouping) || !strings.Contains(events, "minCount 3, now 2") {
		t.Errorf("events %q, want %s saying the change", events, reasonRegrouping)
	}
}

// A running gang is not stopped for a new count: its PodGroup keeps the old one, an event
// says so once, and the new count applies when the pods are next all made again (a pause and
// resume here).
func TestMinCountChangeOfARunningGangWaitsForItsPods(t *testing.T) {
	s := newGangTest(t, withScheduling(nil, nil, &batch.SchedulingConfiguration{SchedulingPolicy: gangOf(ptr.To[int32](3))}), true, Config{})
	s.protectPodGroups(t)
	s.Step(t)
	s.bindAll(t)
	s.runAll(t)
	s.Step(t)
	old := s.podGroup(t)
	pods := s.Pods(t)
	s.setMinCount(t, 2)
	for range 3 {
		s.Step(t)
	}
	if pg := s.podGroup(t); pg.Annotations[engine.AnnotationChildHash] != old.Annotations[engine.AnnotationChildHash] || pg.DeletionTimestamp != nil || pg.Spec.SchedulingPolicy.Gang.MinCount != 3 {
		t.Fatalf("the running gang's PodGroup: deleted %v, minCount %d; want the same, kept, at 3", pg.DeletionTimestamp, pg.Spec.SchedulingPolicy.Gang.MinCount)
	}
	bound := func(pods []corev1.Pod) (n int) {
		for _, p := range pods {
			if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
				n++
			}
		}
		return n
	}
	if n := bound(s.Pods(t)); n != 3 || n != bound(pods) {
		t.Fatalf("%d workers bound after the change, want the 3 running ones kept", n)
	}
	if events := drain(s.Events); strings.Count(events, reasonGangChangePending) != 1 || !strings.Contains(events, "keeps minCount 3") {
		t.Errorf("events %q, want one %s", events, reasonGangChangePending)
	}
	s.setPause(t, true)
	for range 3 {
		s.Step(t)
	}
	s.setPause(t, false)
	for range 3 {
		s.Step(t)
	}
	if pg := s.podGroup(t); pg.Spec.SchedulingPolicy.Gang.MinCount != 2 {
		t.Errorf("after a pause and resume: minCount %d, want 2", pg.Spec.SchedulingPolicy.Gang.MinCount)
	}
	if n := len(s.Pods(t)); n != 3 {
		t.Errorf("after the resume: %d pods, want 3 workers", n)
	}
}
