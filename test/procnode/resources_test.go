package procnode

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// resourceFieldRef as a kubelet reads it: a limit or request of a container, divided and
// rounded up; a missing limit is the node's allocatable.
func TestResourceValue(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "a", Resources: corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi"), corev1.ResourceCPU: resource.MustParse("1500m")},
			Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("100M"), corev1.ResourceCPU: resource.MustParse("250m")}}},
		{Name: "b"},
	}}}
	a, b := &pod.Spec.Containers[0], &pod.Spec.Containers[1]
	for _, c := range []struct {
		self     *corev1.Container
		name     string
		resource string
		divisor  string
		want     string
	}{
		{a, "", "limits.memory", "", "268435456"},
		{a, "", "limits.memory", "1Mi", "256"},
		{a, "", "limits.cpu", "", "2"},
		{a, "", "limits.cpu", "1m", "1500"},
		{a, "", "requests.cpu", "1m", "250"},
		{a, "", "requests.memory", "1Mi", "96"},
		{b, "", "limits.memory", "", "137438953472"},
		{b, "", "limits.cpu", "", "32"},
		{b, "", "requests.cpu", "", "0"},
		{b, "a", "limits.memory", "1Mi", "256"},
		{nil, "a", "limits.memory", "1Gi", "1"},
	} {
		sel := &corev1.ResourceFieldSelector{ContainerName: c.name, Resource: c.resource}
		if c.divisor != "" {
			sel.Divisor = resource.MustParse(c.divisor)
		}
		got, err := resourceValue(pod, c.self, sel)
		if err != nil || got != c.want {
			t.Errorf("%s of %q (divisor %q): %q (%v), want %q", c.resource, c.name, c.divisor, got, err, c.want)
		}
	}
	for _, sel := range []*corev1.ResourceFieldSelector{{Resource: "limits.gpu"}, {Resource: "cpu"}, {ContainerName: "none", Resource: "limits.cpu"}} {
		if _, err := resourceValue(pod, a, sel); err == nil {
			t.Errorf("%+v was read", sel)
		}
	}
}
