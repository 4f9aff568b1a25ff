package engine

import (
	"context"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/metrics"
	"github.com/t9k-jobs/t9k-jobs/pkg/features"
)

// apply carries out a decision: the status and the writes, in an order that survives a
// controller stopping at any point. It returns the job as it left it: with the status it
// wrote, or as it was when it wrote none (also on an error, which may follow a write).
func (c *Controller) apply(ctx context.Context, key string, job Job, d *Decision) (Job, error) {
	// A status that counts restarts or ends the job goes first, so that a restart is never
	// lost nor counted twice, and an outcome never undone, if the controller stops half-way.
	// So does one that changes the nodes new pods avoid (a pod deleted to be made again
	// without a node must not come back with it), or says what a rule decided or that the
	// job stalled or was resized: their events are told once the status that records them
	// is written (a resize is told once: the next decision finds the status at the new size).
	// A release goes after the status that says its replicas are made again: read with the
	// status before it, the released pod would be taken for the old life that is restarting.
	statusFirst := len(d.Restarted) > 0 || len(d.Disrupted) > 0 || d.JobRestart != "" || d.Outcome != nil || d.Elsewhere ||
		len(d.RuleDecisions) > 0 || d.Stalled != "" || len(d.ExcludedNodes) > 0 || len(d.DroppedNodes) > 0 || d.Resized != "" ||
		len(d.ReleasePods) > 0 || d.InPlaceFallback != ""
	if statusFirst {
		written, err := c.writeDecided(ctx, key, job, d)
		if err != nil {
			return job, err
		}
		job = written
		c.recordOutcome(job, d)
	}
	if err := c.deleteAll(ctx, key, job, d.DeletePods, d.DeleteObjects); err != nil {
		return job, err
	}
	if err := c.restartInPlace(ctx, job, d); err != nil {
		return job, err
	}
	created, err := c.createAndUpdate(ctx, key, job, d)
	switch {
	case statusFirst:
	case err != nil:
		// Show what was created; the retry creates the rest.
		if written, werr := c.writeDecided(ctx, key, job, d); werr == nil {
			job = written
		}
	case created == 0:
		if wait := c.holdStartingStatus(key, job, d); wait > 0 {
			d.RequeueAfter = decision.MinPositive(d.RequeueAfter, wait)
			return job, nil
		}
		return c.writeDecided(ctx, key, job, d)
	default:
		// The new children's events bring a sync within podBatchPeriod that reports them as
		// they are, so a status saying "Creating" would be written only to be overwritten:
		// one write per job saved.
	}
	return job, err
}

// holdStartingStatus is how long a decided status should wait before it is written (0: write now).
// With BatchedPodStatusUpdates, while a job starts (its phase Pending before and after) a
// status that changes only its replicas' progress (one scheduled, one of four running) waits
// until podBatchPeriod after the first such status was held back, and is written then with
// whatever changed meanwhile; the status that moves the phase goes at once, and with it
// whatever was held. So a starting job's burst of pod changes costs one status write, and
// Running is not delayed.
//
// While scheduling gates hold a pod of the job, and for a batch after they let it go, the
// status waits, up to gatedBatchPeriod in all: the gates' holder (Kueue's topology ungater,
// which batches its own work for a second) lets the pods go within it, and a status saying
// only that they were made would be overwritten by the one that says they run.
//
// Only a starting job is held: the status is also the controller's memory (a replica's last
// phase tells a pod deleted while it ran from one never made), and while a job starts a
// later sync decides from the unwritten status what this one did.
func (c *Controller) holdStartingStatus(key string, job Job, d *Decision) time.Duration {
	old := job.JobStatus()
	if !features.Enabled(features.BatchedPodStatusUpdates) || phaseOf(old) != batch.JobPending || phaseOf(d.Status) != batch.JobPending {
		return 0
	}
	if equality.Semantic.DeepEqual(old, d.Status) {
		c.held.Delete(key) // nothing held; the kind's own status, if it changed, goes now
		return 0
	}
	now := c.now()
	v, _ := c.held.LoadOrStore(key, &heldStatus{first: now, batch: now})
	h := v.(*heldStatus)
	if d.Gated || h.gated {
		h.batch = now // the gates held the pods until now: their batch starts again
	}
	h.gated = d.Gated
	return min(h.batch.Add(podBatchPeriod).Sub(now), h.first.Add(gatedBatchPeriod).Sub(now))
}

