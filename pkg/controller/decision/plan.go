// Package decision decides what one sync does to a job: it compares the plan a kind's
// adapter made of the job with the children the caches show, and returns the status to write
// and the children to create, update and delete (Decide). It is a pure function of its
// inputs and imports no client (imports_test.go holds it to the API types and apimachinery),
// so that every policy has a unit test. Each policy is one file; Decide, in decide.go,
// applies them in order and combines what each returns.
package decision

import (
	"fmt"
	"math"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// Job is a job of any kind.
type Job interface {
	metav1.Object
	runtime.Object
	// JobStatus is the status every kind shares.
	JobStatus() *batch.JobStatus
	// JobLifecycle is the lifecycle controls every kind's spec shares (TTL, start deadline,
	// restart scope).
	JobLifecycle() *batch.Lifecycle
}

// Plan is a job as the engine runs it.
type Plan struct {
	// Groups are the replica types, in the order status reports them.
	Groups []Group
	// ServicePorts, when set, give every replica a headless Service named like its pod.
	ServicePorts []corev1.ServicePort
	// Debug runs every replica's debug command; the job never ends on its own.
	Debug bool
	// DebugHint, in debug mode, tells a person what to do with the job: how to start its work
	// by hand. The Running condition's message ends with it while every replica runs its
	// debug command, and a DebugMode event says it when that message first does.
	DebugHint string
	// Paused deletes every replica and service until it is unset.
	Paused bool
	// Scheduler, when set, places the pods with T9k Scheduler.
	Scheduler *batch.T9kScheduler
	// CleanUp says which replicas are deleted once the job has ended; CleanUpTypes limits it
	// to some replica types (nil: all).
	CleanUp      batch.CleanUpPolicy
	CleanUpTypes []string
	// BackoffLimit bounds the restarts of all replicas together (nil: no bound).
	BackoffLimit *int32
	// Deadline fails the job once it has run this long, from status.startTime: the first
	// creation of its replicas, again at each resume (0: no deadline). Debug mode has none.
	Deadline time.Duration
	// StartupDeadline fails the job when its replicas are not all running this long after
	// status.startTime (0: no deadline). Debug mode has none.
	StartupDeadline time.Duration
	// RestartJob: a restart restarts every replica of the job together, once all the old
	// pods are gone (spec.restartScope: Job); backoffLimit bounds status.restarts then.
	RestartJob bool
	// Judge tells from the replicas whether the job has ended; nil means not yet.
	Judge func(Replicas) *Outcome
	// Objects are the job's children besides its replicas: an SSH key Secret, a hostfile
	// ConfigMap, a Service for all replicas, a TensorBoard Deployment. Each is created while
	// the job has not ended, again if it is deleted, and updated when what the plan builds
	// for it changes (a resize while paused rewrites the hostfile); it lives until the job is
	// deleted (pause and clean-up keep it). One the plan no longer lists is deleted.
	Objects []PlannedChild
	// KindStatus, when set, reports the kind's own status fields from the children
	// (TensorFlow's TensorBoard); they are written with the shared status.
	KindStatus func(Children) KindStatus
	// FailurePolicy is the job's spec.failurePolicy (nil: none): rules that decide what a
	// replica's failure does (rules.go), and the nodes new pods avoid (nodes.go).
	FailurePolicy *batch.FailurePolicy
	// ProgressDeadline calls a running job stalled when a replica that reported progress
	// then reports nothing this long (0: never; stall.go). ProgressLag is how late a report
	// may show in status.progress (the progress writer's interval, the controllers' clocks
	// apart): a replica is called stalled only once its silence is longer than both, so that
	// a report taken but not yet written never counts as silence.
	ProgressDeadline time.Duration
	ProgressLag      time.Duration
	// Progress, when the controller serves the progress endpoint, is where the job's pods
	// report (progress.go); the engine sets it, not the adapter.
	Progress *ProgressPlan
	// InPlace, when set, restarts the whole job in place (spec.restartStrategy: InPlace):
	// every pod carries the agent (inplace.go).
	InPlace *InPlacePlan
	// Elastic, when set, is the replica type whose size may change while the job runs
	// (spec.elastic; elastic.go). Its group's Replicas is the size asked for.
	Elastic *Elastic
}

// Children are what the controller sees of a job's children.
type Children struct {
	Pods []*corev1.Pod
	// Objects are the job's other children, of every kind in the controller's table.
	Objects []metav1.Object
	// EndSeen is when the controller first saw each ended pod (by UID) as ended. A
	// container's finishedAt is truncated to the second; this keeps restart backoffs from
	// starting up to a second before the pod really ended.
	EndSeen map[types.UID]time.Time
	// Gone is the last state, by UID, of the job's pods that were disrupted and deleted
	// before a sync read them: how they ended is told from it.
	Gone map[types.UID]*corev1.Pod
	// Failing is the last state, by UID, of the job's pods that restart in place, as one of
	// their containers had just failed (inplace.go): the exit code is told from it once the
	// kubelet has restarted them all.
	Failing map[types.UID]*corev1.Pod

	// Kinds tells each object's kind, as the controller's table of child kinds (the
	// admitters' included) holds it; nil: the built-in kinds (Pod, Service, Secret,
	// ConfigMap, Deployment), the engine's own.
	Kinds KindTable
}

// ObjectKind is the kind of a job's child, as its API names it.
type ObjectKind string

const (
	PodKind        ObjectKind = "Pod"
	ServiceKind    ObjectKind = "Service"
	SecretKind     ObjectKind = "Secret"
	ConfigMapKind  ObjectKind = "ConfigMap"
	DeploymentKind ObjectKind = "Deployment"
)

// KindTable is what a decision needs of the controller's table of child kinds (the engine's
// kinds.go): which kind an object is, and whether one whose content changed is made again
// rather than updated.
type KindTable interface {
	// KindOf is the kind of an object ("" for one the table does not hold).
	KindOf(o metav1.Object) ObjectKind
	// ReplaceOnChange: a child of o's kind whose built content changed is deleted and made
	// again (an admitter's request that cannot change once granted).
	ReplaceOnChange(o metav1.Object) bool
}

// builtinKinds are the kinds of the engine's own table, for Children without Kinds.
type builtinKinds struct{}

func (builtinKinds) KindOf(o metav1.Object) ObjectKind {
	switch o.(type) {
	case *corev1.Pod:
		return PodKind
	case *corev1.Service:
		return ServiceKind
	case *corev1.Secret:
		return SecretKind
	case *corev1.ConfigMap:
		return ConfigMapKind
	case *appsv1.Deployment:
		return DeploymentKind
	}
	return ""
}

func (builtinKinds) ReplaceOnChange(metav1.Object) bool { return false }

// kinds are the children's kinds table, the built-in one when the controller gave none.
func (c Children) kinds() KindTable {
	if c.Kinds == nil {
		return builtinKinds{}
	}
	return c.Kinds
}

// KindStatus is a kind's own part of its status, as a decision found it.
type KindStatus interface {
	// SetOn sets the fields on job and says whether they changed.
	SetOn(job Job) (changed bool)
}

// PlannedChild is one of a job's children besides its replicas (a Service, a ConfigMap, an
// admitter's Workload or PodGroup), as the plan wants it. Not to be confused with
// metav1.Object, which is what it builds.
type PlannedChild struct {
	Kind ObjectKind
	Name string
	// Build makes the object as the plan wants it now, given the one that exists (nil when
	// there is none), so that what must not change (a key pair) is kept from it. The engine
	// sets its name, namespace, labels and owner, and compares a hash of the result with the
	// one it recorded on the existing object: a difference updates it. Build is called on
	// every sync: it must be cheap, and build the same from the same job and current object
	// (what is made afresh, a key pair, only when there is no current object).
	Build func(current metav1.Object) (metav1.Object, error)
	// Unhashed, when set, completes a built object with what the hash leaves out: fields
	// another controller owns once the object exists (an admitter's, whose priority its
	// system rewrites), which must not make the engine change it.
	Unhashed func(built metav1.Object)
	// Keep keeps the existing object as it is while the plan lists it: not built, changed nor
	// made (an admitter's request that must outlast the job's pods).
	Keep bool
}

// Group is one replica type.
type Group struct {
	Type     string
	Replicas int32
	// Restart says when a replica is restarted; Limit bounds one replica's restarts (nil: no
	// bound).
	Restart batch.RestartPolicy
	Limit   *int32
	// Template returns the pod template of the replica of a rank. The engine names the pod,
	// labels it, owns it, and applies the run mode and scheduler.
	Template func(rank int32) corev1.PodTemplateSpec
	// PodName names the pod of a rank (nil: <job>-<type>-<rank>).
	PodName func(rank int32) string
	// After lists replica types every replica of which must be Ready before this group's pods
	// are created (a launcher waits for its workers). Debug mode does not wait.
	After []string
	// MainContainer names the container that debug and resume settings change ("": the first).
	MainContainer string
	// Debug is the group's debug setting, used when the plan is in debug mode.
	Debug *batch.ReplicaDebugSet
	// Resume is the group's resume setting, used once the job has been paused and resumed.
	Resume *batch.ResumeSpec
}

// Replica is what a plan's Judge sees of one replica.
type Replica struct {
	// Phase is the replica's phase; "" while Held.
	Phase    batch.ReplicaPhase
	ExitCode int32
	// Final: the replica has ended for good (succeeded, or failed with no restart left).
	Final bool
	// Ready: its pod is Ready.
	Ready bool
	// Lost: its pod is gone, or being deleted, though it had not ended (deleted by hand, or
	// with its node); the engine creates it again unless the outcome says otherwise.
	Lost bool
	// Held: it has no pod because its group waits for others to be Ready (Group.After).
	Held bool
	// Disruption, for a Lost replica, is why its pod went when Kubernetes says so (the
	// reason of its DisruptionTarget condition: EvictionByEvictionAPI ...), else Deleted.
	Disruption string
}

// Replicas are a job's replicas, by type and rank.
type Replicas map[string][]Replica

// Outcome is how a job ended.
type Outcome struct {
	Succeeded bool
	// Reason is one word; Message says why, e.g. which rule fired.
	Reason, Message string
}

// Verdict is the admitters' answer for one job in one sync (the engine's admission.go asks
// them and combines their answers): whether the job's pods may be made, and what each adds.
type Verdict struct {
	// Admitted: the job's pods may be made.
	Admitted bool
	// Reason (one word) and Message say why the job waits, while it is not admitted; the
	// job's Running condition says them.
	Reason, Message string
	// RequeueAfter asks for another sync then, should no event come first (0: none).
	RequeueAfter time.Duration
	// Pod, when set, adds to the pod of a replica of the given type what the admission
	// assigned: node selectors, tolerations, labels, a pod group.
	Pod func(replicaType string, pod *corev1.Pod)
	// Note is the admitter's own, from Admit to Decided (Kueue: the job's Workload).
	Note any
	// Counts, when an admission gave a replica type fewer pods than its group's Replicas
	// (Kueue's partial admission of an elastic type), is how many the type runs.
	Counts map[string]int32
	// Gang, when set, are the replica types whose pods the scheduler places as one (a
	// PodGroup's members): their new pods are not made while a bound pod of theirs is being
	// deleted (gangwait.go).
	Gang map[string]bool
}

// SetRunMode applies a job's run mode (debug, pause and their per-type settings) and
// scheduler to the plan; call it once the plan has its groups.
func (p *Plan) SetRunMode(mode *batch.RunMode, scheduler *batch.SchedulePolicy) {
	if mode != nil {
		p.Debug = mode.Debug != nil && mode.Debug.Enabled
		p.Paused = mode.Pause != nil && mode.Pause.Enabled
		for i := range p.Groups {
			p.Groups[i].Debug = mode.Debug.For(p.Groups[i].Type)
			p.Groups[i].Resume = mode.Pause.For(p.Groups[i].Type)
		}
	}
	if scheduler != nil {
		p.Scheduler = scheduler.T9kScheduler
	}
}

// SetLifecycle applies the lifecycle controls every kind's spec shares to the plan.
func (p *Plan) SetLifecycle(l *batch.Lifecycle) {
	if l.StartupDeadlineSeconds != nil && *l.StartupDeadlineSeconds > 0 {
		p.StartupDeadline = Seconds(*l.StartupDeadlineSeconds)
	}
	p.RestartJob = l.RestartScope == batch.RestartScopeJob
	p.FailurePolicy = l.FailurePolicy
	if l.ProgressDeadlineSeconds != nil && *l.ProgressDeadlineSeconds > 0 {
		p.ProgressDeadline = Seconds(*l.ProgressDeadlineSeconds)
	}
	p.Elastic = ElasticOf(l)
}

// Seconds is n seconds as a Duration; a count past what a Duration holds (some 292 years)
// is as long as one can be, where the product would overflow into the past.
func Seconds(n int64) time.Duration {
	return time.Duration(min(n, math.MaxInt64/int64(time.Second))) * time.Second
}

// ExitText is " with exit code N" for a non-zero code: the one phrase every message uses for
// how a replica ended.
func ExitText(code int32) string {
	if code == 0 {
		return ""
	}
	return fmt.Sprintf(" with exit code %d", code)
}
