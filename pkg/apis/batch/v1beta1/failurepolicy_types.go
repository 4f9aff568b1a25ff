package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FailurePolicy says what a replica's failure does, beyond its restart policy, and keeps
// retries away from the nodes the job failed on (docs/failures.md).
type FailurePolicy struct {
	// Rules decide what a replica's failure does, first match wins: a pod that failed (a
	// container's exit code, a termination reason such as OOMKilled), one Kubernetes
	// disrupted (a pod condition such as DisruptionTarget), or a replica that stopped
	// reporting progress (reason Stalled). A failure no rule matches is handled as the
	// replica's restart policy says, a disruption is replaced, and a stall restarts the whole
	// job where the job allows restarts, or fails it.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Rules []FailurePolicyRule `json:"rules,omitempty"`

	// AvoidFailedNodes makes a failed replica's replacement, and every pod of a restarted
	// job, avoid the nodes this job failed on (status.excludedNodes). Without it, the
	// scheduler may place them anywhere, the failed node included.
	// +optional
	AvoidFailedNodes *AvoidFailedNodes `json:"avoidFailedNodes,omitempty"`
}

// FailurePolicyRule matches a replica's failure and says what it does. It matches on replica
// types and ranks (all when left out) and on at most one of onExitCodes, onPodConditions and
// onReasons; a rule with none of the three matches every failure of its replicas, stalls
// included, but not a disruption.
// +kubebuilder:validation:XValidation:rule="(has(self.onExitCodes) ? 1 : 0) + (has(self.onPodConditions) ? 1 : 0) + (has(self.onReasons) ? 1 : 0) <= 1",message="a failure policy rule matches on at most one of onExitCodes, onPodConditions and onReasons: split it into several rules"
type FailurePolicyRule struct {
	// Name names the rule in the job's status, conditions and events.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// Action is what a matching failure does: FailJob fails the job at once; RestartReplica
	// restarts the replica, whatever its restart policy says, counting toward its limit and
	// backoffLimit; RestartJob restarts every replica together, behind the same barrier as
	// spec.restartScope: Job, counting one restart of the job (status.restarts) toward
	// backoffLimit; Ignore replaces the pod and counts nothing, as a disruption.
	Action FailurePolicyAction `json:"action"`

	// ReplicaTypes limits the rule to replicas of these types (all types when left out).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=40
	ReplicaTypes []string `json:"replicaTypes,omitempty"`

	// Ranks limits the rule to replicas of these ranks (all ranks when left out).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:Minimum=0
	Ranks []int32 `json:"ranks,omitempty"`

	// OnExitCodes matches a failed pod by its containers' exit codes, as a batch/v1 Job's
	// podFailurePolicy does: containers that exited 0 are not looked at.
	// +optional
	OnExitCodes *ExitCodesRequirement `json:"onExitCodes,omitempty"`

	// OnPodConditions matches a pod that has one of these conditions, such as
	// DisruptionTarget (evicted, preempted, its node drained or lost) or a condition a node
	// problem detector sets. Any pod that ended, or was deleted while the job ran, is
	// looked at.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	OnPodConditions []PodConditionPattern `json:"onPodConditions,omitempty"`

	// OnReasons matches a termination reason: OOMKilled (a container was killed for using
	// more memory than its limit), Evicted (the kubelet evicted the pod), DeadlineExceeded
	// (the pod's activeDeadlineSeconds passed), Stalled (the replica stopped reporting
	// progress for spec.progressDeadlineSeconds).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=4
	OnReasons []FailureReason `json:"onReasons,omitempty"`

	// AvoidNode says whether a failure this rule matches counts against the node the replica
	// ran on (spec.failurePolicy.avoidFailedNodes). Without it: a disruption by the node
	// (its kubelet, its taints, its loss) or a non-zero exit of a replica that had been
	// running there does; a preemption, an eviction through the API, a stall and an
	// OOMKilled (its own memory limit) do not.
	// +optional
	AvoidNode *bool `json:"avoidNode,omitempty"`
}

