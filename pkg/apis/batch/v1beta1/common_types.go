package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// This file holds the parts every kind shares: run modes, scheduling, clean-up and status.

// RunMode switches a job between its normal run and the debug or pause mode.
type RunMode struct {
	// Debug deploys the training environment without starting training: every replica runs a
	// waiting command instead of its own, so that a user can connect to it and test.
	// +optional
	Debug *DebugMode `json:"debug,omitempty"`

	// Pause deletes the job's replicas (or does not create them) and stops training; turning it
	// off recreates them as resumeSpecs says.
	// +optional
	Pause *PauseMode `json:"pause,omitempty"`
}

// DebugMode configures the debug mode.
type DebugMode struct {
	// Enabled turns the debug mode on.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// ReplicaSpecs says how each replica type runs in debug mode. A type that is not listed
	// uses the defaults: init containers kept, and the kind's default debug command
	// ("sleep inf"; for MPIJob workers "/usr/bin/sshd -D").
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	ReplicaSpecs []ReplicaDebugSet `json:"replicaSpecs,omitempty"`
}

// ReplicaDebugSet is the debug setting of one replica type.
type ReplicaDebugSet struct {
	// Type is the replica type this setting applies to.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	Type string `json:"type"`

	// SkipInitContainer drops the replica's init containers while debugging. Defaults to false.
	// +optional
	SkipInitContainer bool `json:"skipInitContainer,omitempty"`

	// Command is what the replica runs while it waits to be debugged. Defaults to
	// ["sleep", "inf"] (for MPIJob workers ["/usr/bin/sshd", "-D"]).
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	Command []string `json:"command,omitempty"`
}

// PauseMode configures the pause mode.
type PauseMode struct {
	// Enabled pauses the job: its replicas are deleted (or not created) until it is set to false
	// again. It may be changed at any time.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// ResumeSpecs says how each replica type is recreated when the pause ends. A type that is
	// not listed is recreated from its template unchanged. It cannot be changed once set, so
	// set it before pausing.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	ResumeSpecs []ResumeSpec `json:"resumeSpecs,omitempty"`
}

// ResumeSpec is the resume setting of one replica type.
type ResumeSpec struct {
	// Type is the replica type this setting applies to.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	Type string `json:"type"`

	// SkipInitContainer drops the replica's init containers when it is recreated. Defaults to
	// false.
	// +optional
	SkipInitContainer bool `json:"skipInitContainer,omitempty"`

	// Command replaces the command of the replica's first container when it is recreated.
	// Defaults to the command in the replica's template.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	Command []string `json:"command,omitempty"`

	// Args replaces the args of the replica's first container when it is recreated. Defaults
	// to the args in the replica's template.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	Args []string `json:"args,omitempty"`
}

// SchedulePolicy chooses the scheduler of a job's pods. Without it, the default Kubernetes
// scheduler places them.
type SchedulePolicy struct {
	// T9kScheduler places the pods with T9k Scheduler, in the given queue and priority.
	// +optional
	T9kScheduler *T9kScheduler `json:"t9kScheduler,omitempty"`
}

// T9kScheduler is the T9k Scheduler's queue and priority for a job's pods.
type T9kScheduler struct {
	// Queue is the T9k Scheduler queue the pods wait in.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Queue string `json:"queue"`

	// Priority orders the job among the others in its queue; higher goes first.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Priority int32 `json:"priority,omitempty"`
}

// CleanUpPolicy says which replicas are deleted once a job has finished.
// +kubebuilder:validation:Enum=All;None;Unfinished
type CleanUpPolicy string

const (
	// CleanUpAll deletes every replica.
	CleanUpAll CleanUpPolicy = "All"
	// CleanUpNone keeps every replica, for reading logs while debugging a training script.
	CleanUpNone CleanUpPolicy = "None"
	// CleanUpUnfinished deletes the replicas that have not ended (Pending, Running or Unknown).
	CleanUpUnfinished CleanUpPolicy = "Unfinished"
)

// JobPhase is where a job is in its life.
// +kubebuilder:validation:Enum=Pending;Running;Paused;Resuming;Succeeded;Failed;Unknown
type JobPhase string

const (
	// JobPending: the job has just been created and waits for its replicas to start.
	JobPending JobPhase = "Pending"
	// JobRunning: the replicas have been created and the job is running.
	JobRunning JobPhase = "Running"
	// JobPaused: the job is in pause mode.
	JobPaused JobPhase = "Paused"
	// JobResuming: the job is leaving pause mode; it moves on to Running.
	JobResuming JobPhase = "Resuming"
	// JobSucceeded: the job has succeeded (for MPIJob and ColossalAIJob: the launcher ended
	// with exit code 0).
	JobSucceeded JobPhase = "Succeeded"
	// JobFailed: the job has failed.
	JobFailed JobPhase = "Failed"
	// JobUnknown: the controller cannot tell the job's phase.
	JobUnknown JobPhase = "Unknown"
)

