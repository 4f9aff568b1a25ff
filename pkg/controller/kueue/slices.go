package kueue

import (
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kueue "github.com/t9k-jobs/t9k-jobs/pkg/apis/kueue/v1beta2"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

// Growing an admitted elastic job through Kueue's workload slices (docs/elastic.md, "With
// Kueue"). Kueue never changes an admitted Workload's counts upwards. A job that runs fewer
// replicas of its elastic type than spec.elastic.replicas asks for (it was admitted in part,
// it shrank and was scaled up again) asks for the larger size with a second Workload, a
// slice that replaces the one admitted: the same pod sets, the elastic one at the size
// wanted, and Kueue's annotations that make it a replacement. Kueue's scheduler charges only
// the difference, admits it when that fits (preempting as the ClusterQueue allows), and then
// finishes the old slice (WorkloadSliceReplaced), whose quota the new one now holds. The job
// makes the new pods only once the slice is admitted (Kueue's own integrations gate pods
// they cannot hold back; this controller does not make them), and deletes the old slice
// once Kueue has finished it.
//
// A slice cannot ask for a minimum as well (Kueue's webhook refuses partial admission on an
// elastic Workload): it is admitted whole, at the size wanted, or waits; the job runs on at
// the size it holds meanwhile. A slice that Kueue evicts would be readmitted only whole, so
// once the job has handed its quota back and its pods are gone, the job asks anew with a
// Workload of its own (the chain's next name), down to its minimum.

// Kueue's annotations of a workload slice.
const (
	// AnnotationElasticJob marks a Workload as a slice of an elastic job.
	AnnotationElasticJob = "kueue.x-k8s.io/elastic-job"
	// AnnotationSliceReplacementFor names, as namespace/name, the slice a new one replaces.
	AnnotationSliceReplacementFor = "kueue.x-k8s.io/workload-slice-replacement-for"
	// AnnotationSliceName is the name of the chain's first slice.
	AnnotationSliceName = "kueue.x-k8s.io/workload-slice-name"
	// workloadSliceReplaced is the reason Kueue gives a slice it finished for its replacement.
	workloadSliceReplaced = "WorkloadSliceReplaced"
)

// chain is a job's Workloads as slices of one request: the first is named WorkloadName, each
// later one <WorkloadName>-<n>, n counting up from 2.
type chain struct {
	// current holds the job's admission, or asks for it (nil: the job has no Workload).
	current *kueue.Workload
	// growing asks for a larger size than current holds, as its replacement, and is not
	// admitted yet (nil: none).
	growing *kueue.Workload
	// replaced were admitted and have been replaced by current; Kueue has not finished them
	// yet, and they are kept until it has.
	replaced []*kueue.Workload
	// next is the number of the next slice; base, the first slice's name.
	next int
	base string
}

// chainOf sorts the job's Workloads into its chain. current is the latest admitted slice
// that holds quota and is not finished (else the latest that holds quota); without one, the
// latest slice (finished or not: an ended job keeps its own).
func chainOf(job engine.Job, objects []metav1.Object) chain {
	c := chain{base: WorkloadName(job), next: 2}
	type numbered struct {
		n  int
		wl *kueue.Workload
	}
	var all []numbered
	for _, o := range objects {
		wl, ok := o.(*kueue.Workload)
		if !ok {
			continue
		}
		n := sliceNumber(c.base, wl.Name)
		if n == 0 {
			continue
		}
		all = append(all, numbered{n, wl})
		c.next = max(c.next, n+1)
	}
	slices.SortFunc(all, func(a, b numbered) int { return a.n - b.n })
	// The latest admitted slice is current; a later one whose quota is reserved while its
	// admission checks run is not yet.
	active, admitted := -1, -1
	for i := range all {
		if holdsQuota(all[i].wl) {
			active = i
			if meta.IsStatusConditionTrue(all[i].wl.Status.Conditions, kueue.WorkloadAdmitted) {
				admitted = i
			}
		}
	}
	if admitted >= 0 {
		active = admitted
	}
	if active < 0 {
		if len(all) > 0 {
			c.current = all[len(all)-1].wl
		}
		return c
	}
	c.current = all[active].wl
	for _, s := range all[:active] {
		if holdsQuota(s.wl) {
			c.replaced = append(c.replaced, s.wl)
		}
	}
	for _, s := range all[active+1:] {
		if s.wl.Annotations[AnnotationSliceReplacementFor] == sliceKey(c.current) && s.wl.DeletionTimestamp == nil && !finished(s.wl) {
			c.growing = s.wl
		}
	}
	return c
}

// grow plans the job's slices besides its current Workload, once that is admitted: those it
// replaced, kept until Kueue has finished them, and a slice for the size of the elastic type
// the job asks for, while that is more than the current Workload holds. It returns the slice
// asked for (nil: none).
func (a *Admitter) grow(job engine.Job, plan *engine.Plan, q *request, c chain) (*growth, error) {
	for _, old := range c.replaced {
		plan.Objects = append(plan.Objects, engine.PlannedChild{Kind: WorkloadKind, Name: old.Name, Keep: true})
	}
	e := plan.Elastic
	held, ok := elasticHeld(c.current, e)
	if !ok {
		return nil, nil
	}
	var size int32
	for _, g := range plan.Groups {
		if g.Type == e.Type {
			size = g.Replicas
		}
	}
	if size <= held {
		return nil, nil
	}
	g := &growth{replaces: c.current, size: size}
	if c.growing != nil && podSetCount(c.growing, podSetName(e.Type)) == size {
		plan.Objects = append(plan.Objects, engine.PlannedChild{Kind: WorkloadKind, Name: c.growing.Name, Keep: true})
		return g, nil
	}
	obj, err := a.workloadObject(job, plan, q, nil, c.nextName(), g)
	if err != nil {
		return nil, err
	}
	plan.Objects = append(plan.Objects, obj)
	return g, nil
}

// sliceNumber is a Workload's number in the chain of base (0: not of the chain).
func sliceNumber(base, name string) int {
	if name == base {
		return 1
	}
	rest, ok := strings.CutPrefix(name, base+"-")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 2 || strconv.Itoa(n) != rest {
		return 0
	}
	return n
}

// nextName names the chain's next slice.
func (c chain) nextName() string { return c.base + "-" + strconv.Itoa(c.next) }

// name is the current Workload's name, or the first slice's when there is none.
func (c chain) name() string {
	if c.current != nil {
		return c.current.Name
	}
	return c.base
}

// holdsQuota reports whether a Workload holds quota: reserved and not finished.
func holdsQuota(wl *kueue.Workload) bool {
	return meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) && !finished(wl)
}

