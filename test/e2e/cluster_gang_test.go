package e2e

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestLocalClusterSchedulesGangsWhole: the local control plane runs Kubernetes' own gang
// scheduling (the GenericWorkload gate, scheduling.k8s.io/v1beta1): of a PodGroup of minCount 3
// whose third pod fits no node, no pod is bound, though two would fit; once the third fits,
// all three are. Other clusters may not turn it on: the test skips there.
func TestLocalClusterSchedulesGangsWhole(t *testing.T) {
	parallel(t)
	if env.cluster == nil {
		t.Skip("gang scheduling is on in the local control plane only")
	}
	ctx := context.Background()
	ns := namespace(t)
	group := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "gang"}, Spec: schedulingv1beta1.PodGroupSpec{
		SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 3}}}}
	if _, err := env.kube.SchedulingV1beta1().PodGroups(ns).Create(ctx, group, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a PodGroup: %v", err)
	}
	pod := func(name, cpu string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
			SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: ptr.To("gang")},
			Containers: []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}}
	}
	for _, p := range []*corev1.Pod{pod("a", "1"), pod("b", "1"), pod("too-big", "100000")} {
		if _, err := env.kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	unschedulable := func(name string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			p, err := env.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
					return true, nil
				}
			}
			return false, nil
		}
	}
	// The scheduler has tried the pods that fit, and kept them back for the gang.
	for _, name := range []string{"a", "b"} {
		waitFor(t, name+" to be held back", jobTimeout, unschedulable(name))
	}
	if bound := boundPods(t, ns); len(bound) != 0 {
		t.Fatalf("pods %v were bound though their gang cannot start whole", bound)
	}
	if err := env.kube.CoreV1().Pods(ns).Delete(ctx, "too-big", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.kube.CoreV1().Pods(ns).Create(ctx, pod("c", "1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the whole gang to be bound", jobTimeout, func(context.Context) (bool, error) {
		return len(boundPods(t, ns)) == 3, nil
	})
}

// boundPods lists the pods of ns that have a node.
func boundPods(t *testing.T, ns string) []string {
	t.Helper()
	list, err := env.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var bound []string
	for _, p := range list.Items {
		if p.Spec.NodeName != "" {
			bound = append(bound, fmt.Sprintf("%s@%s", p.Name, p.Spec.NodeName))
		}
	}
	return bound
}