// JobConditionType is the type of a job condition.
// +kubebuilder:validation:Enum=Initialized;Running;ReplicaFailure;Completed;Failed;Paused;Stalled;InPlaceUnavailable
type JobConditionType string

const (
	// JobConditionInitialized: every child object of the job has been created.
	JobConditionInitialized JobConditionType = "Initialized"
	// JobConditionRunning: the job has started to run.
	JobConditionRunning JobConditionType = "Running"
	// JobConditionReplicaFailure: one or more replicas have failed.
	JobConditionReplicaFailure JobConditionType = "ReplicaFailure"
	// JobConditionCompleted: the job has finished successfully (for MPIJob and ColossalAIJob: ended).
	JobConditionCompleted JobConditionType = "Completed"
	// JobConditionFailed: the job has failed.
	JobConditionFailed JobConditionType = "Failed"
	// JobConditionPaused: the job is paused and all its replicas are deleted or being deleted.
	JobConditionPaused JobConditionType = "Paused"
	// JobConditionStalled: a running replica that reported progress has reported nothing for
	// spec.progressDeadlineSeconds.
	JobConditionStalled JobConditionType = "Stalled"
	// JobConditionInPlaceUnavailable: the job asks to restart in place (spec.restartStrategy:
	// InPlace), but no node that could take its pods restarts a pod's containers together:
	// its pods are made without the restart agent, and its whole-job restarts recreate them.
	JobConditionInPlaceUnavailable JobConditionType = "InPlaceUnavailable"
)

// JobCondition is one aspect of a job's state.
type JobCondition struct {
	// Type of the condition: Initialized, Running, ReplicaFailure, Completed, Failed, Paused,
	// Stalled or InPlaceUnavailable.
	Type JobConditionType `json:"type"`

	// Status of the condition: True, False or Unknown.
	Status corev1.ConditionStatus `json:"status"`

	// LastTransitionTime is when the status last changed.
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`

	// Reason is a one-word reason for the last transition ("-" when there is nothing to add).
	// +optional
	Reason string `json:"reason,omitempty"`

	// Message tells a person what happened, for example which rule ended the job.
	// +optional
	Message string `json:"message,omitempty"`
}

// ReplicaPhase is the phase of one replica: a pod phase, or Creating or Deleted.
// +kubebuilder:validation:Enum=Creating;Pending;Running;Succeeded;Failed;Unknown;Deleted
type ReplicaPhase string

const (
	// ReplicaCreating: the pod has been asked for and is not seen yet.
	ReplicaCreating ReplicaPhase = "Creating"
	// ReplicaPending is the pod phase Pending.
	ReplicaPending ReplicaPhase = "Pending"
	// ReplicaRunning is the pod phase Running.
	ReplicaRunning ReplicaPhase = "Running"
	// ReplicaSucceeded is the pod phase Succeeded.
	ReplicaSucceeded ReplicaPhase = "Succeeded"
	// ReplicaFailed is the pod phase Failed.
	ReplicaFailed ReplicaPhase = "Failed"
	// ReplicaUnknown is the pod phase Unknown.
	ReplicaUnknown ReplicaPhase = "Unknown"
	// ReplicaDeleted: the pod is gone or being deleted.
	ReplicaDeleted ReplicaPhase = "Deleted"
)

// ContainerState is the state of one container of a replica.
// +kubebuilder:validation:Enum=Waiting;Running;Terminated
type ContainerState string

const (
	ContainerWaiting    ContainerState = "Waiting"
	ContainerRunning    ContainerState = "Running"
	ContainerTerminated ContainerState = "Terminated"
)

// ContainerStatus is the state of one container of a replica's pod.
type ContainerStatus struct {
	// Name of the container.
	Name string `json:"name"`

	// State of the container: Waiting, Running or Terminated.
	// +optional
	State ContainerState `json:"state,omitempty"`

	// ExitCode of the container, once it has terminated.
	// +optional
	ExitCode *int32 `json:"exitCode,omitempty"`

	// Reason is why the container is in its state, as its node reports it: for a terminated
	// container Completed, Error, OOMKilled, ContainerStatusUnknown ...; for a waiting one
	// ContainerCreating, ImagePullBackOff ...
	// +optional
	Reason string `json:"reason,omitempty"`
}

// ReplicaStatus is the state of one replica and the pod that runs it.
type ReplicaStatus struct {
	// Name of the replica's pod.
	Name string `json:"name"`

	// UID of the replica's pod.
	// +optional
	UID types.UID `json:"uid,omitempty"`

	// Phase of the replica: Creating, Pending, Running, Succeeded, Failed, Unknown or Deleted.
	// +optional
	Phase ReplicaPhase `json:"phase,omitempty"`

	// RestartCount is how many times the controller has restarted this replica.
	// +optional
	RestartCount int32 `json:"restartCount,omitempty"`

	// Disruptions counts the pods of this replica that were replaced because they were
	// disrupted, not because the program failed: evicted, preempted, their node drained or
	// lost, or deleted by someone else while the job ran (with spec.restartScope: Job, also
	// because another replica was). They use no restart: restartCount and backoffLimit do
	// not count them. lastTermination tells how the last one ended.
	// +optional
	Disruptions int32 `json:"disruptions,omitempty"`

	// Containers of the replica's pod. They are kept once the pod is gone (clean-up, pause),
	// so that a finished job still tells how each replica ended.
	// +optional
	Containers []ContainerStatus `json:"containers"`

	// Node is the node the replica's pod ran on (kept once the pod is gone).
	// +optional
	Node string `json:"node,omitempty"`

	// Reason and Message are the pod's own, when Kubernetes gives them: Evicted,
	// DeadlineExceeded, NodeLost, UnexpectedAdmissionError ...
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`

	// LastTermination is how the replica's previous pod ended, kept when the replica is
	// restarted: its UID, node, pod reason and containers with their exit codes and reasons.
	// +optional
	LastTermination *ReplicaTermination `json:"lastTermination,omitempty"`
}