// FailurePolicyAction is what a failure a rule matches does.
// +kubebuilder:validation:Enum=FailJob;RestartReplica;RestartJob;Ignore
type FailurePolicyAction string

const (
	// FailJob fails the job at once, naming the rule.
	FailJob FailurePolicyAction = "FailJob"
	// RestartReplica restarts the replica, counting toward its limits.
	RestartReplica FailurePolicyAction = "RestartReplica"
	// RestartJob restarts every replica of the job together.
	RestartJob FailurePolicyAction = "RestartJob"
	// Ignore replaces the pod and counts nothing.
	Ignore FailurePolicyAction = "Ignore"
)

// ExitCodesRequirement matches containers' exit codes.
// +kubebuilder:validation:XValidation:rule="self.operator != 'In' || !self.values.exists(v, v == 0)",message="onExitCodes.values must not hold 0 with operator In: a container that exited 0 did not fail, and is never looked at"
type ExitCodesRequirement struct {
	// ContainerName limits the match to one container (all the pod's containers, init
	// containers included, when left out).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	ContainerName *string `json:"containerName,omitempty"`

	// Operator: In matches when a container's non-zero exit code is one of values; NotIn
	// when one is not.
	// +kubebuilder:validation:Enum=In;NotIn
	Operator ExitCodesOperator `json:"operator"`

	// Values are the exit codes.
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=255
	Values []int32 `json:"values"`
}

// ExitCodesOperator is how an exit code is compared with a rule's values.
type ExitCodesOperator string

const (
	ExitCodesIn    ExitCodesOperator = "In"
	ExitCodesNotIn ExitCodesOperator = "NotIn"
)

// PodConditionPattern matches a pod condition by type and status.
type PodConditionPattern struct {
	// Type of the pod condition, such as DisruptionTarget.
	Type corev1.PodConditionType `json:"type"`

	// Status of the condition. Defaults to True.
	// +optional
	// +kubebuilder:default=True
	// +kubebuilder:validation:Enum=True;False;Unknown
	Status corev1.ConditionStatus `json:"status,omitempty"`
}

// FailureReason is how a replica's pod ended, as a rule matches it.
// +kubebuilder:validation:Enum=OOMKilled;Evicted;DeadlineExceeded;Stalled
type FailureReason string

const (
	ReasonOOMKilled        FailureReason = "OOMKilled"
	ReasonEvicted          FailureReason = "Evicted"
	ReasonDeadlineExceeded FailureReason = "DeadlineExceeded"
	ReasonStalled          FailureReason = "Stalled"
)

// AvoidFailedNodes bounds the list of nodes a job's new pods avoid.
type AvoidFailedNodes struct {
	// MaxNodes is the most nodes the job avoids at once; past it, the oldest exclusion is
	// dropped. Defaults to 8.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	MaxNodes *int32 `json:"maxNodes,omitempty"`
}

// DefaultMaxExcludedNodes is avoidFailedNodes.maxNodes when it is left out.
const DefaultMaxExcludedNodes = 8

// ExcludedNode is a node the job's new pods avoid, and why.
type ExcludedNode struct {
	// Node is the node's name.
	Node string `json:"node"`
	// Replica is the replica that failed there.
	Replica string `json:"replica"`
	// Reason is how it failed: an exit code, or a disruption's reason.
	Reason string `json:"reason"`
	// Time is when the failure was seen.
	Time metav1.Time `json:"time"`
}

// FailurePolicyRuleRef names the failure policy rule that decided a replica's fate: its
// index and action (its name is in the spec, and in the event that said it; a job may have
// 750 replicas, each with its own).
type FailurePolicyRuleRef struct {
	// Index of the rule in spec.failurePolicy.rules.
	Index int32 `json:"index"`
	// Action the rule took.
	Action FailurePolicyAction `json:"action"`
}
