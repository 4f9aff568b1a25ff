package progress

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
	jobinformers "github.com/t9k-jobs/t9k-jobs/pkg/client/informers/externalversions"
)

// FieldManager names the progress endpoint in the managedFields of what it writes (a job's
// status.progress, the Secret of its certificate): its own name, beside the engine's
// t9k-job-controller, so that `kubectl get -o yaml --show-managed-fields` says which part of
// the controller wrote a field.
const FieldManager = "t9k-job-controller-progress"

// Job is a job of any kind, as the endpoint reads it.
type Job interface {
	metav1.Object
	JobStatus() *batch.JobStatus
}

// Kind is one job kind: its jobs read from the informer cache the engine shares, and its
// status patched.
type Kind struct {
	Resource string
	Synced   cache.InformerSynced
	Get      func(namespace, name string) (Job, error)
	// Patch sends a JSON merge patch of the job's status subresource.
	Patch func(ctx context.Context, namespace, name string, patch []byte) error
}

// Kinds are the five kinds, read through f (the jobs' informer factory) and written with
// client.
func Kinds(client versioned.Interface, f jobinformers.SharedInformerFactory) []Kind {
	b, c := f.Batch().V1beta1(), client.BatchV1beta1()
	return []Kind{
		kind("genericjobs", b.GenericJobs().Informer(), b.GenericJobs().Lister().GenericJobs, c.GenericJobs),
		kind("mpijobs", b.MPIJobs().Informer(), b.MPIJobs().Lister().MPIJobs, c.MPIJobs),
		kind("colossalaijobs", b.ColossalAIJobs().Informer(), b.ColossalAIJobs().Lister().ColossalAIJobs, c.ColossalAIJobs),
		kind("tensorflowtrainingjobs", b.TensorFlowTrainingJobs().Informer(), b.TensorFlowTrainingJobs().Lister().TensorFlowTrainingJobs, c.TensorFlowTrainingJobs),
		kind("xgboosttrainingjobs", b.XGBoostTrainingJobs().Informer(), b.XGBoostTrainingJobs().Lister().XGBoostTrainingJobs, c.XGBoostTrainingJobs),
	}
}

func kind[T Job, L interface{ Get(name string) (T, error) }, C interface {
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}](resource string, informer cache.SharedIndexInformer, lister func(namespace string) L, client func(namespace string) C) Kind {
	return Kind{
		Resource: resource,
		Synced:   informer.HasSynced,
		Get:      func(ns, name string) (Job, error) { return lister(ns).Get(name) },
		Patch: func(ctx context.Context, ns, name string, patch []byte) error {
			_, err := client(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager}, "status")
			return err
		},
	}
}

// Pods finds the pods of jobs in an informer's cache of any type whose objects have metadata
// (the engine's cache keeps pods trimmed).
type Pods struct {
	Synced cache.InformerSynced
	// Get finds a pod by namespace and name.
	Get func(namespace, name string) (metav1.Object, bool)
	// OfJob are the pods a job controls, by the job's UID.
	OfJob func(jobUID types.UID) []metav1.Object
}

// PodsOf reads pods from informer's cache, whose index byJob indexes them by their job's UID.
func PodsOf(informer cache.SharedIndexInformer, byJob string) Pods {
	indexer := informer.GetIndexer()
	return Pods{
		Synced: informer.HasSynced,
		Get: func(ns, name string) (metav1.Object, bool) {
			obj, ok, err := indexer.GetByKey(ns + "/" + name)
			if err != nil || !ok {
				return nil, false
			}
			m, isMeta := obj.(metav1.Object)
			return m, isMeta
		},
		OfJob: func(jobUID types.UID) []metav1.Object {
			objs, _ := indexer.ByIndex(byJob, string(jobUID))
			pods := make([]metav1.Object, 0, len(objs))
			for _, o := range objs {
				if m, ok := o.(metav1.Object); ok && controllerUID(m) == jobUID {
					pods = append(pods, m)
				}
			}
			return pods
		},
	}
}

// controllerUID is the UID of the object's controller (its owner reference that controls it).
func controllerUID(o metav1.Object) types.UID {
	if ref := metav1.GetControllerOfNoCopy(o); ref != nil {
		return ref.UID
	}
	return ""
}

// Source is what the endpoint reads: the jobs of each kind, and their pods.
type Source struct {
	Kinds []Kind
	Pods  Pods
}

// InNamespaces joins the sources of several namespaces, each read by informers of its own (a
// controller that runs the jobs of a list of namespaces): a job or a pod is looked up in its
// namespace's. A single source is returned as it is (one namespace, or all of them).
func InNamespaces(sources map[string]Source) Source {
	var first Source
	for _, s := range sources {
		first = s
		break
	}
	if len(sources) == 1 {
		return first
	}
	joined := Source{Kinds: make([]Kind, len(first.Kinds))}
	for i, k := range first.Kinds {
		joined.Kinds[i] = Kind{
			Resource: k.Resource,
			Synced: func() bool {
				for _, s := range sources {
					if !s.Kinds[i].Synced() {
						return false
					}
				}
				return true
			},
			Get: func(ns, name string) (Job, error) {
				s, ok := sources[ns]
				if !ok {
					return nil, apierrors.NewNotFound(batch.Resource(k.Resource), name)
				}
				return s.Kinds[i].Get(ns, name)
			},
			Patch: k.Patch, // the same client in every namespace
		}
	}
	joined.Pods = Pods{
		Synced: func() bool {
			for _, s := range sources {
				if !s.Pods.Synced() {
					return false
				}
			}
			return true
		},
		Get: func(ns, name string) (metav1.Object, bool) {
			s, ok := sources[ns]
			if !ok {
				return nil, false
			}
			return s.Pods.Get(ns, name)
		},
		// A UID is one pod's in the cluster: the namespace of its job is not needed.
		OfJob: func(jobUID types.UID) []metav1.Object {
			var pods []metav1.Object
			for _, s := range sources {
				pods = append(pods, s.Pods.OfJob(jobUID)...)
			}
			return pods
		},
	}
	return joined
}
