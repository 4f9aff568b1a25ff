package kueue

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kueue "github.com/t9k-jobs/t9k-jobs/pkg/apis/kueue/v1beta2"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

// state is Kueue's verdict on a job, as the Workload shows it: the job runs only while it is
// admitted.
type state struct {
	// admitted: the job may run. podSets add to its pods what the admission assigned, by
	// pod set.
	admitted bool
	podSets  map[string]podSetAdmission
	// reason and message say why the job does not run, while it is not admitted;
	// evictionReason is Kueue's own, when it evicted the job.
	reason, message, evictionReason string
}

// state reads Kueue's verdict on the job from its Workload (nil while there is none).
func (a *Admitter) state(q *request, wl *kueue.Workload) (*state, error) {
	waiting := fmt.Sprintf("Waiting for Kueue to admit the job from LocalQueue %q", q.localQueue)
	switch {
	case !a.installed():
		return &state{reason: reasonKueueNotInstalled, message: fmt.Sprintf(
			"The job asks for Kueue's LocalQueue %q, but Kueue's API (kueue.x-k8s.io/v1beta2 Workloads) is not served: install Kueue and restart the controller, or take the job out of the queue.",
			q.localQueue)}, nil
	case wl == nil || wl.DeletionTimestamp != nil:
		return &state{reason: reasonQueued, message: waiting + "."}, nil
	}
	conds := wl.Status.Conditions
	if ev := meta.FindStatusCondition(conds, kueue.WorkloadEvicted); ev != nil && ev.Status == metav1.ConditionTrue {
		reason := reasonEvicted
		if ev.Reason == "Preempted" {
			reason = reasonPreempted
		}
		message := fmt.Sprintf("Kueue evicted the job (%s): %s", ev.Reason, sentence(ev.Message))
		if by := a.preemptor(ev.Message); by != "" {
			message += " " + by + " took its place."
		}
		if deactivated(wl) {
			return &state{reason: reason, evictionReason: ev.Reason, message: message + " Its Workload " + wl.Name + " is deactivated: the job waits until it is activated again (spec.active: true)."}, nil
		}
		return &state{reason: reason, evictionReason: ev.Reason, message: message + " It waits to be admitted again."}, nil
	}
	if meta.IsStatusConditionTrue(conds, kueue.WorkloadAdmitted) && wl.Status.Admission != nil {
		podSets, err := a.admitted(wl)
		if err != nil {
			return nil, err
		}
		return &state{admitted: true, podSets: podSets}, nil
	}
	if meta.IsStatusConditionTrue(conds, kueue.WorkloadQuotaReserved) {
		return &state{reason: reasonQueued, message: waiting + ": quota is reserved; admission checks are pending."}, nil
	}
	if r := meta.FindStatusCondition(conds, kueue.WorkloadQuotaReserved); r != nil && r.Message != "" {
		return &state{reason: reasonQueued, message: waiting + ": " + sentence(r.Message)}, nil
	}
	return &state{reason: reasonQueued, message: waiting + "."}, nil
}

// preemptorUID finds the preempting job's UID in Kueue's preemption message: "Preempted to
// accommodate a workload (UID: ..., JobUID: ...) due to ...".
var preemptorUID = regexp.MustCompile(`JobUID: ([0-9A-Za-z-]+)\)`)

// preemptor names the job of the controller's kinds whose Workload preempted this one, from
// Kueue's message and the Workloads' cache ("": another kind of workload, or unknown).
func (a *Admitter) preemptor(message string) string {
	m := preemptorUID.FindStringSubmatch(message)
	if m == nil {
		return ""
	}
	objs, _ := a.workloads.GetIndexer().ByIndex(engine.IndexByJob, m[1])
	for _, obj := range objs {
		if o, ok := obj.(metav1.Object); ok {
			if ref := metav1.GetControllerOfNoCopy(o); ref != nil && string(ref.UID) == m[1] {
				return fmt.Sprintf("%s %s/%s", ref.Kind, o.GetNamespace(), ref.Name)
			}
		}
	}
	return ""
}

