package engine

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision"
)

// CachedPod is a pod as the children's cache keeps it (TrimChild): its metadata and what
// the engine reads of its status. The cache holds every pod of every job, kept pods of
// finished jobs too, and a corev1.Pod costs 1.2 KB of structs before it holds anything (its
// spec and status are values): at 40,000 pods this type halves the controller's heap.
// A sync turns its job's pods back into corev1.Pods (Pod), so decisions read the real type.
type CachedPod struct {
	metav1.ObjectMeta
	NodeName   string
	Phase      corev1.PodPhase
	Reason     string
	Message    string
	Ready      bool // the Ready condition is True
	Containers []CachedContainer
	// Unscheduled is the PodScheduled condition while it is False: the scheduler's reason
	// and message, and since when (the job's status says why its replicas wait). nil once
	// the pod is placed, so that the pods of running and finished jobs pay one pointer.
	Unscheduled *corev1.PodCondition
	// Disruption is the DisruptionTarget (or Kueue's TerminatedByKueue) condition while it
	// is True (reason and message):
	// the pod was evicted, preempted or its node went, not failed (decision/disruption.go).
	// nil for almost every pod.
	Disruption *corev1.PodCondition
	// Rare is what few pods have: nil for almost every pod.
	Rare *CachedRare
}

// CachedRare is what a cached pod keeps that few pods have.
type CachedRare struct {
	// Others are the pod's conditions of types Kubernetes does not set itself (a readiness
	// gate's, a node problem detector's): what failure policy rules may match
	// (onPodConditions). Their type, status and reason only.
	Others []corev1.PodCondition
	// For a pod that restarts in place (decision/inplace.go), what tells its attempt's state:
	// each init container's name, state, whether it started and how often it restarted (the
	// agent's among them), and how each container's last run ended (by the index of
	// Containers; nil where none).
	Inits []corev1.ContainerStatus
	Last  []*corev1.ContainerStateTerminated
}

// rare is the pod's CachedRare, made when first needed.
func (p *CachedPod) rare() *CachedRare {
	if p.Rare == nil {
		p.Rare = &CachedRare{}
	}
	return p.Rare
}

// kubernetesConditions are the pod condition types Kubernetes sets on every pod, which
// CachedPod keeps in its own fields (Ready, Unscheduled, Disruption) or not at all.
var kubernetesConditions = map[corev1.PodConditionType]bool{
	corev1.PodScheduled: true, corev1.PodInitialized: true, corev1.ContainersReady: true, corev1.PodReady: true,
	corev1.PodReadyToStartContainers: true, corev1.DisruptionTarget: true, decision.TerminatedByKueue: true,
	corev1.PodResizePending: true, corev1.PodResizeInProgress: true,
}

// CachedContainer is a container's name and state: whether it waits (and why: reason and
// message), runs, or ended (exit code, reason, finishedAt).
type CachedContainer struct {
	Name  string
	State corev1.ContainerState
}

