package enginetest

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// AsDecoded is obj as a controller's cache holds it: client-go's decoder clears an object's
// kind and API version, so a job read from an informer has none. The fake clientsets keep
// them; the caches of these fixtures drop them, so that code that needs a job's kind (the
// name of its Workload or PodGroup) fails here as it would against an API server.
func AsDecoded(obj any) (any, error) {
	o, ok := obj.(runtime.Object)
	if !ok {
		return obj, nil // a tombstone
	}
	o = o.DeepCopyObject()
	o.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return o, nil
}
