package main

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
)

// TestRefusesToStartWithoutCRDs: without the API the controller says how to install it.
func TestRefusesToStartWithoutCRDs(t *testing.T) {
	kube := kubefake.NewClientset()
	err := checkCRDs(kube)
	if err == nil || !strings.Contains(err.Error(), "kubectl apply -f manifests/crds/") {
		t.Fatalf("want a message naming the fix, got %v", err)
	}

	kube.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{
		GroupVersion: "batch.tensorstack.dev/v1beta1",
		APIResources: []metav1.APIResource{{Name: "genericjobs", Kind: "GenericJob"}},
	}}
	if err := checkCRDs(kube); err != nil {
		t.Fatalf("with the CRDs installed: %v", err)
	}
}
