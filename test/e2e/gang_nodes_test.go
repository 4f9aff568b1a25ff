package e2e

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/t9k-jobs/t9k-jobs/test/cluster"
)

// gangNodeKey labels and taints the fake nodes of one gang test: only its pods, which select
// and tolerate it, go there, so what fits is what the test says.
const gangNodeKey = "test.batch.tensorstack.dev/gang-nodes"

// gangNodes are the fake nodes of 4 CPUs of one test, deleted when it ends.
type gangNodes struct {
	t     *testing.T
	group string // the label's value: the test's namespace
	names []string
}

func newGangNodes(t *testing.T, group string) *gangNodes {
	n := &gangNodes{t: t, group: group}
	t.Cleanup(func() {
		for _, name := range n.names {
			_ = env.kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})
	return n
}

// add makes one more node of 4 CPUs.
func (n *gangNodes) add() string {
	n.t.Helper()
	return n.addNode("4", nil)
}

// addNode makes one more node of cpu CPUs, with labels besides its own. The node is made with
// its capacity (a node's status may be set when it is made), which kwok keeps
// (test/cluster/kwok.yaml): cutting it down afterwards raced with kwok's first status writes,
// which could put the default of 1000 CPUs back. It is labelled for the test's pods once
// Ready, so that none is placed on it before.
func (n *gangNodes) addNode(cpu string, labels map[string]string) string {
	t := n.t
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("%s-%d", n.group, len(n.names))
	nodeLabels := map[string]string{"kubernetes.io/hostname": name, "type": "kwok"}
	for k, v := range labels {
		nodeLabels[k] = v
	}
	resources := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Ti"),
		corev1.ResourcePods: resource.MustParse("1M"), "nvidia.com/gpu": resource.MustParse("64")}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{cluster.FakeNodeAnnotation: "fake"}, Labels: nodeLabels},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: gangNodeKey, Value: n.group, Effect: corev1.TaintEffectNoSchedule}}},
		Status:     corev1.NodeStatus{Capacity: resources, Allocatable: resources},
	}
	if _, err := env.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.names = append(n.names, name)
	waitFor(t, name+" to be Ready", jobTimeout, func(ctx context.Context) (bool, error) {
		node, err := env.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	nodes := env.kube.CoreV1().Nodes()
	got, err := nodes.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Allocatable.Cpu().Cmp(resource.MustParse(cpu)) != 0 {
		t.Fatalf("node %s is Ready with allocatable %v; want the %s CPUs it was made with", name, got.Status.Allocatable, cpu)
	}
	if _, err := nodes.Patch(ctx, name, types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, gangNodeKey, n.group)), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

// remove deletes the last node made.
func (n *gangNodes) remove() {
	n.t.Helper()
	last := n.names[len(n.names)-1]
	if err := env.kube.CoreV1().Nodes().Delete(context.Background(), last, metav1.DeleteOptions{}); err != nil {
		n.t.Fatal(err)
	}
	n.names = n.names[:len(n.names)-1]
}

// place has a pod template go to the test's nodes only, asking for cpu.
func (n *gangNodes) place(spec *corev1.PodSpec, cpu string) {
	spec.NodeSelector = map[string]string{gangNodeKey: n.group}
	spec.Tolerations = []corev1.Toleration{{Key: gangNodeKey, Operator: corev1.TolerationOpEqual, Value: n.group, Effect: corev1.TaintEffectNoSchedule}}
	for i := range spec.Containers {
		q := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
		spec.Containers[i].Resources = corev1.ResourceRequirements{Requests: q, Limits: q}
	}
}
