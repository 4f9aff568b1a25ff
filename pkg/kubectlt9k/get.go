package kubectlt9k

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// queueLabel is Kueue's label naming a job's LocalQueue (docs/queueing.md).
const queueLabel = "kueue.x-k8s.io/queue-name"

// row is one job as `kubectl t9k get` prints it.
func row(j job, now time.Time, withNamespace bool) []string {
	s := j.JobStatus()
	a := s.Aggregate
	total := a.Creating + a.Pending + a.Running + a.Succeeded + a.Failed + a.Unknown + a.Deleted
	replicas := fmt.Sprintf("%d/%d", a.Running, total)
	if s.Elastic != nil {
		replicas += fmt.Sprintf(" (elastic %d)", s.Elastic.Replicas)
	}
	phase := string(s.Phase)
	if phase == "" {
		phase = "Pending"
	}
	queue := j.GetLabels()[queueLabel]
	if queue == "" {
		queue = "-"
	}
	restarts := s.Restarts
	for _, t := range s.Tasks {
		restarts += t.RestartCount
	}
	attempt := "-"
	if s.Attempt > 0 {
		attempt = fmt.Sprint(s.Attempt)
	}
	cols := []string{strings.ToLower(j.Kind.Name), j.GetName(), phase, replicas, progress(s.Progress), fmt.Sprint(restarts), attempt, queue,
		duration.HumanDuration(now.Sub(j.GetCreationTimestamp().Time))}
	if withNamespace {
		cols = append([]string{j.GetNamespace()}, cols...)
	}
	return cols
}

// progress is a job's progress in a few characters: the percentage, else the step.
func progress(p *batch.JobProgress) string {
	switch {
	case p == nil:
		return "-"
	case p.ProgressPercentage != nil:
		return fmt.Sprintf("%d%%", *p.ProgressPercentage)
	case p.Step != nil && p.TotalSteps != nil:
		return fmt.Sprintf("step %d/%d", *p.Step, *p.TotalSteps)
	case p.Step != nil:
		return fmt.Sprintf("step %d", *p.Step)
	}
	return "-"
}

var header = []string{"KIND", "NAME", "PHASE", "RUNNING", "PROGRESS", "RESTARTS", "ATTEMPT", "QUEUE", "AGE"}

// printTable prints jobs under the header; RUNNING is running replicas of all of them,
// RESTARTS the job's whole-job restarts plus its replicas' own, ATTEMPT the job's life
// (status.attempt; "-" before its first decision).
func printTable(out io.Writer, jobs []job, now time.Time, withNamespace, withHeader bool) error {
	w := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	if withHeader {
		h := header
		if withNamespace {
			h = append([]string{"NAMESPACE"}, h...)
		}
		fmt.Fprintln(w, strings.Join(h, "\t"))
	}
	for _, j := range jobs {
		fmt.Fprintln(w, strings.Join(row(j, now, withNamespace), "\t"))
	}
	return w.Flush()
}

// Get prints the jobs of every kind in namespace ns ("" for all), or the jobs that refs
// name, and with watch, a line for each change after that until ctx ends.
func (o *Options) Get(ctx context.Context, refs []string, watch bool) error {
	var jobs []job
	if len(refs) == 0 {
		var err error
		if jobs, err = list(ctx, o.Jobs, o.Namespace, kinds); err != nil {
			return err
		}
	} else {
		for _, ref := range refs {
			j, err := find(ctx, o.Jobs, o.Namespace, ref)
			if err != nil {
				return err
			}
			jobs = append(jobs, j)
		}
	}
	withNamespace := o.Namespace == ""
	if len(jobs) == 0 && !watch {
		where := "namespace " + o.Namespace
		if withNamespace {
			where = "any namespace"
		}
		fmt.Fprintf(o.ErrOut, "No jobs found in %s.\n", where)
		return nil
	}
	if err := printTable(o.Out, jobs, o.now(), withNamespace, true); err != nil {
		return err
	}
	if !watch {
		return nil
	}
	return o.watch(ctx, jobs, refs, func(j job) error { return printTable(o.Out, []job{j}, o.now(), withNamespace, false) })
}
