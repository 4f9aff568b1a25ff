package progress

import (
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// received is a pod's last report as this controller received it.
type received struct {
	Pod    string
	UID    types.UID
	At     time.Time
	Report *Report
}

// line is the pod's line in status.progress.replicas.
func (r *received) line() batch.ReplicaProgress {
	return batch.ReplicaProgress{UID: r.UID, ProgressPercentage: r.Report.Percentage, ReportTime: metav1.NewTime(r.At)}
}

// merged is a job's progress made from its status and the reports this controller holds.
type merged struct {
	// Progress is the new status.progress.
	Progress *batch.JobProgress
	// Top tells whether Progress's job-level fields are to be written: they are the slowest
	// replica's report, which this controller may not hold (another replica of the
	// controller received it, and writes them); then the status keeps those it has.
	Top bool
}

// merge makes a job's progress from current (its status.progress, nil when none) and held,
// the last report of each pod this controller received, by the pod's UID. member tells
// whether a pod, by UID, is still the job's: the line of a pod that is no longer the job's
// (gone, or replaced by a new pod of its replica) leaves the list. A held report older than
// the status's line of its pod (another controller replica received a newer one) does not
// replace it.
//
// The job-level fields are the slowest replica's (docs/progress.md, "What the status
// shows"): the least percentage among the lines; where no line has one (steps without a
// total), the least step among the reports held. A synchronous job moves at its slowest
// member's pace, and a straggler is what a user looks for.
func merge(current *batch.JobProgress, held map[types.UID]*received, member func(uid types.UID) bool) merged {
	lines := map[types.UID]batch.ReplicaProgress{}
	if current != nil {
		for _, l := range current.Replicas {
			lines[l.UID] = l
		}
	}
	for uid, r := range held {
		switch l, ok := lines[uid]; {
		case !member(uid):
			continue // an earlier pod of the replica
		case ok && l.ReportTime.After(r.At):
			continue // a newer report, received by another controller replica
		}
		lines[uid] = r.line()
	}
	out := &batch.JobProgress{}
	for uid, l := range lines {
		if member(uid) {
			out.Replicas = append(out.Replicas, l)
		}
	}
	sort.Slice(out.Replicas, func(i, j int) bool { return out.Replicas[i].UID < out.Replicas[j].UID })
	// The report of a line, when this controller holds it as the line says.
	heldAs := func(l *batch.ReplicaProgress) *received {
		if r := held[l.UID]; r != nil && sameSecond(r.At, l.ReportTime.Time) {
			return r
		}
		return nil
	}
	var slowest *received
	if l := slowestLine(out.Replicas, func(l *batch.ReplicaProgress) bool { return heldAs(l) != nil }); l != nil {
		if slowest = heldAs(l); slowest == nil {
			return merged{Progress: out} // another controller replica holds it
		}
	} else {
		for i := range out.Replicas {
			if r := heldAs(&out.Replicas[i]); r != nil && slower(r, slowest) {
				slowest = r
			}
		}
	}
	if slowest == nil {
		return merged{Progress: out, Top: len(out.Replicas) == 0}
	}
	rep := slowest.Report
	out.ProgressPercentage, out.EstimatedRemainingSeconds = rep.Percentage, rep.ETA
	out.Step, out.TotalSteps, out.Epoch, out.TotalEpochs = rep.Step, rep.TotalSteps, rep.Epoch, rep.TotalEpochs
	out.Metrics = rep.Metrics
	out.LastUpdatedTime = &metav1.Time{Time: rep.LastUpdated}
	out.Replica = slowest.Pod
	return merged{Progress: out, Top: true}
}

// slowestLine is the line of the least percentage (nil when no line has one); of lines
// equally slow, the first that preferred holds, else the first.
func slowestLine(lines []batch.ReplicaProgress, preferred func(*batch.ReplicaProgress) bool) *batch.ReplicaProgress {
	var slowest *batch.ReplicaProgress
	for i := range lines {
		l := &lines[i]
		switch {
		case l.ProgressPercentage == nil:
		case slowest == nil || *l.ProgressPercentage < *slowest.ProgressPercentage:
			slowest = l
		case *l.ProgressPercentage == *slowest.ProgressPercentage && !preferred(slowest) && preferred(l):
			slowest = l
		}
	}
	return slowest
}

// slower: r is behind than (nil): a lesser step, or a step where than has none; of equals,
// the later report.
func slower(r, than *received) bool {
	switch {
	case than == nil:
		return true
	case r.Report.Step != nil && than.Report.Step == nil:
		return true
	case r.Report.Step == nil && than.Report.Step != nil:
		return false
	case r.Report.Step != nil && *r.Report.Step != *than.Report.Step:
		return *r.Report.Step < *than.Report.Step
	}
	return r.At.After(than.At)
}

// sameSecond: the status keeps times to the second.
func sameSecond(a, b time.Time) bool { return a.Truncate(time.Second).Equal(b.Truncate(time.Second)) }
