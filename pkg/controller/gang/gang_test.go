package gang

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/enginetest"
)

// gangTest is a controller of one GenericJob of three workers and a launcher that waits for
// them (as MPIJob's).
type gangTest struct{ *enginetest.Admission }

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func template(int32) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{PriorityClassName: "training", Containers: []corev1.Container{{
		Name: "main", Image: "trainer",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}},
	}}}}
}

func testJob(annotations map[string]string, scheduler *batch.SchedulePolicy) *batch.GenericJob {
	job := &batch.GenericJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: batch.SchemeGroupVersion.String(), Kind: "GenericJob"},
		ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns", UID: "job-uid", Generation: 1, Annotations: annotations},
	}
	if scheduler != nil {
		job.Spec.Scheduler = scheduler
	}
	return job
}

var gangAnnotation = map[string]string{AnnotationGang: "true"}

// newGangTest makes the controller; served false is a cluster without the PodGroup API.
// edits change the pod template of every replica.
func newGangTest(t *testing.T, job *batch.GenericJob, served bool, config Config, edits ...func(*corev1.PodTemplateSpec)) *gangTest {
	t.Helper()
	tmpl := func(rank int32) corev1.PodTemplateSpec {
		pt := template(rank)
		for _, e := range edits {
			e(&pt)
		}
		return pt
	}
	s := &gangTest{Admission: enginetest.NewAdmission(t, job, now, func(j *batch.GenericJob) (*engine.Plan, error) {
		p := &engine.Plan{Groups: []engine.Group{
			{Type: "worker", Replicas: 3, Restart: batch.RestartOnFailure, Template: tmpl},
			{Type: "launcher", Replicas: 1, Restart: batch.RestartNever, Template: tmpl, After: []string{"worker"}},
		}}
		p.SetRunMode(j.Spec.RunMode, j.Spec.Scheduler)
		return p, nil
	})}
	config.Recorder = s.Events
	if served {
		config.Client, config.Informers = s.Kube, s.Children.Kube
		s.Shows = append(s.Shows, func(t *testing.T) (engine.ObjectKind, []metav1.Object) {
			var objs []metav1.Object
			if pg, err := s.Kube.SchedulingV1beta1().PodGroups("ns").Get(context.Background(), "genericjob-job", metav1.GetOptions{}); err == nil {
				objs = append(objs, pg)
			}
			return PodGroupKind, objs
		})
	}
	s.Start(t, s.Adapter(), New(config))
	return s
}

func (s *gangTest) podGroup(t *testing.T) *schedulingv1beta1.PodGroup {
	t.Helper()
	pg, err := s.Kube.SchedulingV1beta1().PodGroups("ns").Get(context.Background(), "genericjob-job", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the job's PodGroup: %v", err)
	}
	return pg
}

// cannotPlace has the scheduler say on the PodGroup that it cannot place the gang, for want of
// CPU.
func (s *gangTest) cannotPlace(t *testing.T) {
	t.Helper()
	pg := s.podGroup(t)
	pg.Status.Conditions = []metav1.Condition{{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionFalse,
		Reason: schedulingv1beta1.PodGroupReasonUnschedulable, Message: "0/2 nodes are available: 2 Insufficient cpu.", LastTransitionTime: metav1.NewTime(now)}}
	if _, err := s.Kube.SchedulingV1beta1().PodGroups("ns").UpdateStatus(context.Background(), pg, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Refresh(t)
}

// runAll has every pod run and be Ready, as a kubelet would once the gang is bound.
func (s *gangTest) runAll(t *testing.T) {
	t.Helper()
	for _, p := range s.Pods(t) {
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "main", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now)}}}}}
		if _, err := s.Kube.CoreV1().Pods("ns").UpdateStatus(context.Background(), &p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s.Refresh(t)
}

