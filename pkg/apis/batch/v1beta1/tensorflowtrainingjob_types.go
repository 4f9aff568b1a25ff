package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tfj,categories=t9k
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Running",type=integer,JSONPath=`.status.aggregate.running`
// +kubebuilder:printcolumn:name="Succeeded",type=integer,JSONPath=`.status.aggregate.succeeded`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.aggregate.failed`
// +kubebuilder:printcolumn:name="Progress",type=integer,JSONPath=`.status.progress.progressPercentage`,description="percent of the training done, as the slowest replica reports it"
// +kubebuilder:printcolumn:name="Attempt",type=integer,priority=1,JSONPath=`.status.attempt`,description="the job's life: 1, then one more at each whole-job restart"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,priority=1,JSONPath=`.status.conditions[?(@.status=="True")].message`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must consist of lower-case letters, digits and '-', start with a letter and end with a letter or digit: it begins the host name and Service name of every replica"
// +kubebuilder:validation:XValidation:rule="self.spec.replicaSpecs.all(r, size(self.metadata.name) + size(r.type) + ((has(r.replicas) ? r.replicas : 1) > 1000 ? 4 : (has(r.replicas) ? r.replicas : 1) > 100 ? 3 : (has(r.replicas) ? r.replicas : 1) > 10 ? 2 : 1) + 2 <= 63)",message="metadata.name is too long: the replica names <name>-<type>-<rank> (host names and Service names) must fit in 63 characters; shorten the job name"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.tensorboardSpec) || size(self.metadata.name) <= 51",message="metadata.name is too long: the TensorBoard Service <name>-tensorboard must fit in 63 characters, so a job with spec.tensorboardSpec may have a name of at most 51 characters"

// TensorFlowTrainingJob runs distributed TensorFlow training: chief, worker, ps and evaluator
// replicas, each told the cluster layout in TF_CONFIG.
type TensorFlowTrainingJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the job the user asks for.
	Spec TensorFlowTrainingJobSpec `json:"spec"`

	// Status is what the controller observed of the job.
	// +optional
	Status TensorFlowTrainingJobStatus `json:"status,omitempty"`
}

