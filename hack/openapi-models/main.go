// Command openapi-models prints the OpenAPI v2 models of the API (from the definitions
// openapi-gen wrote) as JSON. applyconfiguration-gen reads them, so that server-side apply of
// our kinds, and of their status, works with the generated fake clientset too.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"

	batchv1beta1 "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/openapi"
)

func main() {
	ref := func(name string) spec.Ref {
		return spec.MustCreateRef("#/definitions/" + util.ToRESTFriendlyName(name))
	}
	defs := openapi.GetOpenAPIDefinitions(ref)

	// Root kinds carry their group, version and kind, as the API server's models do: the
	// apply machinery finds them by it.
	scheme := runtime.NewScheme()
	if err := batchv1beta1.AddToScheme(scheme); err != nil {
		fail(err)
	}
	gv := batchv1beta1.SchemeGroupVersion
	for kind, t := range scheme.KnownTypes(gv) {
		name := t.PkgPath() + "." + t.Name()
		def, ok := defs[name]
		if !ok || strings.HasSuffix(kind, "List") {
			continue
		}
		def.Schema.AddExtension("x-kubernetes-group-version-kind", []map[string]string{{
			"group": gv.Group, "version": gv.Version, "kind": kind,
		}})
		defs[name] = def
	}

	models := make(spec.Definitions, len(defs))
	for name, def := range defs {
		schema := def.Schema
		// Types with an OpenAPI v3 schema (Quantity, IntOrString) carry their v2 one inside.
		if v2, ok := schema.Extensions[common.ExtensionV2Schema].(spec.Schema); ok {
			schema = v2
		}
		models[util.ToRESTFriendlyName(name)] = schema
	}
	doc := spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger:     "2.0",
		Info:        &spec.Info{InfoProps: spec.InfoProps{Title: "t9k-jobs", Version: gv.Version}},
		Paths:       &spec.Paths{Paths: map[string]spec.PathItem{}},
		Definitions: models,
	}}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		fail(err)
	}
	fmt.Println(string(out))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "openapi-models:", err)
	os.Exit(1)
}
