package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// TestNamespacedInstall installs the controller as examples/namespaced-install says, for two
// namespaces of the test's, on the real node: their jobs run; a job in a third namespace is
// not touched; the controller's token may read Secrets in the two and nowhere else, cluster
// wide neither; the controller's log shows no request refused; `kubectl delete -k` leaves
// nothing behind, the split ClusterRoles neither.
func TestNamespacedInstall(t *testing.T) {
	needInstall(t)
	handOverToInstalled(t)
	const devImage = "ghcr.io/t9k-jobs/t9k-job-controller:dev" // manifests/kustomization.yaml
	a, b, other := namespace(t), namespace(t), namespace(t)
	dir := namespacedOverlay(t, a, b)

	// The suite's controller ran with the default install's permissions: they go first, as
	// when an install is switched to namespaced (kubectl apply removes nothing).
	if out, err := kubectl("delete", "--ignore-not-found", "clusterrolebinding/t9k-job-controller", "clusterrole/t9k-job-controller"); err != nil {
		t.Fatalf("deleting the default install's ClusterRole: %v\n%s", err, out)
	}
	if out, err := kubectl("apply", "-k", dir); err != nil {
		t.Fatalf("kubectl apply -k (the namespaced install): %v\n%s", err, out)
	}
	_ = os.RemoveAll(env.kubectlCache) // the CRDs are new
	leader := waitLeader(t, waitControllerPods(t, devImage))

	createJob(t, other, quickJob("elsewhere", "0s"))
	for _, ns := range []string{a, b} {
		createJob(t, ns, quickJob("listed", "0s"))
	}
	for _, ns := range []string{a, b} {
		waitJob(t, ns, "listed", "Succeeded", inPhase(batch.JobSucceeded))
	}
	// Both listed namespaces' jobs ran to their end meanwhile: one in a namespace not listed
	// would have been seen by then.
	if j := getJob(t, other, "elsewhere"); j.Status.Phase != "" || len(jobPods(t, other, "elsewhere-")) != 0 {
		t.Errorf("the job of a namespace not listed was run: phase %q", j.Status.Phase)
	}

	// The controller's own token.
	token, err := env.kube.CoreV1().ServiceAccounts(controllerNamespace).CreateToken(context.Background(), "t9k-job-controller",
		&authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(env.config)
	cfg.BearerToken = token.Status.Token
	sa := kubernetes.NewForConfigOrDie(cfg)
	for ns, allowed := range map[string]bool{a: true, b: true, other: false, "": false} {
		_, err := sa.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{Limit: 1})
		where := "namespace " + ns
		if ns == "" {
			where = "every namespace"
		}
		switch {
		case allowed && err != nil:
			t.Errorf("the controller's token may not list Secrets in %s: %v", where, err)
		case !allowed && !apierrors.IsForbidden(err):
			t.Errorf("the controller's token lists Secrets in %s (err %v), want forbidden", where, err)
		}
	}
	if log, err := kubectl("logs", "-n", controllerNamespace, leader); err != nil || strings.Contains(log, "forbidden") {
		t.Errorf("the leader's log says a request was refused (err %v):\n%s", err, log)
	}

	if out, err := kubectl("delete", "-k", dir); err != nil {
		t.Fatalf("kubectl delete -k (the namespaced install): %v\n%s", err, out)
	}
	checkNothingLeft(t)
	for _, name := range []string{"t9k-job-controller-namespaced", "t9k-job-controller-cluster"} {
		waitGone(t, "ClusterRole "+name, func(ctx context.Context) error {
			_, err := env.kube.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
			return err
		})
	}
}

// namespacedOverlay is examples/namespaced-install as a user edits it: a copy, for the
// namespaces a and b instead of team-a and team-b, over the repository's manifests.
func namespacedOverlay(t *testing.T, a, b string) string {
	t.Helper()
	dir := t.TempDir()
	example := filepath.Join(repoRoot, "examples", "namespaced-install")
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	manifests, err := filepath.Rel(dir, filepath.Join(root, "manifests")) // kustomize takes a base by a relative path only
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"kustomization.yaml", "rolebindings.yaml"} {
		data, err := os.ReadFile(filepath.Join(example, name))
		if err != nil {
			t.Fatal(err)
		}
		text := strings.NewReplacer("team-a", a, "team-b", b, "../../manifests", manifests).Replace(string(data))
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
