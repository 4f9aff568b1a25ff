package engine

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// TrimChild is the informer transform of the children's caches: it keeps of each child only
// what the engine reads, so that the caches of many jobs stay small. What each kind keeps:
//
//   - every kind: the metadata, less managedFields;
//   - Pod: of its annotations only batch.AnnotationRunMode; spec.nodeName; status phase,
//     reason, message, the Ready condition's status, and each container's name and state:
//     whether it waits (and why), runs, or ended (exit code, reason, finishedAt);
//   - Secret: its data (a job's SSH keys are kept from it when the Secret is built again);
//   - Deployment: status.readyReplicas (TensorBoard's readiness);
//   - Service, ConfigMap: nothing more (their content is compared by the hash annotation).
//
// TestTrimmedChildrenDecideAlike fails when the engine starts reading a field dropped here.
func TrimChild(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		return trimPod(o), nil
	case *corev1.Service:
		return &corev1.Service{ObjectMeta: o.ObjectMeta}, nil
	case *corev1.ConfigMap:
		return &corev1.ConfigMap{ObjectMeta: o.ObjectMeta}, nil
	case *appsv1.Deployment:
		return &appsv1.Deployment{ObjectMeta: o.ObjectMeta, Status: appsv1.DeploymentStatus{ReadyReplicas: o.Status.ReadyReplicas}}, nil
	}
	return obj, nil
}

// trimPod keeps of a pod what TrimChild says. A pod is the most numerous child, and the
// fields dropped (other conditions, timestamps, container IDs, the template's annotations)
// are most of what a pod of a finished job would cost the cache.
func trimPod(o *corev1.Pod) *corev1.Pod {
	meta := o.ObjectMeta
	meta.Annotations = nil
	if mode, ok := o.Annotations[batch.AnnotationRunMode]; ok {
		meta.Annotations = map[string]string{batch.AnnotationRunMode: mode}
	}
	statuses := make([]corev1.ContainerStatus, len(o.Status.ContainerStatuses))
	for i, cs := range o.Status.ContainerStatuses {
		state := corev1.ContainerState{}
		switch {
		case cs.State.Terminated != nil:
			t := cs.State.Terminated
			state.Terminated = &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Reason: t.Reason, FinishedAt: t.FinishedAt}
		case cs.State.Running != nil:
			state.Running = &corev1.ContainerStateRunning{}
		case cs.State.Waiting != nil:
			state.Waiting = &corev1.ContainerStateWaiting{Reason: cs.State.Waiting.Reason}
		}
		statuses[i] = corev1.ContainerStatus{Name: cs.Name, State: state}
	}
	var conditions []corev1.PodCondition
	for _, c := range o.Status.Conditions {
		if c.Type == corev1.PodReady {
			conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return &corev1.Pod{ObjectMeta: meta, Spec: corev1.PodSpec{NodeName: o.Spec.NodeName},
		Status: corev1.PodStatus{Phase: o.Status.Phase, Conditions: conditions, Reason: o.Status.Reason,
			Message: o.Status.Message, ContainerStatuses: statuses}}
}

// lastApplied is the annotation in which `kubectl apply` keeps a copy of the whole object as
// the user applied it: as large as the job's spec, and never read by the controller.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// TrimJob is the informer transform of the jobs' caches: a job keeps its spec, status, and
// metadata less managedFields and kubectl's last-applied copy. A status write sends the whole
// cached job, but the API server takes only the status from it (the status subresource), so
// nothing dropped here is lost.
func TrimJob(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
		if a := m.GetAnnotations(); a[lastApplied] != "" {
			delete(a, lastApplied)
			if len(a) == 0 {
				m.SetAnnotations(nil)
			}
		}
	}
	return obj, nil
}