// TensorFlowTrainingJobSpec is the desired state of a TensorFlowTrainingJob.
// +kubebuilder:validation:XValidation:rule="self.replicaSpecs.all(r, r.type in ['chief', 'worker', 'ps', 'evaluator'])",message="spec.replicaSpecs[*].type must be chief, worker, ps or evaluator"
// +kubebuilder:validation:XValidation:rule="self.replicaSpecs.all(r, r.type != 'chief' || !has(r.replicas) || r.replicas <= 1)",message="a TensorFlowTrainingJob has at most one chief: set the chief's replicas to 1"
// +kubebuilder:validation:XValidation:rule="self.replicaSpecs.all(r, r.type != 'evaluator' || !has(r.replicas) || r.replicas <= 1)",message="a TensorFlowTrainingJob has at most one evaluator: set the evaluator's replicas to 1"
// +kubebuilder:validation:XValidation:rule="self.replicaSpecs.exists(r, r.type == 'chief' || r.type == 'worker')",message="spec.replicaSpecs must include a chief or a worker: the chief (or else worker 0) decides the job's outcome"
// +kubebuilder:validation:XValidation:rule="!has(self.runMode) || !has(self.runMode.debug) || !has(self.runMode.debug.replicaSpecs) || self.runMode.debug.replicaSpecs.all(d, self.replicaSpecs.exists(r, r.type == d.type))",message="spec.runMode.debug.replicaSpecs[*].type must name a replica type listed in spec.replicaSpecs"
// +kubebuilder:validation:XValidation:rule="!has(self.runMode) || !has(self.runMode.pause) || !has(self.runMode.pause.resumeSpecs) || self.runMode.pause.resumeSpecs.all(d, self.replicaSpecs.exists(r, r.type == d.type))",message="spec.runMode.pause.resumeSpecs[*].type must name a replica type listed in spec.replicaSpecs"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.runMode) || !has(oldSelf.runMode.pause) || !has(oldSelf.runMode.pause.resumeSpecs) || (has(self.runMode) && has(self.runMode.pause) && has(self.runMode.pause.resumeSpecs) && self.runMode.pause.resumeSpecs == oldSelf.runMode.pause.resumeSpecs)",message="spec.runMode.pause.resumeSpecs cannot be changed once set; pause.enabled can still be switched at any time"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.runMode) && has(oldSelf.runMode.pause) && has(oldSelf.runMode.pause.enabled) && oldSelf.runMode.pause.enabled) || (has(self.runMode) && has(self.runMode.pause) && has(self.runMode.pause.enabled) && self.runMode.pause.enabled) || self.replicaSpecs == oldSelf.replicaSpecs",message="spec.replicaSpecs cannot change while the job runs, since its replicas were created from it: pause the job first (spec.runMode.pause.enabled: true), change it, then resume; or create a new job"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.runMode) && has(oldSelf.runMode.pause) && has(oldSelf.runMode.pause.enabled) && oldSelf.runMode.pause.enabled) || (has(self.runMode) && has(self.runMode.pause) && has(self.runMode.pause.enabled) && self.runMode.pause.enabled) || (has(self.scheduler) == has(oldSelf.scheduler) && (!has(self.scheduler) || self.scheduler == oldSelf.scheduler))",message="spec.scheduler cannot change while the job runs, since its replicas were created from it: pause the job first (spec.runMode.pause.enabled: true), change it, then resume; or create a new job"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.runMode) && has(oldSelf.runMode.pause) && has(oldSelf.runMode.pause.enabled) && oldSelf.runMode.pause.enabled) || (has(self.runMode) && has(self.runMode.pause) && has(self.runMode.pause.enabled) && self.runMode.pause.enabled) || ((has(self.runMode) && has(self.runMode.debug)) == (has(oldSelf.runMode) && has(oldSelf.runMode.debug)) && (!(has(self.runMode) && has(self.runMode.debug)) || self.runMode.debug == oldSelf.runMode.debug))",message="spec.runMode.debug cannot change while the job runs, since its replicas were created from it: pause the job first (spec.runMode.pause.enabled: true), change it, then resume; or create a new job"
// +kubebuilder:validation:XValidation:rule="!has(self.restartScope) || self.restartScope != 'Job' || self.replicaSpecs.exists(r, has(r.restartPolicy) && r.restartPolicy != 'Never')",message="spec.restartScope: Job restarts every replica when one is restarted, but no replica type of this job is ever restarted: give one a restartPolicy (OnFailure or ExitCode, say), or leave spec.restartScope out"
// +kubebuilder:validation:XValidation:rule="has(self.managedBy) == has(oldSelf.managedBy) && (!has(self.managedBy) || self.managedBy == oldSelf.managedBy)",message="spec.managedBy cannot be set, changed or removed once the job exists: it says which controller runs the job; create a new job instead"
// +kubebuilder:validation:XValidation:rule="!has(self.failurePolicy) || !has(self.failurePolicy.rules) || self.failurePolicy.rules.all(r, !has(r.replicaTypes) || r.replicaTypes.all(t, self.replicaSpecs.exists(s, s.type == t)))",messageExpression="'spec.failurePolicy.rules, rule ' + self.failurePolicy.rules[self.failurePolicy.rules.map(r, has(r.replicaTypes) && r.replicaTypes.exists(t, !self.replicaSpecs.exists(s, s.type == t))).indexOf(true)].name + ': replicaTypes may only name types of spec.replicaSpecs'"
// +kubebuilder:validation:XValidation:rule="!has(self.elastic)",message="spec.elastic cannot apply to a TensorFlowTrainingJob: TensorFlow's cluster spec (TF_CONFIG) lists every replica when the job starts and cannot change while it runs; leave spec.elastic out, or run an elastic program as a GenericJob"
type TensorFlowTrainingJobSpec struct {
	// Lifecycle: ttlSecondsAfterFinished, startupDeadlineSeconds, restartScope, managedBy
	// and scheduling, as every kind has them (docs/lifecycle.md, docs/gang.md).
	Lifecycle `json:",inline"`

	// ReplicaSpecs lists the replica types: chief (at most one), worker, ps and evaluator.
	// Types must be unique, and their replicas add up to at most 750 (the status lists every
	// replica, in one object).
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:XValidation:rule="self.map(r, has(r.replicas) ? r.replicas : 1).sum() <= 750",message="spec.replicaSpecs[*].replicas add up to more than 750, the most replicas one job may have: its status lists every replica and must fit in one object; split the job or use fewer replicas"
	ReplicaSpecs []TrainingReplicaSpec `json:"replicaSpecs"`

	// RunPolicy bounds the job's restarts and run time, and cleans up after it.
	// +optional
	RunPolicy TrainingRunPolicy `json:"runPolicy,omitempty"`

	// TensorboardSpec runs a TensorBoard beside the job, over its training logs.
	// +optional
	TensorboardSpec *TensorBoardSpec `json:"tensorboardSpec,omitempty"`

	// Scheduler chooses the scheduler of the job's pods; without it, the default Kubernetes
	// scheduler.
	// +optional
	Scheduler *SchedulePolicy `json:"scheduler,omitempty"`

	// RunMode switches the job to debug or pause mode.
	// +optional
	RunMode *RunMode `json:"runMode,omitempty"`
}