func finished(wl *kueue.Workload) bool {
	return meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished)
}

// replacedByKueue reports whether Kueue finished a slice for its replacement.
func replacedByKueue(wl *kueue.Workload) bool {
	c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadFinished)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == workloadSliceReplaced
}

// handedBackSlice reports whether a Workload is a slice whose admission is gone: Kueue
// evicted it and the job handed the quota back (or Kueue never admitted it and what it
// replaced is gone). It asks for the size the job had grown to, with no minimum.
func handedBackSlice(wl *kueue.Workload) bool {
	return wl.Annotations[AnnotationSliceReplacementFor] != "" && wl.DeletionTimestamp == nil &&
		!meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) && !finished(wl)
}

// sliceKey is how a replacement names the slice it replaces.
func sliceKey(wl *kueue.Workload) string { return wl.Namespace + "/" + wl.Name }

// growth is a slice the plan asks for: it replaces current with the elastic type at size.
type growth struct {
	replaces *kueue.Workload
	size     int32
}

// annotate makes a built Workload the slice: Kueue's annotations, the size wanted, no
// minimum.
func (g *growth) annotate(wl *kueue.Workload, elastic int) {
	if wl.Annotations == nil {
		wl.Annotations = map[string]string{}
	}
	first := g.replaces.Annotations[AnnotationSliceName]
	if first == "" {
		first = g.replaces.Name
	}
	wl.Annotations[AnnotationElasticJob] = "true"
	wl.Annotations[AnnotationSliceReplacementFor] = sliceKey(g.replaces)
	wl.Annotations[AnnotationSliceName] = first
	wl.Spec.PodSets[elastic].Count = g.size
	wl.Spec.PodSets[elastic].MinCount = nil
	// The job's priority as Kueue holds it now (it rewrites a Workload's when its class's
	// value changes), so that a slice competes as the job does.
	wl.Spec.Priority, wl.Spec.PriorityClassRef = g.replaces.Spec.Priority, g.replaces.Spec.PriorityClassRef
}

// podSetCount is a Workload's count of a pod set (0: none).
func podSetCount(wl *kueue.Workload, name string) int32 {
	for _, ps := range wl.Spec.PodSets {
		if ps.Name == name {
			return ps.Count
		}
	}
	return 0
}

// recordSlices says in events what became of the job's slices in this sync: one asked for
// (Growing), one that Kueue replaced and the job let go (Grown).
func (a *Admitter) recordSlices(job engine.Job, n *note, r engine.Report) {
	e := engine.ElasticOf(job.JobLifecycle())
	if e == nil {
		return
	}
	for _, o := range r.Decision.CreateObjects {
		if wl, ok := o.(*kueue.Workload); ok && n.grown != nil && wl.Annotations[AnnotationSliceReplacementFor] != "" {
			held, _ := elasticHeld(n.grown.replaces, e)
			a.config.Recorder.Eventf(job, corev1.EventTypeNormal, "Growing",
				"Asked Kueue for %s at %d replicas, with Workload %s replacing %s: the job runs %d until Kueue admits it",
				e.Type, n.grown.size, wl.Name, n.grown.replaces.Name, held)
		}
	}
	for _, o := range r.Decision.DeleteObjects {
		if wl, ok := o.(*kueue.Workload); ok && n.wl != nil && replacedByKueue(wl) {
			held, _ := elasticHeld(n.wl, e)
			a.config.Recorder.Eventf(job, corev1.EventTypeNormal, "Grown",
				"Kueue admitted Workload %s, which replaced %s: %s holds quota for %d replicas", n.wl.Name, wl.Name, e.Type, held)
		}
	}
}
