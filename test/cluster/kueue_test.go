package cluster

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
)

// kueueConfigDir is the Kueue configuration hack/lib/tools.sh cached with the binaries.
func kueueConfigDir(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("T9K_TOOLS_BIN")
	if bin == "" {
		const why = "T9K_TOOLS_BIN is not set (make test sets it to hack/lib/tools.sh's directory)"
		if os.Getenv("CI") != "" {
			t.Fatal(why + ", and CI is set")
		}
		t.Skip(why)
	}
	return filepath.Join(bin, "kueue-config")
}

// TestKueueConversionCRDs checks which CRDs StartKueue gives a conversion webhook: those
// Kueue's kustomization patches, the kinds with a v1beta1 to convert from.
func TestKueueConversionCRDs(t *testing.T) {
	k := &kueueSetup{configDir: kueueConfigDir(t)}
	converted, err := k.convertedCRDs()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for name, versions := range converted {
		names = append(names, name)
		if !slices.Contains(versions, "v1") {
			t.Errorf("%s: conversionReviewVersions %v lack v1", name, versions)
		}
	}
	slices.Sort(names)
	want := []string{"clusterqueues.kueue.x-k8s.io", "cohorts.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io",
		"multikueueclusters.kueue.x-k8s.io", "workloads.kueue.x-k8s.io"}
	if !slices.Equal(names, want) {
		t.Errorf("converted CRDs: got %v, want %v", names, want)
	}
}

// TestKueueWebhooks checks that only the webhooks for Kueue's kinds and batch Jobs are
// registered, each at a URL on Kueue's server: never those for pods, Deployments or
// StatefulSets, which would put every pod of the cluster behind Kueue.
func TestKueueWebhooks(t *testing.T) {
	k := &kueueSetup{configDir: kueueConfigDir(t), webhookPort: 9443, caPEM: []byte("ca")}
	mutating, validating, err := k.webhooks()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	check := func(name string, rules []admissionv1.RuleWithOperations, config admissionv1.WebhookClientConfig) {
		names = append(names, name)
		for _, rule := range rules {
			for _, group := range rule.APIGroups {
				if group != "kueue.x-k8s.io" && group != "batch" {
					t.Errorf("%s: registered for group %q", name, group)
				}
			}
		}
		if config.Service != nil || config.URL == nil || !strings.HasPrefix(*config.URL, "https://127.0.0.1:9443/") || string(config.CABundle) != "ca" {
			t.Errorf("%s: client config %+v, want a URL on https://127.0.0.1:9443 and the CA", name, config)
		}
	}
	for _, w := range mutating.Webhooks {
		check(w.Name, w.Rules, w.ClientConfig)
	}
	for _, w := range validating.Webhooks {
		check(w.Name, w.Rules, w.ClientConfig)
	}
	for _, name := range []string{"mworkload.kb.io", "vworkload.kb.io", "mresourceflavor.kb.io", "vclusterqueue.kb.io", "mjob.kb.io"} {
		if !slices.Contains(names, name) {
			t.Errorf("webhook %s is not registered; registered: %v", name, names)
		}
	}
	if mutating.Name != "kueue-mutating-webhook-configuration" || validating.Name != "kueue-validating-webhook-configuration" {
		t.Errorf("configurations named %q and %q, not as Kueue's certificate management expects", mutating.Name, validating.Name)
	}
}
