package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +genclient:method=GetScale,verb=get,subresource=scale,result=k8s.io/api/autoscaling/v1.Scale
// +genclient:method=UpdateScale,verb=update,subresource=scale,input=k8s.io/api/autoscaling/v1.Scale,result=k8s.io/api/autoscaling/v1.Scale
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.elastic.replicas,statuspath=.status.elastic.replicas,selectorpath=.status.elastic.selector
// +kubebuilder:resource:shortName=gj,categories=t9k
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Running",type=integer,JSONPath=`.status.aggregate.running`
// +kubebuilder:printcolumn:name="Size",type=integer,priority=1,JSONPath=`.spec.elastic.replicas`,description="the size an elastic job asks for (spec.elastic.replicas)"
// +kubebuilder:printcolumn:name="Succeeded",type=integer,JSONPath=`.status.aggregate.succeeded`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.aggregate.failed`
// +kubebuilder:printcolumn:name="Progress",type=integer,JSONPath=`.status.progress.progressPercentage`,description="percent of the training done, as the slowest replica reports it"
// +kubebuilder:printcolumn:name="Attempt",type=integer,priority=1,JSONPath=`.status.attempt`,description="the job's life: 1, then one more at each whole-job restart"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,priority=1,JSONPath=`.status.conditions[?(@.status=="True")].message`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must consist of lower-case letters, digits and '-', start with a letter and end with a letter or digit: it begins the host name and Service name of every replica"
// +kubebuilder:validation:XValidation:rule="self.spec.replicaSpecs.all(r, size(self.metadata.name) + size(r.type) + ((has(self.spec.elastic) && self.spec.elastic.replicaType == r.type ? self.spec.elastic.maxReplicas : has(r.replicas) ? r.replicas : 1) > 1000 ? 4 : (has(self.spec.elastic) && self.spec.elastic.replicaType == r.type ? self.spec.elastic.maxReplicas : has(r.replicas) ? r.replicas : 1) > 100 ? 3 : (has(self.spec.elastic) && self.spec.elastic.replicaType == r.type ? self.spec.elastic.maxReplicas : has(r.replicas) ? r.replicas : 1) > 10 ? 2 : 1) + 2 <= 63)",message="metadata.name is too long: the replica names <name>-<type>-<rank> (host names and Service names) must fit in 63 characters; shorten the job name"

// GenericJob runs any set of replica types, with success and failure rules over them; a
// skilled user can build MPI, PyTorch or TensorFlow jobs on it.
type GenericJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the job the user asks for.
	Spec GenericJobSpec `json:"spec"`

	// Status is what the controller observed of the job.
	// +optional
	Status JobStatus `json:"status,omitempty"`
}

