package kubectlt9k

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/duration"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// Why prints, in a few lines, why the job ref is where it is: its phase and the conditions
// that say why, each replica's last termination and the rule that decided it, the nodes it
// avoids, its recent Warning events, and the commands to look further.
func (o *Options) Why(ctx context.Context, ref string) error {
	j, err := find(ctx, o.Jobs, o.Namespace, ref)
	if err != nil {
		return err
	}
	events, err := o.Kube.CoreV1().Events(j.GetNamespace()).List(ctx, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.name": j.GetName(), "involvedObject.kind": j.Kind.Name, "type": corev1.EventTypeWarning}.String(),
	})
	var warnings []corev1.Event
	if err == nil {
		warnings = events.Items
	}
	explainWhy(o.Out, j, warnings, o.now())
	return nil
}

// conditionOrder is the order in which conditions are told: the ending first, then what the
// job is doing.
var conditionOrder = []batch.JobConditionType{batch.JobConditionFailed, batch.JobConditionCompleted, batch.JobConditionPaused,
	batch.JobConditionStalled, batch.JobConditionInPlaceUnavailable, batch.JobConditionRunning, batch.JobConditionReplicaFailure, batch.JobConditionInitialized}

func explainWhy(out io.Writer, j job, warnings []corev1.Event, now time.Time) {
	s := j.JobStatus()
	ref := strings.ToLower(j.Kind.Name) + "/" + j.GetName()
	phase := string(s.Phase)
	if phase == "" {
		phase = "Pending (not seen by the controller yet)"
	}
	a := s.Aggregate
	attempt := ""
	if s.Attempt > 0 {
		attempt = fmt.Sprintf(", attempt %d", s.Attempt)
	}
	fmt.Fprintf(out, "%s in namespace %s is %s: %d running, %d succeeded, %d failed replicas; %d whole-job restarts%s.\n",
		ref, j.GetNamespace(), phase, a.Running, a.Succeeded, a.Failed, s.Restarts, attempt)

	for _, t := range conditionOrder {
		for _, c := range s.Conditions {
			// What is true, and Running when it is False too: a job that waits, and why.
			if c.Type != t || c.Status != corev1.ConditionTrue && c.Type != batch.JobConditionRunning {
				continue
			}
			fmt.Fprintf(out, "  %s %s (%s, %s ago)", c.Type, c.Status, orDash(c.Reason), ago(c.LastTransitionTime, now))
			if c.Message != "" {
				fmt.Fprintf(out, ": %s", c.Message)
			}
			fmt.Fprintln(out)
		}
	}

	var ended []string
	for _, t := range s.Tasks {
		for _, r := range t.Replicas {
			if line := termination(r); line != "" {
				ended = append(ended, line)
			}
		}
	}
	if len(ended) > 0 {
		fmt.Fprintln(out, "Last terminations:")
		for _, l := range ended {
			fmt.Fprintln(out, "  "+l)
		}
	}
	if len(s.ExcludedNodes) > 0 {
		fmt.Fprintln(out, "Nodes its new pods avoid (spec.failurePolicy.avoidFailedNodes):")
		for _, n := range s.ExcludedNodes {
			fmt.Fprintf(out, "  %s: %s failed there (%s, %s ago)\n", n.Node, n.Replica, n.Reason, ago(n.Time, now))
		}
	}
	if len(warnings) > 0 {
		sort.Slice(warnings, func(a, b int) bool { return lastSeen(warnings[a]).Before(lastSeen(warnings[b])) })
		if len(warnings) > 5 {
			warnings = warnings[len(warnings)-5:]
		}
		fmt.Fprintln(out, "Recent warnings:")
		for _, e := range warnings {
			count := ""
			if e.Count > 1 {
				count = fmt.Sprintf(" (x%d)", e.Count)
			}
			fmt.Fprintf(out, "  %s ago  %s: %s%s\n", ago(metav1.NewTime(lastSeen(e)), now), e.Reason, e.Message, count)
		}
	}
	ns := j.GetNamespace()
	fmt.Fprintln(out, "Look further:")
	fmt.Fprintf(out, "  kubectl describe %s %s -n %s\n", strings.ToLower(j.Kind.Name), j.GetName(), ns)
	fmt.Fprintf(out, "  kubectl get events -n %s --field-selector involvedObject.name=%s\n", ns, j.GetName())
	fmt.Fprintf(out, "  kubectl t9k logs %s -n %s\n", ref, ns)
}

// termination says how a replica's last life ended, and who decided what came of it.
func termination(r batch.ReplicaStatus) string {
	t := r.LastTermination
	if t == nil {
		return ""
	}
	line := r.Name + ": " + orDash(string(t.Phase))
	if t.Attempt > 0 {
		line += fmt.Sprintf(" in attempt %d", t.Attempt)
	}
	if t.Disrupted {
		line += ", disrupted (no restart counted)"
	}
	for _, c := range t.Containers {
		if c.ExitCode != nil {
			line += fmt.Sprintf(", %s exited %d", c.Name, *c.ExitCode)
			if c.Reason != "" {
				line += " (" + c.Reason + ")"
			}
		}
	}
	if t.Reason != "" {
		line += "; " + t.Reason
	}
	if t.Message != "" {
		line += ": " + t.Message
	}
	if t.Node != "" {
		line += "; on " + t.Node
	}
	if t.Rule != nil {
		line += fmt.Sprintf("; failurePolicy rule %d decided %s", t.Rule.Index, t.Rule.Action)
	}
	if r.RestartCount > 0 {
		line += fmt.Sprintf("; restarted %d times", r.RestartCount)
	}
	return line
}

func lastSeen(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case e.Series != nil:
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

func ago(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
