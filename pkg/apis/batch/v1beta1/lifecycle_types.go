package v1beta1

// Lifecycle holds the controls every kind shares over a job's life beyond its replicas'
// restart policies: when a finished job goes, how long its replicas may take to start, what
// one restart restarts (docs/lifecycle.md), which controller runs it, and how its pods are
// placed together (scheduling, docs/gang.md). Each kind's spec has them at its top level,
// as a batch/v1 Job has its own.
// +kubebuilder:validation:XValidation:rule="has(self.scheduling) == has(oldSelf.scheduling)",message="spec.scheduling cannot be added or removed once the job exists: the job's PodGroup, or its pods without one, were made by it; create a new job instead"
// +kubebuilder:validation:XValidation:rule="!has(self.failurePolicy) || !has(self.failurePolicy.rules) || has(self.progressDeadlineSeconds) || !self.failurePolicy.rules.exists(r, has(r.onReasons) && 'Stalled' in r.onReasons)",messageExpression="'spec.failurePolicy.rules, rule ' + self.failurePolicy.rules[self.failurePolicy.rules.map(r, has(r.onReasons) && 'Stalled' in r.onReasons).indexOf(true)].name + ': onReasons Stalled needs spec.progressDeadlineSeconds, which says how long a replica may go without reporting progress; set it, or drop Stalled from the rule'"
// +kubebuilder:validation:XValidation:rule="!has(self.elastic) || !has(self.managedBy) || self.managedBy != 'kueue.x-k8s.io/multikueue'",message="spec.elastic cannot go with spec.managedBy: kueue.x-k8s.io/multikueue: MultiKueue runs a copy of the job on a worker cluster and does not carry a resize to it; leave one of them out"
type Lifecycle struct {
	// TTLSecondsAfterFinished deletes the job, with its pods, Services and other children,
	// this many seconds after it finished (status.completionTime), whether it succeeded or
	// failed; 0 deletes it as soon as it finishes. Without it, a finished job stays until it
	// is deleted. It may be set or changed at any time, also after the job finished.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= 0",message="spec.ttlSecondsAfterFinished must not be negative: it is how many seconds a finished job is kept before it is deleted (0: delete it as soon as it finishes)"
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// StartupDeadlineSeconds fails the job (reason StartupDeadlineExceeded) when its replicas
	// are not all running this many seconds after they were created; the count starts again
	// when the job is resumed or readmitted, so time spent paused or waiting in a queue does
	// not count. The failure says which replicas were still waiting and why. Without it, a
	// job may wait for its replicas for ever.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= 1",message="spec.startupDeadlineSeconds must be at least 1: it is how many seconds the job's replicas may take to be all running"
	StartupDeadlineSeconds *int64 `json:"startupDeadlineSeconds,omitempty"`

	// RestartScope says what a restart restarts: Replica (the default) restarts the replica
	// whose policy asks for it, alone; Job deletes every replica of the job and creates them
	// again together, once all the old pods are gone, for a group that cannot take one new
	// member back (PyTorch DDP without elastic rendezvous). With Job, the failed replica's
	// restartPolicy and limit decide whether the job restarts, every replica's restartCount
	// goes up by one, and backoffLimit bounds status.restarts, the job's restarts.
	// +optional
	RestartScope RestartScope `json:"restartScope,omitempty"`

	// RestartStrategy says how a whole-job restart (restartScope Job, a rule's RestartJob, a
	// stall, a request) restarts the pods: Recreate (the default) deletes every pod and
	// makes it again; InPlace restarts every container of each pod on its node, keeping the
	// pod, its UID, node and address, and makes again only the pods that cannot be kept
	// (ended, or on a node whose kubelet cannot restart a pod's containers together). InPlace
	// adds a small agent container to every pod (docs/lifecycle.md, "Restarting in place").
	// +optional
	RestartStrategy RestartStrategy `json:"restartStrategy,omitempty"`

	// ManagedBy names the controller that runs the job: empty or
	// batch.tensorstack.dev/job-controller for this project's controller;
	// kueue.x-k8s.io/multikueue for Kueue's MultiKueue, which runs a copy of the job on a
	// worker cluster and copies its status back. A job managed by another controller gets no
	// pods, children or status from this one, only its Kueue Workload when it asks for a queue
	// (docs/queueing.md, "Across clusters with MultiKueue"). It cannot change once the job
	// exists.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	ManagedBy string `json:"managedBy,omitempty"`

	// Scheduling places the job's pods together through a PodGroup of kube-scheduler's:
	// all or nothing (gang), in one topology domain, disrupted only all together, sharing
	// device claims. It has the shape of a batch/v1 Job's spec.scheduling (docs/gang.md). It
	// cannot be added or removed once the job exists, and only
	// schedulingPolicy.gang.minCount may change in it.
	// +optional
	Scheduling *SchedulingConfiguration `json:"scheduling,omitempty"`

	// FailurePolicy says what a replica's failure does, by exit code, pod condition or
	// termination reason, and keeps retries away from the nodes the job failed on
	// (docs/failures.md). Without it, each replica's restart policy alone decides.
	// +optional
	FailurePolicy *FailurePolicy `json:"failurePolicy,omitempty"`

	// ProgressDeadlineSeconds calls a running job Stalled when a replica that reported
	// progress (status.progress) then reports nothing for this many seconds; the failure
	// policy's rules decide what a stall does (reason Stalled), by default a restart of the
	// whole job where the job allows restarts, otherwise its failure. A replica that never
	// reported is never called stalled. Without it, no stall is looked for.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= 1",message="spec.progressDeadlineSeconds must be at least 1: it is how many seconds a replica that reported progress may go without reporting before the job is called stalled"
	ProgressDeadlineSeconds *int64 `json:"progressDeadlineSeconds,omitempty"`

	// Elastic lets one replica type change its size while the job runs, between
	// minReplicas and maxReplicas (docs/elastic.md); `kubectl scale` sets its replicas.
	// Only a kind whose framework can take members that come and go has it: a GenericJob.
	// +optional
	Elastic *ElasticPolicy `json:"elastic,omitempty"`
}

// ControllerName is the project's controller's name in spec.managedBy.
const ControllerName = "batch.tensorstack.dev/job-controller"

// MultiKueueControllerName is Kueue's MultiKueue in spec.managedBy.
const MultiKueueControllerName = "kueue.x-k8s.io/multikueue"

// ManagedElsewhere reports whether spec.managedBy names a controller other than this
// project's.
func (l *Lifecycle) ManagedElsewhere() bool {
	return l.ManagedBy != "" && l.ManagedBy != ControllerName
}

// RestartStrategy is how a whole-job restart restarts the job's pods.
// +kubebuilder:validation:Enum=Recreate;InPlace
type RestartStrategy string

const (
	// RestartRecreate deletes every pod and makes it again.
	RestartRecreate RestartStrategy = "Recreate"
	// RestartInPlace restarts the containers of every pod that can be kept, on its node.
	RestartInPlace RestartStrategy = "InPlace"
)

// RestartScope is what one restart restarts.
// +kubebuilder:validation:Enum=Replica;Job
type RestartScope string

const (
	// RestartScopeReplica restarts a replica alone.
	RestartScopeReplica RestartScope = "Replica"
	// RestartScopeJob restarts every replica of the job together.
	RestartScopeJob RestartScope = "Job"
)
