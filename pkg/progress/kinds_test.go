package progress

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// A controller of several namespaces reads each through informers of its own: the endpoint
// finds a job or a pod in its namespace's, a job's pods in any, none in a namespace not
// listed, and is synced once every namespace is.
func TestSourcesInNamespaces(t *testing.T) {
	source := func(ns string, synced bool) Source {
		job := &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job", UID: types.UID(ns + "-job")}}
		pod := &metav1.ObjectMeta{Namespace: ns, Name: "pod"}
		return Source{
			Kinds: []Kind{{Resource: "genericjobs", Synced: func() bool { return synced },
				Get: func(namespace, name string) (Job, error) {
					if namespace != ns || name != "job" {
						t.Errorf("%s's lister asked for %s/%s", ns, namespace, name)
					}
					return job, nil
				}}},
			Pods: Pods{Synced: func() bool { return synced },
				Get: func(namespace, name string) (metav1.Object, bool) { return pod, namespace == ns && name == "pod" },
				OfJob: func(uid types.UID) []metav1.Object {
					if uid == job.UID {
						return []metav1.Object{pod}
					}
					return nil
				}},
		}
	}
	joined := InNamespaces(map[string]Source{"team-a": source("team-a", true), "team-b": source("team-b", false)})
	if job, err := joined.Kinds[0].Get("team-b", "job"); err != nil || job.GetNamespace() != "team-b" {
		t.Errorf("team-b/job: %v, %v", job, err)
	}
	if _, err := joined.Kinds[0].Get("team-c", "job"); !apierrors.IsNotFound(err) {
		t.Errorf("a job in a namespace not listed: %v, want not found", err)
	}
	if pod, ok := joined.Pods.Get("team-a", "pod"); !ok || pod.GetNamespace() != "team-a" {
		t.Errorf("team-a/pod: %v, %v", pod, ok)
	}
	if _, ok := joined.Pods.Get("team-c", "pod"); ok {
		t.Error("a pod in a namespace not listed was found")
	}
	if pods := joined.Pods.OfJob("team-b-job"); len(pods) != 1 || pods[0].GetNamespace() != "team-b" {
		t.Errorf("team-b's job's pods: %v", pods)
	}
	if joined.Kinds[0].Synced() || joined.Pods.Synced() {
		t.Error("synced while team-b's informers are not")
	}
}
