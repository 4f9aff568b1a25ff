package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"

	kueue "github.com/t9k-jobs/t9k-jobs/pkg/apis/kueue/v1beta2"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

// checkCRDs refuses to start unless the API server serves every kind the controller runs: the
// informer of a kind whose CRD is missing retries forever, the caches never sync, and no job of
// any kind runs, silently. The message names every missing kind and the file to apply.
func checkCRDs(d discovery.DiscoveryInterface, kinds []engine.Adapter) error {
	served := map[schema.GroupVersion]map[string]bool{}
	var missing []schema.GroupVersionKind
	for _, a := range kinds {
		gvk := a.GroupVersionKind()
		gv := gvk.GroupVersion()
		if _, ok := served[gv]; !ok {
			names, err := servedKinds(d, gv)
			if err != nil {
				return err
			}
			served[gv] = names
		}
		if !served[gv][gvk.Kind] {
			missing = append(missing, gvk)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	var byGV []string // "MPIJob, XGBoostTrainingJob of batch.tensorstack.dev/v1beta1"
	var files []string
	for i, gvk := range missing {
		if i == 0 || gvk.GroupVersion() != missing[i-1].GroupVersion() {
			byGV = append(byGV, gvk.Kind)
		} else {
			byGV[len(byGV)-1] += ", " + gvk.Kind
		}
		if i == len(missing)-1 || gvk.GroupVersion() != missing[i+1].GroupVersion() {
			byGV[len(byGV)-1] += " of " + gvk.GroupVersion().String()
		}
		files = append(files, "-f "+crdFile(gvk))
	}
	return fmt.Errorf("the API server does not serve %s: install the CRDs with `kubectl apply -f manifests/crds/`, "+
		"or just the missing ones with `kubectl apply %s`", strings.Join(byGV, "; "), strings.Join(files, " "))
}

// servedKinds returns the kinds the API server serves in gv: none when the group version is
// not served at all.
func servedKinds(d discovery.DiscoveryInterface, gv schema.GroupVersion) (map[string]bool, error) {
	kinds := map[string]bool{}
	resources, err := d.ServerResourcesForGroupVersion(gv.String())
	if apierrors.IsNotFound(err) {
		return kinds, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checking for the API %s: %w", gv, err)
	}
	for _, r := range resources.APIResources {
		if !strings.Contains(r.Name, "/") { // not a subresource such as genericjobs/status
			kinds[r.Kind] = true
		}
	}
	return kinds, nil
}

// crdFile is where manifests/crds keeps a kind's CRD: controller-gen names it
// <group>_<plural>.yaml (a unit test holds every kind to it).
func crdFile(gvk schema.GroupVersionKind) string {
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	return fmt.Sprintf("manifests/crds/%s_%s.yaml", gvk.Group, plural.Resource)
}

// kueueServed reports whether the API server serves the part of Kueue's API the controller
// uses. Without it the controller watches none of it: a job that asks for a Kueue queue then
// waits, with a condition that says Kueue is missing.
func kueueServed(d discovery.DiscoveryInterface) (bool, error) {
	kinds, err := servedKinds(d, kueue.SchemeGroupVersion)
	if err != nil {
		return false, err
	}
	return kinds["Workload"] && kinds["ResourceFlavor"] && kinds["WorkloadPriorityClass"], nil
}

// kueueWorkloadCRD is the name of Kueue's Workload CRD, whose schema says how many pod sets
// a Workload takes.
const kueueWorkloadCRD = "workloads." + kueue.GroupName

// kueuePodSetLimit reads from Kueue's Workload CRD the most pod sets a Workload takes (the
// maxItems of spec.podSets in the version the controller writes): 18 since Kueue v0.19, 8
// before. 0 when the CRD cannot be read or says nothing; the admitter then assumes the
// tested version's.
func kueuePodSetLimit(ctx context.Context, d discovery.DiscoveryInterface, logger klog.Logger) int {
	// JSON, not the protobuf the clientset's REST client asks for by default.
	raw, err := d.RESTClient().Get().AbsPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", kueueWorkloadCRD).
		SetHeader("Accept", "application/json").DoRaw(ctx)
	if err != nil {
		logger.Info("Could not read Kueue's Workload CRD for its pod-set limit: assuming Kueue v0.19's", "crd", kueueWorkloadCRD, "err", err)
		return 0
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema struct {
						Properties struct {
							Spec struct {
								Properties struct {
									PodSets struct {
										MaxItems int `json:"maxItems"`
									} `json:"podSets"`
								} `json:"properties"`
							} `json:"spec"`
						} `json:"properties"`
					} `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &crd); err != nil {
		logger.Info("Could not decode Kueue's Workload CRD", "crd", kueueWorkloadCRD, "err", err)
		return 0
	}
	for _, v := range crd.Spec.Versions {
		if v.Name == kueue.SchemeGroupVersion.Version {
			return v.Schema.OpenAPIV3Schema.Properties.Spec.Properties.PodSets.MaxItems
		}
	}
	return 0
}
