package main

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
)

// TestPodGroupsServed: the controller tells from discovery whether the cluster gang-schedules
// (PodGroups of scheduling.k8s.io/v1beta1); the group served without them (PriorityClasses
// only, the gate off) is not enough.
func TestPodGroupsServed(t *testing.T) {
	kube := kubefake.NewClientset()
	o := options{scheduler: schedulerGang}
	if served, err := podGroupsServed(kube.Discovery(), o, klog.Background()); err != nil || served {
		t.Fatalf("without the group: served %v, %v; want false", served, err)
	}
	group := func(kinds ...string) {
		list := &metav1.APIResourceList{GroupVersion: "scheduling.k8s.io/v1beta1"}
		for _, k := range kinds {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: k, Kind: k})
		}
		kube.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{list}
	}
	group("PriorityClass")
	if served, err := podGroupsServed(kube.Discovery(), o, klog.Background()); err != nil || served {
		t.Fatalf("without PodGroups: served %v, %v; want false", served, err)
	}
	group("PriorityClass", "PodGroup")
	if served, err := podGroupsServed(kube.Discovery(), o, klog.Background()); err != nil || !served {
		t.Fatalf("with PodGroups: served %v, %v; want true", served, err)
	}
}