// GenericJobSpec is the desired state of a GenericJob.
// +kubebuilder:validation:XValidation:rule="!has(self.successRules) || self.successRules.all(rule, rule.all(t, self.replicaSpecs.exists(r, r.type == t)))",message="spec.successRules may only name replica types listed in spec.replicaSpecs"
// +kubebuilder:validation:XValidation:rule="!has(self.failureRules) || self.failureRules.all(rule, rule.all(t, self.replicaSpecs.exists(r, r.type == t)))",message="spec.failureRules may only name replica types listed in spec.replicaSpecs"
// +kubebuilder:validation:XValidation:rule="!has(self.successRules) || self.successRules.all(rule, rule.all(t, self.replicaSpecs.all(r, r.type != t || rule[t].all(i, i < (has(self.elastic) && self.elastic.replicaType == r.type ? self.elastic.minReplicas : has(r.replicas) ? r.replicas : 1)))))",message="spec.successRules names a rank that does not exist: ranks of a type run from 0 to its replicas - 1, and a rule may name only the ranks of an elastic type that always run, below spec.elastic.minReplicas"
// +kubebuilder:validation:XValidation:rule="!has(self.failureRules) || self.failureRules.all(rule, rule.all(t, self.replicaSpecs.all(r, r.type != t || rule[t].all(i, i < (has(self.elastic) && self.elastic.replicaType == r.type ? self.elastic.minReplicas : has(r.replicas) ? r.replicas : 1)))))",message="spec.failureRules names a rank that does not exist: ranks of a type run from 0 to its replicas - 1, and a rule may name only the ranks of an elastic type that always run, below spec.elastic.minReplicas"
// +kubebuilder:validation:XValidation:rule="!has(self.runMode) || !has(self.runMode.debug) || !has(self.runMode.debug.replicaSpecs) || self.runMode.debug.replicaSpecs.all(d, self.replicaSpecs.exists(r, r.type == d.type))",message="spec.runMode.debug.replicaSpecs[*].type must name a replica type listed in spec.replicaSpecs"
// +kubebuilder:validation:XValidation:rule="!has(self.runMode) || !has(self.runMode.pause) || !has(self.runMode.pause.resumeSpecs) || self.runMode.pause.resumeSpecs.all(d, self.replicaSpecs.exists(r, r.type == d.type))",message="spec.runMode.pause.resumeSpecs[*].type must name a replica type listed in spec.replicaSpecs"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.runMode) || !has(oldSelf.runMode.pause) || !has(oldSelf.runMode.pause.resumeSpecs) || (has(self.runMode) && has(self.runMode.pause) && has(self.runMode.pause.resumeSpecs) && self.runMode.pause.resumeSpecs == oldSelf.runMode.pause.resumeSpecs)",message="spec.runMode.pause.resumeSpecs cannot be changed once set; pause.enabled can still be switched at any time"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.runMode) && has(oldSelf.runMode.pause) && has(oldSelf.runMode.pause.enabled) && oldSelf.runMode.pause.enabled) || (has(self.runMode) && has(self.runMode.pause) && has(self.runMode.pause.enabled) && self.runMode.pause.enabled) || self.replicaSpecs == oldSelf.replicaSpecs",message="spec.replicaSpecs cannot change while the job runs, since its replicas were created from it: pause the job first (spec.runMode.pause.enabled: true), change it, then resume; or create a new job"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.runMode) && has(oldSelf.runMode.pause) && has(oldSelf.runMode.pause.enabled) && oldSelf.runMode.pause.enabled) || (has(self.runMode) && has(self.runMode.pause) && has(self.runMode.pause.enabled) && self.runMode.pause.enabled) || (has(self.service) == has(oldSelf.service) && (!has(self.service) || self.service == oldSelf.service))",message="spec.service cannot change while the job runs, since its replicas were created with it: pause the job first (spec.runMode.pause.enabled: true), change it, then resume; or create a new job"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.runMode) && has(oldSelf.runMode.pause) && has(oldSelf.runMode.pause.enabled) && oldSelf.runMode.pause.enabled) || (has(self.runMode) && has(self.runMode.pause) && has(self.runMode.pause.enabled) && self.runMode.pause.enabled) || (has(self.scheduler) == has(oldSelf.scheduler) && (!has(self.scheduler) || self.scheduler == oldSelf.scheduler))",message="spec.scheduler cannot change while the job runs, since its replicas were placed with it: pause the job first (spec.runMode.pause.enabled: true), change it, then resume; or create a new job"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.runMode) && has(oldSelf.runMode.pause) && has(oldSelf.runMode.pause.enabled) && oldSelf.runMode.pause.enabled) || (has(self.runMode) && has(self.runMode.pause) && has(self.runMode.pause.enabled) && self.runMode.pause.enabled) || ((has(self.runMode) && has(self.runMode.debug)) == (has(oldSelf.runMode) && has(oldSelf.runMode.debug)) && (!(has(self.runMode) && has(self.runMode.debug)) || self.runMode.debug == oldSelf.runMode.debug))",message="spec.runMode.debug cannot change while the job runs, since its replicas were created with it: pause the job first (spec.runMode.pause.enabled: true), change it, then resume; or create a new job"
// +kubebuilder:validation:XValidation:rule="!has(self.restartScope) || self.restartScope != 'Job' || self.replicaSpecs.exists(r, has(r.restartPolicy) && r.restartPolicy.policy != 'Never')",message="spec.restartScope: Job restarts every replica when one is restarted, but no replica type of this job is ever restarted: give one a restartPolicy (policy: OnFailure, say), or leave spec.restartScope out"
// +kubebuilder:validation:XValidation:rule="has(self.managedBy) == has(oldSelf.managedBy) && (!has(self.managedBy) || self.managedBy == oldSelf.managedBy)",message="spec.managedBy cannot be set, changed or removed once the job exists: it says which controller runs the job; create a new job instead"
// +kubebuilder:validation:XValidation:rule="!has(self.failurePolicy) || !has(self.failurePolicy.rules) || self.failurePolicy.rules.all(r, !has(r.replicaTypes) || r.replicaTypes.all(t, self.replicaSpecs.exists(s, s.type == t)))",messageExpression="'spec.failurePolicy.rules, rule ' + self.failurePolicy.rules[self.failurePolicy.rules.map(r, has(r.replicaTypes) && r.replicaTypes.exists(t, !self.replicaSpecs.exists(s, s.type == t))).indexOf(true)].name + ': replicaTypes may only name types of spec.replicaSpecs'"
// +kubebuilder:validation:XValidation:rule="!has(self.elastic) || self.replicaSpecs.exists(r, r.type == self.elastic.replicaType)",message="spec.elastic.replicaType must name a replica type listed in spec.replicaSpecs"
// +kubebuilder:validation:XValidation:rule="!has(self.elastic) || self.replicaSpecs.all(r, r.type != self.elastic.replicaType || !has(r.replicas))",message="spec.replicaSpecs[*].replicas must be left out for the elastic type (spec.elastic.replicaType): its size is spec.elastic.replicas, the one field kubectl scale changes"
// +kubebuilder:validation:XValidation:rule="!has(self.elastic) || self.replicaSpecs.map(r, r.type == self.elastic.replicaType ? self.elastic.maxReplicas : has(r.replicas) ? r.replicas : 1).sum() <= 750",message="spec.elastic.maxReplicas and the other types' replicas add up to more than 750, the most replicas one job may have: its status lists every replica and must fit in one object; lower maxReplicas"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.runMode) && has(oldSelf.runMode.pause) && has(oldSelf.runMode.pause.enabled) && oldSelf.runMode.pause.enabled) || (has(self.runMode) && has(self.runMode.pause) && has(self.runMode.pause.enabled) && self.runMode.pause.enabled) || (has(self.elastic) == has(oldSelf.elastic) && (!has(self.elastic) || (self.elastic.replicaType == oldSelf.elastic.replicaType && self.elastic.minReplicas == oldSelf.elastic.minReplicas && self.elastic.maxReplicas == oldSelf.elastic.maxReplicas)))",message="spec.elastic cannot be added or removed, nor its replicaType, minReplicas or maxReplicas changed, while the job runs: only spec.elastic.replicas may (kubectl scale); pause the job first (spec.runMode.pause.enabled: true), change it, then resume"
type GenericJobSpec struct {
	// Lifecycle: ttlSecondsAfterFinished, startupDeadlineSeconds, restartScope, managedBy
	// and scheduling, as every kind has them (docs/lifecycle.md, docs/gang.md).
	Lifecycle `json:",inline"`

	// ReplicaSpecs lists the replica types of the job, each with its count, pod template and
	// restart policy. Types must be unique, and their replicas add up to at most 750 (the
	// status lists every replica, in one object).
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.map(r, has(r.replicas) ? r.replicas : 1).sum() <= 750",message="spec.replicaSpecs[*].replicas add up to more than 750, the most replicas one job may have: its status lists every replica and must fit in one object; split the job or use fewer replicas"
	ReplicaSpecs []GenericReplicaSpec `json:"replicaSpecs"`

	// SuccessRules: the job succeeds as soon as one rule holds. A rule maps replica types to
	// ranks, e.g. {"worker": [0, 1]}, and holds when all those replicas have succeeded.
	// Without rules, the job succeeds when every replica has succeeded.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	SuccessRules []ReplicaRule `json:"successRules,omitempty"`

	// FailureRules: the job fails as soon as one rule holds. A rule maps replica types to
	// ranks and holds when all those replicas have failed with no restart left. Without
	// rules, the job fails when any replica has failed with no restart left.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	FailureRules []ReplicaRule `json:"failureRules,omitempty"`

	// Service exposes every replica under the host name <job>-<type>-<rank> on these ports,
	// and makes the $(service...) variables available.
	// +optional
	Service *ServiceOption `json:"service,omitempty"`

	// CleanUpPolicy says which replicas are deleted once the job has succeeded or failed:
	// All, None or Unfinished (Pending, Running or Unknown ones). Defaults to Unfinished.
	// +optional
	CleanUpPolicy CleanUpPolicy `json:"cleanUpPolicy,omitempty"`

	// Scheduler chooses the scheduler of the job's pods; without it, the default Kubernetes
	// scheduler.
	// +optional
	Scheduler *SchedulePolicy `json:"scheduler,omitempty"`

	// RunMode switches the job to debug or pause mode.
	// +optional
	RunMode *RunMode `json:"runMode,omitempty"`
}

