package kueue

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	kueue "github.com/t9k-jobs/t9k-jobs/pkg/apis/kueue/v1beta2"
)

// Topology-aware scheduling (docs/queueing.md, "Placement by topology"). A replica type asks
// for a placement with Kueue's own annotations on its pod template, as on a batch Job; its
// pod set carries them as a topologyRequest, with the replica-index label as the pod index,
// so that Kueue gives rank r the r-th pod slot of its assignment (neighbouring ranks,
// neighbouring nodes). On a flavor with a topology and no annotation, Kueue places the pod
// set by topology all the same (its implicit TAS), by the same index. Once admitted with a
// topology assignment, a pod set's pods are made gated (kueue.x-k8s.io/topology) and marked
// as Kueue's ungater finds them; it removes the gate and adds the domain's node labels to
// the pod's nodeSelector. The controller never writes a pod after it made it, so the
// ungater's patch is nobody's to undo.

// placementAnnotations ask for where a pod set goes; a template gives at most one of them.
var placementAnnotations = []string{kueue.AnnotationRequiredTopology, kueue.AnnotationPreferredTopology, kueue.AnnotationUnconstrainedTopology}

// topologyRequest is the topology request of a replica type's pod set, from its template's
// annotations: what they ask for, and always the pod index label. An annotation Kueue would
// refuse on a batch Job is an error that names it and says what to write.
func topologyRequest(replicaType string, count int32, annotations map[string]string) (*kueue.PodSetTopologyRequest, error) {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("replica type %s: annotation %s: %s", replicaType, key, fmt.Sprintf(format, args...))
	}
	index := batch.LabelReplicaIndex
	r := &kueue.PodSetTopologyRequest{PodIndexLabel: &index}
	var asked []string
	for _, key := range placementAnnotations {
		value, ok := annotations[key]
		if !ok {
			continue
		}
		asked = append(asked, key)
		switch key {
		case kueue.AnnotationUnconstrainedTopology:
			b, err := strconv.ParseBool(value)
			if err != nil {
				return nil, bad(key, "%q is not true or false", value)
			}
			r.Unconstrained = &b
		case kueue.AnnotationRequiredTopology, kueue.AnnotationPreferredTopology:
			if value == "" || len(value) > 63 {
				return nil, bad(key, "want the node label of a level of the Topology (at most 63 characters), not %q", value)
			}
			v := value
			if key == kueue.AnnotationRequiredTopology {
				r.Required = &v
			} else {
				r.Preferred = &v
			}
		}
	}
	if len(asked) > 1 {
		return nil, fmt.Errorf("replica type %s: annotations %s: give at most one of them", replicaType, strings.Join(asked, " and "))
	}
	if name, ok := annotations[kueue.AnnotationPodSetGroupName]; ok && (r.Required != nil || r.Preferred != nil) {
		r.PodSetGroupName = &name
	}
	sliceLevel, hasLevel := annotations[kueue.AnnotationSliceRequiredTopology]
	sliceSize, hasSize := annotations[kueue.AnnotationSliceSize]
	layers, hasLayers := annotations[kueue.AnnotationSliceRequiredTopologyConstraints]
	switch {
	case hasLayers && (hasLevel || hasSize):
		return nil, bad(kueue.AnnotationSliceRequiredTopologyConstraints, "give either it or %s and %s, not both", kueue.AnnotationSliceRequiredTopology, kueue.AnnotationSliceSize)
	case hasLevel != hasSize:
		return nil, fmt.Errorf("replica type %s: annotations %s and %s go together: give both (a level and the pods of a slice)", replicaType, kueue.AnnotationSliceRequiredTopology, kueue.AnnotationSliceSize)
	case hasLevel:
		n, err := strconv.ParseInt(sliceSize, 10, 32)
		if err != nil || n < 1 || int32(n) > count {
			return nil, bad(kueue.AnnotationSliceSize, "%q: want a whole number of pods from 1 to the type's %d replicas", sliceSize, count)
		}
		size := int32(n)
		r.PodSetSliceRequiredTopology, r.PodSetSliceSize = &sliceLevel, &size
	case hasLayers:
		if err := json.Unmarshal([]byte(layers), &r.PodsetSliceRequiredTopologyConstraints); err != nil {
			return nil, bad(kueue.AnnotationSliceRequiredTopologyConstraints, `want JSON such as [{"topology": "<level>", "size": 4}]: %v`, err)
		}
		n := len(r.PodsetSliceRequiredTopologyConstraints)
		if n < 1 || n > 3 {
			return nil, bad(kueue.AnnotationSliceRequiredTopologyConstraints, "want 1 to 3 layers, not %d", n)
		}
		for _, c := range r.PodsetSliceRequiredTopologyConstraints {
			if c.Topology == "" || c.Size < 1 {
				return nil, bad(kueue.AnnotationSliceRequiredTopologyConstraints, "every layer needs a topology level and a size of at least 1")
			}
		}
	}
	return r, nil
}

