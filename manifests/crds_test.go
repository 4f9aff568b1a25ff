package manifests

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

var wantNames = map[string]struct {
	shortName string
}{
	"GenericJob":            {"gj"},
	"MPIJob":                {"mj"},
	"ColossalAIJob":         {"caj"},
	"TensorFlowTrainingJob": {"tfj"},
	"XGBoostTrainingJob":    {"xgbj"},
}

func crdsByKind(t testing.TB) map[string]*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crds, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, crd := range crds {
		byKind[crd.Spec.Names.Kind] = crd
	}
	return byKind
}

// TestCRDsPassAPIServerValidation runs the API server's own CRD validation, CEL cost
// estimates included, on every generated CRD.
func TestCRDsPassAPIServerValidation(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := apiextensions.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for kind, crd := range crdsByKind(t) {
		t.Run(kind, func(t *testing.T) {
			crd = crd.DeepCopy()
			crd.Status.StoredVersions = []string{"v1beta1"} // as the API server records on create
			internal := &apiextensions.CustomResourceDefinition{}
			if err := scheme.Convert(crd, internal, nil); err != nil {
				t.Fatal(err)
			}
			for _, err := range validation.ValidateCustomResourceDefinition(context.Background(), internal) {
				t.Error(err)
			}
		})
	}
}

func TestCRDNamesAndColumns(t *testing.T) {
	byKind := crdsByKind(t)
	if len(byKind) != len(wantNames) {
		t.Fatalf("got CRDs for %d kinds, want %d", len(byKind), len(wantNames))
	}
	for kind, want := range wantNames {
		crd := byKind[kind]
		if crd == nil {
			t.Errorf("no CRD for %s", kind)
			continue
		}
		if crd.Spec.Group != "batch.tensorstack.dev" || crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
			t.Errorf("%s: group %q scope %q", kind, crd.Spec.Group, crd.Spec.Scope)
		}
		if got := crd.Spec.Names.ShortNames; len(got) != 1 || got[0] != want.shortName {
			t.Errorf("%s: short names %v, want [%s]", kind, got, want.shortName)
		}
		if got := crd.Spec.Names.Categories; len(got) != 1 || got[0] != "t9k" {
			t.Errorf("%s: categories %v, want [t9k]", kind, got)
		}
		v := crd.Spec.Versions[0]
		if v.Name != "v1beta1" || !v.Served || !v.Storage || v.Subresources == nil || v.Subresources.Status == nil {
			t.Errorf("%s: version %s served=%v storage=%v, status subresource %v", kind, v.Name, v.Served, v.Storage, v.Subresources)
		}
		columns := map[string]string{}
		for _, c := range v.AdditionalPrinterColumns {
			columns[c.Name] = c.JSONPath
		}
		if columns["Phase"] != ".status.phase" || columns["Age"] != ".metadata.creationTimestamp" {
			t.Errorf("%s: printer columns %v lack Phase or Age", kind, columns)
		}
	}
}

// TestPodTemplateMetadataKept guards generateEmbeddedObjectMeta: without it, labels and
// annotations in a replica's template.metadata would be pruned silently.
func TestPodTemplateMetadataKept(t *testing.T) {
	a := newAdmitter(t, crdsByKind(t)["GenericJob"])
	obj := readExample(t, "generic-example.yaml")
	set(obj, map[string]any{"labels": map[string]any{"team": "a"}, "annotations": map[string]any{"note": "b"}},
		"spec", "replicaSpecs", 0, "template", "metadata")
	if errs := a.admit(obj, nil); len(errs) != 0 {
		t.Fatalf("template.metadata refused or pruned: %v", errs)
	}
}

// TestClientSideApplyFits checks that `kubectl apply -f manifests/crds/` (client-side) can
// store each CRD in its last-applied-configuration annotation (256 KiB for all annotations).
func TestClientSideApplyFits(t *testing.T) {
	for kind, crd := range crdsByKind(t) {
		data, err := yaml.YAMLToJSON(mustMarshal(t, crd))
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > 200*1024 {
			t.Errorf("%s: CRD is %d bytes as JSON; client-side apply stores it in a 256 KiB annotation", kind, len(data))
		}
	}
}