// ReplicaTermination is how one pod of a replica ended.
type ReplicaTermination struct {
	// UID of the pod.
	UID types.UID `json:"uid"`

	// Phase the pod was in when it ended, or was deleted to restart or replace it:
	// Succeeded, Failed, or Running (a replica restarted with its job).
	// +optional
	Phase ReplicaPhase `json:"phase,omitempty"`

	// Disrupted: the pod was replaced because it was disrupted (see disruptions), not
	// restarted; its reason and message are those of its DisruptionTarget condition when it
	// has one (EvictionByEvictionAPI, PreemptionByScheduler, TerminationByKubelet,
	// DeletionByTaintManager ...), else the controller's (Deleted, RestartedWithJob).
	// +optional
	Disrupted bool `json:"disrupted,omitempty"`

	// Node the pod ran on.
	// +optional
	Node string `json:"node,omitempty"`

	// Reason and Message are the pod's own, when Kubernetes gives them (Evicted ...); for
	// a pod deleted to restart its whole job, RestartedWithJob and the replica that caused it.
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`

	// Containers of the pod as they ended.
	// +optional
	Containers []ContainerStatus `json:"containers,omitempty"`

	// Rule is the spec.failurePolicy rule that decided what this ending did, if one did.
	// +optional
	Rule *FailurePolicyRuleRef `json:"rule,omitempty"`

	// Attempt is the job's attempt the pod was made for (status.attempt at its creation).
	// +optional
	Attempt int32 `json:"attempt,omitempty"`
}

// TaskStatus is the state of the replicas of one type.
type TaskStatus struct {
	// Type of the replicas.
	Type string `json:"type"`

	// RestartCount is the sum of the restarts of the replicas of this type.
	// +optional
	RestartCount int32 `json:"restartCount"`

	// Replicas lists each replica of this type, by rank.
	// +optional
	Replicas []ReplicaStatus `json:"replicas,omitempty"`
}

// Aggregate counts a job's replicas by phase.
type Aggregate struct {
	Creating  int32 `json:"creating"`
	Pending   int32 `json:"pending"`
	Running   int32 `json:"running"`
	Succeeded int32 `json:"succeeded"`
	Failed    int32 `json:"failed"`
	Unknown   int32 `json:"unknown"`
	Deleted   int32 `json:"deleted"`
}

// JobStatus is the observed state of a job, shared by every kind.
type JobStatus struct {
	// Conditions describe the job's state: Initialized, Running, ReplicaFailure, Completed,
	// Failed and Paused, each at most once.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []JobCondition `json:"conditions,omitempty"`

	// Phase is where the job is in its life: Pending, Running, Paused, Resuming, Succeeded,
	// Failed or Unknown.
	// +optional
	Phase JobPhase `json:"phase,omitempty"`

	// Tasks reports the replicas of each type.
	// +optional
	Tasks []TaskStatus `json:"tasks,omitempty"`

	// Aggregate counts the job's replicas by phase.
	// +optional
	Aggregate Aggregate `json:"aggregate"`

	// ObservedGeneration is the metadata.generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// StartTime is when the job's replicas were first created (again after a pause, or a
	// readmission); runPolicy.activeDeadlineSeconds and spec.startupDeadlineSeconds count
	// from it.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// CompletionTime is when the job finished (Succeeded or Failed); it is kept from then on,
	// and spec.ttlSecondsAfterFinished counts from it.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// Restarts counts the restarts of the whole job (spec.restartScope: Job); backoffLimit
	// bounds it then. Each replica's restartCount counts its own.
	// +optional
	Restarts int32 `json:"restarts,omitempty"`

	// Attempt numbers the job's lives: 1 for the first, one more at each whole-job restart
	// (spec.restartScope: Job, a rule's RestartJob, a stall, a replacement of every replica
	// after a disruption), whether or not it counts in restarts. Every pod carries the attempt
	// it was made for (label batch.tensorstack.dev/attempt, env T9K_ATTEMPT), and each
	// lastTermination the attempt of the pod that ended (docs/lifecycle.md, "Attempts").
	// +optional
	Attempt int32 `json:"attempt,omitempty"`

	// Progress is how far the training has come, as the job's replicas report it
	// (docs/failures.md, "Progress").
	// +optional
	Progress *JobProgress `json:"progress,omitempty"`

	// ExcludedNodes are the nodes the job's new pods avoid, oldest first
	// (spec.failurePolicy.avoidFailedNodes).
	// +optional
	// +listType=map
	// +listMapKey=node
	// +kubebuilder:validation:MaxItems=64
	ExcludedNodes []ExcludedNode `json:"excludedNodes,omitempty"`

	// Elastic, for a job with spec.elastic, is the size it runs at.
	// +optional
	Elastic *ElasticStatus `json:"elastic,omitempty"`
}

// SSHConfig configures the SSH connection from the launcher to the workers (MPIJob,
// ColossalAIJob).
type SSHConfig struct {
	// AuthMountPath is where the SSH keys are mounted in the launcher and the workers.
	// Defaults to /root/.ssh.
	// +optional
	// +kubebuilder:validation:Pattern=`^/`
	AuthMountPath string `json:"authMountPath,omitempty"`

	// SshdPath is the absolute path of the sshd program in the worker image: sshd must be
	// started by its absolute path. Defaults to /usr/sbin/sshd.
	// +optional
	// +kubebuilder:validation:Pattern=`^/`
	SshdPath string `json:"sshdPath,omitempty"`
}

// WorkerCleanUpPolicy is the run policy of the launcher-based kinds (MPIJob, ColossalAIJob).
type WorkerCleanUpPolicy struct {
	// CleanUpWorkers deletes the workers once the job has finished. The launcher is kept, so
	// that its log, which tells how training went, can still be read.
	// +optional
	CleanUpWorkers bool `json:"cleanUpWorkers,omitempty"`
}

// TrainingReplicaSpec is one replica type of a TensorFlowTrainingJob or XGBoostTrainingJob.
// +kubebuilder:validation:XValidation:rule="has(self.template.spec) && size(self.template.spec.containers) > 0",message="template.spec.containers must list at least one container (containers belong under template.spec, not directly under template)"
type TrainingReplicaSpec struct {
	// Type is the replicas' role in the framework.
	Type string `json:"type"`

	// Replicas is the number of replicas of this type. Defaults to 1.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=750
	Replicas *int32 `json:"replicas,omitempty"`

	// RestartPolicy overrides the template's pod restart policy: Never, OnFailure, Always or
	// ExitCode (restart only after exit code 130, 137, 143 or 138). Defaults to Never.
	// Restarts are counted against spec.runPolicy.backoffLimit.
	// +optional
	// +kubebuilder:validation:Enum=Never;OnFailure;Always;ExitCode
	RestartPolicy RestartPolicy `json:"restartPolicy,omitempty"`

	// Template is the pod template of the replicas.
	Template corev1.PodTemplateSpec `json:"template"`
}

// TrainingRunPolicy bounds a TensorFlowTrainingJob or XGBoostTrainingJob and cleans up after it.
type TrainingRunPolicy struct {
	// CleanUpPolicy says which replicas are deleted once the job has finished: All, None or
	// Unfinished. Defaults to Unfinished.
	// +optional
	CleanUpPolicy CleanUpPolicy `json:"cleanUpPolicy,omitempty"`

	// BackoffLimit is the most restarts of all the job's replicas together. Without it, there
	// is no limit.
	// +optional
	// +kubebuilder:validation:Minimum=0
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`

	// ActiveDeadlineSeconds fails the job once it has run this long.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`
}
