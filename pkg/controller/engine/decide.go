package engine

import (
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// Decision is what one sync does: the status to write, then the writes to send.
type Decision struct {
	Status         *batch.JobStatus
	CreatePods     []*corev1.Pod
	DeletePods     []*corev1.Pod
	CreateServices []*corev1.Service
	DeleteServices []*corev1.Service
	// CreateObjects are the plan's other objects that are missing.
	CreateObjects []Object
	// Restarted names the replicas restarted by this decision.
	Restarted []string
	// RequeueAfter asks for another sync after a restart backoff (0: none).
	RequeueAfter time.Duration
	// Outcome is set when the job ends with this decision.
	Outcome *Outcome
	// Waiting says which replicas wait for others to be ready before they are created.
	Waiting string
	// Reported: the kind's own status fields changed (StatusReporter); the status is written
	// even if the shared part did not change.
	Reported bool
}

// retryableExitCodes are the exit codes the ExitCode restart policy restarts after: SIGINT,
// SIGKILL, SIGTERM, and 138, which a program may use to ask for a restart.
var retryableExitCodes = map[int32]bool{130: true, 137: true, 143: true, 138: true}

// Restart backoff: a replica's first restart is immediate, later ones wait 1s, 2s, 4s, ...
// after its pod ended, up to maxRestartBackoff, so a replica that fails at once cannot spin.
const maxRestartBackoff = time.Minute

func restartBackoff(restarts int32) time.Duration {
	if restarts <= 0 {
		return 0
	}
	d := time.Second << min(restarts-1, 16)
	return min(d, maxRestartBackoff)
}

// Children are what the controller sees of a job's children.
type Children struct {
	Pods        []*corev1.Pod
	Services    []*corev1.Service
	Secrets     []*corev1.Secret
	ConfigMaps  []*corev1.ConfigMap
	Deployments []*appsv1.Deployment
	// EndSeen is when the controller first saw each ended pod (by UID) as ended. A
	// container's finishedAt is truncated to the second; this keeps restart backoffs from
	// starting up to a second before the pod really ended.
	EndSeen map[types.UID]time.Time
}

// Decide compares a job's plan with its children and decides the next status and writes. It
// is a pure function of its inputs, so that every rule has a unit test; the status it returns
// already counts the restarts it orders, which is what makes a restart count survive a crash
// between the status write and the pod deletion.
//
// It decides in two steps: first every replica as it is and what it would do (restart, be
// created), and the outcome on that; then, only if the job goes on, the restarts and
// creations. A sync that ends the job restarts nothing: a restart is counted only when it
// happens.
func Decide(job Job, plan *Plan, children Children, now time.Time) *Decision {
	old := job.JobStatus()
	d := &Decision{Status: &batch.JobStatus{ObservedGeneration: job.GetGeneration()}}
	x := &decider{plan: plan, now: now, endSeen: children.EndSeen, d: d}
	x.finished = Finished(old)
	x.paused = plan.Paused && !x.finished
	resumed := !plan.Paused && wasPaused(old)
	pods := children.Pods

	podByName := make(map[string]*corev1.Pod, len(pods))
	for _, p := range pods {
		podByName[p.Name] = p
	}
	prevByName := map[string]batch.ReplicaStatus{}
	for _, task := range old.Tasks {
		for _, r := range task.Replicas {
			prevByName[r.Name] = r
			x.totalRestarts += r.RestartCount
		}
	}

	var all []*replica
	desired := map[string]bool{}
	for gi := range plan.Groups {
		g := &plan.Groups[gi]
		for rank := range g.Replicas {
			name := g.podName(job.GetName(), rank)
			desired[name] = true
			r := x.observe(g, rank, prevByName[name], podByName[name])
			r.status.Name = name
			all = append(all, r)
		}
	}
	if !plan.Debug {
		d.Waiting = x.holdBack(all)
	}
	views := Replicas{}
	for _, r := range all {
		views[r.group.Type] = append(views[r.group.Type], r.view)
	}

	// The deadline counts from the first creation of the replicas, again after a pause.
	d.Status.StartTime = old.StartTime
	switch {
	case x.paused:
		d.Status.StartTime = nil
	case d.Status.StartTime == nil && !x.finished:
		// The first sync creates the pods but does not write status: the next one takes
		// their creation time.
		t := metav1.NewTime(now)
		for _, p := range live(pods) {
			if p.CreationTimestamp.Before(&t) && !p.CreationTimestamp.IsZero() {
				t = p.CreationTimestamp
			}
		}
		d.Status.StartTime = &t
	}

	outcome := (*Outcome)(nil)
	if !x.finished && !x.paused && !plan.Debug {
		outcome = x.deadline(d.Status.StartTime)
		if outcome == nil && plan.Outcome != nil {
			outcome = plan.Outcome(views)
		}
		if outcome != nil {
			d.Outcome = outcome
			x.finished = true
		}
	}

	var failedNames []string
	for _, r := range all {
		x.carryOut(job, r, resumed)
		if r.status.Phase == batch.ReplicaFailed || (r.pod != nil && r.pod.Status.Phase == corev1.PodFailed) {
			failedNames = append(failedNames, failureText(r.status))
		}
	}
	for _, g := range plan.Groups {
		task := batch.TaskStatus{Type: g.Type}
		for _, r := range all {
			if r.group.Type == g.Type {
				task.RestartCount += r.status.RestartCount
				task.Replicas = append(task.Replicas, r.status)
			}
		}
		d.Status.Tasks = append(d.Status.Tasks, task)
	}

	// Pods the plan no longer has (scaled down, or a type removed) go.
	for _, p := range pods {
		if !desired[p.Name] && p.DeletionTimestamp == nil {
			d.DeletePods = append(d.DeletePods, p)
		}
	}

	// The plan's other objects: created while the job has not ended, kept until it is deleted.
	have := children.objectNames()
	isObject := map[string]bool{}
	for _, o := range plan.Objects {
		if o.Kind == ServiceKind {
			isObject[o.Name] = true
		}
		if !x.finished && !have[objectName(o.Kind, o.Name)] {
			d.CreateObjects = append(d.CreateObjects, o)
		}
	}
	var replicaServices []*corev1.Service
	for _, svc := range children.Services {
		if !isObject[svc.Name] {
			replicaServices = append(replicaServices, svc)
		}
	}

	switch {
	case x.finished:
		d.DeletePods = append(d.DeletePods, cleanUp(plan, pods, d.DeletePods)...)
		if plan.CleanUp != batch.CleanUpNone {
			d.DeleteServices = append(d.DeleteServices, live(replicaServices)...)
		}
	case x.paused:
		d.DeletePods = append(d.DeletePods, unlisted(live(pods), d.DeletePods)...)
		d.DeleteServices = append(d.DeleteServices, live(replicaServices)...)
	default:
		d.CreateServices, d.DeleteServices = servicePlan(job, plan, desired, replicaServices)
	}

	setPhaseAndConditions(d.Status, old, outcome, x.paused, resumed, failedNames, pods, d.Waiting, now)
	d.Status.Aggregate = aggregate(d.Status.Tasks)
	return d
}

// decider holds what one Decide call knows across replicas.
type decider struct {
	plan     *Plan
	now      time.Time
	endSeen  map[types.UID]time.Time
	d        *Decision
	finished bool
	paused   bool
	// totalRestarts counts the job's restarts, those this decision would order included, for
	// the plan's backoff limit.
	totalRestarts int32
}

// replicaAction is what a replica would do next, if the job goes on.
type replicaAction int

const (
	noAction replicaAction = iota
	// needsPod: the replica has no pod.
	needsPod
	// restartNow: its pod ended and its policy and limits restart it now.
	restartNow
	// finishRestart: an earlier decision counted a restart whose pod is still to be deleted
	// or created (the controller stopped half-way, or a delete was refused).
	finishRestart
)

// replica is one replica while a decision is made.
type replica struct {
	group  *Group
	rank   int32
	pod    *corev1.Pod
	status batch.ReplicaStatus
	view   Replica
	action replicaAction
}

// observe reports a replica as it is and says what it would do.
func (x *decider) observe(g *Group, rank int32, prev batch.ReplicaStatus, pod *corev1.Pod) *replica {
	r := &replica{group: g, rank: rank, pod: pod, status: prev, view: Replica{Phase: prev.Phase}}
	if r.status.Containers == nil {
		r.status.Containers = []batch.ContainerStatus{}
	}
	counted := restartCounted(prev)
	switch {
	case pod != nil && pod.DeletionTimestamp != nil:
		fromPod(&r.status, pod)
		switch {
		case counted && prev.UID == pod.UID:
			r.status.Phase, r.view.Phase = batch.ReplicaDeleted, batch.ReplicaDeleted
			r.action = finishRestart
		case podEnded(pod) && !x.paused:
			// An ended pod that is being deleted (clean-up, by hand) ended all the same; a
			// restart it is due waits until it is gone. (Pause deletes every replica, and
			// resume recreates every one.)
			r.view = Replica{Phase: r.status.Phase, ExitCode: exitCode(pod), Final: !x.mayRestart(g, r.status)}
		default:
			r.status.Phase, r.view.Phase = batch.ReplicaDeleted, batch.ReplicaDeleted
			r.view.Lost = !x.finished && !x.paused
		}
	case pod != nil:
		fromPod(&r.status, pod)
		r.view = Replica{Phase: r.status.Phase, ExitCode: exitCode(pod), Ready: podReady(pod)}
		if !podEnded(pod) {
			break
		}
		if prev.UID == pod.UID && prev.Phase == batch.ReplicaDeleted {
			// This pod's restart is counted already: finish it, do not count it again.
			r.status.Phase, r.view.Phase = batch.ReplicaDeleted, batch.ReplicaDeleted
			r.action = finishRestart
			break
		}
		if !x.mayRestart(g, r.status) {
			r.view.Final = true
			break
		}
		if wait := restartBackoff(r.status.RestartCount) - x.now.Sub(x.endTime(pod)); wait > 0 {
			x.d.RequeueAfter = minPositive(x.d.RequeueAfter, wait)
			break
		}
		x.totalRestarts++ // reserved, so that the backoff limit holds across replicas
		r.action = restartNow
	default: // no pod
		switch {
		case counted:
			r.action = finishRestart
		case x.paused:
			r.status.Phase, r.view.Phase = batch.ReplicaDeleted, batch.ReplicaDeleted
		case prev.Phase == batch.ReplicaSucceeded || prev.Phase == batch.ReplicaFailed:
			// Its pod ended and is gone (cleaned up, or deleted before its restart): a
			// restart it is due happens now, with a new pod; otherwise keep what it did.
			if x.mayRestart(g, prev) {
				x.totalRestarts++
				r.action = restartNow
				break
			}
			r.view.Final = true
		case x.finished:
			r.status.Phase, r.view.Phase = batch.ReplicaDeleted, batch.ReplicaDeleted
		default:
			r.action = needsPod
			// A pod it had is gone though it had not ended: deleted by hand, or with its node.
			// (Deleted: the engine deleted it, for a pause or a restart.)
			r.view.Lost = prev.UID != "" && prev.Phase != batch.ReplicaCreating && prev.Phase != batch.ReplicaDeleted
			r.view.Phase = batch.ReplicaCreating
		}
	}
	return r
}

// deadline ends a job that has run longer than its plan allows, and otherwise asks for a
// sync when it would.
func (x *decider) deadline(start *metav1.Time) *Outcome {
	if x.plan.Deadline <= 0 || start == nil {
		return nil
	}
	left := start.Add(x.plan.Deadline).Sub(x.now)
	if left > 0 {
		x.d.RequeueAfter = minPositive(x.d.RequeueAfter, left)
		return nil
	}
	return &Outcome{Reason: "DeadlineExceeded", Message: fmt.Sprintf("The job ran longer than runPolicy.activeDeadlineSeconds (%d s) allows.", int64(x.plan.Deadline/time.Second))}
}

// holdBack keeps back the creation of replicas whose group waits for others to be Ready,
// and says what they wait for ("" when nothing waits).
func (x *decider) holdBack(all []*replica) string {
	var waiting []string
	for _, g := range x.plan.Groups {
		ready, total, blocked := 0, 0, false
		for _, r := range all {
			if contains(g.After, r.group.Type) {
				total++
				if r.view.Ready {
					ready++
				}
			}
		}
		if ready == total {
			continue
		}
		for _, r := range all {
			if r.group.Type == g.Type && r.action == needsPod {
				r.action, r.view = noAction, Replica{Lost: r.view.Lost}
				r.status.UID, r.status.Phase = "", ""
				blocked = true
			}
		}
		if blocked {
			waiting = append(waiting, fmt.Sprintf("%s is created once every %s is ready: %d of %d ready", g.Type, strings.Join(g.After, " and "), ready, total))
		}
	}
	if len(waiting) == 0 {
		return ""
	}
	return "Waiting: " + strings.Join(waiting, "; ") + "."
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// objectNames lists the job's live other objects as kind/name.
func (ch Children) objectNames() map[string]bool {
	have := map[string]bool{}
	for _, o := range ch.Services {
		have[objectName(ServiceKind, o.Name)] = true // one being deleted is waited for
	}
	for _, o := range ch.Secrets {
		have[objectName(SecretKind, o.Name)] = true
	}
	for _, o := range ch.ConfigMaps {
		have[objectName(ConfigMapKind, o.Name)] = true
	}
	for _, o := range ch.Deployments {
		have[objectName(DeploymentKind, o.Name)] = true
	}
	return have
}

func objectName(kind ObjectKind, name string) string { return string(kind) + "/" + name }

// carryOut orders what observe said a replica would do, now that the outcome is known: a job
// that has ended restarts and creates nothing, and takes back a restart it counted but did
// not carry out.
func (x *decider) carryOut(job Job, r *replica, resumed bool) {
	d := x.d
	switch r.action {
	case needsPod:
		if x.finished {
			r.status.Phase = batch.ReplicaDeleted
			return
		}
		x.createPod(job, r, resumed)
	case restartNow:
		if x.finished {
			return // the replica keeps its pod and its ending; clean-up decides the pod
		}
		d.Restarted = append(d.Restarted, r.status.Name)
		r.status.RestartCount++
		if r.pod == nil { // gone already: straight to the new pod
			s := r.status
			r.status.LastTermination = &batch.ReplicaTermination{UID: s.UID, Phase: s.Phase, Node: s.Node, Reason: s.Reason, Message: s.Message, Containers: s.Containers}
			x.createPod(job, r, resumed)
			return
		}
		r.status.LastTermination = termination(r.pod)
		r.status.Phase = batch.ReplicaDeleted
		d.DeletePods = append(d.DeletePods, r.pod)
	case finishRestart:
		switch {
		case x.finished:
			takeBackRestart(r)
		case x.paused:
			// Pause deletes the pod; resume creates the replica again.
		case r.pod == nil:
			x.createPod(job, r, resumed)
		case r.pod.DeletionTimestamp == nil:
			d.DeletePods = append(d.DeletePods, r.pod)
		}
	}
}

func (x *decider) createPod(job Job, r *replica, resumed bool) {
	r.status.UID, r.status.Phase = "", batch.ReplicaCreating
	r.status.Containers, r.status.Node, r.status.Reason, r.status.Message = []batch.ContainerStatus{}, "", "", ""
	x.d.CreatePods = append(x.d.CreatePods, newPod(job, x.plan, *r.group, r.rank, resumed))
}

// restartCounted reports whether a replica's status counts a restart of its current pod that
// has not been carried out yet: the pod is marked Deleted and its ending recorded.
func restartCounted(s batch.ReplicaStatus) bool {
	return s.Phase == batch.ReplicaDeleted && s.UID != "" && s.LastTermination != nil && s.LastTermination.UID == s.UID
}

// takeBackRestart undoes the count of a restart that will not happen because the job ended
// first, so that a replica's restart count stays the number of pods it had, minus one. It
// is reported as its pod ended.
func takeBackRestart(r *replica) {
	s := &r.status
	s.RestartCount--
	if r.pod != nil {
		if r.pod.DeletionTimestamp == nil {
			s.Phase = replicaPhase(r.pod)
		}
	} else if t := s.LastTermination; t != nil {
		s.Phase, s.Node, s.Reason, s.Message, s.Containers = t.Phase, t.Node, t.Reason, t.Message, t.Containers
	}
	s.LastTermination = nil
}

// endTime is when a pod's backoff starts: when it ended. A container's finishedAt is
// truncated to the second, so the pod ended within the second that follows it; the
// controller's own sighting of the end, when earlier than that, is closer and never before
// the end. With neither, now.
func (x *decider) endTime(pod *corev1.Pod) time.Time {
	end := x.now
	if f := finishedAt(pod); !f.IsZero() {
		end = f.Add(time.Second)
	}
	if seen, ok := x.endSeen[pod.UID]; ok && seen.Before(end) {
		end = seen
	}
	return end
}

func podEnded(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
}

// fromPod reports a replica's pod in its status.
func fromPod(s *batch.ReplicaStatus, pod *corev1.Pod) {
	s.UID, s.Phase, s.Containers = pod.UID, replicaPhase(pod), containerStatuses(pod)
	s.Node, s.Reason, s.Message = pod.Spec.NodeName, pod.Status.Reason, pod.Status.Message
}

// termination records how a pod ended.
func termination(pod *corev1.Pod) *batch.ReplicaTermination {
	return &batch.ReplicaTermination{UID: pod.UID, Phase: replicaPhase(pod), Node: pod.Spec.NodeName,
		Reason: pod.Status.Reason, Message: pod.Status.Message, Containers: containerStatuses(pod)}
}

// mayRestart reports whether a replica whose pod ended, as its status reports it, is to be
// restarted: the job goes on, its policy asks for it, and restarts are left.
func (x *decider) mayRestart(g *Group, s batch.ReplicaStatus) bool {
	return !x.finished && !x.paused && wantsRestart(*g, s) && restartsLeft(*g, x.plan, s.RestartCount, x.totalRestarts)
}

func wantsRestart(g Group, s batch.ReplicaStatus) bool {
	failed := s.Phase == batch.ReplicaFailed
	switch g.Restart {
	case batch.RestartAlways:
		return true
	case batch.RestartOnFailure:
		return failed
	case batch.RestartExitCode:
		return failed && retryableExitCodes[statusExitCode(s)]
	default:
		return false
	}
}

// statusExitCode is the first non-zero exit code of a replica's containers, or 0.
func statusExitCode(s batch.ReplicaStatus) int32 {
	for _, c := range s.Containers {
		if c.ExitCode != nil && *c.ExitCode != 0 {
			return *c.ExitCode
		}
	}
	return 0
}

func restartsLeft(g Group, plan *Plan, replicaRestarts, totalRestarts int32) bool {
	if g.Limit != nil && replicaRestarts >= *g.Limit {
		return false
	}
	return plan.BackoffLimit == nil || totalRestarts < *plan.BackoffLimit
}

// cleanUp returns the pods the plan's clean-up policy deletes once the job has ended, leaving
// out those already being deleted.
func cleanUp(plan *Plan, pods, deleting []*corev1.Pod) []*corev1.Pod {
	if plan.CleanUp == batch.CleanUpNone {
		return nil
	}
	var out []*corev1.Pod
	for _, p := range unlisted(live(pods), deleting) {
		if plan.CleanUpTypes != nil && !contains(plan.CleanUpTypes, p.Labels[batch.LabelReplicaType]) {
			continue
		}
		ended := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		if plan.CleanUp == batch.CleanUpAll || !ended {
			out = append(out, p)
		}
	}
	return out
}

// servicePlan returns the services to create and delete for a running job.
func servicePlan(job Job, plan *Plan, desiredPods map[string]bool, services []*corev1.Service) (create, remove []*corev1.Service) {
	have := map[string]bool{}
	for _, s := range services {
		if s.DeletionTimestamp != nil {
			have[s.Name] = true // wait for it to go before creating it again
			continue
		}
		if len(plan.ServicePorts) == 0 || !desiredPods[s.Name] {
			remove = append(remove, s)
			continue
		}
		have[s.Name] = true
	}
	if len(plan.ServicePorts) == 0 {
		return nil, remove
	}
	for gi := range plan.Groups {
		g := &plan.Groups[gi]
		for rank := range g.Replicas {
			if name := g.podName(job.GetName(), rank); !have[name] {
				create = append(create, newService(job, plan, g, rank))
			}
		}
	}
	return create, remove
}

func live[T interface{ GetDeletionTimestamp() *metav1.Time }](objs []T) []T {
	var out []T
	for _, o := range objs {
		if o.GetDeletionTimestamp() == nil {
			out = append(out, o)
		}
	}
	return out
}

// unlisted returns the pods of pods that are not in listed.
func unlisted(pods, listed []*corev1.Pod) []*corev1.Pod {
	skip := map[string]bool{}
	for _, p := range listed {
		skip[p.Name] = true
	}
	var out []*corev1.Pod
	for _, p := range pods {
		if !skip[p.Name] {
			out = append(out, p)
		}
	}
	return out
}

func replicaPhase(pod *corev1.Pod) batch.ReplicaPhase {
	switch pod.Status.Phase {
	case corev1.PodPending, "":
		return batch.ReplicaPending
	case corev1.PodRunning:
		return batch.ReplicaRunning
	case corev1.PodSucceeded:
		return batch.ReplicaSucceeded
	case corev1.PodFailed:
		return batch.ReplicaFailed
	default:
		return batch.ReplicaUnknown
	}
}

func containerStatuses(pod *corev1.Pod) []batch.ContainerStatus {
	out := make([]batch.ContainerStatus, 0, len(pod.Status.ContainerStatuses))
	for _, cs := range pod.Status.ContainerStatuses {
		s := batch.ContainerStatus{Name: cs.Name}
		switch {
		case cs.State.Terminated != nil:
			code := cs.State.Terminated.ExitCode
			s.State, s.ExitCode, s.Reason = batch.ContainerTerminated, &code, cs.State.Terminated.Reason
		case cs.State.Running != nil:
			s.State = batch.ContainerRunning
		default:
			s.State = batch.ContainerWaiting
			if w := cs.State.Waiting; w != nil {
				s.Reason = w.Reason
			}
		}
		out = append(out, s)
	}
	return out
}

// exitCode is the first non-zero exit code of a pod's containers, or 0.
func exitCode(pod *corev1.Pod) int32 {
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return t.ExitCode
		}
	}
	return 0
}