// ReplicaRule maps replica types to lists of ranks, e.g. {"master": [2], "worker": [0, 1]}.
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:MaxProperties=16
type ReplicaRule map[string]RankList

// RankList is a list of replica ranks.
// +kubebuilder:validation:MinItems=1
// +kubebuilder:validation:MaxItems=64
// +kubebuilder:validation:items:Minimum=0
type RankList []int32

// GenericReplicaSpec is one replica type of a GenericJob.
// +kubebuilder:validation:XValidation:rule="has(self.template.spec) && size(self.template.spec.containers) > 0",message="template.spec.containers must list at least one container (containers belong under template.spec, not directly under template)"
type GenericReplicaSpec struct {
	// Type names the replicas' role, e.g. worker or master. It is used in child names
	// (<job>-<type>-<rank>), so it must be a DNS label.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Type string `json:"type"`

	// Replicas is the number of replicas of this type. Defaults to 1.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=750
	Replicas *int32 `json:"replicas,omitempty"`

	// RestartPolicy says whether a failed replica is restarted, and how often at most.
	// Defaults to Never.
	// +optional
	RestartPolicy *GenericRestartPolicy `json:"restartPolicy,omitempty"`

	// Template is the pod template of the replicas. In command, args and env values of its
	// containers, $(type), $(rank), $(replicas[T]), $(service.T[R].host) and
	// $(service.port[P]) are replaced per replica.
	Template corev1.PodTemplateSpec `json:"template"`
}

