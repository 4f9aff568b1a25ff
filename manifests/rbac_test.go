package manifests

import (
	"maps"
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

// A namespaced install (examples/namespaced-install) grants what the default install's
// ClusterRole does, split in two: what is in a namespace by t9k-job-controller-namespaced,
// bound in the listed namespaces alone, and the rest cluster-wide by
// t9k-job-controller-cluster, which must name nothing in a namespace (a Secret read
// cluster-wide is what the namespaced install is for). A permission added to one install
// and not to the other fails here.
func TestNamespacedRBACSplitsTheClusterRole(t *testing.T) {
	full := clusterRoles(t, "rbac.yaml")["t9k-job-controller"]
	split := clusterRoles(t, "namespaced/rbac.yaml")
	namespaced, cluster := split["t9k-job-controller-namespaced"], split["t9k-job-controller-cluster"]
	if full == nil || namespaced == nil || cluster == nil {
		t.Fatalf("ClusterRoles: default %v, namespaced %v, cluster %v", full != nil, namespaced != nil, cluster != nil)
	}
	if got, want := grants(append(slices.Clone(namespaced.Rules), cluster.Rules...)), grants(full.Rules); !got.Equal(want) {
		t.Errorf("the namespaced install grants %v more and %v less than the default", sets.List(got.Difference(want)), sets.List(want.Difference(got)))
	}
	clusterScoped := sets.New("resourceflavors", "workloadpriorityclasses", "customresourcedefinitions", "tokenreviews")
	for _, rule := range cluster.Rules {
		for _, r := range rule.Resources {
			if !clusterScoped.Has(r) {
				t.Errorf("t9k-job-controller-cluster grants %v on %s in every namespace", rule.Verbs, r)
			}
		}
	}
}

// clusterRoles reads the ClusterRoles of a manifest, by name.
func clusterRoles(t *testing.T, file string) map[string]*rbacv1.ClusterRole {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]*rbacv1.ClusterRole{}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		r := &rbacv1.ClusterRole{}
		if err := yaml.Unmarshal([]byte(doc), r); err == nil && r.Kind == "ClusterRole" {
			roles[r.Name] = r
		}
	}
	return roles
}

// grants lists what rules grant, one "group resource[/name] verb" each.
func grants(rules []rbacv1.PolicyRule) sets.Set[string] {
	out := sets.New[string]()
	for _, rule := range rules {
		names := rule.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range rule.APIGroups {
			for _, r := range rule.Resources {
				for _, n := range names {
					for _, v := range rule.Verbs {
						out.Insert(g + " " + r + "/" + n + " " + v)
					}
				}
			}
		}
	}
	return out
}

// The users' ClusterRoles (user-roles.yaml), aggregated into admin, edit and view, cover every
// kind the CRDs serve: editors may create, change and delete each, and resize those with a
// scale subresource; viewers may read each, and its status and scale.
func TestUserRolesCoverEveryKind(t *testing.T) {
	data, err := os.ReadFile("user-roles.yaml")
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]*rbacv1.ClusterRole{}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		r := &rbacv1.ClusterRole{}
		if err := yaml.UnmarshalStrict([]byte(doc), r); err != nil {
			t.Fatal(err)
		}
		roles[r.Name] = r
	}
	grants := func(role *rbacv1.ClusterRole, resource string) sets.Set[string] {
		verbs := sets.New[string]()
		for _, rule := range role.Rules {
			if slices.Contains(rule.APIGroups, "batch.tensorstack.dev") && slices.Contains(rule.Resources, resource) {
				verbs.Insert(rule.Verbs...)
			}
		}
		return verbs
	}
	edit, view := roles["t9k-jobs-edit"], roles["t9k-jobs-view"]
	if edit == nil || view == nil || edit.Labels["rbac.authorization.k8s.io/aggregate-to-edit"] != "true" ||
		view.Labels["rbac.authorization.k8s.io/aggregate-to-view"] != "true" {
		t.Fatalf("user-roles.yaml: want t9k-jobs-edit aggregated to edit and t9k-jobs-view to view, got %v", slices.Collect(maps.Keys(roles)))
	}
	crds, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds {
		plural := crd.Spec.Names.Plural
		need := map[*rbacv1.ClusterRole]map[string][]string{
			edit: {plural: {"create", "update", "patch", "delete", "get", "list", "watch"}, plural + "/status": {"get"}},
			view: {plural: {"get", "list", "watch"}, plural + "/status": {"get"}},
		}
		if crd.Spec.Versions[0].Subresources.Scale != nil {
			need[edit][plural+"/scale"] = []string{"get", "update", "patch"}
			need[view][plural+"/scale"] = []string{"get"}
		}
		for role, resources := range need {
			for resource, verbs := range resources {
				if missing := sets.New(verbs...).Difference(grants(role, resource)); missing.Len() > 0 {
					t.Errorf("%s does not let its holders %v %s", role.Name, sets.List(missing), resource)
				}
			}
		}
	}
}