// TensorBoardSpec is a TensorBoard over a job's training logs.
// +kubebuilder:validation:XValidation:rule="self.trainingLogFilesets.all(f, f.matches('^t9k://pvc/[a-z0-9]([-a-z0-9.]*[a-z0-9])?(/.*)?$'))",message="spec.tensorboardSpec.trainingLogFilesets: each entry must be of the form t9k://pvc/<claim>/<path>, e.g. t9k://pvc/tensorflow-tensorboard-pvc/log"
type TensorBoardSpec struct {
	// Image of the TensorBoard; it must provide the tensorboard command.
	// +kubebuilder:validation:MinLength=1
	Image string `json:"image"`

	// TrainingLogFilesets are the log directories to show, each as t9k://pvc/<claim>/<path>.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:Pattern=`^t9k://pvc/[a-z0-9]([-a-z0-9.]*[a-z0-9])?(/.*)?$`
	// +kubebuilder:validation:items:MaxLength=1024
	TrainingLogFilesets []string `json:"trainingLogFilesets"`
}

// TensorFlowTrainingJobStatus is the observed state of a TensorFlowTrainingJob.
type TensorFlowTrainingJobStatus struct {
	JobStatus `json:",inline"`

	// Tensorboard reports the TensorBoard of spec.tensorboardSpec.
	// +optional
	Tensorboard *DependentStatus `json:"tensorboard,omitempty"`
}

// DependentStatus reports an object the job depends on, such as its TensorBoard.
type DependentStatus struct {
	// Action is what the controller last did to the object: Create, Update or NOP.
	// +optional
	Action string `json:"action,omitempty"`

	// Dependent points to the object.
	// +optional
	Dependent *DependentReference `json:"dependent,omitempty"`

	// Note tells a person how the object is.
	// +optional
	Note string `json:"note,omitempty"`

	// Ready says whether the object is ready for use.
	Ready bool `json:"ready"`

	// Reason is a one-word reason for the state, e.g. DependentReady.
	// +optional
	Reason string `json:"reason,omitempty"`

	// Type is Normal or Warning.
	// +optional
	Type string `json:"type,omitempty"`
}

// DependentReference points to an object.
type DependentReference struct {
	APIVersion string    `json:"apiVersion,omitempty"`
	Kind       string    `json:"kind,omitempty"`
	Name       string    `json:"name,omitempty"`
	Namespace  string    `json:"namespace,omitempty"`
	UID        types.UID `json:"uid,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// TensorFlowTrainingJobList is a list of TensorFlowTrainingJobs.
type TensorFlowTrainingJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TensorFlowTrainingJob `json:"items"`
}
