package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// JobProgress is how far a job's training has come, as its replicas report it to the
// controller's progress endpoint (docs/progress.md). Its fields but the
// replicas' list are those of the slowest reporting replica (the least step, or the least
// percentage): a synchronous job moves at its slowest member's pace.
type JobProgress struct {
	// ProgressPercentage is how complete the training is, 0 to 100, as reported, or
	// step * 100 / totalSteps.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	ProgressPercentage *int32 `json:"progressPercentage,omitempty"`

	// EstimatedRemainingSeconds is the reported estimate of the training time left.
	// +optional
	// +kubebuilder:validation:Minimum=0
	EstimatedRemainingSeconds *int32 `json:"estimatedRemainingSeconds,omitempty"`

	// Step and TotalSteps, Epoch and TotalEpochs are read from the metrics currentStep,
	// totalSteps, currentEpoch and totalEpochs when a report has them.
	// +optional
	Step *int64 `json:"step,omitempty"`
	// +optional
	TotalSteps *int64 `json:"totalSteps,omitempty"`
	// +optional
	Epoch *int64 `json:"epoch,omitempty"`
	// +optional
	TotalEpochs *int64 `json:"totalEpochs,omitempty"`

	// Metrics are the reported metrics, such as loss, as strings.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Metrics []ProgressMetric `json:"metrics,omitempty"`

	// LastUpdatedTime is when the report was made, as the replica said.
	// +optional
	LastUpdatedTime *metav1.Time `json:"lastUpdatedTime,omitempty"`

	// Replica names the replica these fields come from.
	// +optional
	Replica string `json:"replica,omitempty"`

	// Replicas are the pods that reported, with their last report: what the stall check
	// (spec.progressDeadlineSeconds) reads. Atomic: it is written whole, and a list of 750
	// keyed entries would cost as much again in managedFields.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=750
	Replicas []ReplicaProgress `json:"replicas,omitempty"`
}

// ProgressMetric is one reported metric.
type ProgressMetric struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Name string `json:"name"`
	// +kubebuilder:validation:MaxLength=64
	Value string `json:"value"`
}

// ReplicaProgress is one replica's last progress report, by the pod that made it: a report
// of an earlier pod of the replica does not count for the current one. It holds no more than
// the stall check and the slowest replica need, since a job may have 750 of them.
type ReplicaProgress struct {
	// UID of the pod that reported.
	UID types.UID `json:"uid"`
	// ProgressPercentage it reported, or computed from its step, if any.
	// +optional
	ProgressPercentage *int32 `json:"progressPercentage,omitempty"`
	// ReportTime is when the controller received the report.
	ReportTime metav1.Time `json:"reportTime"`
}
