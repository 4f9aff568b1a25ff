package engine

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TrimChild is the informer transform of the children's caches: it keeps of each child only
// what the engine reads, so that the caches of many jobs stay small. What each kind keeps:
//
//   - every kind: the metadata, less managedFields;
//   - Pod: spec.nodeName; status phase, conditions, reason, message, and each container's
//     name and state (not its image or IDs): what Decide, the status and the handlers read;
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
		statuses := make([]corev1.ContainerStatus, len(o.Status.ContainerStatuses))
		for i, cs := range o.Status.ContainerStatuses {
			statuses[i] = corev1.ContainerStatus{Name: cs.Name, State: cs.State}
		}
		return &corev1.Pod{ObjectMeta: o.ObjectMeta, Spec: corev1.PodSpec{NodeName: o.Spec.NodeName},
			Status: corev1.PodStatus{Phase: o.Status.Phase, Conditions: o.Status.Conditions, Reason: o.Status.Reason,
				Message: o.Status.Message, ContainerStatuses: statuses}}, nil
	case *corev1.Service:
		return &corev1.Service{ObjectMeta: o.ObjectMeta}, nil
	case *corev1.ConfigMap:
		return &corev1.ConfigMap{ObjectMeta: o.ObjectMeta}, nil
	case *appsv1.Deployment:
		return &appsv1.Deployment{ObjectMeta: o.ObjectMeta, Status: appsv1.DeploymentStatus{ReadyReplicas: o.Status.ReadyReplicas}}, nil
	}
	return obj, nil
}
