package main

import (
	"context"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/t9k-jobs/t9k-jobs/pkg/controller/gang"
)

// podGroupsServed reports whether the API server serves scheduling.k8s.io/v1beta1 PodGroups
// (the GenericWorkload feature gate and --runtime-config), and if so which of their gated
// fields it keeps (nil: not served). Without them nothing of them is watched, and a job that
// asks for a PodGroup waits with a condition that says what to turn on: its pods, placed one
// by one, would not be what it asked for. Likewise a job that asks for a topology domain or
// shared claims the API server would drop. The fields are probed by a dry run with probe, a
// client outside the write fence: it writes nothing, and the fence is closed until this
// replica leads.
func podGroupsServed(ctx context.Context, d discovery.DiscoveryInterface, probe kubernetes.Interface, o options, logger klog.Logger) (*gang.Features, error) {
	kinds, err := servedKinds(d, schedulingv1beta1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	if !kinds["PodGroup"] {
		if o.scheduler == schedulerGang {
			logger.Info("PodGroups are not served (scheduling.k8s.io/v1beta1, feature gate GenericWorkload): jobs that ask to start whole wait until they are and the controller is restarted", "scheduler", o.scheduler)
		}
		return nil, nil
	}
	ns := metav1.NamespaceDefault
	if len(o.namespaces) > 0 {
		ns = o.namespaces[0] // a namespaced install may write nowhere else
	}
	features, err := gang.DetectFeatures(ctx, probe, ns)
	if err != nil {
		logger.Info("Could not tell which PodGroup fields the API server keeps; assuming all", "err", err)
		features = gang.AllFeatures
	}
	logger.Info("PodGroups are served: jobs that ask to start whole are gang-scheduled by kube-scheduler", "scheduler", o.scheduler,
		"topology", features.Topology, "resourceClaims", features.ResourceClaims)
	if !features.Topology {
		logger.Info("The API server drops PodGroups' schedulingConstraints (feature gate TopologyAwareWorkloadScheduling): jobs whose spec.scheduling asks for a topology domain wait until it keeps them and the controller is restarted")
	}
	if !features.ResourceClaims {
		logger.Info("The API server drops PodGroups' resourceClaims (feature gate DRAWorkloadResourceClaims): jobs whose spec.scheduling shares resource claims wait until it keeps them and the controller is restarted")
	}
	return &features, nil
}
