package charts

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// repoRoot is the repository's root: go test runs a package's tests in its directory. (Not
// from runtime.Caller: the Makefile builds with -trimpath, which leaves no path on disk.)
func repoRoot() string {
	root, err := filepath.Abs("..")
	if err != nil {
		panic(err)
	}
	return root
}

// tool runs a tool pinned in hack/tools/<module> (helm, kustomize) with go tool, from the
// repository's root.
func tool(t *testing.T, module string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", append([]string{"-C", filepath.Join("hack", "tools", module), "tool", module}, args...)...)
	cmd.Dir = repoRoot()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", module, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// chartLabels are the labels the chart adds to every object for Helm's tools: the only
// difference a render may have from manifests/.
var chartLabels = []string{"app.kubernetes.io/part-of", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "helm.sh/chart"}

// objects decodes a multi-document YAML stream, keyed by kind, namespace and name, without
// the chart's labels.
func objects(t *testing.T, data []byte) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if m == nil {
			continue
		}
		o := &unstructured.Unstructured{Object: m}
		labels := o.GetLabels()
		for _, l := range chartLabels {
			delete(labels, l)
		}
		if len(labels) == 0 {
			unstructured.RemoveNestedField(o.Object, "metadata", "labels")
		} else {
			o.SetLabels(labels)
		}
		out[fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())] = o
	}
	return out
}

// same reports how two sets of objects differ, object by object.
func same(t *testing.T, chart, manifests map[string]*unstructured.Unstructured) {
	t.Helper()
	var keys []string
	for k := range manifests {
		keys = append(keys, k)
	}
	for k := range chart {
		if _, ok := manifests[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		c, m := chart[k], manifests[k]
		switch {
		case c == nil:
			t.Errorf("%s: in manifests/, not in the chart", k)
		case m == nil:
			t.Errorf("%s: in the chart, not in manifests/", k)
		case !reflect.DeepEqual(c.Object, m.Object):
			t.Errorf("%s differs:\nchart:     %v\nmanifests: %v", k, c.Object, m.Object)
		}
	}
}

// TestChartIsTheManifests: with its defaults, in t9k-system, the chart renders exactly what
// install.yaml installs but the Namespace (helm install --create-namespace makes it).
func TestChartIsTheManifests(t *testing.T) {
	chart := objects(t, tool(t, "helm", "template", "t9k-jobs", "../../../charts/t9k-jobs", "--namespace", "t9k-system", "--include-crds"))
	manifests := objects(t, tool(t, "kustomize", "build", "../../../manifests"))
	delete(manifests, "Namespace /t9k-system")
	same(t, chart, manifests)
}

// TestNamespacedChartIsTheNamespacedInstall: watchNamespaces renders the namespaced install
// of examples/namespaced-install (its namespaces team-a and team-b).
func TestNamespacedChartIsTheNamespacedInstall(t *testing.T) {
	chart := objects(t, tool(t, "helm", "template", "t9k-jobs", "../../../charts/t9k-jobs", "--namespace", "t9k-system", "--include-crds",
		"--set", "watchNamespaces={team-a,team-b}"))
	manifests := objects(t, tool(t, "kustomize", "build", "../../../examples/namespaced-install"))
	delete(manifests, "Namespace /t9k-system")
	same(t, chart, manifests)
}

// TestChartValues: another namespace is the controller's everywhere (its objects, the
// admission policy's expressions), and each value reaches the Deployment.
func TestChartValues(t *testing.T) {
	out := tool(t, "helm", "template", "jobs", "../../../charts/t9k-jobs", "--namespace", "ml-system",
		"--set", "image.tag=v1.2.3,image.digest=sha256:abc,replicaCount=3,controller.scheduler=kueue,controller.workers=16",
		"--set", "resources.limits.memory=512Mi,serviceMonitor.enabled=true", "--set", "nodeSelector.pool=system")
	if bytes.Contains(out, []byte("t9k-system")) {
		t.Errorf("a render into ml-system still names t9k-system:\n%s", out)
	}
	objs := objects(t, out)
	policy := objs["ValidatingAdmissionPolicy /t9k-job-controller-writes"]
	if policy == nil {
		t.Fatal("no admission policy")
	}
	conds, _, _ := unstructured.NestedSlice(policy.Object, "spec", "matchConditions")
	if len(conds) != 1 || conds[0].(map[string]any)["expression"] != `request.userInfo.username == "system:serviceaccount:ml-system:t9k-job-controller"` {
		t.Errorf("the admission policy matches %v, want the ServiceAccount of ml-system", conds)
	}
	d := objs["Deployment ml-system/t9k-job-controller"]
	if d == nil {
		t.Fatal("no Deployment in ml-system")
	}
	replicas, _, _ := unstructured.NestedFloat64(d.Object, "spec", "replicas")
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	c := containers[0].(map[string]any)
	args := fmt.Sprint(c["args"])
	memory, _, _ := unstructured.NestedString(c, "resources", "limits", "memory")
	pool, _, _ := unstructured.NestedString(d.Object, "spec", "template", "spec", "nodeSelector", "pool")
	if replicas != 3 || c["image"] != "ghcr.io/t9k-jobs/t9k-job-controller:v1.2.3@sha256:abc" || !strings.Contains(args, "--scheduler=kueue") ||
		!strings.Contains(args, "--workers=16") || memory != "512Mi" || pool != "system" {
		t.Errorf("the Deployment does not have the values: replicas %v, image %v, args %s, memory limit %s, nodeSelector pool %q", replicas, c["image"], args, memory, pool)
	}
	for _, k := range []string{"Service ml-system/t9k-job-controller-metrics", "ServiceMonitor ml-system/t9k-job-controller"} {
		if objs[k] == nil {
			t.Errorf("serviceMonitor.enabled: no %s", k)
		}
	}
}
