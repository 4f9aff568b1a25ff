package gang

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

// podGroupSpec is the PodGroup the request asks for, of the gang's count pods (types):
// spec.scheduling carried over field for field, with its defaults. Without spec.scheduling
// (the annotation or the flag alone), or without its schedulingPolicy, the group is a gang
// of every member pod; docs/gang.md says why the default is not basic as on a batch Job. An
// *engine.InvalidSpecError is a spec that cannot be made: a minCount larger than the gang, a
// pod template whose claim of a shared claim's name has another source.
func (r *request) podGroupSpec(plan *engine.Plan, types map[string]bool, count int32) (schedulingv1beta1.PodGroupSpec, error) {
	spec := schedulingv1beta1.PodGroupSpec{
		SchedulingPolicy:  schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: gangFloor(plan, count)}},
		PriorityClassName: priorityClassOf(plan, types),
	}
	s := r.scheduling
	if s == nil {
		return spec, nil
	}
	if p := s.SchedulingPolicy; p != nil && p.Basic != nil {
		spec.SchedulingPolicy = schedulingv1beta1.PodGroupSchedulingPolicy{Basic: &schedulingv1beta1.BasicSchedulingPolicy{}}
	} else if p != nil && p.Gang != nil && p.Gang.MinCount != nil {
		n := *p.Gang.MinCount
		if n > count {
			return spec, &engine.InvalidSpecError{Message: fmt.Sprintf("spec.scheduling.schedulingPolicy.gang.minCount is %d, but the job's gang has %d pods (%s): "+
				"the scheduler would wait for ever for pods that are never made. Lower minCount (it may change while the job exists), or leave it out for all %d.",
				n, count, describeMembers(plan, types), count)}
		}
		spec.SchedulingPolicy.Gang.MinCount = n
	}
	if c := s.SchedulingConstraints; c != nil && len(c.Topology) > 0 {
		spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{}
		for _, t := range c.Topology {
			spec.SchedulingConstraints.Topology = append(spec.SchedulingConstraints.Topology, schedulingv1beta1.TopologyConstraint{Key: t.Key})
		}
	}
	if d := s.DisruptionMode; d != nil {
		switch {
		case d.All != nil:
			spec.DisruptionMode = &schedulingv1beta1.DisruptionMode{All: &schedulingv1beta1.AllDisruptionMode{}}
		case d.Single != nil:
			spec.DisruptionMode = &schedulingv1beta1.DisruptionMode{Single: &schedulingv1beta1.SingleDisruptionMode{}}
		}
	}
	for _, c := range s.ResourceClaims {
		spec.ResourceClaims = append(spec.ResourceClaims, schedulingv1beta1.PodGroupResourceClaim{
			Name: c.Name, ResourceClaimName: copyString(c.ResourceClaimName), ResourceClaimTemplateName: copyString(c.ResourceClaimTemplateName)})
	}
	if err := templatesAgree(plan, types, spec.ResourceClaims); err != nil {
		return spec, err
	}
	return spec, nil
}

// gangFloor is the default minCount of a gang of count pods: every pod, but an elastic type
// counts only its minReplicas (docs/elastic.md), so that the job starts with what fits and
// a resize leaves the PodGroup as it is.
func gangFloor(plan *engine.Plan, count int32) int32 {
	e := plan.Elastic
	if e == nil {
		return count
	}
	for _, g := range plan.Groups {
		if g.Type == e.Type && len(g.After) == 0 && g.Replicas > e.Min {
			count -= g.Replicas - e.Min
		}
	}
	return count
}

// describeMembers says which replicas the gang counts: "worker: 3, ps: 1", and the
// launcher left out where there is one.
func describeMembers(plan *engine.Plan, types map[string]bool) string {
	var in, out []string
	for _, g := range plan.Groups {
		switch {
		case types[g.Type]:
			in = append(in, fmt.Sprintf("%s: %d", g.Type, g.Replicas))
		case len(g.After) > 0:
			out = append(out, g.Type)
		}
	}
	s := strings.Join(in, ", ")
	if len(out) > 0 {
		s += "; " + strings.Join(out, ", ") + " made only once they are Ready, outside the gang"
	}
	return s
}

// templatesAgree fails a job whose pod template has a claim of a shared claim's name with
// another source: the pod would then use its own claim, not the PodGroup's, or the two
// entries would clash. Each member type's template of rank 0 is read, as for the priority
// class: the ranks of a type differ in their variables and env, not in their claims.
func templatesAgree(plan *engine.Plan, types map[string]bool, claims []schedulingv1beta1.PodGroupResourceClaim) error {
	if len(claims) == 0 {
		return nil
	}
	for _, g := range plan.Groups {
		if !types[g.Type] {
			continue
		}
		for _, own := range g.Template(0).Spec.ResourceClaims {
			for _, c := range claims {
				if own.Name == c.Name && !sameSource(own, c) {
					return &engine.InvalidSpecError{Message: fmt.Sprintf("The pod template of replica type %s has a resourceClaims entry %q from %s, "+
						"but spec.scheduling.resourceClaims shares a claim of that name from %s: a pod of the job's PodGroup uses the group's claim. "+
						"Remove the template's entry (the controller adds the shared one to every pod of the group), or give it another name.",
						g.Type, own.Name, source(own.ResourceClaimName, own.ResourceClaimTemplateName), source(c.ResourceClaimName, c.ResourceClaimTemplateName))}
				}
			}
		}
	}
	return nil
}

// join has a pod of the gang join its PodGroup and use the group's claims: an entry of the
// same name and source in spec.resourceClaims, which the scheduler and kube-controller-manager
// bind to the PodGroup's claim, not one of the pod's own. An entry the template has already
// (templatesAgree: of the same source) is kept.
func join(pod *corev1.Pod, name string, claims []schedulingv1beta1.PodGroupResourceClaim) {
	pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(name)}
	for _, c := range claims {
		if slices.ContainsFunc(pod.Spec.ResourceClaims, func(own corev1.PodResourceClaim) bool { return own.Name == c.Name }) {
			continue
		}
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{
			Name: c.Name, ResourceClaimName: copyString(c.ResourceClaimName), ResourceClaimTemplateName: copyString(c.ResourceClaimTemplateName)})
	}
}

func sameSource(own corev1.PodResourceClaim, c schedulingv1beta1.PodGroupResourceClaim) bool {
	return ptr.Equal(own.ResourceClaimName, c.ResourceClaimName) && ptr.Equal(own.ResourceClaimTemplateName, c.ResourceClaimTemplateName)
}

// source says where a claim comes from, as the user wrote it.
func source(claimName, templateName *string) string {
	switch {
	case claimName != nil:
		return "resourceClaimName " + *claimName
	case templateName != nil:
		return "resourceClaimTemplateName " + *templateName
	}
	return "no source"
}

func copyString(s *string) *string {
	if s == nil {
		return nil
	}
	return ptr.To(*s)
}
