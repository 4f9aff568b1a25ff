package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
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

// checkReleasePlugin: a release holds the kubectl plugin for this machine's platform (the
// install test builds only that one), an archive with the one binary, which reports the
// release's version, and krew's manifest naming the archive by its sha256.
func checkReleasePlugin(t *testing.T) {
	name := fmt.Sprintf("kubectl-t9k_%s_%s_%s.tar.gz", install.version, runtime.GOOS, runtime.GOARCH)
	archive, err := os.ReadFile(filepath.Join(install.release, name))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(archive)
	var manifest struct {
		Kind string `json:"kind"`
		Spec struct {
			Version   string `json:"version"`
			Platforms []struct {
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"selector"`
				URI    string `json:"uri"`
				SHA256 string `json:"sha256"`
				Bin    string `json:"bin"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	data, err := os.ReadFile(filepath.Join(install.release, "t9k.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &manifest); err != nil {
		t.Fatalf("t9k.yaml: %v", err)
	}
	if manifest.Kind != "Plugin" || manifest.Spec.Version != install.version || len(manifest.Spec.Platforms) != 1 {
		t.Fatalf("t9k.yaml: kind %q, version %q, %d platforms; want a Plugin of %s for this platform", manifest.Kind, manifest.Spec.Version, len(manifest.Spec.Platforms), install.version)
	}
	p := manifest.Spec.Platforms[0]
	if p.Selector.MatchLabels["os"] != runtime.GOOS || p.Selector.MatchLabels["arch"] != runtime.GOARCH || p.SHA256 != hex.EncodeToString(sum[:]) ||
		p.Bin != "kubectl-t9k" || !strings.HasSuffix(p.URI, "/"+name) {
		t.Errorf("t9k.yaml's platform %+v does not name %s (sha256 %x)", p, name, sum)
	}
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	hdr, err := tr.Next()
	if err != nil || hdr.Name != "kubectl-t9k" {
		t.Fatalf("%s: first entry %v (%v), want kubectl-t9k", name, hdr, err)
	}
	bin := filepath.Join(t.TempDir(), "kubectl-t9k")
	f, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, tr); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := tr.Next(); err != io.EOF {
		t.Errorf("%s holds more than kubectl-t9k", name)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), install.version) {
		t.Errorf("the released kubectl-t9k --version: %v, %q; want %s", err, out, install.version)
	}
	if sums, _ := os.ReadFile(filepath.Join(install.release, "SHA256SUMS")); !strings.Contains(string(sums), hex.EncodeToString(sum[:])+"  "+name+"\n") {
		t.Errorf("SHA256SUMS has no line for %s", name)
	}
}

// checkReleaseChart: a release holds the Helm chart, whose default image is the release's,
// pinned by digest as install.yaml pins it.
func checkReleaseChart(t *testing.T) {
	name := "t9k-jobs-" + strings.TrimPrefix(install.version, "v") + ".tgz"
	out, err := helm("template", "t9k-jobs", filepath.Join(install.release, name), "--namespace", "t9k-system")
	if err != nil {
		t.Fatalf("helm template %s: %v\n%s", name, err, out)
	}
	data, err := os.ReadFile(filepath.Join(install.release, "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if want := imageIn(t, string(data)); imageIn(t, out) != want {
		t.Errorf("the chart's image is %s, want install.yaml's %s", imageIn(t, out), want)
	}
	if sums, _ := os.ReadFile(filepath.Join(install.release, "SHA256SUMS")); !strings.Contains(string(sums), "  "+name+"\n") {
		t.Errorf("SHA256SUMS has no line for %s", name)
	}
}
