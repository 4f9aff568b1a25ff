package main

import (
	"context"
	"os"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// defaultAgentImage is the agent's image when the controller runs outside a cluster and is
// given none: the image `make image` names (manifests/kustomization.yaml).
const defaultAgentImage = "ghcr.io/t9k-jobs/t9k-job-controller:dev"

// agentImage is the image of the restart agent in the pods of jobs that restart in place
// (pkg/agent): --agent-image when given; in a cluster, the controller's own image, as its pod
// names it (the agent is the controller's binary in another mode, so an install that can run
// the controller can run the agent); otherwise defaultAgentImage.
func agentImage(ctx context.Context, kube kubernetes.Interface, flag string) string {
	if flag != "" {
		return flag
	}
	ns, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	host, herr := os.Hostname()
	if err != nil || herr != nil {
		return defaultAgentImage
	}
	pod, err := kube.CoreV1().Pods(strings.TrimSpace(string(ns))).Get(ctx, host, metav1.GetOptions{})
	if err != nil || len(pod.Spec.Containers) == 0 {
		klog.FromContext(ctx).Info("The controller's own image is not known: jobs that restart in place run the default agent image; set --agent-image", "err", err, "image", defaultAgentImage)
		return defaultAgentImage
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == "controller" {
			return c.Image
		}
	}
	return pod.Spec.Containers[0].Image
}
