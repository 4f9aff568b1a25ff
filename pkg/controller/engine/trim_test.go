package engine

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision/decisiontest"
)

// full gives a pod everything a real one has besides what the tests set: the fields the
// informer transform drops.
func full(p *corev1.Pod) *corev1.Pod {
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	p.Spec.NodeName = "node-1"
	p.Spec.Containers = []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"train"},
		Env:       []corev1.EnvVar{{Name: "RANK", Value: "0"}},
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}}}
	p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	p.Status.HostIP, p.Status.PodIP, p.Status.QOSClass = "10.0.0.1", "10.1.0.5", corev1.PodQOSBurstable
	p.Status.StartTime = &metav1.Time{Time: now.Add(-2 * time.Hour)}
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations["example.com/from-the-template"] = "x"
	p.Finalizers = []string{"example.com/keep"}
	p.Status.Conditions = append(p.Status.Conditions,
		corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Time{Time: now.Add(-2 * time.Hour)}},
		corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", Message: "not ready"})
	for i := range p.Status.ContainerStatuses {
		cs := &p.Status.ContainerStatuses[i]
		cs.Image, cs.ImageID, cs.ContainerID, cs.RestartCount = "busybox", "sha256:abc", "containerd://123", 0
		cs.Ready, cs.Started = cs.State.Running != nil, ptr.To(cs.State.Running != nil)
		if r := cs.State.Running; r != nil {
			r.StartedAt = metav1.Time{Time: now.Add(-time.Hour)}
		}
		if t := cs.State.Terminated; t != nil {
			t.StartedAt, t.Message, t.Signal, t.ContainerID = metav1.Time{Time: now.Add(-2 * time.Hour)}, "bye", 9, "containerd://123"
		}
		if w := cs.State.Waiting; w != nil {
			w.Message = "Back-off pulling image"
		}
		cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}
	}
	return p
}

// waiting is a pending pod whose container waits, for the reason given.
func waiting(name string, uid types.UID, reason string) *corev1.Pod {
	p := decisiontest.Pod(name, uid, corev1.PodPending, 0)
	p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}
	return p
}

