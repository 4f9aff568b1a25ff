// Package kubectlt9k is the kubectl plugin `kubectl t9k` (docs/kubectl-plugin.md): jobs of
// all five kinds in one table, why a job waits or failed, its replicas' logs interleaved,
// and pause, resume and scale with confirmation of what happened.
package kubectlt9k

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
	batchclient "github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned/typed/batch/v1beta1"
	batchinformers "github.com/t9k-jobs/t9k-jobs/pkg/client/informers/externalversions/batch/v1beta1"
)

// kind is one of the five job kinds, by the names a user types for it, and its typed client
// and informer: the one place that names each kind's generated API.
type kind struct {
	Name     string // GenericJob
	Resource string // genericjobs
	Short    string // gj
	// client is the kind's typed client in a namespace.
	client func(c batchclient.BatchV1beta1Interface, ns string) jobClient
	// informer is the kind's informer of a factory.
	informer func(f batchinformers.Interface) cache.SharedIndexInformer
}

var kinds = []kind{
	{"GenericJob", "genericjobs", "gj",
		func(c batchclient.BatchV1beta1Interface, ns string) jobClient {
			return typed[*batch.GenericJob, *batch.GenericJobList]{c.GenericJobs(ns)}
		},
		func(f batchinformers.Interface) cache.SharedIndexInformer { return f.GenericJobs().Informer() }},
	{"MPIJob", "mpijobs", "mj",
		func(c batchclient.BatchV1beta1Interface, ns string) jobClient {
			return typed[*batch.MPIJob, *batch.MPIJobList]{c.MPIJobs(ns)}
		},
		func(f batchinformers.Interface) cache.SharedIndexInformer { return f.MPIJobs().Informer() }},
	{"ColossalAIJob", "colossalaijobs", "caj",
		func(c batchclient.BatchV1beta1Interface, ns string) jobClient {
			return typed[*batch.ColossalAIJob, *batch.ColossalAIJobList]{c.ColossalAIJobs(ns)}
		},
		func(f batchinformers.Interface) cache.SharedIndexInformer { return f.ColossalAIJobs().Informer() }},
	{"TensorFlowTrainingJob", "tensorflowtrainingjobs", "tfj",
		func(c batchclient.BatchV1beta1Interface, ns string) jobClient {
			return typed[*batch.TensorFlowTrainingJob, *batch.TensorFlowTrainingJobList]{c.TensorFlowTrainingJobs(ns)}
		},
		func(f batchinformers.Interface) cache.SharedIndexInformer {
			return f.TensorFlowTrainingJobs().Informer()
		}},
	{"XGBoostTrainingJob", "xgboosttrainingjobs", "xgbj",
		func(c batchclient.BatchV1beta1Interface, ns string) jobClient {
			return typed[*batch.XGBoostTrainingJob, *batch.XGBoostTrainingJobList]{c.XGBoostTrainingJobs(ns)}
		},
		func(f batchinformers.Interface) cache.SharedIndexInformer { return f.XGBoostTrainingJobs().Informer() }},
}

// jobClient is what the plugin asks of any kind's typed client.
type jobClient interface {
	list(ctx context.Context) ([]jobObject, error)
	get(ctx context.Context, name string) (jobObject, error)
	mergePatch(ctx context.Context, name string, patch []byte) error
	create(ctx context.Context, obj jobObject) (jobObject, error)
}

// typed is a kind's generated typed client (T its object, L its list) as a jobClient.
type typed[T jobObject, L runtime.Object] struct {
	c interface {
		Get(context.Context, string, metav1.GetOptions) (T, error)
		List(context.Context, metav1.ListOptions) (L, error)
		Patch(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (T, error)
		Create(context.Context, T, metav1.CreateOptions) (T, error)
	}
}

func (t typed[T, L]) list(ctx context.Context) ([]jobObject, error) {
	l, err := t.c.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	items, err := apimeta.ExtractList(l) // pointers to the list's items
	if err != nil {
		return nil, err
	}
	objs := make([]jobObject, 0, len(items))
	for _, o := range items {
		objs = append(objs, o.(jobObject))
	}
	return objs, nil
}

func (t typed[T, L]) get(ctx context.Context, name string) (jobObject, error) {
	o, err := t.c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err // not o: a nil *T in a jobObject is not a nil jobObject
	}
	return o, nil
}