// heldStatus is when a starting job's status was first held back (holdStartingStatus), and when its
// current batch began: later than first while scheduling gates held its pods (gated, as of
// the last sync).
type heldStatus struct {
	first, batch time.Time
	gated        bool
}

// phaseOf is a status's phase, where a status never written counts as Pending: a job's first
// status that says it is pending is no news.
func phaseOf(s *batch.JobStatus) batch.JobPhase {
	if s.Phase == "" {
		return batch.JobPending
	}
	return s.Phase
}

// failJob fails a job that cannot run, once: its spec cannot run as written (its plan
// failed), or a child's name is held by another object. The failure is a decision like any
// other, carried out by apply: the status first, then, if it happens to a running job, its
// unfinished replicas stop, as at any failure, and its replicas' Services go. The admitters
// hear that the job ended, again on a later sync should a write fail.
func (c *Controller) failJob(ctx context.Context, key string, job Job, children Children, reason string, cause error) error {
	if !job.JobStatus().Finished() {
		failed, err := c.apply(ctx, key, job, decision.Failed(job, children, reason, cause.Error(), c.now()))
		if err != nil {
			return err
		}
		job = failed
	}
	return c.ended(ctx, job)
}

// withCreated is a job's children with those a decision created before its apply failed,
// by the UIDs the API server gave them: a failure found half-way (a name another object
// holds) stops the pods and Services made in the same sync too, not only those listed before.
func withCreated(children Children, d *Decision) Children {
	out := children
	out.Pods = slices.Clone(children.Pods)
	for _, p := range d.CreatePods {
		if p.UID != "" {
			out.Pods = append(out.Pods, p)
		}
	}
	out.Objects = slices.Clone(children.Objects)
	for _, o := range d.CreateObjects {
		if o.GetUID() != "" {
			out.Objects = append(out.Objects, o)
		}
	}
	return out
}

// writeDecided writes a decision's status and, once it is written, says the debug hint it
// is the first to carry: a status not written now is decided again, and says it then.
func (c *Controller) writeDecided(ctx context.Context, key string, job Job, d *Decision) (Job, error) {
	written, err := c.writeStatus(ctx, key, job, d.Status, d.KindStatus)
	if err != nil {
		return job, err
	}
	if d.DebugHint != "" {
		c.recorder.Event(written, corev1.EventTypeNormal, "DebugMode", d.DebugHint)
	}
	return written, nil
}

// writeStatus writes status, and the kind's own part of it, when they differ from the job's,
// and counts the phase change. It returns the job as written (job itself, untouched, when
// nothing differed).
func (c *Controller) writeStatus(ctx context.Context, key string, job Job, status *batch.JobStatus, kindStatus KindStatus) (Job, error) {
	// The copy is made only for a write (or to see whether the kind's part changes): most
	// syncs write nothing.
	var next Job
	kindChanged := false
	if kindStatus != nil {
		next = job.DeepCopyObject().(Job)
		kindChanged = kindStatus.SetOn(next)
	}
	from := job.JobStatus().Phase
	if !kindChanged && equality.Semantic.DeepEqual(job.JobStatus(), status) {
		return job, nil
	}
	if next == nil {
		next = job.DeepCopyObject().(Job)
	}
	*next.JobStatus() = *status
	written, err := c.adapter.UpdateStatus(ctx, next)
	if err != nil {
		return job, err
	}
	// What the API returns has no kind; the job's children are owned by kind.
	written.GetObjectKind().SetGroupVersionKind(job.GetObjectKind().GroupVersionKind())
	c.held.Delete(key)
	c.written.Store(key, writtenStatus{resourceVersion: written.GetResourceVersion(), at: c.now()})
	if from != status.Phase {
		fromLabel := string(from)
		if fromLabel == "" {
			fromLabel = "None"
		}
		metrics.PhaseTransitions.WithLabelValues(c.kind, fromLabel, string(status.Phase)).Inc()
		if from != "" {
			c.recorder.Eventf(written, corev1.EventTypeNormal, "PhaseChanged", "Phase changed from %s to %s", from, status.Phase)
		}
	}
	return written, nil
}

