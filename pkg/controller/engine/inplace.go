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
		if c.writtenInPlace(r.Pod.UID, func(w inPlaceWrite) bool { return w.label == r.Attempt }) {
			continue
		}
		meta := map[string]any{"uid": r.Pod.UID, "labels": map[string]string{batch.LabelAttempt: strconv.Itoa(int(r.Attempt))},
			"annotations": map[string]string{batch.AnnotationRestartedAt: c.now().UTC().Format(time.RFC3339)}}
		if err := c.patchPod(ctx, r.Pod, meta); err != nil {
			return err
		}
		c.noteInPlace(r.Pod.UID, func(w *inPlaceWrite) { w.label = r.Attempt })
		restarted = append(restarted, r.Pod.Name)
	}
	for _, r := range d.ReleasePods {
		if c.writtenInPlace(r.Pod.UID, func(w inPlaceWrite) bool { return w.released == r.Attempt }) {
			continue
		}
		meta := map[string]any{"uid": r.Pod.UID, "annotations": map[string]string{
			batch.AnnotationReleasedAttempt: strconv.Itoa(int(r.Attempt)),
			batch.AnnotationAgentRestarts:   strconv.Itoa(int(r.AgentRestarts)),
		}}
		if err := c.patchPod(ctx, r.Pod, meta); err != nil {
			return err
		}
		c.noteInPlace(r.Pod.UID, func(w *inPlaceWrite) { w.released = r.Attempt })
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

// inPlaceWrite is what the controller last wrote to a pod that restarts in place: the attempt
// of its label, the attempt released, and when. A sync on a cache that has not shown the
// write yet would ask for it again; within inPlaceWriteTTL it is not sent twice (nor its
// event told twice). Past it the write goes again: idempotent, should the first have been
// lost with its pod's replacement.
type inPlaceWrite struct {
	label, released int32
	at              time.Time
}

const inPlaceWriteTTL = 30 * time.Second

// writtenInPlace reports whether the pod was written what same checks, within the TTL.
func (c *Controller) writtenInPlace(uid types.UID, same func(inPlaceWrite) bool) bool {
	v, ok := c.inPlaceWritten.Load(uid)
	return ok && same(v.(inPlaceWrite)) && c.now().Sub(v.(inPlaceWrite).at) < inPlaceWriteTTL
}

// noteInPlace records a write to a pod that restarts in place.
func (c *Controller) noteInPlace(uid types.UID, set func(*inPlaceWrite)) {
	w := inPlaceWrite{}
	if v, ok := c.inPlaceWritten.Load(uid); ok {
		w = v.(inPlaceWrite)
	}
	set(&w)
	w.at = c.now()
	c.inPlaceWritten.Store(uid, w)
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