// sentence ends a message from elsewhere with a full stop.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || strings.HasSuffix(s, ".") {
		return s
	}
	return s + "."
}

// admitted is what an admission adds to the pods of each replica type: the node labels and
// tolerations of the flavors it assigned, and the updates of admission checks.
func (a *Admitter) admitted(wl *kueue.Workload) (map[string]podSetAdmission, error) {
	out := map[string]podSetAdmission{}
	byPodSet := map[string]*podSetAdmission{}
	for _, ps := range wl.Spec.PodSets {
		byPodSet[ps.Name] = &podSetAdmission{}
	}
	for _, assigned := range wl.Status.Admission.PodSetAssignments {
		adm := byPodSet[assigned.Name]
		if adm == nil {
			continue
		}
		if assigned.TopologyAssignment != nil {
			adm.topology = &topologyPlacement{podSet: assigned.Name, workload: wl.Name}
		}
		for _, name := range slices.Sorted(maps.Values(assigned.Flavors)) {
			flavor, err := a.flavors.Get(name)
			if err != nil {
				return nil, fmt.Errorf("reading ResourceFlavor %s of the admission: %w", name, err)
			}
			adm.NodeSelector = withAll(adm.NodeSelector, flavor.Spec.NodeLabels)
			adm.Tolerations = append(adm.Tolerations, flavor.Spec.Tolerations...)
		}
	}
	for _, check := range wl.Status.AdmissionChecks {
		for _, u := range check.PodSetUpdates {
			if adm := byPodSet[u.Name]; adm != nil {
				adm.Labels = withAll(adm.Labels, u.Labels)
				adm.Annotations = withAll(adm.Annotations, u.Annotations)
				adm.NodeSelector = withAll(adm.NodeSelector, u.NodeSelector)
				adm.Tolerations = append(adm.Tolerations, u.Tolerations...)
			}
		}
	}
	// Pod sets are named after replica types in lower case; the plan's types are found by it.
	for name, adm := range byPodSet {
		out[name] = *adm
	}
	return out, nil
}

// podSetAdmission is what an admission adds to the pods of one replica type: the node labels
// and tolerations of the flavors assigned, and what admission checks ask for.
type podSetAdmission struct {
	Labels, Annotations, NodeSelector map[string]string
	Tolerations                       []corev1.Toleration
	// topology, when the pod set was placed by topology: its pods wait for Kueue's ungater.
	topology *topologyPlacement
}

// topologyPlacement is what the ungater finds the pods of a pod set placed by topology by: the
// pod set's name and its Workload's.
type topologyPlacement struct {
	podSet, workload string
}

// applyTo adds the admission's settings to a pod; the admission's node selector wins over
// the template's for the same key. A pod of a pod set placed by topology is made gated: a
// replica made again (restarted, replaced, resumed) waits for the ungater too, which gives
// its rank the domain the current assignment has for it.
func (a podSetAdmission) applyTo(pod *corev1.Pod) {
	if a.topology != nil {
		gateForTopology(pod, a.topology.podSet, a.topology.workload)
	}
	pod.Labels = withAll(pod.Labels, a.Labels)
	pod.Annotations = withAll(pod.Annotations, a.Annotations)
	pod.Spec.NodeSelector = withAll(pod.Spec.NodeSelector, a.NodeSelector)
	for _, t := range a.Tolerations {
		if !slices.ContainsFunc(pod.Spec.Tolerations, func(have corev1.Toleration) bool { return have.MatchToleration(&t) }) {
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, t)
		}
	}
}

func withAll(to, from map[string]string) map[string]string {
	if len(from) == 0 {
		return to
	}
	if to == nil {
		to = map[string]string{}
	}
	maps.Copy(to, from)
	return to
}
