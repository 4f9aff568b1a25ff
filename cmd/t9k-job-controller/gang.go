package main

import (
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"
)

// podGroupsServed reports whether the API server serves scheduling.k8s.io/v1beta1 PodGroups
// (the GenericWorkload feature gate and --runtime-config). Without them nothing of them is
// watched, and a job that asks to start whole waits with a condition that says what to turn
// on: its pods, placed one by one, would not be what it asked for.
func podGroupsServed(d discovery.DiscoveryInterface, o options, logger klog.Logger) (bool, error) {
	kinds, err := servedKinds(d, schedulingv1beta1.SchemeGroupVersion)
	if err != nil {
		return false, err
	}
	served := kinds["PodGroup"]
	switch {
	case served:
		logger.Info("PodGroups are served: jobs that ask to start whole are gang-scheduled by kube-scheduler", "scheduler", o.scheduler)
	case o.scheduler == schedulerGang:
		logger.Info("PodGroups are not served (scheduling.k8s.io/v1beta1, feature gate GenericWorkload): jobs that ask to start whole wait until they are and the controller is restarted", "scheduler", o.scheduler)
	}
	return served, nil
}
