package kubectlt9k

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// fieldManager names the plugin in the managed fields of what it changes.
const fieldManager = "kubectl-t9k"

// SetPaused pauses or resumes the job ref as docs/changing-jobs.md says
// (spec.runMode.pause.enabled), and, unless o.NoWait, waits until the job says so.
func (o *Options) SetPaused(ctx context.Context, ref string, paused bool) error {
	j, err := find(ctx, o.Jobs, o.Namespace, ref)
	if err != nil {
		return err
	}
	name := strings.ToLower(j.Kind.Name) + "/" + j.GetName()
	was := j.JobStatus().Phase
	verb, done := "paused", pauseDone
	if !paused {
		verb, done = "resumed", resumeDone
	}
	if isPaused(j) == paused {
		fmt.Fprintf(o.Out, "%s is already %s: spec.runMode.pause.enabled is %t (phase %s)\n", name, verb, paused, orDash(string(was)))
		return nil
	}
	patch := fmt.Sprintf(`{"spec":{"runMode":{"pause":{"enabled":%t}}}}`, paused)
	if err := j.Kind.client(o.Jobs.BatchV1beta1(), j.GetNamespace()).mergePatch(ctx, j.GetName(), []byte(patch)); err != nil {
		return explain(err, "patch", j.Kind, j.GetNamespace())
	}
	if o.NoWait {
		fmt.Fprintf(o.Out, "%s %s (was %s); `kubectl t9k get %s -w` follows it\n", name, verb, orDash(string(was)), name)
		return nil
	}
	now, err := o.waitShown(ctx, j, name, done, fmt.Sprintf("%s: spec.runMode.pause.enabled is %t", name, paused), "the job is not "+verb)
	if err != nil {
		return err
	}
	a := now.JobStatus().Aggregate
	fmt.Fprintf(o.Out, "%s %s: %s (was %s), %d replicas running\n", name, verb, now.JobStatus().Phase, orDash(string(was)), a.Running)
	return nil
}

// pauseDone: the job is Paused at once, and its condition says Pausing until the last pod is
// gone.
func pauseDone(j job) bool {
	s := j.JobStatus()
	for _, c := range s.Conditions {
		if c.Type == batch.JobConditionPaused {
			return s.Phase == batch.JobPaused && c.Status == corev1.ConditionTrue && c.Reason != "Pausing"
		}
	}
	return false
}

// resumeDone: the job runs again, or has ended.
func resumeDone(j job) bool {
	return slices.Contains([]batch.JobPhase{batch.JobRunning, batch.JobSucceeded, batch.JobFailed}, j.JobStatus().Phase)
}

// isPaused reads spec.runMode.pause.enabled of any kind.
func isPaused(j job) bool {
	_, mode := parts(j.jobObject)
	return *mode != nil && (*mode).Pause != nil && (*mode).Pause.Enabled
}

// Restart restarts the job ref whole, as its next attempt (docs/lifecycle.md, "Restarting on
// request"): it asks the controller to restart the job's current attempt through the
// annotation batch.tensorstack.dev/restart-attempt, and, unless o.NoWait, waits until every
// replica of the next attempt runs, or the job ends.
func (o *Options) Restart(ctx context.Context, ref string) error {
	j, err := find(ctx, o.Jobs, o.Namespace, ref)
	if err != nil {
		return err
	}
	name := strings.ToLower(j.Kind.Name) + "/" + j.GetName()
	s := j.JobStatus()
	switch {
	case hasEnded(s):
		return fmt.Errorf("%s has ended (%s): an ended job is not restarted; create it again to run it again", name, s.Phase)
	case isPaused(j):
		return fmt.Errorf("%s is paused: `kubectl t9k resume %s` makes its replicas again", name, name)
	case s.Attempt == 0:
		return fmt.Errorf("%s has no attempt yet (status.attempt): the controller has not started it; `kubectl t9k why %s` says why", name, name)
	}
	was := s.Attempt
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"%d"}}}`, batch.AnnotationRestartAttempt, was)
	if err := j.Kind.client(o.Jobs.BatchV1beta1(), j.GetNamespace()).mergePatch(ctx, j.GetName(), []byte(patch)); err != nil {
		return explain(err, "patch", j.Kind, j.GetNamespace())
	}
	if o.NoWait {
		fmt.Fprintf(o.Out, "%s: asked to restart attempt %d; `kubectl t9k get %s -w` follows it\n", name, was, name)
		return nil
	}
	now, err := o.waitShown(ctx, j, name, func(j job) bool {
		s := j.JobStatus()
		a := s.Aggregate
		return hasEnded(s) || s.Attempt > was && a.Creating+a.Pending+a.Deleted+a.Unknown == 0
	}, fmt.Sprintf("%s: asked to restart attempt %d", name, was), "its next attempt does not run")
	if err != nil {
		return err
	}
	s = now.JobStatus()
	if s.Attempt == was {
		return fmt.Errorf("%s ended (%s) before it restarted", name, s.Phase)
	}
	fmt.Fprintf(o.Out, "%s restarted: attempt %d (was %d), %s, %d replicas running\n", name, s.Attempt, was, s.Phase, s.Aggregate.Running)
	return nil
}

// hasEnded: the job succeeded or failed, as its phase or its conditions say.
func hasEnded(s *batch.JobStatus) bool {
	return s.Phase == batch.JobSucceeded || s.Phase == batch.JobFailed || s.Finished()
}

// Scale sets the size of a GenericJob's elastic type through its scale subresource, as
// kubectl scale does (docs/elastic.md), and, unless o.NoWait, waits until it runs at that size.
func (o *Options) Scale(ctx context.Context, ref string, replicas int32) error {
	j, err := find(ctx, o.Jobs, o.Namespace, ref)
	if err != nil {
		return err
	}
	name := strings.ToLower(j.Kind.Name) + "/" + j.GetName()
	g, ok := j.jobObject.(*batch.GenericJob)
	if !ok {
		return fmt.Errorf("%s cannot be resized: only a GenericJob with spec.elastic has a size to change (docs/elastic.md)", name)
	}
	if g.Spec.Elastic == nil {
		return fmt.Errorf("%s has no spec.elastic: give it one (its type, minimum and maximum) to resize it (docs/elastic.md)", name)
	}
	jobs := o.Jobs.BatchV1beta1().GenericJobs(j.GetNamespace())
	scale, err := jobs.GetScale(ctx, j.GetName(), metav1.GetOptions{})
	if err != nil {
		return explain(err, "get the scale of", j.Kind, j.GetNamespace())
	}
	was := scale.Spec.Replicas
	scale.Spec.Replicas = replicas
	if _, err := jobs.UpdateScale(ctx, j.GetName(), scale, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
		return explain(err, "scale", j.Kind, j.GetNamespace())
	}
	if o.NoWait {
		fmt.Fprintf(o.Out, "%s scaled from %d to %d\n", name, was, replicas)
		return nil
	}
	_, err = o.waitShown(ctx, j, name, func(j job) bool {
		e := j.JobStatus().Elastic
		return e != nil && e.Replicas == replicas
	}, fmt.Sprintf("%s: asked for %d replicas", name, replicas), "it does not run at that size")
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "%s scaled from %d to %d: %d running\n", name, was, replicas, replicas)
	return nil
}
