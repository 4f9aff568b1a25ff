package main

import (
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	jobfake "github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned/fake"
)

// --namespace takes namespaces' names, each once, and says what is wrong with one that is not.
func TestNamespacesChecked(t *testing.T) {
	for _, tc := range []struct {
		namespaces []string
		err        string
	}{
		{nil, ""},
		{[]string{"team-a", "team-b"}, ""},
		{[]string{"Team-A"}, `--namespace="Team-A": not a namespace's name`},
		{[]string{"team-a", ""}, `--namespace="": not a namespace's name`},
		{[]string{"team-a", "team-a"}, `--namespace lists "team-a" twice`},
	} {
		err := checkNamespaces(tc.namespaces)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%q: %v, want %q", tc.namespaces, err, tc.err)
		}
	}
}

// One scope watches every namespace; a list of namespaces is a scope each, whose informers
// list and watch in that namespace alone (a namespaced install may read nothing else).
func TestAScopeForEachNamespace(t *testing.T) {
	kube, jobs := fake.NewClientset(), jobfake.NewClientset()
	if s := newScopes(options{}, jobs, jobs, kube); len(s) != 1 || s[0].namespace != "" {
		t.Fatalf("no --namespace: scopes %+v, want one of every namespace", s)
	}
	scopes := newScopes(options{namespaces: []string{"team-a", "team-b"}}, jobs, jobs, kube)
	if len(scopes) != 2 {
		t.Fatalf("%d scopes, want 2", len(scopes))
	}
	for _, s := range scopes {
		if len(s.kinds) != 5 {
			t.Errorf("scope %s runs %d kinds, want 5", s.namespace, len(s.kinds))
		}
		// The factories' informers list in their namespace: a fake clientset records it.
		s.children.Kube.Core().V1().Pods().Informer()
		s.jobs.Batch().V1beta1().GenericJobs().Informer()
	}
	stop := make(chan struct{})
	for _, s := range scopes {
		s.children.Kube.Start(stop)
		s.jobs.Start(stop)
		s.children.Kube.WaitForCacheSync(stop)
		s.jobs.WaitForCacheSync(stop)
	}
	for _, a := range append(kube.Actions(), jobs.Actions()...) {
		if a.GetVerb() != "list" && a.GetVerb() != "watch" {
			continue
		}
		if ns := a.GetNamespace(); ns != "team-a" && ns != "team-b" {
			t.Errorf("%s %s in namespace %q, want team-a or team-b alone", a.GetVerb(), a.GetResource().Resource, ns)
		}
	}
	close(stop)
	for _, s := range scopes {
		s.children.Kube.Shutdown()
		s.jobs.Shutdown()
	}
}
