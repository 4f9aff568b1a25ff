package manifests

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
)

// admitter checks an object against one CRD the way the API server's create and update
// handlers do, without a server: unknown fields (as strict field validation reports them),
// the OpenAPI schema, then the CEL rules. The end-to-end tests check the same on a real API
// server; this keeps every rule's test fast and close to the rule.
type admitter struct {
	structural *structuralschema.Structural
	schema     apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

func newAdmitter(t testing.TB, crd *apiextensionsv1.CustomResourceDefinition) *admitter {
	t.Helper()
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, internal, nil); err != nil {
		t.Fatal(err)
	}
	s, err := structuralschema.NewStructural(internal)
	if err != nil {
		t.Fatal(err)
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(internal)
	if err != nil {
		t.Fatal(err)
	}
	return &admitter{structural: s, schema: validator, cel: cel.NewValidator(s, true, celconfig.PerCallLimit)}
}

// admit returns the errors the API server would answer for creating obj (old == nil) or
// updating old to obj, one string per error.
func (a *admitter) admit(obj, old map[string]any) []string {
	obj, old = asDecoded(obj), asDecoded(old)
	var errs field.ErrorList
	for _, path := range pruning.PruneWithOptions(asDecoded(obj), a.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}) {
		errs = append(errs, field.Invalid(field.NewPath(path), nil, "unknown field: field not declared in schema"))
	}
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, a.structural, obj)...)
	if old == nil {
		errs = append(errs, apiservervalidation.ValidateCustomResource(nil, obj, a.schema)...)
	} else {
		errs = append(errs, apiservervalidation.ValidateCustomResourceUpdate(nil, obj, old, a.schema)...)
	}
	var oldObj any
	if old != nil {
		oldObj = old
	}
	celErrs, _ := a.cel.Validate(context.Background(), nil, a.structural, obj, oldObj, celconfig.RuntimeCELCostBudget)
	errs = append(errs, celErrs...)
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// asDecoded returns obj as the API server decodes a request body: integers as int64.
func asDecoded(obj map[string]any) map[string]any {
	if obj == nil {
		return nil
	}
	data, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	out := map[string]any{}
	if err := utiljson.Unmarshal(data, &out); err != nil {
		panic(err)
	}
	return out
}

func anyContains(errs []string, want string) bool {
	for _, e := range errs {
		if strings.Contains(e, want) {
			return true
		}
	}
	return false
}
