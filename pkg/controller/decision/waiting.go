package decision

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// Why replicas wait. A pod the scheduler cannot place, or whose container cannot start (its
// image cannot be pulled, a Secret it needs is missing), leaves a job Pending with nothing
// on the job to say why. The job's Running condition says it instead, from what the pods'
// cache keeps (CachedPod): which replicas wait, the reason, and since when, the replicas of
// one reason together. The text changes only when the reasons or the replicas do, never with
// the time that passes, so that it costs no status write of its own.

// Bounds of the summary: a job may have hundreds of replicas, and a condition's message is
// part of a status that must stay small.
const (
	// waitNames is how many replicas of one reason are named; the rest are counted.
	waitNames = 10
	// waitReasons is how many reasons are told; the replicas of the others are counted.
	waitReasons = 3
	// waitTextMax bounds what one reason quotes of the scheduler's or the kubelet's message.
	waitTextMax = 300
)

// ReplicaWait is why some replicas of a job wait: one reason, in the same words.
type ReplicaWait struct {
	// Reason is the scheduler's (Unschedulable) or the waiting container's
	// (ImagePullBackOff, CreateContainerConfigError ...).
	Reason string
	// Text is what the job says of it: the scheduler's message, or the container's reason
	// and message.
	Text string
	// Replicas are the replicas' names without the job's ("worker-0"), in the plan's order.
	Replicas []string
	// Since is when the first of them began to wait: the PodScheduled condition's
	// lastTransitionTime, or, for a container that cannot start, its pod's creation.
	Since time.Time
}

// Line is the wait as the condition's message and the event say it:
// "worker-0, worker-2: 0/4 nodes are available: 4 Insufficient cpu (since 12:03:04)".
func (w ReplicaWait) Line() string {
	return fmt.Sprintf("%s: %s (since %s)", Listed(w.Replicas, waitNames), w.Text, w.Since.UTC().Format(time.TimeOnly))
}

// startingReasons are those for which every container waits while its pod starts: no news.
var startingReasons = map[string]bool{"": true, "ContainerCreating": true, "PodInitializing": true}

// podWait says why a pending pod waits, if something holds it: the scheduler could not place
// it, or a container cannot start. A pod its scheduling gates hold is no news: it waits for
// whoever set them, as its job asked (Kueue's topology ungater gives it its node at once),
// and saying so would cost a status write per job placed by topology.
func podWait(pod *corev1.Pod) (reason, text string, since time.Time, ok bool) {
	if pod == nil || pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodPending {
		return "", "", time.Time{}, false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason != corev1.PodReasonSchedulingGated {
			reason, text = c.Reason, c.Message
			if reason == "" {
				reason = corev1.PodReasonUnschedulable
			}
			if text == "" {
				text = reason
			}
			return reason, quoted(text), c.LastTransitionTime.Time, true
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && !startingReasons[w.Reason] {
			text = w.Reason
			if w.Message != "" {
				text += ": " + w.Message
			}
			return w.Reason, quoted(text), pod.CreationTimestamp.Time, true
		}
	}
	return "", "", time.Time{}, false
}

// gated reports whether scheduling gates hold a pod that has not ended: the scheduler says
// so in its PodScheduled condition (which the pod cache keeps).
func gated(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodPending {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonSchedulingGated {
			return true
		}
	}
	return false
}

// quoted is another component's message as a part of ours: one line, no closing full stop,
// at most waitTextMax bytes.
func quoted(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > waitTextMax {
		cut := waitTextMax
		for cut > 0 && !isRuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return strings.TrimSuffix(s, ".")
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// waitsOf groups the replicas that wait by reason and text, in the order of their first
// replica.
func waitsOf(job string, all []*replica) []ReplicaWait {
	var waits []ReplicaWait
	index := map[string]int{}
	for _, r := range all {
		reason, text, since, ok := podWait(r.pod)
		if !ok {
			continue
		}
		name := strings.TrimPrefix(r.status.Name, job+"-")
		key := reason + "\x00" + text
		i, seen := index[key]
		if !seen {
			i, index[key] = len(waits), len(waits)
			waits = append(waits, ReplicaWait{Reason: reason, Text: text, Since: since})
		}
		w := &waits[i]
		w.Replicas = append(w.Replicas, name)
		if since.Before(w.Since) {
			w.Since = since
		}
	}
	return waits
}

// waitMessage is the waits as one text, the first waitReasons of them told:
// "worker-0: ... (since 12:03:04); worker-1: ImagePullBackOff: ... (since 12:03:05)".
func waitMessage(waits []ReplicaWait) string {
	lines := make([]string, 0, min(len(waits), waitReasons)+1)
	others := 0
	for i, w := range waits {
		if i < waitReasons {
			lines = append(lines, w.Line())
		} else {
			others += len(w.Replicas)
		}
	}
	if others > 0 {
		lines = append(lines, fmt.Sprintf("%d more replicas wait for other reasons", others))
	}
	return strings.Join(lines, "; ")
}

// runningWith is the Running condition's message while replicas wait, or the count alone.
func runningWith(running, total int, waits []ReplicaWait) string {
	message := fmt.Sprintf("%d of %d replicas are running.", running, total)
	if len(waits) > 0 {
		message += " " + waitMessage(waits) + "."
	}
	return message
}

// admissionWait is what an admitter's reason to wait adds: the replicas that wait for it and
// since when the job has waited (the Running condition's lastTransitionTime while it stays
// False, else now).
func admissionWait(job string, all []*replica, running batch.JobCondition, now time.Time) string {
	if len(all) == 0 {
		return ""
	}
	names := make([]string, len(all))
	for i, r := range all {
		names[i] = strings.TrimPrefix(r.status.Name, job+"-")
	}
	since := now
	if running.Status == corev1.ConditionFalse && !running.LastTransitionTime.IsZero() {
		since = running.LastTransitionTime.Time
	}
	return fmt.Sprintf(" Replicas waiting: %s (since %s).", Listed(names, waitNames), since.UTC().Format(time.TimeOnly))
}
