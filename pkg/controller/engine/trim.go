package engine

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TrimChild is the informer transform of the children's caches: it keeps of each child only
// what the engine reads, so that the caches of many jobs stay small (an admitter's kinds
// trim further what their admitter does not read). What each kind keeps:
//
//   - every kind: the metadata, less managedFields, with its common strings shared
//     (internChildMeta); of pods and Services, the labels less the rank, one map shared by
//     all with the same labels (shareLabels);
//   - Pod: a CachedPod, of its annotations only batch.AnnotationRunMode; spec.nodeName;
//     status phase, reason, message, the Ready condition's status, the PodScheduled
//     condition while it is False (reason, message, lastTransitionTime: why the pod waits),
//     the DisruptionTarget condition while it is True (why the pod went, if not by failing),
//     and each container's name and state: whether it waits (reason and message), runs, or
//     ended (exit code, reason, finishedAt);
//   - Secret: its data (a job's SSH keys are kept from it when the Secret is built again);
//   - Deployment: status.readyReplicas (TensorBoard's readiness);
//   - Service, ConfigMap: nothing more (their content is compared by the hash annotation).
//
// TestTrimmedChildrenDecideAlike fails when the engine starts reading a field dropped here.
func TrimChild(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
		internChildMeta(m)
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		p := cachePod(o)
		p.Labels = shareLabels(p, o.Labels)
		return p, nil
	case *corev1.Service:
		s := &corev1.Service{ObjectMeta: o.ObjectMeta}
		s.Labels = shareLabels(s, o.Labels)
		return s, nil
	}
	if m, ok := obj.(metav1.Object); ok {
		internLabels(m)
	}
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		return &corev1.ConfigMap{ObjectMeta: o.ObjectMeta}, nil
	case *appsv1.Deployment:
		return &appsv1.Deployment{ObjectMeta: o.ObjectMeta, Status: appsv1.DeploymentStatus{ReadyReplicas: o.Status.ReadyReplicas}}, nil
	}
	return obj, nil
}

// lastApplied is the annotation in which `kubectl apply` keeps a copy of the whole object as
// the user applied it: as large as the job's spec, and never read by the controller.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// TrimJob is the informer transform of the jobs' caches: a job keeps its spec, status, and
// metadata less managedFields and kubectl's last-applied copy; its namespace and its status's
// and labels' common strings are shared (intern). A status write sends the whole
// cached job, but the API server takes only the status from it (the status subresource), so
// nothing dropped here is lost.
func TrimJob(obj any) (any, error) {
	if job, ok := obj.(Job); ok {
		internStatus(job.JobStatus())
		job.SetLabels(internKeys(job.GetLabels()))
		job.SetNamespace(intern(job.GetNamespace()))
	}
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