// finishedAt is when a pod's last container ended, as its node reports it (zero when it does
// not say).
func finishedAt(pod *corev1.Pod) time.Time {
	var end time.Time
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.FinishedAt.After(end) {
			end = t.FinishedAt.Time
		}
	}
	return end
}

// failureText names a failed replica with the exit code status keeps for it.
func failureText(s batch.ReplicaStatus) string {
	if code := statusExitCode(s); code != 0 {
		return fmt.Sprintf("%s (exit code %d)", s.Name, code)
	}
	return s.Name
}

func minPositive(a, b time.Duration) time.Duration {
	if a <= 0 || b < a {
		return b
	}
	return a
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// FormatReplicaRule writes a rule the way the docs do: {"master": [2], "worker": [0, 1]}.
func FormatReplicaRule(rule map[string][]int32) string {
	types := make([]string, 0, len(rule))
	for t := range rule {
		types = append(types, t)
	}
	sort.Strings(types)
	parts := make([]string, 0, len(types))
	for _, t := range types {
		ranks := make([]string, 0, len(rule[t]))
		for _, r := range rule[t] {
			ranks = append(ranks, fmt.Sprint(r))
		}
		parts = append(parts, fmt.Sprintf("%q: [%s]", t, strings.Join(ranks, ", ")))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