// The engine decides the same on the children as the informers keep them (TrimChild) as on
// the children as the API server has them. A field the transform drops that the engine
// starts to read makes a case here decide differently.
func TestTrimmedChildrenDecideAlike(t *testing.T) {
	oom := full(decisiontest.Pod("job-worker-0", "w0", corev1.PodFailed, 137))
	oom.Status.Reason, oom.Status.Message = "Evicted", "The node was low on memory."
	oom.Status.ContainerStatuses[0].State.Terminated.Reason = "OOMKilled"
	oom.Status.ContainerStatuses[0].State.Terminated.FinishedAt = metav1.Time{Time: now.Add(-10 * time.Second)} // its 3rd restart's backoff is over
	deleting := full(decisiontest.Pod("job-worker-1", "w1", corev1.PodRunning, 0))
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	debug := full(decisiontest.Ready(decisiontest.Pod("job-worker-1", "w1", corev1.PodRunning, 0)))
	debug.Annotations = map[string]string{batch.AnnotationRunMode: batch.RunModeDebug}
	evicted := full(decisiontest.Pod("job-worker-1", "w1", corev1.PodRunning, 0))
	evicted.DeletionTimestamp = &metav1.Time{Time: now}
	evicted.Status.Conditions = append(evicted.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting", LastTransitionTime: metav1.NewTime(now)})
	succeeded := full(decisiontest.Pod("job-worker-0", "w0", corev1.PodSucceeded, 0))
	succeeded.CreationTimestamp = metav1.Time{Time: now.Add(-time.Hour)}

	hostfile := PlannedChild{Kind: ConfigMapKind, Name: "job-hostfile", Build: func(metav1.Object) (metav1.Object, error) {
		return &corev1.ConfigMap{Data: map[string]string{"hostfile": "w0\n"}}, nil
	}}
	madeHostfile, err := BuildChild(decisiontest.Job(batch.JobStatus{}), hostfile, nil)
	if err != nil {
		t.Fatal(err)
	}
	madeHostfile.(*corev1.ConfigMap).ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "t9k"}}
	tensorboard := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "job-tensorboard", UID: "d"},
		Spec:   appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)},
		Status: appsv1.DeploymentStatus{ReadyReplicas: 1, Replicas: 1, ObservedGeneration: 3}}
	service := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "job-worker-0", UID: "s0", Labels: map[string]string{batch.LabelReplicaType: "worker"}},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Port: 2222}}}}

	restartOnFailure := &Plan{Groups: []Group{workers(2, batch.RestartOnFailure, ptr.To[int32](3))}, Judge: whenAllSucceed,
		ServicePorts: []corev1.ServicePort{{Port: 2222}}, Objects: []PlannedChild{hostfile}, CleanUp: batch.CleanUpUnfinished,
		KindStatus: func(ch Children) KindStatus {
			ready := int32(0)
			for _, o := range ch.Objects {
				if d, ok := o.(*appsv1.Deployment); ok {
					ready = d.Status.ReadyReplicas
				}
			}
			return readyReplicas(ready)
		}}
	inPlacePlan := &Plan{Groups: []Group{workers(2, batch.RestartOnFailure, nil)}, Judge: whenAllSucceed, RestartJob: true,
		InPlace: &decision.InPlacePlan{AgentImage: "agent"}}
	debugPlan := &Plan{Groups: []Group{workers(2, batch.RestartNever, nil)}, Debug: true, DebugHint: "go", Judge: whenAllSucceed}
	cases := []struct {
		name    string
		plan    *Plan
		status  batch.JobStatus
		pods    []*corev1.Pod
		objects []metav1.Object
	}{
		{"a restart after an OOM kill, a pod being deleted, objects", restartOnFailure,
			decisiontest.StatusWith(batch.JobRunning, decisiontest.ReplicaStatus("job-worker-0", "w0", batch.ReplicaRunning, 2), decisiontest.ReplicaStatus("job-worker-1", "w1", batch.ReplicaRunning, 0)),
			[]*corev1.Pod{oom, deleting}, []metav1.Object{madeHostfile, tensorboard, service}},
		{"debug mode, ready pods", debugPlan,
			decisiontest.StatusWith(batch.JobRunning, decisiontest.ReplicaStatus("job-worker-0", "w0", batch.ReplicaRunning, 0), decisiontest.ReplicaStatus("job-worker-1", "w1", batch.ReplicaRunning, 0)),
			[]*corev1.Pod{full(decisiontest.Ready(decisiontest.Pod("job-worker-0", "w0", corev1.PodRunning, 0))), debug}, nil},
		{"a pod waiting for its image", restartOnFailure,
			decisiontest.StatusWith(batch.JobPending, decisiontest.ReplicaStatus("job-worker-0", "w0", batch.ReplicaPending, 0), decisiontest.ReplicaStatus("job-worker-1", "w1", batch.ReplicaRunning, 0)),
			[]*corev1.Pod{full(waiting("job-worker-0", "w0", "ImagePullBackOff")), full(decisiontest.Ready(decisiontest.Pod("job-worker-1", "w1", corev1.PodRunning, 0)))}, nil},
		{"a pod the scheduler cannot place, one that waits for its image", restartOnFailure,
			decisiontest.StatusWith(batch.JobPending, decisiontest.ReplicaStatus("job-worker-0", "w0", batch.ReplicaPending, 0), decisiontest.ReplicaStatus("job-worker-1", "w1", batch.ReplicaPending, 0)),
			[]*corev1.Pod{unplaced(full(waiting("job-worker-0", "w0", "ContainerCreating"))), full(waiting("job-worker-1", "w1", "ImagePullBackOff"))}, nil},
		{"pods evicted: by their kubelet, and through the API", restartOnFailure,
			decisiontest.StatusWith(batch.JobRunning, decisiontest.ReplicaStatus("job-worker-0", "w0", batch.ReplicaRunning, 0), decisiontest.ReplicaStatus("job-worker-1", "w1", batch.ReplicaRunning, 0)),
			[]*corev1.Pod{full(decisiontest.DisruptedPod("job-worker-0", "w0", "TerminationByKubelet")), evicted}, nil},
		{"success and clean-up", restartOnFailure,
			decisiontest.StatusWith(batch.JobRunning, decisiontest.ReplicaStatus("job-worker-0", "w0", batch.ReplicaRunning, 0), decisiontest.ReplicaStatus("job-worker-1", "w1", batch.ReplicaRunning, 0)),
			[]*corev1.Pod{succeeded, full(decisiontest.Pod("job-worker-1", "w1", corev1.PodSucceeded, 0))}, []metav1.Object{service}},
		{"restarting in place: a pod held after its failure, one running", inPlacePlan,
			inPlaceStatus(1), []*corev1.Pod{inPlace(full(decisiontest.Pod("job-worker-0", "w0", corev1.PodRunning, 0)), 1, 1, 1, true),
				inPlace(full(decisiontest.Pod("job-worker-1", "w1", corev1.PodRunning, 0)), 1, 1, 0, false)}, nil},
		{"restarting in place: both pods down, released", inPlacePlan,
			inPlaceStatus(2), []*corev1.Pod{inPlace(full(decisiontest.Pod("job-worker-0", "w0", corev1.PodRunning, 0)), 2, 1, 2, true),
				inPlace(full(decisiontest.Pod("job-worker-1", "w1", corev1.PodRunning, 0)), 2, 1, 1, true)}, nil},
		{"a pod Kueue terminated before it ran: a disruption", &Plan{Groups: []Group{workers(1, batch.RestartNever, nil)}, Judge: whenAllSucceed, BackoffLimit: ptr.To[int32](0)},
			decisiontest.StatusWith(batch.JobRunning, decisiontest.ReplicaStatus("job-worker-0", "w0", batch.ReplicaPending, 0)),
			[]*corev1.Pod{decisiontest.TerminatedByKueue()}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			trimmed := Children{}
			for _, p := range tc.pods {
				o, _ := TrimChild(p.DeepCopy())
				trimmed.Pods = append(trimmed.Pods, asPod(o))
			}
			for _, obj := range tc.objects {
				o, _ := TrimChild(obj.(runtime.Object).DeepCopyObject())
				trimmed.Objects = append(trimmed.Objects, o.(metav1.Object))
			}
			want := summary(t, mustDecide(t, decisiontest.Job(tc.status), tc.plan, Children{Pods: tc.pods, Objects: tc.objects}, nil, now))
			if got := summary(t, mustDecide(t, decisiontest.Job(tc.status), tc.plan, trimmed, nil, now)); got != want {
				t.Errorf("decided on trimmed children:\n%s\nwant, as on the full ones:\n%s", got, want)
			}
		})
	}
}

