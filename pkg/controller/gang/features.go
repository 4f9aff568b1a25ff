package gang

import (
	"context"
	"fmt"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

// Features are the PodGroup fields behind feature gates of their own, beyond GenericWorkload
// (Kubernetes 1.37). An API server with the gate off does not refuse a PodGroup that sets
// them: it drops them silently (pkg/registry/scheduling/podgroup/strategy.go), and the
// scheduler then places a gang that was meant to stay in one rack anywhere, or pods that
// were meant to share a claim with none.
type Features struct {
	// Topology: spec.schedulingConstraints.topology, gate TopologyAwareWorkloadScheduling
	// (alpha).
	Topology bool
	// ResourceClaims: spec.resourceClaims, gate DRAWorkloadResourceClaims (beta, off by
	// default).
	ResourceClaims bool
}

// AllFeatures assumes every field is kept.
var AllFeatures = Features{Topology: true, ResourceClaims: true}

// DetectFeatures asks the API server which PodGroup fields it keeps: a server-side dry run
// (nothing is stored) of a PodGroup that sets them all, in namespace, and which of them the
// answer still has. An error is a dry run refused, which says nothing of the fields.
func DetectFeatures(ctx context.Context, client kubernetes.Interface, namespace string) (Features, error) {
	probe := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "t9k-job-controller-probe-"},
		Spec: schedulingv1beta1.PodGroupSpec{
			SchedulingPolicy:      schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 1}},
			SchedulingConstraints: &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: "batch.tensorstack.dev/probe"}}},
			ResourceClaims:        []schedulingv1beta1.PodGroupResourceClaim{{Name: "probe", ResourceClaimTemplateName: ptr.To("probe")}},
		},
	}
	got, err := client.SchedulingV1beta1().PodGroups(namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: engine.FieldManager})
	if err != nil {
		return Features{}, fmt.Errorf("a dry run of a PodGroup in namespace %s: %w", namespace, err)
	}
	return Features{
		Topology:       got.Spec.SchedulingConstraints != nil && len(got.Spec.SchedulingConstraints.Topology) > 0,
		ResourceClaims: len(got.Spec.ResourceClaims) > 0,
	}, nil
}