func (c *Controller) recordOutcome(job Job, d *Decision) {
	if d.Outcome != nil {
		eventType, reason := corev1.EventTypeNormal, "Succeeded"
		if !d.Outcome.Succeeded {
			eventType, reason = corev1.EventTypeWarning, "Failed"
		}
		if d.Outcome.Reason != "" {
			reason = d.Outcome.Reason
		}
		c.recorder.Event(job, eventType, reason, d.Outcome.Message)
	}
	if d.JobRestart != "" {
		eventType := corev1.EventTypeWarning
		if d.JobRestartCause == decision.RestartCauseRequest {
			eventType = corev1.EventTypeNormal // nothing went wrong: someone asked
		}
		c.recorder.Eventf(job, eventType, "RestartingJob", "Restarting every replica together as attempt %d (%s): %s.", d.Status.Attempt, d.JobRestartBy, d.JobRestart)
		metrics.JobRestarts.WithLabelValues(c.kind, d.JobRestartCause).Inc()
	}
	if d.InPlaceFallback != "" {
		c.recorder.Event(job, corev1.EventTypeWarning, "InPlaceRestartUnavailable", d.InPlaceFallback)
	}
	for _, name := range d.Restarted {
		if d.JobRestart == "" {
			c.recorder.Eventf(job, corev1.EventTypeWarning, "Restarting", "Restarting replica %s%s", name, endingText(d.Status, name))
		}
		metrics.Restarts.WithLabelValues(c.kind).Inc()
	}
	for _, rd := range d.RuleDecisions {
		eventType := corev1.EventTypeNormal
		if rd.Rule.Action == batch.FailJob {
			eventType = corev1.EventTypeWarning
		}
		c.recorder.Eventf(job, eventType, "FailurePolicyRule", "Replica %s: spec.failurePolicy.rules[%d] (%q) decides %s.", rd.Ending, rd.Rule.Index, rd.RuleName, rd.Rule.Action)
		metrics.FailurePolicyDecisions.WithLabelValues(c.kind, string(rd.Rule.Action)).Inc()
	}
	if d.Resized != "" {
		c.recorder.Event(job, corev1.EventTypeNormal, "Resized", d.Resized+".")
	}
	if d.Stalled != "" {
		c.recorder.Event(job, corev1.EventTypeWarning, "Stalled", d.Stalled)
		metrics.Stalls.WithLabelValues(c.kind).Inc()
	}
	for _, e := range d.ExcludedNodes {
		c.recorder.Eventf(job, corev1.EventTypeNormal, "NodeExcluded", "New pods avoid node %s, where %s failed (%s) (spec.failurePolicy.avoidFailedNodes).", e.Node, e.Replica, e.Reason)
	}
	for _, node := range d.DroppedNodes {
		c.recorder.Eventf(job, corev1.EventTypeWarning, "ExcludedNodeDropped", "No node fits the job's waiting pods without node %s, which it avoided since a replica failed there: the exclusion is dropped and the pods made again (spec.failurePolicy.avoidFailedNodes).", node)
	}
	for _, name := range d.Disrupted {
		c.recorder.Eventf(job, corev1.EventTypeWarning, "Disrupted", "Replacing replica %s, no restart counted: its pod was disrupted%s", name, disruptionEventText(d.Status, name))
		metrics.Disruptions.WithLabelValues(c.kind).Inc()
	}
}

// disruptionEventText says how a replica's pod was disrupted: " (EvictionByEvictionAPI:
// Eviction API: evicting) on node-1".
func disruptionEventText(s *batch.JobStatus, name string) string {
	for _, t := range s.Tasks {
		for _, r := range t.Replicas {
			if e := r.LastTermination; r.Name == name && e != nil && e.Disrupted {
				text := " (" + e.Reason
				if e.Message != "" {
					text += ": " + e.Message
				}
				text += ")"
				if e.Node != "" {
					text += " on " + e.Node
				}
				return text
			}
		}
	}
	return ""
}

// endingText says how the last pod of a replica ended, for events: ": its pod failed with exit
// code 137 (OOMKilled) on node-1".
func endingText(s *batch.JobStatus, name string) string {
	for _, t := range s.Tasks {
		for _, r := range t.Replicas {
			if r.Name != name || r.LastTermination == nil {
				continue
			}
			e := r.LastTermination
			text := ": its pod " + strings.ToLower(string(e.Phase))
			for _, cs := range e.Containers {
				if cs.ExitCode != nil && *cs.ExitCode != 0 {
					text += ExitText(*cs.ExitCode)
					if cs.Reason != "" {
						text += " (" + cs.Reason + ")"
					}
					break
				}
			}
			if e.Reason != "" {
				text += ", " + e.Reason
			}
			if e.Node != "" {
				text += " on " + e.Node
			}
			return text
		}
	}
	return ""
}
