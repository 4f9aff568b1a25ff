package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/t9k-jobs/t9k-jobs/manifests"
)

// checkReleaseMonitoring: a release ships the dashboard and the alert rules as they are in
// manifests/monitoring/, and the same rules in a PrometheusRule (docs/monitoring.md), each
// in SHA256SUMS.
func checkReleaseMonitoring(t *testing.T) {
	read := func(name string) []byte {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(install.release, name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	dashboard, err := manifests.Dashboard()
	if err != nil {
		t.Fatal(err)
	}
	rules, err := manifests.AlertRules()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(read("grafana-dashboard.json"), dashboard) {
		t.Error("the release's grafana-dashboard.json is not manifests/monitoring/dashboard.json")
	}
	if !bytes.Equal(read("prometheus-alerts.yaml"), rules) {
		t.Error("the release's prometheus-alerts.yaml is not manifests/monitoring/alerts.yaml")
	}
	var want struct {
		Groups []any `json:"groups"`
	}
	if err := yaml.Unmarshal(rules, &want); err != nil {
		t.Fatal(err)
	}
	var rule struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string            `json:"name"`
			Namespace string            `json:"namespace"`
			Labels    map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			Groups []any `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(read("prometheusrule.yaml"), &rule); err != nil {
		t.Fatalf("prometheusrule.yaml: %v", err)
	}
	if rule.APIVersion != "monitoring.coreos.com/v1" || rule.Kind != "PrometheusRule" || rule.Metadata.Name != "t9k-jobs" {
		t.Errorf("prometheusrule.yaml is a %s %s named %q, want a monitoring.coreos.com/v1 PrometheusRule t9k-jobs", rule.APIVersion, rule.Kind, rule.Metadata.Name)
	}
	if len(want.Groups) == 0 || !reflect.DeepEqual(rule.Spec.Groups, want.Groups) {
		t.Error("prometheusrule.yaml's spec.groups are not the groups of manifests/monitoring/alerts.yaml")
	}
	sums := string(read("SHA256SUMS"))
	for _, name := range []string{"install.yaml", "grafana-dashboard.json", "prometheus-alerts.yaml", "prometheusrule.yaml"} {
		if !strings.Contains(sums, "  "+name+"\n") {
			t.Errorf("SHA256SUMS has no %s:\n%s", name, sums)
		}
	}
}
