package engine

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision"
)

// Restarting in place (spec.restartStrategy: InPlace; decision/inplace.go, docs/lifecycle.md
// "Restarting in place"): the engine gives the plan the agent's image and writes the attempts
// the decision orders to the pods.

// planInPlace gives a job that restarts in place the agent's image.
func (c *Controller) planInPlace(job Job, plan *Plan) {
	if job.JobLifecycle().RestartStrategy == batch.RestartInPlace {
		plan.InPlace = &decision.InPlacePlan{AgentImage: c.options.AgentImage}
	}
}

// restartInPlace writes the attempts the decision orders: the next attempt to the label of
// each pod it restarts, and the attempt released, with the agent's restart count, to each
// pod whose earlier attempt is down. Each write names the pod's UID, so that it never
// reaches another pod of the same name.
func (c *Controller) restartInPlace(ctx context.Context, job Job, d *Decision) error {
	var restarted, released []string
	for _, r := range d.RestartPods {
		meta := map[string]any{"uid": r.Pod.UID, "labels": map[string]string{batch.LabelAttempt: strconv.Itoa(int(r.Attempt))},
			"annotations": map[string]string{batch.AnnotationRestartedAt: c.now().UTC().Format(time.RFC3339)}}
		if err := c.patchPod(ctx, r.Pod, meta); err != nil {
			return err
		}
		restarted = append(restarted, r.Pod.Name)
	}
	for _, r := range d.ReleasePods {
		meta := map[string]any{"uid": r.Pod.UID, "annotations": map[string]string{
			batch.AnnotationReleasedAttempt: strconv.Itoa(int(r.Attempt)),
			batch.AnnotationAgentRestarts:   strconv.Itoa(int(r.AgentRestarts)),
		}}
		if err := c.patchPod(ctx, r.Pod, meta); err != nil {
			return err
		}
		released = append(released, r.Pod.Name)
	}
	if len(restarted) > 0 {
		c.recorder.Eventf(job, corev1.EventTypeNormal, "RestartingInPlace", "Restarting pods in place for attempt %d: %s", d.Status.Attempt, strings.Join(restarted, ", "))
	}
	if len(released) > 0 {
		c.recorder.Eventf(job, corev1.EventTypeNormal, "Released", "Every pod's attempt %d is down: pods %s run attempt %d", d.Status.Attempt-1, strings.Join(released, ", "), d.Status.Attempt)
	}
	return nil
}

// patchPod merges meta into a pod's metadata; a pod gone, or another of the same name (the
// UID differs: a conflict), needs nothing more.
func (c *Controller) patchPod(ctx context.Context, pod *corev1.Pod, meta map[string]any) error {
	body, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return err
	}
	_, err = c.clients.Kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: FieldManager})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}