// GenericRestartPolicy is a restart policy with a limit.
type GenericRestartPolicy struct {
	// Policy: Never (no restart), OnFailure (restart a failed replica) or Always (restart a
	// replica whenever it ends; use with care, the job may never end).
	// +kubebuilder:validation:Enum=Never;OnFailure;Always
	Policy RestartPolicy `json:"policy"`

	// Limit is the most times one replica is restarted. Without it, there is no limit.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Limit *int32 `json:"limit,omitempty"`
}

// RestartPolicy says when the controller restarts a replica. Pods are always created with the
// pod restart policy Never: the controller, not the kubelet, restarts replicas, so that it can
// count restarts.
type RestartPolicy string

const (
	// RestartNever never restarts a replica.
	RestartNever RestartPolicy = "Never"
	// RestartOnFailure restarts a replica that has failed.
	RestartOnFailure RestartPolicy = "OnFailure"
	// RestartAlways restarts a replica whenever it ends.
	RestartAlways RestartPolicy = "Always"
	// RestartExitCode restarts a replica that has failed with a retryable exit code: 130
	// (SIGINT), 137 (SIGKILL), 143 (SIGTERM) or 138 (user-defined).
	RestartExitCode RestartPolicy = "ExitCode"
)

// ServiceOption is the service exposed for every replica.
type ServiceOption struct {
	// Ports of every replica's service. Their names are used in $(service.port[name]).
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Ports []ServicePort `json:"ports"`
}

// ServicePort is one port of the replicas' services.
type ServicePort struct {
	// Name of the port, unique within spec.service.ports.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// Port number, served by the replica on the same port.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`

	// Protocol of the port: TCP, UDP or SCTP. Defaults to TCP.
	// +optional
	// +kubebuilder:validation:Enum=TCP;UDP;SCTP
	Protocol corev1.Protocol `json:"protocol,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// GenericJobList is a list of GenericJobs.
type GenericJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GenericJob `json:"items"`
}