// asksForTopology reports whether a template's annotations ask for a placement Kueue marks
// its pods by (required, preferred or unconstrained); a pod placed by an implicit or a
// slice-only request is marked unconstrained, as Kueue's integrations mark theirs.
func asksForTopology(annotations map[string]string) bool {
	for _, key := range placementAnnotations {
		if _, ok := annotations[key]; ok {
			return true
		}
	}
	return false
}

// gateForTopology makes a pod of a pod set placed by topology wait for Kueue's ungater, and
// marks it as the ungater finds it: its pod set, its Workload, and a topology annotation
// (Kueue counts a pod without one as using the node outside its topology).
func gateForTopology(pod *corev1.Pod, podSet, workload string) {
	pod.Labels = withAll(pod.Labels, map[string]string{kueue.LabelPodSet: podSet})
	pod.Annotations = withAll(pod.Annotations, map[string]string{kueue.AnnotationWorkload: workload})
	if !asksForTopology(pod.Annotations) {
		pod.Annotations[kueue.AnnotationUnconstrainedTopology] = "true"
	}
	for _, g := range pod.Spec.SchedulingGates {
		if g.Name == kueue.TopologySchedulingGate {
			return
		}
	}
	pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: kueue.TopologySchedulingGate})
}

// domain is one domain of a topology assignment: its node labels, and how many pods go there.
type domain struct {
	values []string
	count  int32
}

// domains decodes a topology assignment into its domains, in rank order.
func domains(ta *kueue.TopologyAssignment) []domain {
	var out []domain
	for _, s := range ta.Slices {
		for i := 0; i < int(s.DomainCount); i++ {
			d := domain{values: make([]string, len(s.ValuesPerLevel))}
			for l, v := range s.ValuesPerLevel {
				switch {
				case v.Universal != nil:
					d.values[l] = *v.Universal
				case v.Individual != nil && i < len(v.Individual.Roots):
					d.values[l] = ptr.Deref(v.Individual.Prefix, "") + v.Individual.Roots[i] + ptr.Deref(v.Individual.Suffix, "")
				}
			}
			switch {
			case s.PodCounts.Universal != nil:
				d.count = *s.PodCounts.Universal
			case i < len(s.PodCounts.Individual):
				d.count = s.PodCounts.Individual[i]
			}
			out = append(out, d)
		}
	}
	return out
}

// placement says where an assignment puts a pod set, by its lowest level, for an event:
// "kubernetes.io/hostname: node-a (2), node-b (2)"; at most a few domains, then how many
// more.
func placement(ta *kueue.TopologyAssignment) string {
	ds := domains(ta)
	if len(ds) == 0 || len(ta.Levels) == 0 {
		return ""
	}
	const shown = 4
	var parts []string
	for i, d := range ds {
		if i == shown {
			parts = append(parts, fmt.Sprintf("and %d more", len(ds)-shown))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%d)", d.values[len(d.values)-1], d.count))
	}
	return ta.Levels[len(ta.Levels)-1] + ": " + strings.Join(parts, ", ")
}
