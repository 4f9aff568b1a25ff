// Package examples embeds the documented examples, so that tests read exactly the files a
// user would apply.
package examples

import (
	"embed"
	"io/fs"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

//go:embed *.yaml
var files embed.FS

// AsPublished is the XGBoostTrainingJob example exactly as the documentation prints it: its
// worker lists containers directly under template, so the API server refuses it.
const AsPublished = "xgboost-example-as-published.yaml"

// Names lists the example files.
func Names() []string {
	names, _ := fs.Glob(files, "*.yaml")
	return names
}

// Object returns an example decoded as the API server decodes a request: a JSON object with
// integers as int64.
func Object(name string) (map[string]any, error) {
	data, err := files.ReadFile(name)
	if err != nil {
		return nil, err
	}
	jsonData, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	obj := map[string]any{}
	return obj, utiljson.Unmarshal(jsonData, &obj)
}

// Decode strictly decodes an example into a typed object, e.g. a *v1beta1.GenericJob.
func Decode(name string, into any) error {
	data, err := files.ReadFile(name)
	if err != nil {
		return err
	}
	return yaml.UnmarshalStrict(data, into)
}