// inPlace makes a full pod one that restarts in place: its attempt label and released
// annotation, its agent's restart count (the release's count is 0), and whether the agent
// holds its containers (their last run ended when the kubelet restarted them all).
func inPlace(p *corev1.Pod, label, released int, agentRestarts int32, held bool) *corev1.Pod {
	p.Labels[batch.LabelAttempt] = strconv.Itoa(label)
	p.Annotations[batch.AnnotationReleasedAttempt] = strconv.Itoa(released)
	p.Annotations[batch.AnnotationAgentRestarts] = "0"
	agent := corev1.ContainerStatus{Name: decision.AgentContainer, RestartCount: agentRestarts, Started: ptr.To(!held), Image: "agent", ImageID: "sha256:def",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now)}}}
	p.Status.InitContainerStatuses = []corev1.ContainerStatus{agent}
	if held {
		p.Status.Phase = corev1.PodPending
		cs := &p.Status.ContainerStatuses[0]
		cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}
		cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "RestartingAllContainers",
			StartedAt: metav1.NewTime(now.Add(-time.Minute)), FinishedAt: metav1.NewTime(now.Add(-5 * time.Second)), ContainerID: "containerd://122"}}
	}
	return p
}

// inPlaceStatus is a running job of two workers in the attempt given.
func inPlaceStatus(attempt int32) batch.JobStatus {
	s := decisiontest.StatusWith(batch.JobRunning, decisiontest.ReplicaStatus("job-worker-0", "w0", batch.ReplicaRunning, 0), decisiontest.ReplicaStatus("job-worker-1", "w1", batch.ReplicaRunning, 0))
	s.Attempt = attempt
	return s
}