// cachePod keeps of a pod what CachedPod holds: of its annotations only
// batch.AnnotationRunMode, batch.AnnotationExcludedNodes and those of restarting in place,
// of its managedFields nothing.
func cachePod(o *corev1.Pod) *CachedPod {
	p := &CachedPod{ObjectMeta: o.ObjectMeta, NodeName: o.Spec.NodeName, Phase: o.Status.Phase,
		Reason: o.Status.Reason, Message: o.Status.Message, Ready: decision.PodReady(o)}
	p.ManagedFields, p.Annotations = nil, nil
	p.Phase, p.Reason = corev1.PodPhase(intern(string(p.Phase))), intern(p.Reason)
	p.Unscheduled = unscheduled(o)
	if c, ok := decision.DisruptionTarget(o); ok {
		p.Disruption = &corev1.PodCondition{Type: c.Type, Status: corev1.ConditionTrue,
			Reason: intern(c.Reason), Message: internMessage(c.Message), LastTransitionTime: c.LastTransitionTime}
	}
	for _, c := range o.Status.Conditions {
		if !kubernetesConditions[c.Type] {
			p.rare().Others = append(p.rare().Others, corev1.PodCondition{Type: corev1.PodConditionType(intern(string(c.Type))), Status: c.Status, Reason: intern(c.Reason)})
		}
	}
	for _, key := range []string{batch.AnnotationRunMode, batch.AnnotationExcludedNodes, batch.AnnotationReleasedAttempt, batch.AnnotationAgentRestarts, batch.AnnotationRestartedAt} {
		if v, ok := o.Annotations[key]; ok {
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[key] = v
		}
	}
	p.Containers = make([]CachedContainer, len(o.Status.ContainerStatuses))
	for i, cs := range o.Status.ContainerStatuses {
		p.Containers[i] = CachedContainer{Name: intern(cs.Name), State: cachedState(cs.State)}
	}
	if _, ok := o.Annotations[batch.AnnotationReleasedAttempt]; ok {
		ip := p.rare()
		ip.Last = make([]*corev1.ContainerStateTerminated, len(o.Status.ContainerStatuses))
		for _, cs := range o.Status.InitContainerStatuses {
			ip.Inits = append(ip.Inits, corev1.ContainerStatus{Name: intern(cs.Name), State: cachedState(cs.State), Started: cs.Started, RestartCount: cs.RestartCount})
		}
		for i, cs := range o.Status.ContainerStatuses {
			if t := cs.LastTerminationState.Terminated; t != nil {
				ip.Last[i] = &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Reason: intern(t.Reason), FinishedAt: t.FinishedAt}
			}
		}
	}
	return p
}

// cachedState is what the cache keeps of a container's state: whether it waits (reason and
// message), runs, or ended (exit code, reason, finishedAt).
func cachedState(s corev1.ContainerState) corev1.ContainerState {
	state := corev1.ContainerState{}
	switch {
	case s.Terminated != nil:
		t := s.Terminated
		state.Terminated = &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Reason: intern(t.Reason), FinishedAt: t.FinishedAt}
	case s.Running != nil:
		state.Running = &corev1.ContainerStateRunning{}
	case s.Waiting != nil:
		w := s.Waiting
		state.Waiting = &corev1.ContainerStateWaiting{Reason: intern(w.Reason), Message: internMessage(w.Message)}
	}
	return state
}

// unscheduled is a pod's PodScheduled condition while it is False, with what explains it:
// its reason and message (shared: the pods of a burst hear the same from the scheduler) and
// lastTransitionTime.
func unscheduled(o *corev1.Pod) *corev1.PodCondition {
	for _, c := range o.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return &corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
				Reason: intern(c.Reason), Message: internMessage(c.Message), LastTransitionTime: c.LastTransitionTime}
		}
	}
	return nil
}

// Pod is the cached pod as a corev1.Pod, sharing its metadata and container states: read
// it, never change it.
func (p *CachedPod) Pod() *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: p.ObjectMeta, Spec: corev1.PodSpec{NodeName: p.NodeName},
		Status: corev1.PodStatus{Phase: p.Phase, Reason: p.Reason, Message: p.Message}}
	if p.Ready {
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	if p.Unscheduled != nil {
		pod.Status.Conditions = append(pod.Status.Conditions, *p.Unscheduled)
	}
	if p.Disruption != nil {
		pod.Status.Conditions = append(pod.Status.Conditions, *p.Disruption)
	}
	if p.Rare != nil {
		pod.Status.Conditions = append(pod.Status.Conditions, p.Rare.Others...)
	}
	pod.Status.ContainerStatuses = make([]corev1.ContainerStatus, len(p.Containers))
	for i, c := range p.Containers {
		pod.Status.ContainerStatuses[i] = corev1.ContainerStatus{Name: c.Name, State: c.State}
	}
	if ip := p.Rare; ip != nil {
		pod.Status.InitContainerStatuses = ip.Inits
		for i, t := range ip.Last {
			if t != nil && i < len(pod.Status.ContainerStatuses) {
				pod.Status.ContainerStatuses[i].LastTerminationState.Terminated = t
			}
		}
	}
	return pod
}

// asPod is a child of the pod cache as a corev1.Pod (nil for anything else). The caches of
// tests that do not trim hold corev1.Pods.
func asPod(obj any) *corev1.Pod {
	switch p := obj.(type) {
	case *CachedPod:
		return p.Pod()
	case *corev1.Pod:
		return p
	}
	return nil
}
