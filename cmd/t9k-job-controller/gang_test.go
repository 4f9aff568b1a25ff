package main

import (
	"context"
	"errors"
	"testing"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"

	"github.com/t9k-jobs/t9k-jobs/pkg/controller/gang"
)

// TestPodGroupsServed: the controller tells from discovery whether the cluster gang-schedules
// (PodGroups of scheduling.k8s.io/v1beta1); the group served without them (PriorityClasses
// only, the gate off) is not enough.
func TestPodGroupsServed(t *testing.T) {
	kube := kubefake.NewClientset()
	o := options{scheduler: schedulerGang}
	served := func() *gang.Features {
		t.Helper()
		f, err := podGroupsServed(context.Background(), kube.Discovery(), kube, o, klog.Background())
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	if f := served(); f != nil {
		t.Fatalf("without the group: served %+v; want nil", f)
	}
	group := func(kinds ...string) {
		list := &metav1.APIResourceList{GroupVersion: "scheduling.k8s.io/v1beta1"}
		for _, k := range kinds {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: k, Kind: k})
		}
		kube.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{list}
	}
	group("PriorityClass")
	if f := served(); f != nil {
		t.Fatalf("without PodGroups: served %+v; want nil", f)
	}
	group("PriorityClass", "PodGroup")
	if f := served(); f == nil {
		t.Fatal("with PodGroups: not served")
	}
}

// TestPodGroupFeatures: which of a PodGroup's gated fields the API server keeps is told by a
// dry run that sets them all, as the server's answer has them; the server drops a field
// whose gate is off (kube 1.37's PodGroup strategy). A dry run refused says nothing: every
// field is assumed kept, and the scheduler is left to say what it cannot do.
func TestPodGroupFeatures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		drop   func(*schedulingv1beta1.PodGroup)
		refuse bool
		want   gang.Features
	}{
		{"all gates on", func(*schedulingv1beta1.PodGroup) {}, false, gang.AllFeatures},
		{"topology gate off", func(pg *schedulingv1beta1.PodGroup) { pg.Spec.SchedulingConstraints = nil }, false, gang.Features{ResourceClaims: true}},
		{"claims gate off", func(pg *schedulingv1beta1.PodGroup) { pg.Spec.ResourceClaims = nil }, false, gang.Features{Topology: true}},
		{"both off", func(pg *schedulingv1beta1.PodGroup) { pg.Spec.SchedulingConstraints, pg.Spec.ResourceClaims = nil, nil }, false, gang.Features{}},
		{"dry run refused", nil, true, gang.AllFeatures},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := kubefake.NewClientset()
			kube.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{GroupVersion: "scheduling.k8s.io/v1beta1",
				APIResources: []metav1.APIResource{{Name: "podgroups", Kind: "PodGroup"}}}}
			dryRun := false
			kube.PrependReactor("create", "podgroups", func(action k8stesting.Action) (bool, runtime.Object, error) {
				create := action.(k8stesting.CreateActionImpl)
				dryRun = len(create.GetCreateOptions().DryRun) == 1 && create.GetCreateOptions().DryRun[0] == metav1.DryRunAll
				if action.GetNamespace() != "default" {
					t.Errorf("dry run in namespace %q, want default", action.GetNamespace())
				}
				if tc.refuse {
					return true, nil, errors.New("forbidden")
				}
				pg := create.GetObject().(*schedulingv1beta1.PodGroup).DeepCopy()
				tc.drop(pg)
				return true, pg, nil
			})
			f, err := podGroupsServed(context.Background(), kube.Discovery(), kube, options{}, klog.Background())
			if err != nil || f == nil {
				t.Fatalf("served %+v, %v", f, err)
			}
			if *f != tc.want {
				t.Errorf("features %+v, want %+v", *f, tc.want)
			}
			if !dryRun {
				t.Error("the probe was not a dry run: it would have made a PodGroup")
			}
		})
	}
}