// create creates obj, a T, as the plugin's field manager.
func (t typed[T, L]) create(ctx context.Context, obj jobObject) (jobObject, error) {
	o, err := t.c.Create(ctx, obj.(T), metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil {
		return nil, err
	}
	return o, nil
}

// mergePatch patches as kubectl patch --type merge does, as the plugin's field manager.
func (t typed[T, L]) mergePatch(ctx context.Context, name string, patch []byte) error {
	_, err := t.c.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
	return err
}

// kindNamed finds a kind by its name, plural, singular or short name, in any case.
func kindNamed(s string) (kind, error) {
	l := strings.ToLower(strings.TrimSuffix(s, "."+batch.GroupName))
	for _, k := range kinds {
		if l == strings.ToLower(k.Name) || l == k.Resource || l == k.Short {
			return k, nil
		}
	}
	var names []string
	for _, k := range kinds {
		names = append(names, fmt.Sprintf("%s (%s)", strings.ToLower(k.Name), k.Short))
	}
	return kind{}, fmt.Errorf("unknown kind %q: want one of %s", s, strings.Join(names, ", "))
}

// parts are what the plugin reads and writes of a job object of any kind beyond jobObject:
// its metadata, and its spec.runMode.
func parts(o jobObject) (*metav1.ObjectMeta, **batch.RunMode) {
	switch t := o.(type) {
	case *batch.GenericJob:
		return &t.ObjectMeta, &t.Spec.RunMode
	case *batch.MPIJob:
		return &t.ObjectMeta, &t.Spec.RunMode
	case *batch.ColossalAIJob:
		return &t.ObjectMeta, &t.Spec.RunMode
	case *batch.TensorFlowTrainingJob:
		return &t.ObjectMeta, &t.Spec.RunMode
	case *batch.XGBoostTrainingJob:
		return &t.ObjectMeta, &t.Spec.RunMode
	}
	panic(fmt.Sprintf("not a job of the five kinds: %T", o))
}

// jobObject is what every kind has: its metadata and the status all five share.
type jobObject interface {
	metav1.Object
	JobStatus() *batch.JobStatus
}

// job is a job of any kind.
type job struct {
	Kind kind
	jobObject
}

// podLabels select the pods of job j: its name, and its UID, so that a job of the same name
// deleted before has none of them.
func podLabels(j job) labels.Set {
	return labels.Set{batch.LabelJobName: j.GetName(), batch.LabelControllerUID: string(j.GetUID())}
}

// list lists the jobs of the given kinds in namespace ns ("" for all), sorted by namespace,
// name and kind.
func list(ctx context.Context, client versioned.Interface, ns string, of []kind) ([]job, error) {
	var jobs []job
	for _, k := range of {
		objs, err := k.client(client.BatchV1beta1(), ns).list(ctx)
		if err != nil {
			return nil, explain(err, "list", k, ns)
		}
		for _, o := range objs {
			jobs = append(jobs, job{k, o})
		}
	}
	sort.Slice(jobs, func(i, j int) bool {
		a, b := jobs[i], jobs[j]
		if a.GetNamespace() != b.GetNamespace() {
			return a.GetNamespace() < b.GetNamespace()
		}
		if a.GetName() != b.GetName() {
			return a.GetName() < b.GetName()
		}
		return a.Kind.Name < b.Kind.Name
	})
	return jobs, nil
}

// find finds the job ref names in namespace ns: KIND/NAME, or NAME alone when one job of any
// kind has that name.
func find(ctx context.Context, client versioned.Interface, ns, ref string) (job, error) {
	if kindName, name, ok := strings.Cut(ref, "/"); ok {
		k, err := kindNamed(kindName)
		if err != nil {
			return job{}, err
		}
		o, err := k.client(client.BatchV1beta1(), ns).get(ctx, name)
		if apierrors.IsNotFound(err) {
			return job{}, fmt.Errorf("no %s named %q in namespace %q; `kubectl t9k get` lists the jobs there", strings.ToLower(k.Name), name, ns)
		}
		if err != nil {
			return job{}, explain(err, "get", k, ns)
		}
		return job{k, o}, nil
	}
	var found []job
	for _, k := range kinds {
		o, err := k.client(client.BatchV1beta1(), ns).get(ctx, ref)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return job{}, explain(err, "get", k, ns)
		}
		found = append(found, job{k, o})
	}
	switch len(found) {
	case 0:
		return job{}, fmt.Errorf("no job named %q in namespace %q (of any of the five kinds); `kubectl t9k get` lists them", ref, ns)
	case 1:
		return found[0], nil
	}
	var refs []string
	for _, j := range found {
		refs = append(refs, strings.ToLower(j.Kind.Name)+"/"+ref)
	}
	return job{}, fmt.Errorf("%d jobs are named %q in namespace %q: name one of %s", len(found), ref, ns, strings.Join(refs, ", "))
}

// explain turns the API's refusals into what a person can do about them.
func explain(err error, verb string, k kind, ns string) error {
	where := "in namespace " + ns
	if ns == "" {
		where = "in any namespace"
	}
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("you may not %s %s %s: ask for the t9k-jobs-view role there (t9k-jobs-edit to change jobs; docs/install.md)", verb, k.Resource, where)
	case apierrors.IsNotFound(err) && verb == "list":
		return fmt.Errorf("the cluster does not serve %s.%s: is t9k-jobs installed? (docs/install.md)", k.Resource, batch.GroupName)
	}
	return err
}
