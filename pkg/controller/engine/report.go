package engine

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision"
)

// What the admitters are told of a sync once it is carried out (Admitter.Decided), or of a
// job that ended outside a decision (Admitter.Ended).

// Report is what a sync did to a job, as an admitter needs to know it.
type Report struct {
	// Decision is the sync's decision, carried out; when the job ended outside a decision it
	// holds only the job's status.
	Decision *Decision
	Children Children
	// WasWaiting is the reason of the job's Running condition before the sync: an admitter
	// tells the start of a wait from its continuation by it.
	WasWaiting string
	// Ready: every replica has a pod that is Ready, or has succeeded; of a job another
	// controller runs (Elsewhere), its status shows every replica running or succeeded.
	Ready bool
	// Running: a pod of the job may still run (one being deleted runs until it is gone).
	Running bool
	// KeptRunning names the pods of an ended job that still run and that the decision does
	// not delete: those its clean-up policy keeps.
	KeptRunning []string
	// Now is the sync's time.
	Now time.Time
	// Elsewhere: another controller runs the job (spec.managedBy) and reports its status;
	// this one made no pod, and its decision wrote nothing but the admitters' children.
	Elsewhere bool
}

// report is what a decision did to the job, for the admitters.
func (c *Controller) report(d *Decision, children Children, wasWaiting string) Report {
	return Report{Decision: d, Children: children, WasWaiting: wasWaiting, Now: c.now(),
		Ready: everyReplicaReady(d.Status, children.Pods), Running: AnyRunning(children.Pods), KeptRunning: keptRunning(d, children.Pods)}
}

// everyReplicaReady reports whether every replica of a status has a pod that is ready, or has
// succeeded (Kueue's waitForPodsReady waits for that).
func everyReplicaReady(s *batch.JobStatus, pods []*corev1.Pod) bool {
	total, ready := 0, 0
	for _, t := range s.Tasks {
		total += len(t.Replicas)
	}
	for _, p := range pods {
		if p.DeletionTimestamp == nil && (decision.PodReady(p) || p.Status.Phase == corev1.PodSucceeded) {
			ready++
		}
	}
	return total > 0 && ready >= total
}

// AnyRunning reports whether a pod may still run: one not yet gone that has not ended (one
// being deleted runs until it is gone).
func AnyRunning(pods []*corev1.Pod) bool {
	return slices.ContainsFunc(pods, func(p *corev1.Pod) bool { return !PodEnded(p) })
}

// keptRunning names the pods of an ended job that still run and that its decision does not
// delete: those its clean-up policy keeps.
func keptRunning(d *Decision, pods []*corev1.Pod) []string {
	if !d.Status.Finished() {
		return nil
	}
	var names []string
	for _, p := range decision.Unlisted(decision.Live(pods), d.DeletePods) {
		if !PodEnded(p) {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return names
}
