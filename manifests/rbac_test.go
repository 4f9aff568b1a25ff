package manifests

import (
	"os"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/yaml"

	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/gang"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/kueue"
)

// The controller may read and write every kind of child in the engine's table and its
// admitters': a kind added there without RBAC would be forbidden on a real cluster, whatever
// the fake clients allow.
func TestRBACCoversEveryChildKind(t *testing.T) {
	data, err := os.ReadFile("rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var role *rbacv1.ClusterRole
	for _, doc := range strings.Split(string(data), "\n---\n") {
		r := &rbacv1.ClusterRole{}
		if err := yaml.Unmarshal([]byte(doc), r); err == nil && r.Kind == "ClusterRole" {
			role = r
		}
	}
	if role == nil {
		t.Fatal("no ClusterRole in rbac.yaml")
	}
	for _, k := range slices.Concat(engine.ChildKinds(), kueue.ChildKinds(), gang.ChildKinds()) {
		need := []string{"get", "list", "watch", "create", "delete"}
		if !k.ReplaceOnChange {
			need = append(need, "update")
		}
		if k.Kind == kueue.WorkloadKind {
			need = append(need, "patch") // a priority class changed; a prebuilt Workload adopted
		}
		granted := sets.New[string]()
		for _, rule := range role.Rules {
			if sets.New(rule.APIGroups...).Has(k.Group) && sets.New(rule.Resources...).Has(k.Resource) {
				granted.Insert(rule.Verbs...)
			}
		}
		if missing := sets.New(need...).Difference(granted); missing.Len() > 0 {
			t.Errorf("the ClusterRole does not let the controller %v %s (group %q)", sets.List(missing), k.Resource, k.Group)
		}
	}
}

// Kueue may do to every kind what its controller does to a MultiKueue job: read it and write
// its status on the manager; create, watch and delete the copies on a worker
// (manifests/kueue, docs/queueing.md).
func TestKueueRBACCoversEveryKind(t *testing.T) {
	data, err := os.ReadFile("kueue/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var role *rbacv1.ClusterRole
	bound := false
	for _, doc := range strings.Split(string(data), "\n---\n") {
		r := &rbacv1.ClusterRole{}
		if err := yaml.Unmarshal([]byte(doc), r); err == nil && r.Kind == "ClusterRole" && r.Name == "t9k-jobs-kueue" {
			role = r
		}
		b := &rbacv1.ClusterRoleBinding{}
		if err := yaml.Unmarshal([]byte(doc), b); err == nil && b.Kind == "ClusterRoleBinding" && b.RoleRef.Name == "t9k-jobs-kueue" &&
			len(b.Subjects) == 1 && b.Subjects[0].Name == "kueue-controller-manager" && b.Subjects[0].Namespace == "kueue-system" {
			bound = true
		}
	}
	if role == nil || !bound {
		t.Fatalf("kueue/rbac.yaml: ClusterRole t9k-jobs-kueue %v, bound to kueue-system/kueue-controller-manager %v", role != nil, bound)
	}
	crds, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds {
		for resource, need := range map[string][]string{
			crd.Spec.Names.Plural:             {"get", "list", "watch", "create", "delete"},
			crd.Spec.Names.Plural + "/status": {"get", "update", "patch"},
		} {
			granted := sets.New[string]()
			for _, rule := range role.Rules {
				if sets.New(rule.APIGroups...).Has(crd.Spec.Group) && sets.New(rule.Resources...).Has(resource) {
					granted.Insert(rule.Verbs...)
				}
			}
			if missing := sets.New(need...).Difference(granted); missing.Len() > 0 {
				t.Errorf("Kueue may not %v %s", sets.List(missing), resource)
			}
		}
	}
}
