package v1beta1

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Reading a job's status, as apimachinery's meta.FindStatusCondition reads a
// []metav1.Condition: what every reader of a job (the engine, the adapters, the admitters,
// a program using the clientset) would otherwise write again.

// Condition is the status's condition of type t: the zero condition (Type "") when it has
// none.
func (s *JobStatus) Condition(t JobConditionType) JobCondition {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c
		}
	}
	return JobCondition{}
}

// ConditionTrue reports whether the status has the condition of type t, True.
func (s *JobStatus) ConditionTrue(t JobConditionType) bool {
	return s.Condition(t).Status == corev1.ConditionTrue
}

// Finished reports whether the job has ended: its Completed or Failed condition is True.
func (s *JobStatus) Finished() bool {
	return s.ConditionTrue(JobConditionCompleted) || s.ConditionTrue(JobConditionFailed)
}

// Replica is the status's entry of the replica whose pod is named name: the zero entry (Name
// "") when it has none.
func (s *JobStatus) Replica(name string) ReplicaStatus {
	for _, task := range s.Tasks {
		for _, r := range task.Replicas {
			if r.Name == name {
				return r
			}
		}
	}
	return ReplicaStatus{}
}

// StatusPath is the URL path of a job's status subresource, resource being its kind's plural
// (genericjobs, ...). The controller's progress endpoint takes a job's reports at the same
// path, and the tokens its pods report with are for ProgressAudience (docs/progress.md).
func StatusPath(resource, namespace, name string) string {
	return "/apis/" + GroupName + "/" + SchemeGroupVersion.Version + "/namespaces/" + namespace + "/" + resource + "/" + name + "/status"
}

// ProgressAudience is the audience of the tokens a job's pods report progress with: its
// status path, less /apis/, so that one job's token is refused by every other's endpoint.
func ProgressAudience(resource, namespace, name string) string {
	return strings.TrimPrefix(StatusPath(resource, namespace, name), "/apis/")
}
