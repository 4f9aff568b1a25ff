// Package v1beta2 describes the part of Kueue's API (group kueue.x-k8s.io, version v1beta2)
// that the controller reads and writes: a Workload for each queued job, the ResourceFlavors
// an admission assigns, and the WorkloadPriorityClasses a job may name. The types hold only
// the fields the controller uses; Kueue's own CRDs define the rest. An object read through
// them lacks those fields, so the controller never updates one whole: it creates Workloads it
// built, and changes them with patches of the fields it means to change.
//
// +k8s:deepcopy-gen=package
// +groupName=kueue.x-k8s.io
package v1beta2
