// Package v1beta1 holds the API of the t9k-jobs controller: GenericJob, MPIJob, ColossalAIJob,
// TensorFlowTrainingJob and XGBoostTrainingJob in the group batch.tensorstack.dev.
//
// +k8s:deepcopy-gen=package
// +k8s:openapi-gen=true
// +groupName=batch.tensorstack.dev
// +kubebuilder:object:generate=true
package v1beta1
