package kueue

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	kueue "github.com/t9k-jobs/t9k-jobs/pkg/apis/kueue/v1beta2"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

// Prebuilt Workloads (docs/queueing.md, "Across clusters with MultiKueue"). On a worker
// cluster, MultiKueue first makes the Workload of a job it dispatches there (the manager's
// Workload, its spec unchanged: Kueue there queues and admits it), then the job, annotated
// (or labelled) with that Workload's name. The job runs under that Workload, as Kueue's own
// integrations run theirs: the controller adopts it (a controller reference to the job, the
// job's UID in its labels), never changes its spec (MultiKueue would take that for a
// different job and remove it), and never makes one of its own. The rest is as for any queued job: its pods
// wait for the admission, and the Workload hears of PodsReady, an eviction, the end.

// prebuiltWorkload is the name of the Workload made for the job beforehand ("": none), as
// Kueue reads it: the annotation, where MultiKueue writes it since Kueue v0.18 (feature gate
// WorkloadIdentifierAnnotations, on by default), else the label, where it wrote it before.
func prebuiltWorkload(job engine.Job) string {
	if name := job.GetAnnotations()[kueue.AnnotationPrebuiltWorkload]; name != "" {
		return name
	}
	return job.GetLabels()[kueue.LabelPrebuiltWorkload]
}

// admitPrebuilt is Admit for a job whose Workload is prebuilt (name; wl, the job's child of
// that name, nil until adopted). A Workload of the job's own, from before the label, is left
// alone.
func (a *Admitter) admitPrebuilt(job engine.Job, plan *engine.Plan, q *request, name string, wl *kueue.Workload) (*engine.Verdict, error) {
	if wl == nil {
		if !a.installed() {
			s, err := a.state(q, nil)
			if err != nil {
				return nil, err
			}
			return verdict(nil, s, plan.Elastic), nil
		}
		obj, found, err := a.workloads.GetIndexer().GetByKey(job.GetNamespace() + "/" + name)
		if err != nil {
			return nil, err
		}
		s := &state{reason: reasonQueued, message: fmt.Sprintf("Waiting for Workload %q, which the job's %s names: MultiKueue makes it before the job.", name, kueue.LabelPrebuiltWorkload)}
		if !found {
			return verdict(nil, s, plan.Elastic), nil
		}
		prebuilt := obj.(*kueue.Workload)
		if ref := metav1.GetControllerOfNoCopy(prebuilt); ref != nil && ref.UID != job.GetUID() {
			s.message = fmt.Sprintf("Workload %q, which the job's %s names, belongs to %s %s: it is not this job's.", name, kueue.LabelPrebuiltWorkload, ref.Kind, ref.Name)
			return verdict(nil, s, plan.Elastic), nil
		}
		s.message = fmt.Sprintf("Adopting Workload %q, which MultiKueue made for the job.", name)
		v := verdict(nil, s, plan.Elastic)
		v.Note.(*note).adopt = prebuilt
		return v, nil
	}
	// Kept as it is while the job lives: its spec is the manager's.
	plan.Objects = append(plan.Objects, engine.PlannedChild{Kind: WorkloadKind, Name: wl.Name, Keep: true})
	if job.JobStatus().Finished() {
		return &engine.Verdict{Admitted: true, Note: &note{wl: wl}}, nil
	}
	s, err := a.state(q, wl)
	if err != nil {
		return nil, err
	}
	return verdict(wl, s, plan.Elastic), nil
}

// adopt makes a prebuilt Workload the job's: a controller reference, and the labels by which
// the controller (and Kueue) find a job's Workload. Only its metadata is written.
func (a *Admitter) adopt(ctx context.Context, job engine.Job, wl *kueue.Workload) error {
	gvk := job.GetObjectKind().GroupVersionKind()
	ref := metav1.NewControllerRef(job, gvk)
	fields := map[string]any{"metadata": map[string]any{
		"ownerReferences": []metav1.OwnerReference{*ref},
		"labels": map[string]string{
			batch.LabelControllerUID: string(job.GetUID()),
			batch.LabelJobName:       job.GetName(),
			kueue.LabelJobUID:        string(job.GetUID()),
		},
	}}
	if err := a.patchWorkload(ctx, wl, fields); err != nil {
		return fmt.Errorf("adopting Workload %s: %w", wl.Name, err)
	}
	a.config.Recorder.Eventf(job, corev1.EventTypeNormal, "Adopted", "Adopted Workload %s, which MultiKueue made for the job", wl.Name)
	return nil
}

// workloadNamed is the job's Workload of the name among its children (nil: none).
func workloadNamed(objects []metav1.Object, name string) *kueue.Workload {
	for _, o := range objects {
		if wl, ok := o.(*kueue.Workload); ok && wl.Name == name {
			return wl
		}
	}
	return nil
}

// jobWorkload is the Workload that holds or asks for the job's admission: its prebuilt one,
// or the current one of its chain (nil: none).
func jobWorkload(job engine.Job, objects []metav1.Object) *kueue.Workload {
	if name := prebuiltWorkload(job); name != "" {
		return workloadNamed(objects, name)
	}
	return chainOf(job, objects).current
}
