package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mj,categories=t9k
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Workers",type=integer,JSONPath=`.spec.worker.replicas`
// +kubebuilder:printcolumn:name="Running",type=integer,JSONPath=`.status.aggregate.running`
// +kubebuilder:printcolumn:name="Launcher",type=string,JSONPath=`.status.tasks[?(@.type=="launcher")].replicas[0].phase`
// +kubebuilder:printcolumn:name="Progress",type=integer,JSONPath=`.status.progress.progressPercentage`,description="percent of the training done, as the slowest replica reports it"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,priority=1,JSONPath=`.status.conditions[?(@.status=="True")].message`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must consist of lower-case letters, digits and '-', start with a letter and end with a letter or digit: it begins the host name of every replica"
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) + 8 + ((has(self.spec.worker.replicas) ? self.spec.worker.replicas : 1) > 1000 ? 4 : (has(self.spec.worker.replicas) ? self.spec.worker.replicas : 1) > 100 ? 3 : (has(self.spec.worker.replicas) ? self.spec.worker.replicas : 1) > 10 ? 2 : 1) <= 63",message="metadata.name is too long: the worker names <name>-worker-<rank> (host names) must fit in 63 characters; shorten the job name"

// MPIJob runs an OpenMPI program: workers start sshd and wait, and a launcher runs mpirun,
// which starts the processes on the workers. The job ends when the launcher ends.
type MPIJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the job the user asks for.
	Spec MPIJobSpec `json:"spec"`

	// Status is what the controller observed of the job.
	// +optional
	Status JobStatus `json:"status,omitempty"`
}

