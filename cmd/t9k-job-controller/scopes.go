package main

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
	jobinformers "github.com/t9k-jobs/t9k-jobs/pkg/client/informers/externalversions"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
	"github.com/t9k-jobs/t9k-jobs/pkg/progress"
)

// A scope is what the controller watches in one namespace, or in all of them (--namespace
// empty): the informer factories of the jobs and of their children, and an adapter of each
// kind over them. An informer lists and watches one namespace or all, and a namespaced
// install (docs/install.md, "A namespaced install") may read nothing outside its namespaces,
// so a list of namespaces is a scope each, with controllers of its own: a job and its
// children are always in one namespace.
type scope struct {
	namespace string // metav1.NamespaceAll: every namespace
	jobs      jobinformers.SharedInformerFactory
	children  engine.Informers
	kinds     []engine.Adapter
}

// newScopes makes the scopes of --namespace: jobs is the client that writes jobs, watchJobs
// and watchKube the ones the informers watch with.
func newScopes(o options, jobs, watchJobs versioned.Interface, watchKube kubernetes.Interface) []scope {
	namespaces := o.namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	scopes := make([]scope, 0, len(namespaces))
	for _, ns := range namespaces {
		// Jobs without managedFields nor kubectl's copy of the applied object
		// (engine.TrimJob): the cache is smaller, and so is every status write, which sends
		// the whole object (the API server keeps what a status write leaves out). The resync
		// brings every job back now and then, should an event it waited for never come.
		f := jobinformers.NewSharedInformerFactoryWithOptions(watchJobs, o.resyncPeriod, jobinformers.WithNamespace(ns),
			jobinformers.WithTransform(engine.TrimJob))
		scopes = append(scopes, scope{namespace: ns, jobs: f, kinds: adapters(jobs, f),
			// The children, of every kind the engine's table lists: only the project's, and
			// of each only what the engine reads (engine.TrimChild): memory.
			children: engine.NewInformers(watchKube, informers.WithNamespace(ns), informers.WithTweakListOptions(onlyChildren))})
	}
	return scopes
}

// checkNamespaces checks --namespace: names of namespaces, each once.
func checkNamespaces(namespaces []string) error {
	for i, ns := range namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("--namespace=%q: not a namespace's name: %s; list namespaces separated by commas, or leave it out to run the jobs of every namespace", ns, errs[0])
		}
		if slices.Contains(namespaces[:i], ns) {
			return fmt.Errorf("--namespace lists %q twice", ns)
		}
	}
	return nil
}

// progressSource is what the progress endpoint reads in every scope: the jobs of each kind,
// and their pods.
func progressSource(jobs versioned.Interface, scopes []scope) (progress.Source, error) {
	per := map[string]progress.Source{}
	for _, s := range scopes {
		pods := s.children.Kube.Core().V1().Pods().Informer()
		if err := engine.IndexChildrenByJob(pods); err != nil {
			return progress.Source{}, err
		}
		per[s.namespace] = progress.Source{Kinds: progress.Kinds(jobs, s.jobs), Pods: progress.PodsOf(pods, engine.IndexByJob)}
	}
	return progress.InNamespaces(per), nil
}
