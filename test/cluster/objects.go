package cluster

// Generic helpers for objects installed from YAML: the project's CRDs and Kueue's, and
// Kueue's queues, here; the tests' own objects in test/e2e.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/t9k-jobs/t9k-jobs/manifests"
)

// InstallCRDs installs the project's CRDs and waits until they are served; as
// Options.BeforeControllers, before the cluster's controllers start, so that its garbage
// collector and Kueue know them from the first.
func InstallCRDs(ctx context.Context, config *rest.Config) error {
	client, err := apiextensionsclient.NewForConfig(config)
	if err != nil {
		return err
	}
	crds, err := manifests.CRDs()
	if err != nil {
		return err
	}
	var names []string
	for _, crd := range crds {
		if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		names = append(names, crd.Name)
	}
	return WaitEstablished(ctx, client, names, 30*time.Second)
}

// WaitEstablished waits until the API server serves the named CRDs.
func WaitEstablished(ctx context.Context, client apiextensionsclient.Interface, names []string, timeout time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, name := range names {
			crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				last = err
				return false, nil
			}
			if !slices.ContainsFunc(crd.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
				return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
			}) {
				last = fmt.Errorf("%s is not established", name)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("waiting for CRDs to be established: %w", last)
	}
	return err
}

// CreateObjects creates the objects of a YAML stream through the dynamic client, each in the
// resource its kind names, and returns those it created: one that exists already is left as
// it is.
func CreateObjects(ctx context.Context, client dynamic.Interface, manifests string) ([]*unstructured.Unstructured, error) {
	docs, err := splitYAML([]byte(manifests))
	if err != nil {
		return nil, err
	}
	var created []*unstructured.Unstructured
	for _, doc := range docs {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
			return created, err
		}
		gvr, _ := meta.UnsafeGuessKindToResource(obj.GroupVersionKind()) // ClusterQueue: clusterqueues, ...Class: ...classes
		out, err := client.Resource(gvr).Namespace(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{})
		switch {
		case apierrors.IsAlreadyExists(err):
		case err != nil:
			return created, fmt.Errorf("creating %s %s: %w", obj.GetKind(), obj.GetName(), err)
		default:
			created = append(created, out)
		}
	}
	return created, nil
}

// createOrUpdate creates obj, or replaces the object of its name.
func createOrUpdate[T metav1.Object](ctx context.Context, client interface {
	Create(context.Context, T, metav1.CreateOptions) (T, error)
	Get(context.Context, string, metav1.GetOptions) (T, error)
	Update(context.Context, T, metav1.UpdateOptions) (T, error)
}, obj T) error {
	_, err := client.Create(ctx, obj, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	old, err := client.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if err != nil {
		return err
	}
	obj.SetResourceVersion(old.GetResourceVersion())
	_, err = client.Update(ctx, obj, metav1.UpdateOptions{})
	return err
}

// readYAML decodes the YAML file path into v.
func readYAML(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// readYAMLDocuments reads the documents of a multi-document YAML file.
func readYAMLDocuments(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	docs, err := splitYAML(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return docs, nil
}

// splitYAML splits a multi-document YAML stream, dropping empty documents.
func splitYAML(b []byte) ([][]byte, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var docs [][]byte
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) > 0 {
			docs = append(docs, doc)
		}
	}
}