// MPIJobSpec is the desired state of an MPIJob.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.runMode) || !has(oldSelf.runMode.pause) || !has(oldSelf.runMode.pause.resumeSpecs) || (has(self.runMode) && has(self.runMode.pause) && has(self.runMode.pause.resumeSpecs) && self.runMode.pause.resumeSpecs == oldSelf.runMode.pause.resumeSpecs)",message="spec.runMode.pause.resumeSpecs cannot be changed once set; pause.enabled can still be switched at any time"
// +kubebuilder:validation:XValidation:rule="!has(self.runMode) || !has(self.runMode.debug) || !has(self.runMode.debug.replicaSpecs) || self.runMode.debug.replicaSpecs.all(d, d.type in ['launcher', 'worker'])",message="spec.runMode.debug.replicaSpecs[*].type must be launcher or worker"
// +kubebuilder:validation:XValidation:rule="!has(self.runMode) || !has(self.runMode.pause) || !has(self.runMode.pause.resumeSpecs) || self.runMode.pause.resumeSpecs.all(d, d.type in ['launcher', 'worker'])",message="spec.runMode.pause.resumeSpecs[*].type must be launcher or worker"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.runMode) && has(oldSelf.runMode.pause) && has(oldSelf.runMode.pause.enabled) && oldSelf.runMode.pause.enabled) || (has(self.runMode) && has(self.runMode.pause) && has(self.runMode.pause.enabled) && self.runMode.pause.enabled) || self.worker == oldSelf.worker",message="spec.worker cannot change while the job runs, since its replicas were created from it: pause the job first (spec.runMode.pause.enabled: true), change it, then resume; or create a new job"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.runMode) && has(oldSelf.runMode.pause) && has(oldSelf.runMode.pause.enabled) && oldSelf.runMode.pause.enabled) || (has(self.runMode) && has(self.runMode.pause) && has(self.runMode.pause.enabled) && self.runMode.pause.enabled) || (has(self.mca) == has(oldSelf.mca) && (!has(self.mca) || self.mca == oldSelf.mca))",message="spec.mca cannot change while the job runs, since its replicas were created from it: pause the job first (spec.runMode.pause.enabled: true), change it, then resume; or create a new job"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.runMode) && has(oldSelf.runMode.pause) && has(oldSelf.runMode.pause.enabled) && oldSelf.runMode.pause.enabled) || (has(self.runMode) && has(self.runMode.pause) && has(self.runMode.pause.enabled) && self.runMode.pause.enabled) || (has(self.ssh) == has(oldSelf.ssh) && (!has(self.ssh) || self.ssh == oldSelf.ssh))",message="spec.ssh cannot change while the job runs, since its replicas were created from it: pause the job first (spec.runMode.pause.enabled: true), change it, then resume; or create a new job"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.runMode) && has(oldSelf.runMode.pause) && has(oldSelf.runMode.pause.enabled) && oldSelf.runMode.pause.enabled) || (has(self.runMode) && has(self.runMode.pause) && has(self.runMode.pause.enabled) && self.runMode.pause.enabled) || (has(self.mpiHome) == has(oldSelf.mpiHome) && (!has(self.mpiHome) || self.mpiHome == oldSelf.mpiHome))",message="spec.mpiHome cannot change while the job runs, since its replicas were created from it: pause the job first (spec.runMode.pause.enabled: true), change it, then resume; or create a new job"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.runMode) && has(oldSelf.runMode.pause) && has(oldSelf.runMode.pause.enabled) && oldSelf.runMode.pause.enabled) || (has(self.runMode) && has(self.runMode.pause) && has(self.runMode.pause.enabled) && self.runMode.pause.enabled) || (has(self.scheduler) == has(oldSelf.scheduler) && (!has(self.scheduler) || self.scheduler == oldSelf.scheduler))",message="spec.scheduler cannot change while the job runs, since its replicas were created from it: pause the job first (spec.runMode.pause.enabled: true), change it, then resume; or create a new job"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.runMode) && has(oldSelf.runMode.pause) && has(oldSelf.runMode.pause.enabled) && oldSelf.runMode.pause.enabled) || (has(self.runMode) && has(self.runMode.pause) && has(self.runMode.pause.enabled) && self.runMode.pause.enabled) || ((has(self.runMode) && has(self.runMode.debug)) == (has(oldSelf.runMode) && has(oldSelf.runMode.debug)) && (!(has(self.runMode) && has(self.runMode.debug)) || self.runMode.debug == oldSelf.runMode.debug))",message="spec.runMode.debug cannot change while the job runs, since its replicas were created from it: pause the job first (spec.runMode.pause.enabled: true), change it, then resume; or create a new job"
// +kubebuilder:validation:XValidation:rule="!has(self.restartScope) || self.restartScope == 'Replica'",message="spec.restartScope: Job cannot apply to an MPIJob: its launcher and workers are never restarted, the launcher's one run is the training; leave spec.restartScope out"
// +kubebuilder:validation:XValidation:rule="has(self.managedBy) == has(oldSelf.managedBy) && (!has(self.managedBy) || self.managedBy == oldSelf.managedBy)",message="spec.managedBy cannot be set, changed or removed once the job exists: it says which controller runs the job; create a new job instead"
// +kubebuilder:validation:XValidation:rule="!has(self.failurePolicy) || !has(self.failurePolicy.rules) || self.failurePolicy.rules.all(r, !has(r.replicaTypes) || r.replicaTypes.all(t, t in ['launcher', 'worker']))",messageExpression="'spec.failurePolicy.rules, rule ' + self.failurePolicy.rules[self.failurePolicy.rules.map(r, has(r.replicaTypes) && r.replicaTypes.exists(t, !(t in ['launcher', 'worker']))).indexOf(true)].name + ': replicaTypes must be launcher or worker'"
// +kubebuilder:validation:XValidation:rule="!has(self.failurePolicy) || !has(self.failurePolicy.rules) || self.failurePolicy.rules.all(r, r.action == 'FailJob')",messageExpression="'spec.failurePolicy.rules, rule ' + self.failurePolicy.rules[self.failurePolicy.rules.map(r, r.action != 'FailJob').indexOf(true)].name + ': only action FailJob applies to an MPIJob: its launcher and workers are never restarted or replaced, since the one mpirun of the launcher is the training and a new worker cannot join it'"
// +kubebuilder:validation:XValidation:rule="!has(self.elastic)",message="spec.elastic cannot apply to an MPIJob: its launcher runs mpirun once on a fixed hostfile, and a worker cannot join or leave an MPI world while it runs; leave spec.elastic out, or run torchrun with elastic rendezvous as a GenericJob"
type MPIJobSpec struct {
	// Lifecycle: ttlSecondsAfterFinished, startupDeadlineSeconds, restartScope, managedBy
	// and scheduling, as every kind has them (docs/lifecycle.md, docs/gang.md).
	Lifecycle `json:",inline"`

	// Worker configures the workers, and the program mpirun starts on them.
	Worker MPIWorkerSpec `json:"worker"`

	// MCA sets OpenMPI MCA parameters, passed to mpirun as --mca <key> <value>; for example
	// btl: ^openib to keep MPI off InfiniBand.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	MCA map[string]string `json:"mca,omitempty"`

	// RunPolicy says what happens to the workers once the job has ended.
	// +optional
	RunPolicy WorkerCleanUpPolicy `json:"runPolicy,omitempty"`

	// SSH configures the SSH connection from the launcher to the workers.
	// +optional
	SSH SSHConfig `json:"ssh,omitempty"`

	// MPIHome is the directory MPI is installed in (mpirun is MPIHome/bin/mpirun); some
	// mpirun features need it. Without it, mpirun is looked up in PATH.
	// +optional
	// +kubebuilder:validation:Pattern=`^/`
	MPIHome string `json:"mpiHome,omitempty"`

	// Scheduler chooses the scheduler of the job's pods; without it, the default Kubernetes
	// scheduler.
	// +optional
	Scheduler *SchedulePolicy `json:"scheduler,omitempty"`

	// RunMode switches the job to debug or pause mode. Replica types are launcher and worker.
	// +optional
	RunMode *RunMode `json:"runMode,omitempty"`
}

// MPIWorkerSpec configures the workers of an MPIJob.
// +kubebuilder:validation:XValidation:rule="has(self.template.spec) && self.template.spec.containers.exists(c, c.name == 'mpi-worker')",message="worker.template.spec.containers must include a container named mpi-worker: it runs the MPI processes"
type MPIWorkerSpec struct {
	// Replicas is the number of workers. Defaults to 1. At most 749: with the launcher, a job
	// has at most 750 replicas (the status lists every replica, in one object).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=750
	// +kubebuilder:validation:XValidation:rule="self + 1 <= 750",message="spec.worker.replicas is more than 749: a job may have at most 750 replicas, the launcher included, since its status lists every replica and must fit in one object; split the job or use fewer workers"
	Replicas *int32 `json:"replicas,omitempty"`

	// ExtraMPIArgs are passed to mpirun before the command, e.g. ["-N", "3"] for three
	// processes per worker.
	// +optional
	// +kubebuilder:validation:MaxItems=128
	ExtraMPIArgs []string `json:"extraMPIArgs,omitempty"`

	// Cmd is the command mpirun runs in every MPI process.
	// +kubebuilder:validation:MinItems=1
	Cmd []string `json:"cmd"`

	// Template is the pod template of the workers (the launcher is made from it too). It must
	// have a container named mpi-worker; that container runs sshd, so its command and args
	// are ignored.
	Template corev1.PodTemplateSpec `json:"template"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// MPIJobList is a list of MPIJobs.
type MPIJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MPIJob `json:"items"`
}
