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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
)

// kind is one of the five job kinds, by the names a user types for it.
type kind struct {
	Name     string // GenericJob
	Resource string // genericjobs
	Short    string // gj
}

var kinds = []kind{
	{"GenericJob", "genericjobs", "gj"},
	{"MPIJob", "mpijobs", "mj"},
	{"ColossalAIJob", "colossalaijobs", "caj"},
	{"TensorFlowTrainingJob", "tensorflowtrainingjobs", "tfj"},
	{"XGBoostTrainingJob", "xgboosttrainingjobs", "xgbj"},
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

// list lists the jobs of the given kinds in namespace ns ("" for all), sorted by namespace,
// name and kind.
func list(ctx context.Context, client versioned.Interface, ns string, of []kind) ([]job, error) {
	var jobs []job
	for _, k := range of {
		objs, err := listKind(ctx, client, k, ns)
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

func listKind(ctx context.Context, client versioned.Interface, k kind, ns string) ([]jobObject, error) {
	c := client.BatchV1beta1()
	var objs []jobObject
	switch k.Resource {
	case "genericjobs":
		l, err := c.GenericJobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range l.Items {
			objs = append(objs, &l.Items[i])
		}
	case "mpijobs":
		l, err := c.MPIJobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range l.Items {
			objs = append(objs, &l.Items[i])
		}
	case "colossalaijobs":
		l, err := c.ColossalAIJobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range l.Items {
			objs = append(objs, &l.Items[i])
		}
	case "tensorflowtrainingjobs":
		l, err := c.TensorFlowTrainingJobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range l.Items {
			objs = append(objs, &l.Items[i])
		}
	case "xgboosttrainingjobs":
		l, err := c.XGBoostTrainingJobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range l.Items {
			objs = append(objs, &l.Items[i])
		}
	}
	return objs, nil
}

func getKind(ctx context.Context, client versioned.Interface, k kind, ns, name string) (jobObject, error) {
	c := client.BatchV1beta1()
	get := metav1.GetOptions{}
	switch k.Resource {
	case "genericjobs":
		return c.GenericJobs(ns).Get(ctx, name, get)
	case "mpijobs":
		return c.MPIJobs(ns).Get(ctx, name, get)
	case "colossalaijobs":
		return c.ColossalAIJobs(ns).Get(ctx, name, get)
	case "tensorflowtrainingjobs":
		return c.TensorFlowTrainingJobs(ns).Get(ctx, name, get)
	default:
		return c.XGBoostTrainingJobs(ns).Get(ctx, name, get)
	}
}

// find finds the job ref names in namespace ns: KIND/NAME, or NAME alone when one job of any
// kind has that name.
func find(ctx context.Context, client versioned.Interface, ns, ref string) (job, error) {
	if kindName, name, ok := strings.Cut(ref, "/"); ok {
		k, err := kindNamed(kindName)
		if err != nil {
			return job{}, err
		}
		o, err := getKind(ctx, client, k, ns, name)
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
		o, err := getKind(ctx, client, k, ns, ref)
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
