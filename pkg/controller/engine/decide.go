package engine

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// Decision is what one sync does: the status to write, then the writes to send.
type Decision struct {
	Status         *batch.JobStatus
	CreatePods     []*corev1.Pod
	DeletePods     []*corev1.Pod
	CreateServices []*corev1.Service
	DeleteServices []*corev1.Service
	// Restarted names the replicas restarted by this decision.
	Restarted []string
	// RequeueAfter asks for another sync after a restart backoff (0: none).
	RequeueAfter time.Duration
	// Outcome is set when the job ends with this decision.
	Outcome *Outcome
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

// Decide compares a job's plan with its pods and services (those it owns) and decides the
// next status and writes. It is a pure function of its inputs, so that every rule has a unit
// test; the status it returns already counts the restarts it orders, which is what makes a
// restart count survive a crash between the status write and the pod deletion.
func Decide(job Job, plan *Plan, pods []*corev1.Pod, services []*corev1.Service, now time.Time) *Decision {
	old := job.JobStatus()
	d := &Decision{Status: &batch.JobStatus{ObservedGeneration: job.GetGeneration()}}
	finished := Finished(old)
	paused := plan.Paused && !finished
	resumed := !plan.Paused && wasPaused(old)

	podByName := make(map[string]*corev1.Pod, len(pods))
	for _, p := range pods {
		podByName[p.Name] = p
	}
	prevByName := map[string]batch.ReplicaStatus{}
	for _, task := range old.Tasks {
		for _, r := range task.Replicas {
			prevByName[r.Name] = r
		}
	}
	totalRestarts := int32(0)
	for _, r := range prevByName {
		totalRestarts += r.RestartCount
	}

	replicas := Replicas{}
	desired := map[string]bool{}
	var failedNames []string
	for _, g := range plan.Groups {
		task := batch.TaskStatus{Type: g.Type}
		for rank := range g.Replicas {
			name := ChildName(job.GetName(), g.Type, rank)
			desired[name] = true
			prev := prevByName[name]
			r := batch.ReplicaStatus{Name: name, UID: prev.UID, Phase: prev.Phase, RestartCount: prev.RestartCount, Containers: []batch.ContainerStatus{}}
			view := Replica{Phase: prev.Phase}
			pod := podByName[name]
			switch {
			case pod != nil && pod.DeletionTimestamp != nil:
				r.UID, r.Phase = pod.UID, batch.ReplicaDeleted
				r.Containers = containerStatuses(pod)
				view = Replica{Phase: batch.ReplicaDeleted}
			case pod != nil:
				r.UID, r.Phase, r.Containers = pod.UID, replicaPhase(pod), containerStatuses(pod)
				view = Replica{Phase: r.Phase, ExitCode: exitCode(pod)}
				ended := pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
				if !ended {
					break
				}
				if prev.UID == pod.UID && prev.Phase == batch.ReplicaDeleted {
					// This pod's restart is counted already (an earlier sync wrote it, then
					// stopped before or while deleting): finish the restart, do not count again.
					r.Phase = batch.ReplicaDeleted
					view.Phase = batch.ReplicaDeleted
					if !finished && !paused {
						d.DeletePods = append(d.DeletePods, pod)
					}
					break
				}
				if finished || paused || !wantsRestart(g, pod) || !restartsLeft(g, plan, r.RestartCount, totalRestarts) {
					view.Final = true
					break
				}
				if wait := restartBackoff(r.RestartCount) - now.Sub(endTime(pod, now)); wait > 0 {
					d.RequeueAfter = minPositive(d.RequeueAfter, wait)
					break
				}
				r.RestartCount++
				totalRestarts++
				r.Phase, view.Phase = batch.ReplicaDeleted, batch.ReplicaDeleted
				d.DeletePods = append(d.DeletePods, pod)
				d.Restarted = append(d.Restarted, name)
			default: // no pod
				switch {
				case prev.Phase == batch.ReplicaSucceeded || prev.Phase == batch.ReplicaFailed:
					// It ended for good and its pod was cleaned up (or deleted by hand):
					// keep what it did.
					view.Final = true
				case finished || paused:
					r.Phase, view.Phase = batch.ReplicaDeleted, batch.ReplicaDeleted
				default:
					r.UID, r.Phase = "", batch.ReplicaCreating
					view.Phase = batch.ReplicaCreating
					d.CreatePods = append(d.CreatePods, newPod(job, plan, g, rank, resumed))
				}
			}
			if r.Phase == batch.ReplicaFailed || (pod != nil && pod.Status.Phase == corev1.PodFailed) {
				failedNames = append(failedNames, failureText(name, pod))
			}
			task.RestartCount += r.RestartCount
			task.Replicas = append(task.Replicas, r)
			replicas[g.Type] = append(replicas[g.Type], view)
		}
		d.Status.Tasks = append(d.Status.Tasks, task)
	}

	// Pods the plan no longer has (scaled down, or a type removed) go.
	for _, p := range pods {
		if !desired[p.Name] && p.DeletionTimestamp == nil {
			d.DeletePods = append(d.DeletePods, p)
		}
	}

	outcome := (*Outcome)(nil)
	if !finished && !paused && !plan.Debug && plan.Outcome != nil {
		outcome = plan.Outcome(replicas)
		if outcome != nil {
			// The job ends now: replicas missing this very sync are not created any more.
			d.Outcome, d.CreatePods = outcome, nil
			finished = true
		}
	}

	switch {
	case finished:
		d.DeletePods = append(d.DeletePods, cleanUp(plan, pods, d.DeletePods)...)
		if plan.CleanUp != batch.CleanUpNone {
			d.DeleteServices = append(d.DeleteServices, live(services)...)
		}
	case paused:
		d.DeletePods = append(d.DeletePods, unlisted(live(pods), d.DeletePods)...)
		d.DeleteServices = append(d.DeleteServices, live(services)...)
	default:
		d.CreateServices, d.DeleteServices = servicePlan(job, plan, desired, services)
	}

	setPhaseAndConditions(d.Status, old, plan, outcome, paused, resumed, failedNames, pods, now)
	d.Status.Aggregate = aggregate(d.Status.Tasks)
	return d
}

func wantsRestart(g Group, pod *corev1.Pod) bool {
	switch g.Restart {
	case batch.RestartAlways:
		return true
	case batch.RestartOnFailure:
		return pod.Status.Phase == corev1.PodFailed
	case batch.RestartExitCode:
		return pod.Status.Phase == corev1.PodFailed && retryableExitCodes[exitCode(pod)]
	default:
		return false
	}
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
	for _, g := range plan.Groups {
		for rank := range g.Replicas {
			if name := ChildName(job.GetName(), g.Type, rank); !have[name] {
				create = append(create, newService(job, plan, g.Type, rank))
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
			s.State, s.ExitCode = batch.ContainerTerminated, &code
		case cs.State.Running != nil:
			s.State = batch.ContainerRunning
		default:
			s.State = batch.ContainerWaiting
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

// endTime is when a pod's last container ended (now when it does not say).
func endTime(pod *corev1.Pod, now time.Time) time.Time {
	var end time.Time
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.FinishedAt.After(end) {
			end = t.FinishedAt.Time
		}
	}
	if end.IsZero() {
		return now
	}
	return end
}

func failureText(name string, pod *corev1.Pod) string {
	if pod != nil {
		if code := exitCode(pod); code != 0 {
			return fmt.Sprintf("%s (exit code %d)", name, code)
		}
	}
	return name
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
