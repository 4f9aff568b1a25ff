package procnode

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// nodeCapacity is what the node says it has (its Node's capacity and allocatable): a limit a
// container does not set is this, for the downward API, as a kubelet reads it.
var nodeCapacity = corev1.ResourceList{
	corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("128Gi"),
	corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
	corev1.ResourcePods:             resource.MustParse("110"), "nvidia.com/gpu": resource.MustParse("0"),
}

// resourceValue is the value of a resourceFieldRef (env or downwardAPI volume) as a kubelet
// gives it: limits.* and requests.* of cpu, memory, ephemeral-storage and hugepages-*, of the
// named container (or self, for env), divided by the divisor (1 when unset) and rounded up; a
// limit the container does not set is the node's allocatable.
func resourceValue(pod *corev1.Pod, self *corev1.Container, sel *corev1.ResourceFieldSelector) (string, error) {
	c := self
	if sel.ContainerName != "" || c == nil {
		c = nil
		for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
			for i := range list {
				if list[i].Name == sel.ContainerName {
					c = &list[i]
				}
			}
		}
		if c == nil {
			return "", fmt.Errorf("resourceFieldRef: no container %q", sel.ContainerName)
		}
	}
	kind, name, ok := strings.Cut(sel.Resource, ".")
	if !ok || kind != "limits" && kind != "requests" {
		return "", fmt.Errorf("unsupported container resource: %s", sel.Resource)
	}
	rn := corev1.ResourceName(name)
	if rn != corev1.ResourceCPU && rn != corev1.ResourceMemory && rn != corev1.ResourceEphemeralStorage && !strings.HasPrefix(name, corev1.ResourceHugePagesPrefix) {
		return "", fmt.Errorf("unsupported container resource: %s", sel.Resource)
	}
	list := c.Resources.Requests
	if kind == "limits" {
		list = c.Resources.Limits
	}
	q, ok := list[rn]
	if !ok && kind == "limits" {
		q = nodeCapacity[rn]
	}
	divisor := sel.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if rn == corev1.ResourceCPU {
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
}
