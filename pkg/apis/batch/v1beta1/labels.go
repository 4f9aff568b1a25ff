package v1beta1

// Labels and annotations the controller puts on the objects it creates.
const (
	// LabelJobName is the name of the job a child belongs to.
	LabelJobName = GroupName + "/job-name"
	// LabelReplicaType is the replica type of a pod or service.
	LabelReplicaType = GroupName + "/replica-type"
	// LabelReplicaIndex is the rank of a pod or service within its type.
	LabelReplicaIndex = GroupName + "/replica-index"
	// LabelControllerUID is the UID of the job a child belongs to: a new job with the name of
	// a deleted one never selects the old one's children.
	LabelControllerUID = GroupName + "/controller-uid"
	// LabelAttempt is the job's attempt a pod was made for (status.attempt): the same on every
	// pod of one life of the job, one more after each whole-job restart. Containers read it
	// as T9K_ATTEMPT.
	LabelAttempt = GroupName + "/attempt"
	// AnnotationReleasedAttempt, on a pod of a job that restarts in place
	// (spec.restartStrategy: InPlace), is the attempt the pod's containers may run: its agent
	// holds them until it equals the pod's attempt label. The controller writes it when the
	// pod is made, and again once every pod's earlier attempt is down (docs/lifecycle.md,
	// "Restarting in place"). AnnotationAgentRestarts is the agent's restart count when the
	// attempt was released: a higher count while the pod's containers wait says that the pod
	// restarted on its own, after one of them failed.
	AnnotationReleasedAttempt = GroupName + "/released-attempt"
	AnnotationAgentRestarts   = GroupName + "/agent-restarts"
	// AnnotationRestartedAt is when the controller last restarted a pod in place (RFC 3339):
	// a pod whose containers have not stopped a while after it is made again.
	AnnotationRestartedAt = GroupName + "/restarted-at"
	// AnnotationRunMode marks the pods created in debug mode ("debug"), so that status tells
	// what the pods run, not what the spec asks for now.
	AnnotationRunMode = GroupName + "/run-mode"
	RunModeDebug      = "debug"
	// AnnotationRestartAttempt, on a job, asks for a restart of the whole job while the
	// job's attempt (status.attempt) is the one it names (docs/lifecycle.md, "Restarting on
	// request"): `kubectl t9k restart` writes it; a past attempt's number does nothing.
	AnnotationRestartAttempt = GroupName + "/restart-attempt"
	// AnnotationExcludedNodes lists, comma-separated, the nodes a pod was made to avoid
	// (spec.failurePolicy.avoidFailedNodes): the controller reads it when no node fits the
	// pod, to drop the oldest exclusion.
	AnnotationExcludedNodes = GroupName + "/excluded-nodes"

	// T9kSchedulerName is the schedulerName of pods placed by T9k Scheduler.
	T9kSchedulerName = "t9k-scheduler"
	// LabelQueue and AnnotationPriority tell T9k Scheduler a pod's queue and priority.
	LabelQueue         = "scheduling.tensorstack.dev/queue"
	AnnotationPriority = "scheduling.tensorstack.dev/priority"
)

// JobStatus returns the status every kind shares, for the shared controller engine.
func (j *GenericJob) JobStatus() *JobStatus { return &j.Status }

// JobStatus returns the status every kind shares, for the shared controller engine.
func (j *MPIJob) JobStatus() *JobStatus { return &j.Status }

// JobStatus returns the status every kind shares, for the shared controller engine.
func (j *ColossalAIJob) JobStatus() *JobStatus { return &j.Status }

// JobStatus returns the status every kind shares, for the shared controller engine.
func (j *TensorFlowTrainingJob) JobStatus() *JobStatus { return &j.Status.JobStatus }

// JobStatus returns the status every kind shares, for the shared controller engine.
func (j *XGBoostTrainingJob) JobStatus() *JobStatus { return &j.Status }

// JobLifecycle returns the lifecycle controls of the job's spec.
func (j *GenericJob) JobLifecycle() *Lifecycle { return &j.Spec.Lifecycle }

// JobLifecycle returns the lifecycle controls of the job's spec.
func (j *MPIJob) JobLifecycle() *Lifecycle { return &j.Spec.Lifecycle }

// JobLifecycle returns the lifecycle controls of the job's spec.
func (j *ColossalAIJob) JobLifecycle() *Lifecycle { return &j.Spec.Lifecycle }

// JobLifecycle returns the lifecycle controls of the job's spec.
func (j *TensorFlowTrainingJob) JobLifecycle() *Lifecycle { return &j.Spec.Lifecycle }

// JobLifecycle returns the lifecycle controls of the job's spec.
func (j *XGBoostTrainingJob) JobLifecycle() *Lifecycle { return &j.Spec.Lifecycle }