// bindAll binds every pod to a node, as the scheduler would once the gang fits.
func (s *gangTest) bindAll(t *testing.T) {
	t.Helper()
	for _, p := range s.Pods(t) {
		p.Spec.NodeName = "node-1"
		if _, err := s.Kube.CoreV1().Pods("ns").Update(context.Background(), &p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s.Refresh(t)
}

// setMinCount edits the job's spec.scheduling.schedulingPolicy.gang.minCount.
func (s *gangTest) setMinCount(t *testing.T, n int32) {
	t.Helper()
	job := s.Job(t)
	job.Spec.Scheduling.SchedulingPolicy.Gang.MinCount = ptr.To(n)
	if _, err := s.Jobs.BatchV1beta1().GenericJobs("ns").Update(context.Background(), job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Refresh(t)
}

// setPause pauses or resumes the job.
func (s *gangTest) setPause(t *testing.T, paused bool) {
	t.Helper()
	job := s.Job(t)
	job.Spec.RunMode = &batch.RunMode{Pause: &batch.PauseMode{Enabled: paused}}
	if _, err := s.Jobs.BatchV1beta1().GenericJobs("ns").Update(context.Background(), job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Refresh(t)
}

// protectPodGroups has the fake API server keep a PodGroup that pods still join, as
// kube-controller-manager's podgroup-protection finalizer does: a delete marks it deleted, and
// it goes once the last pod that joins it is gone.
func (s *gangTest) protectPodGroups(t *testing.T) {
	t.Helper()
	tracker := s.Kube.Tracker()
	podsGVR, groupsGVR := corev1.SchemeGroupVersion.WithResource("pods"), schedulingv1beta1.SchemeGroupVersion.WithResource("podgroups")
	joined := func(ns, group string) bool {
		list, err := tracker.List(podsGVR, corev1.SchemeGroupVersion.WithKind("Pod"), ns)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range list.(*corev1.PodList).Items {
			if g := p.Spec.SchedulingGroup; g != nil && ptr.Deref(g.PodGroupName, "") == group {
				return true
			}
		}
		return false
	}
	s.Kube.PrependReactor("delete", "podgroups", func(action k8stesting.Action) (bool, runtime.Object, error) {
		d := action.(k8stesting.DeleteAction)
		if !joined(d.GetNamespace(), d.GetName()) {
			return false, nil, nil
		}
		obj, err := tracker.Get(groupsGVR, d.GetNamespace(), d.GetName())
		if err != nil {
			return true, nil, err
		}
		pg := obj.(*schedulingv1beta1.PodGroup).DeepCopy()
		if pg.DeletionTimestamp == nil {
			pg.DeletionTimestamp = &metav1.Time{Time: now}
			pg.Finalizers = []string{"scheduling.k8s.io/podgroup-protection"}
			return true, nil, tracker.Update(groupsGVR, pg, pg.Namespace)
		}
		return true, nil, nil
	})
	s.Kube.PrependReactor("delete", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		d := action.(k8stesting.DeleteAction)
		if err := tracker.Delete(podsGVR, d.GetNamespace(), d.GetName()); err != nil {
			return true, nil, err
		}
		list, err := tracker.List(groupsGVR, schedulingv1beta1.SchemeGroupVersion.WithKind("PodGroup"), d.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		for _, pg := range list.(*schedulingv1beta1.PodGroupList).Items {
			if pg.DeletionTimestamp != nil && !joined(pg.Namespace, pg.Name) {
				if err := tracker.Delete(groupsGVR, pg.Namespace, pg.Name); err != nil {
					return true, nil, err
				}
			}
		}
		return true, nil, nil
	})
}

func drain(r *record.FakeRecorder) string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return strings.Join(out, "\n")
		}
	}
}

// A job that asks to start whole gets a PodGroup whose gang is its workers, each joined to it;
// the launcher, made only once the workers are Ready, stays outside, or the gang would wait
// for it forever.
func TestGangJobJoinsItsWorkersToAPodGroup(t *testing.T) {
	s := newGangTest(t, testJob(gangAnnotation, nil), true, Config{})
	s.Step(t)
	pg := s.podGroup(t)
	if g := pg.Spec.SchedulingPolicy.Gang; g == nil || g.MinCount != 3 {
		t.Fatalf("gang policy %+v, want minCount 3 (the workers)", pg.Spec.SchedulingPolicy)
	}
	if pg.Spec.PriorityClassName != "training" {
		t.Errorf("PodGroup priorityClassName %q, want the pods' %q", pg.Spec.PriorityClassName, "training")
	}
	if len(pg.OwnerReferences) != 1 || pg.OwnerReferences[0].UID != "job-uid" {
		t.Errorf("PodGroup owners %+v, want the job", pg.OwnerReferences)
	}
	pods := s.Pods(t)
	if len(pods) != 3 {
		t.Fatalf("%d pods, want the 3 workers (the launcher waits for them)", len(pods))
	}
	for _, p := range pods {
		if g := p.Spec.SchedulingGroup; g == nil || g.PodGroupName == nil || *g.PodGroupName != "genericjob-job" {
			t.Errorf("pod %s joins %+v, want PodGroup genericjob-job", p.Name, g)
		}
	}
	s.runAll(t)
	s.Step(t)
	pods = s.Pods(t)
	if len(pods) != 4 {
		t.Fatalf("%d pods once the workers are Ready, want the launcher too", len(pods))
	}
	for _, p := range pods {
		if strings.Contains(p.Name, "launcher") && p.Spec.SchedulingGroup != nil {
			t.Errorf("the launcher joins %+v, want no group", p.Spec.SchedulingGroup)
		}
	}
}

// An elastic job's gang, left to its default, counts only the elastic type's minimum: the
// job starts with what fits, and a resize leaves its PodGroup as it is.
func TestElasticGangCountsTheMinimum(t *testing.T) {
	job := testJob(gangAnnotation, nil)
	job.Spec.Elastic = &batch.ElasticPolicy{ReplicaType: "worker", Replicas: 3, MinReplicas: 2, MaxReplicas: 4}
	s := newGangTest(t, job, true, Config{})
	s.Step(t)
	if g := s.podGroup(t).Spec.SchedulingPolicy.Gang; g == nil || g.MinCount != 2 {
		t.Fatalf("gang policy %+v, want minCount 2 (the workers' minimum)", g)
	}
	if n := len(s.Pods(t)); n != 3 {
		t.Errorf("%d pods, want the 3 workers asked for", n)
	}
}

// A job that does not ask has no PodGroup, and its pods join none.
func TestJobNotAskingHasNoGang(t *testing.T) {
	s := newGangTest(t, testJob(nil, nil), true, Config{})
	s.Step(t)
	if pgs, _ := s.Kube.SchedulingV1beta1().PodGroups("ns").List(context.Background(), metav1.ListOptions{}); len(pgs.Items) != 0 {
		t.Errorf("PodGroups %+v, want none", pgs.Items)
	}
	for _, p := range s.Pods(t) {
		if p.Spec.SchedulingGroup != nil {
			t.Errorf("pod %s joins %+v", p.Name, p.Spec.SchedulingGroup)
		}
	}
}

// Without the PodGroup API a job that asks to start whole waits, with no pod, and says what
// to turn on: in a condition, and in one event when the wait starts.
func TestGangJobWithoutTheAPIWaits(t *testing.T) {
	s := newGangTest(t, testJob(gangAnnotation, nil), false, Config{})
	s.Step(t)
	if n := len(s.Pods(t)); n != 0 {
		t.Fatalf("%d pods, want none", n)
	}
	c := s.Job(t).Status.Condition(batch.JobConditionRunning)
	if c.Reason != reasonNotServed || !strings.Contains(c.Message, "GenericWorkload") {
		t.Fatalf("Running %+v, want %s naming the feature gate", c, reasonNotServed)
	}
	if events := drain(s.Events); !strings.Contains(events, "Warning "+reasonNotServed) || !strings.Contains(events, "runtime-config") {
		t.Errorf("events %q, want a Warning %s naming what to turn on", events, reasonNotServed)
	}
	s.Step(t)
	if events := drain(s.Events); strings.Contains(events, reasonNotServed) {
		t.Errorf("the event again on a later sync: %q", events)
	}
}

// With --scheduler=gang spec.scheduler.t9kScheduler asks to start whole: the pods keep the
// default scheduler, and the queue and priority, meaningless to it, are said to be ignored
// once.
func TestT9kSchedulerAsksForGang(t *testing.T) {
	policy := &batch.SchedulePolicy{T9kScheduler: &batch.T9kScheduler{Queue: "team-a", Priority: 50}}
	s := newGangTest(t, testJob(nil, policy), true, Config{ForT9kScheduler: true})
	s.Step(t)
	if s.podGroup(t).Spec.SchedulingPolicy.Gang.MinCount != 3 {
		t.Fatal("no gang of 3")
	}
	for _, p := range s.Pods(t) {
		if p.Spec.SchedulerName != "" || p.Spec.SchedulingGroup == nil {
			t.Errorf("pod %s: scheduler %q, group %+v; want the default scheduler, in the gang", p.Name, p.Spec.SchedulerName, p.Spec.SchedulingGroup)
		}
	}
	events := drain(s.Events)
	if !strings.Contains(events, "Warning "+reasonIgnored) || !strings.Contains(events, `"team-a"`) {
		t.Errorf("events %q, want %s naming the queue", events, reasonIgnored)
	}
	s.Step(t)
	if events := drain(s.Events); strings.Contains(events, reasonIgnored) {
		t.Errorf("the event again on a later sync: %q", events)
	}
}

// Asking for T9k Scheduler and for the gang, without --scheduler=gang, cannot be done: a pod
// has one scheduler. The job fails, saying so.
func TestGangAndT9kSchedulerConflict(t *testing.T) {
	policy := &batch.SchedulePolicy{T9kScheduler: &batch.T9kScheduler{Queue: "team-a"}}
	s := newGangTest(t, testJob(gangAnnotation, policy), true, Config{})
	s.Step(t)
	job := s.Job(t)
	if job.Status.Phase != batch.JobFailed || len(s.Pods(t)) != 0 {
		t.Fatalf("phase %q with %d pods, want Failed with none", job.Status.Phase, len(s.Pods(t)))
	}
}

// The scheduler's reason for not placing the gang is said in one Warning event per new
// reason, not per sync.
func TestUnschedulableGangSaysWhyOnce(t *testing.T) {
	s := newGangTest(t, testJob(gangAnnotation, nil), true, Config{})
	s.Step(t)
	drain(s.Events)
	s.cannotPlace(t)
	s.Step(t)
	if events := drain(s.Events); !strings.Contains(events, "Warning "+reasonUnschedulable) || !strings.Contains(events, "Insufficient cpu") {
		t.Errorf("events %q, want %s quoting the scheduler", events, reasonUnschedulable)
	}
	s.Step(t)
	if events := drain(s.Events); strings.Contains(events, reasonUnschedulable) {
		t.Errorf("the event again on a later sync: %q", events)
	}
}

// A deleted job is forgotten: the admitter keeps no note of what its events said. Shown by
// the same job read again after its deletion was seen: the scheduler's reason is new to the
// admitter, and said again.
func TestDeletedJobIsForgotten(t *testing.T) {
	s := newGangTest(t, testJob(gangAnnotation, nil), true, Config{})
	s.Step(t)
	s.cannotPlace(t)
	s.Step(t)
	if events := drain(s.Events); !strings.Contains(events, reasonUnschedulable) {
		t.Fatalf("events %q, want %s", events, reasonUnschedulable)
	}
	s.St.Deleted(s.Job(t))
	s.Step(t)
	if events := drain(s.Events); !strings.Contains(events, reasonUnschedulable) {
		t.Errorf("events %q after the job's deletion: the admitter still remembers the reason it said", events)
	}
}

// A worker of a running gang that fails is restarted in a new pod that joins the same
// PodGroup: kube-scheduler counts the members that still run toward the gang's quorum, so it
// is placed at once (docs/gang.md, "A restarted replica").
func TestRestartedReplicaJoinsItsGang(t *testing.T) {
	s := newGangTest(t, testJob(gangAnnotation, nil), true, Config{})
	s.Step(t)
	s.runAll(t)
	s.Step(t)
	p, err := s.Kube.CoreV1().Pods("ns").Get(context.Background(), "job-worker-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "main",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: metav1.NewTime(now)}}}}}
	if _, err := s.Kube.CoreV1().Pods("ns").UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Refresh(t)
	s.Clock.Step(time.Minute) // past the restart backoff
	for range 3 {
		s.Step(t)
	}
	p, err = s.Kube.CoreV1().Pods("ns").Get(context.Background(), "job-worker-1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the worker was not restarted: %v", err)
	}
	if p.Status.Phase == corev1.PodFailed || s.Job(t).Status.Tasks[0].Replicas[1].RestartCount != 1 {
		t.Fatalf("job-worker-1 is still the failed pod, or was not counted as restarted: %+v", s.Job(t).Status.Tasks[0])
	}
	if g := p.Spec.SchedulingGroup; g == nil || *g.PodGroupName != "genericjob-job" {
		t.Errorf("the restarted worker joins %+v, want its gang", g)
	}
	if mc := s.podGroup(t).Spec.SchedulingPolicy.Gang.MinCount; mc != 3 {
		t.Errorf("minCount %d after the restart, want 3 still", mc)
	}
}

// A gang preempted whole (disruptionMode: all) is made again whole: the worker whose old pod
// is gone first gets no new pod while the others' still terminate (the scheduler would count
// them toward minCount and bind it alone); once they are gone the three are made together.
func TestPreemptedGangIsMadeAgainTogether(t *testing.T) {
	s := newGangTest(t, testJob(gangAnnotation, nil), true, Config{})
	s.Step(t)
	s.bindAll(t)
	s.runAll(t)
	s.Step(t)
	ctx := context.Background()
	for _, p := range s.Pods(t) {
		if !strings.Contains(p.Name, "worker") {
			continue
		}
		p.DeletionTimestamp = &metav1.Time{Time: now.Add(30 * time.Second)}
		p.Status.Phase = corev1.PodFailed
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "PreemptionByScheduler"})
		if _, err := s.Kube.CoreV1().Pods("ns").Update(ctx, &p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s.Refresh(t)
	s.Step(t)
	if err := s.Kube.CoreV1().Pods("ns").Delete(ctx, "job-worker-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Refresh(t)
	s.Step(t)
	if _, err := s.Kube.CoreV1().Pods("ns").Get(ctx, "job-worker-0", metav1.GetOptions{}); err == nil {
		t.Fatal("job-worker-0 was made again while two of its gang's preempted pods still terminate")
	}
	for _, name := range []string{"job-worker-1", "job-worker-2"} {
		if err := s.Kube.CoreV1().Pods("ns").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s.Refresh(t)
	s.Step(t)
	made := 0
	for _, p := range s.Pods(t) {
		if strings.Contains(p.Name, "worker") && p.DeletionTimestamp == nil && p.Spec.SchedulingGroup != nil {
			made++
		}
	}
	if made != 3 {
		t.Fatalf("%d workers made once the old ones were gone, want the 3 together, each in the gang", made)
	}
}

// A paused job keeps its PodGroup (no pod is left to join it), and its pods join it again
// when it resumes.
func TestPausedGangKeepsItsPodGroup(t *testing.T) {
	s := newGangTest(t, testJob(gangAnnotation, nil), true, Config{})
	s.Step(t)
	job := s.Job(t)
	job.Spec.RunMode = &batch.RunMode{Pause: &batch.PauseMode{Enabled: true}}
	if _, err := s.Jobs.BatchV1beta1().GenericJobs("ns").Update(context.Background(), job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Refresh(t)
	for range 3 {
		s.Step(t)
	}
	if n := len(s.Pods(t)); n != 0 {
		t.Fatalf("%d pods while paused", n)
	}
	s.podGroup(t)
}