// unplaced makes a full pod one the scheduler could not place: its PodScheduled condition
// False, with the scheduler's reason and message, and the rest of what the scheduler writes.
func unplaced(p *corev1.Pod) *corev1.Pod {
	p.Spec.NodeName = ""
	for i := range p.Status.Conditions {
		if c := &p.Status.Conditions[i]; c.Type == corev1.PodScheduled {
			c.Status, c.Reason, c.Message = corev1.ConditionFalse, corev1.PodReasonUnschedulable, decisiontest.NoCPU
			c.LastProbeTime, c.LastTransitionTime = metav1.NewTime(now), metav1.NewTime(now.Add(-time.Minute))
		}
	}
	return p
}

// readyReplicas is a stand-in kind status that reads a Deployment's readiness.
type readyReplicas int32

func (readyReplicas) SetOn(Job) bool { return false }

// summary is what a decision does, as text: its status, kind status and the names it writes.
func summary(t *testing.T, d *Decision) string {
	t.Helper()
	data, err := json.MarshalIndent(map[string]any{
		"status": d.Status, "kindStatus": d.KindStatus, "createPods": decisiontest.Names(d.CreatePods), "deletePods": decisiontest.Names(d.DeletePods),
		"create": decisiontest.Names(d.CreateObjects), "update": decisiontest.Names(d.UpdateObjects), "delete": decisiontest.Names(d.DeleteObjects),
		"restarted": d.Restarted, "disrupted": d.Disrupted, "jobRestart": d.JobRestart, "requeue": d.RequeueAfter, "outcome": d.Outcome, "waiting": d.Waiting, "hint": d.DebugHint,
		"restartInPlace": inPlaceWrites(d), "inPlaceFallback": d.InPlaceFallback,
	}, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// inPlaceWrites are the attempts a decision writes to pods that restart in place.
func inPlaceWrites(d *Decision) []string {
	var out []string
	for _, r := range d.RestartPods {
		out = append(out, fmt.Sprintf("restart %s for %d", r.Pod.Name, r.Attempt))
	}
	for _, r := range d.ReleasePods {
		out = append(out, fmt.Sprintf("release %s for %d at %d agent restarts", r.Pod.Name, r.Attempt, r.AgentRestarts))
	}
	return out
}

// A job's cached copy loses managedFields and kubectl's copy of the applied object, and
// nothing else.
func TestTrimJob(t *testing.T) {
	job := decisiontest.Job(batch.JobStatus{Phase: batch.JobRunning})
	job.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	job.Annotations = map[string]string{lastApplied: `{"kind":"GenericJob"}`, "team": "a"}
	job.Spec.ReplicaSpecs = []batch.GenericReplicaSpec{{Type: "worker"}}
	want := job.DeepCopy()
	want.ManagedFields, want.Annotations = nil, map[string]string{"team": "a"}
	got, _ := TrimJob(job)
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("trimmed job:\n%+v\nwant\n%+v", got, want)
	}
	only := decisiontest.Job(batch.JobStatus{})
	only.Annotations = map[string]string{lastApplied: "{}"}
	if got, _ := TrimJob(only); got.(*batch.GenericJob).Annotations != nil {
		t.Errorf("annotations left: %v", got.(*batch.GenericJob).Annotations)
	}
}
