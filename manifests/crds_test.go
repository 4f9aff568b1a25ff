package manifests

import (
	"context"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/t9k-jobs/t9k-jobs/examples"
	"github.com/t9k-jobs/t9k-jobs/test/apivalidation"
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
	obj, err := examples.Object(name)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// TestExamplesAdmitted: every documented example is accepted, except the XGBoost one as
// published, whose worker lists containers directly under template.
func TestExamplesAdmitted(t *testing.T) {
	byKind := crdsByKind(t)
	for _, name := range examples.Names() {
		t.Run(name, func(t *testing.T) {
			obj := readExample(t, name)
			errs := newAdmitter(t, byKind[obj["kind"].(string)]).admit(obj, nil)
			if name != examples.AsPublished {
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

// TestAdmissionRules checks every case of test/apivalidation offline; the end-to-end tests
// check the same cases on a real API server.
func TestAdmissionRules(t *testing.T) {
	byKind := crdsByKind(t)
	for _, tc := range apivalidation.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			obj, err := tc.Object()
			if err != nil {
				t.Fatal(err)
			}
			errs := newAdmitter(t, byKind[obj["kind"].(string)]).admit(obj, nil)
			if tc.Want == "" {
				if len(errs) != 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			if !anyContains(errs, tc.Want) {
				t.Fatalf("want an error containing %q, got %v", tc.Want, errs)
			}
		})
	}
}

func TestAdmissionUpdateRules(t *testing.T) {
	byKind := crdsByKind(t)
	for _, tc := range apivalidation.UpdateCases() {
		t.Run(tc.Name, func(t *testing.T) {
			old, updated, err := tc.Objects()
			if err != nil {
				t.Fatal(err)
			}
			errs := newAdmitter(t, byKind[updated["kind"].(string)]).admit(updated, old)
			if tc.Want == "" && len(errs) != 0 {
				t.Fatalf("refused: %v", errs)
			}
			if tc.Want != "" && !anyContains(errs, tc.Want) {
				t.Fatalf("want an error containing %q, got %v", tc.Want, errs)
			}
		})
	}
}