func mustMarshal(t testing.TB, v any) []byte {
	t.Helper()
	out, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func readExample(t testing.TB, name string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{}
	if err := yaml.Unmarshal(data, &obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// TestExamplesAdmitted: every documented example is accepted, except the XGBoost one as
// published, whose worker lists containers directly under template.
func TestExamplesAdmitted(t *testing.T) {
	byKind := crdsByKind(t)
	files, err := filepath.Glob(filepath.Join("..", "examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, file := range files {
		name := filepath.Base(file)
		t.Run(name, func(t *testing.T) {
			obj := readExample(t, name)
			errs := newAdmitter(t, byKind[obj["kind"].(string)]).admit(obj, nil)
			if name != "xgboost-example-as-published.yaml" {
				if len(errs) != 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			if !anyContains(errs, "spec.replicaSpecs[1].template.containers") {
				t.Fatalf("want the misplaced containers named, got %v", errs)
			}
			if !anyContains(errs, "containers belong under template.spec") {
				t.Fatalf("want a hint where containers belong, got %v", errs)
			}
		})
	}
}

func TestAdmissionRules(t *testing.T) {
	byKind := crdsByKind(t)
	type edit func(obj map[string]any)
	cases := []struct {
		name    string
		example string
		edit    edit
		want    string // a substring of one error; "" means accepted
	}{
		// GenericJob
		{"replicas below zero", "generic-example.yaml", func(o map[string]any) { set(o, -1, "spec", "replicaSpecs", 0, "replicas") }, "spec.replicaSpecs[0].replicas: Invalid value"},
		{"zero replicas allowed", "generic-example.yaml", func(o map[string]any) {
			set(o, 0, "spec", "replicaSpecs", 0, "replicas")
			delete(o["spec"].(map[string]any), "successRules")
			delete(o["spec"].(map[string]any), "failureRules")
		}, ""},
		{"no replica specs", "generic-example.yaml", func(o map[string]any) { set(o, []any{}, "spec", "replicaSpecs") }, "spec.replicaSpecs: Invalid value"},
		{"duplicate replica type", "generic-example.yaml", func(o map[string]any) {
			r := get(o, "spec", "replicaSpecs", 0)
			set(o, []any{r, deepCopyValue(r)}, "spec", "replicaSpecs")
		}, "spec.replicaSpecs[1]: Duplicate value"},
		{"replica type not a DNS label", "generic-example.yaml", func(o map[string]any) { set(o, "Worker_1", "spec", "replicaSpecs", 0, "type") }, "spec.replicaSpecs[0].type"},
		{"unknown restart policy", "generic-example.yaml", func(o map[string]any) {
			set(o, map[string]any{"policy": "Sometimes"}, "spec", "replicaSpecs", 0, "restartPolicy")
		}, `spec.replicaSpecs[0].restartPolicy.policy: Unsupported value: "Sometimes"`},
		{"ExitCode is not a GenericJob policy", "generic-example.yaml", func(o map[string]any) {
			set(o, map[string]any{"policy": "ExitCode"}, "spec", "replicaSpecs", 0, "restartPolicy")
		}, `Unsupported value: "ExitCode"`},
		{"restart limit below zero", "generic-example.yaml", func(o map[string]any) {
			set(o, map[string]any{"policy": "OnFailure", "limit": -1}, "spec", "replicaSpecs", 0, "restartPolicy")
		}, "spec.replicaSpecs[0].restartPolicy.limit"},
		{"restart policy with limit", "generic-example.yaml", func(o map[string]any) {
			set(o, map[string]any{"policy": "OnFailure", "limit": 3}, "spec", "replicaSpecs", 0, "restartPolicy")
		}, ""},
		{"success rule names unknown type", "generic-example.yaml", func(o map[string]any) {
			set(o, []any{map[string]any{"master": []any{0}}}, "spec", "successRules")
		}, "spec.successRules may only name replica types listed in spec.replicaSpecs"},
		{"failure rule names missing rank", "generic-example.yaml", func(o map[string]any) {
			set(o, []any{map[string]any{"worker": []any{4}}}, "spec", "failureRules")
		}, "spec.failureRules names a rank that does not exist"},
		{"success rule names last rank", "generic-example.yaml", func(o map[string]any) {
			set(o, []any{map[string]any{"worker": []any{0, 3}}}, "spec", "successRules")
		}, ""},
		{"unknown clean-up policy", "generic-example.yaml", func(o map[string]any) { set(o, "Some", "spec", "cleanUpPolicy") }, `spec.cleanUpPolicy: Unsupported value: "Some"`},
		{"duplicate service port name", "generic-example.yaml", func(o map[string]any) {
			set(o, map[string]any{"ports": []any{map[string]any{"name": "http", "port": 80}, map[string]any{"name": "http", "port": 81}}}, "spec", "service")
		}, "spec.service.ports[1]: Duplicate value"},
		{"service port out of range", "generic-example.yaml", func(o map[string]any) {
			set(o, map[string]any{"ports": []any{map[string]any{"name": "http", "port": 70000}}}, "spec", "service")
		}, "spec.service.ports[0].port"},
		{"containers directly under template", "generic-example.yaml", func(o map[string]any) {
			set(o, get(o, "spec", "replicaSpecs", 0, "template", "spec"), "spec", "replicaSpecs", 0, "template")
		}, "template.spec.containers must list at least one container"},
		{"job name with a dot", "generic-example.yaml", func(o map[string]any) { set(o, "generic.example", "metadata", "name") }, "metadata.name must consist of lower-case letters"},
		{"job name too long for its replicas", "generic-example.yaml", func(o map[string]any) {
			set(o, strings.Repeat("a", 55), "metadata", "name")
		}, "the replica names <name>-<type>-<rank> (host names and Service names) must fit in 63 characters"},
		{"longest job name that fits", "generic-example.yaml", func(o map[string]any) { set(o, strings.Repeat("a", 54), "metadata", "name") }, ""},
		{"debug setting for unknown type", "generic-example.yaml", func(o map[string]any) {
			set(o, map[string]any{"enabled": true, "replicaSpecs": []any{map[string]any{"type": "master"}}}, "spec", "runMode", "debug")
		}, "spec.runMode.debug.replicaSpecs[*].type must name a replica type"},
		{"scheduler queue required", "generic-example.yaml", func(o map[string]any) {
			set(o, map[string]any{"t9kScheduler": map[string]any{"priority": 50}}, "spec", "scheduler")
		}, "spec.scheduler.t9kScheduler.queue: Required value"},
		{"scheduler as documented", "generic-example.yaml", func(o map[string]any) {
			set(o, map[string]any{"t9kScheduler": map[string]any{"queue": "default", "priority": 50}}, "spec", "scheduler")
		}, ""},

		// MPIJob
		{"no mpi-worker container", "mpi-example.yaml", func(o map[string]any) {
			set(o, "worker", "spec", "worker", "template", "spec", "containers", 0, "name")
		}, "must include a container named mpi-worker"},
		{"MPI needs a worker", "mpi-example.yaml", func(o map[string]any) { set(o, 0, "spec", "worker", "replicas") }, "spec.worker.replicas"},
		{"MPI debug type", "mpi-example.yaml", func(o map[string]any) {
			set(o, map[string]any{"enabled": true, "replicaSpecs": []any{map[string]any{"type": "ps"}}}, "spec", "runMode", "debug")
		}, "must be launcher or worker"},
		{"MPI debug as documented", "mpi-example.yaml", func(o map[string]any) {
			set(o, map[string]any{"enabled": true, "replicaSpecs": []any{map[string]any{"type": "worker", "skipInitContainer": true, "command": []any{"sleep", "inf"}}}}, "spec", "runMode", "debug")
		}, ""},
		{"MPI name too long", "mpi-example.yaml", func(o map[string]any) { set(o, strings.Repeat("m", 55), "metadata", "name") }, "the worker names <name>-worker-<rank> (host names) must fit in 63 characters"},

		// ColossalAIJob
		{"no worker container", "colossalai-example.yaml", func(o map[string]any) {
			set(o, "trainer", "spec", "worker", "template", "spec", "containers", 0, "name")
		}, "must include a container named worker"},
		{"no processes per worker", "colossalai-example.yaml", func(o map[string]any) { set(o, 0, "spec", "worker", "procPerWorker") }, "spec.worker.procPerWorker"},
		{"launcher needs an image", "colossalai-example.yaml", func(o map[string]any) { delete(get(o, "spec", "launcher").(map[string]any), "image") }, "spec.launcher.image: Required value"},

		// TensorFlowTrainingJob
		{"TF type outside chief/worker/ps/evaluator", "tensorflow-example.yaml", func(o map[string]any) { set(o, "master", "spec", "replicaSpecs", 0, "type") }, "must be chief, worker, ps or evaluator"},
		{"two chiefs", "tensorflow-example.yaml", func(o map[string]any) {
			r := deepCopyValue(get(o, "spec", "replicaSpecs", 0)).(map[string]any)
			r["type"], r["replicas"] = "chief", 2
			set(o, append(get(o, "spec", "replicaSpecs").([]any), r), "spec", "replicaSpecs")
		}, "at most one chief"},
		{"chief and workers", "tensorflow-example.yaml", func(o map[string]any) {
			r := deepCopyValue(get(o, "spec", "replicaSpecs", 0)).(map[string]any)
			r["type"], r["replicas"] = "chief", 1
			set(o, append(get(o, "spec", "replicaSpecs").([]any), r), "spec", "replicaSpecs")
		}, ""},
		{"only parameter servers", "tensorflow-example.yaml", func(o map[string]any) { set(o, "ps", "spec", "replicaSpecs", 0, "type") }, "must include a chief or a worker"},
		{"TF restart policy", "tensorflow-example.yaml", func(o map[string]any) { set(o, "Sometimes", "spec", "replicaSpecs", 0, "restartPolicy") }, `Unsupported value: "Sometimes"`},
		{"TF ExitCode policy", "tensorflow-example.yaml", func(o map[string]any) { set(o, "ExitCode", "spec", "replicaSpecs", 0, "restartPolicy") }, ""},
		{"TF backoff limit below zero", "tensorflow-example.yaml", func(o map[string]any) { set(o, -1, "spec", "runPolicy", "backoffLimit") }, "spec.runPolicy.backoffLimit"},
		{"TF run policy", "tensorflow-example.yaml", func(o map[string]any) {
			set(o, map[string]any{"cleanUpPolicy": "All", "backoffLimit": 3, "activeDeadlineSeconds": 600}, "spec", "runPolicy")
		}, ""},
		{"TensorBoard as documented", "tensorflow-example.yaml", func(o map[string]any) {
			set(o, map[string]any{"image": "t9kpublic/tensorflow-2.11.0:cpu-sdk-0.5.2", "trainingLogFilesets": []any{"t9k://pvc/tensorflow-tensorboard-pvc/log"}}, "spec", "tensorboardSpec")
		}, ""},
		{"TensorBoard fileset not a t9k URL", "tensorflow-example.yaml", func(o map[string]any) {
			set(o, map[string]any{"image": "tb", "trainingLogFilesets": []any{"/mnt/log"}}, "spec", "tensorboardSpec")
		}, "spec.tensorboardSpec.trainingLogFilesets[0]"},
		{"TensorBoard name too long", "tensorflow-example.yaml", func(o map[string]any) {
			set(o, strings.Repeat("t", 52), "metadata", "name")
			set(o, map[string]any{"image": "tb", "trainingLogFilesets": []any{"t9k://pvc/logs/x"}}, "spec", "tensorboardSpec")
		}, "may have a name of at most 51 characters"},

		// XGBoostTrainingJob
		{"no master", "xgboost-example.yaml", func(o map[string]any) { set(o, []any{get(o, "spec", "replicaSpecs", 1)}, "spec", "replicaSpecs") }, "needs exactly one master"},
		{"two masters", "xgboost-example.yaml", func(o map[string]any) { set(o, 2, "spec", "replicaSpecs", 0, "replicas") }, "needs exactly one master"},
		{"XGBoost type", "xgboost-example.yaml", func(o map[string]any) { set(o, "ps", "spec", "replicaSpecs", 1, "type") }, "must be master or worker"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := readExample(t, tc.example)
			tc.edit(obj)
			errs := newAdmitter(t, byKind[obj["kind"].(string)]).admit(obj, nil)
			if tc.want == "" {
				if len(errs) != 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			if !anyContains(errs, tc.want) {
				t.Fatalf("want an error containing %q, got %v", tc.want, errs)
			}
		})
	}
}

// TestResumeSpecsImmutable: pause.enabled may be switched at will, resumeSpecs may be set
// once and never changed or removed afterwards.
func TestResumeSpecsImmutable(t *testing.T) {
	byKind := crdsByKind(t)
	resume := []any{map[string]any{"type": "worker", "skipInitContainer": true, "command": []any{"/usr/bin/sshd"}}}
	withPause := func(example string, enabled bool, specs []any) map[string]any {
		obj := readExample(t, example)
		pause := map[string]any{"enabled": enabled}
		if specs != nil {
			pause["resumeSpecs"] = specs
		}
		set(obj, pause, "spec", "runMode", "pause")
		return obj
	}
	changed := []any{map[string]any{"type": "worker", "command": []any{"python", "resume.py"}}}
	for _, example := range []string{"generic-example.yaml", "mpi-example.yaml", "colossalai-example.yaml", "tensorflow-example.yaml", "xgboost-example.yaml"} {
		cases := []struct {
			name     string
			old, new map[string]any
			refused  bool
		}{
			{"pause switched on, resumeSpecs kept", withPause(example, false, resume), withPause(example, true, resume), false},
			{"pause switched off, resumeSpecs kept", withPause(example, true, resume), withPause(example, false, resume), false},
			{"resumeSpecs set for the first time", withPause(example, false, nil), withPause(example, true, resume), false},
			{"resumeSpecs changed", withPause(example, true, resume), withPause(example, true, changed), true},
			{"resumeSpecs removed", withPause(example, true, resume), withPause(example, true, nil), true},
			{"pause removed with its resumeSpecs", withPause(example, true, resume), readExample(t, example), true},
		}
		for _, tc := range cases {
			t.Run(example+"/"+tc.name, func(t *testing.T) {
				errs := newAdmitter(t, byKind[tc.new["kind"].(string)]).admit(tc.new, tc.old)
				refused := anyContains(errs, "spec.runMode.pause.resumeSpecs cannot be changed once set")
				if refused != tc.refused || (!tc.refused && len(errs) != 0) {
					t.Fatalf("refused=%v, want %v: %v", refused, tc.refused, errs)
				}
			})
		}
	}
}
