package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// helm runs Helm as pinned in hack/tools/helm against the cluster under test.
func helm(args ...string) (string, error) {
	cmd := exec.Command("go", append([]string{"-C", filepath.Join(repoRoot, "hack", "tools", "helm"), "tool", "helm", "--kubeconfig", env.kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestHelmInstall: the chart on the real node (docs/install.md, "With Helm"): helm install
// runs the controller and a job; helm upgrade to the release's image rolls the Deployment
// while a job runs, and the job's pods are the same ones after it; helm uninstall leaves
// nothing of the controller but the CRDs (and so the jobs), as Helm does with a chart's crds/.
func TestHelmInstall(t *testing.T) {
	needInstall(t)
	handOverToInstalled(t)
	const devImage = "ghcr.io/t9k-jobs/t9k-job-controller:dev" // the chart's default image
	// Helm runs in hack/tools/helm: the chart by its absolute path.
	chart, err := filepath.Abs(filepath.Join(repoRoot, "charts", "t9k-jobs"))
	if err != nil {
		t.Fatal(err)
	}

	// What the suite's controller was given (manifests/rbac.yaml, applied by kubectl) is not
	// Helm's to take: it goes first, the CRDs stay.
	if out, err := kubectl("delete", "--ignore-not-found", "--wait=true", "-f", filepath.Join(repoRoot, "manifests", "rbac.yaml")); err != nil {
		t.Fatalf("deleting the suite's permissions: %v\n%s", err, out)
	}
	waitGone(t, "namespace "+controllerNamespace, func(ctx context.Context) error {
		_, err := env.kube.CoreV1().Namespaces().Get(ctx, controllerNamespace, metav1.GetOptions{})
		return err
	})

	if out, err := helm("install", "t9k-jobs", chart, "--namespace", controllerNamespace, "--create-namespace"); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = helm("uninstall", "t9k-jobs", "--namespace", controllerNamespace, "--ignore-not-found") })
	waitLeader(t, waitControllerPods(t, devImage))
	ns := namespace(t)
	createJob(t, ns, quickJob("under-helm", "0s"))
	waitJob(t, ns, "under-helm", "Succeeded", inPhase(batch.JobSucceeded))

	// The upgrade, to the release's image pinned by digest, while a job runs.
	data, err := os.ReadFile(filepath.Join(install.release, "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	released := imageIn(t, string(data))
	named, digest, _ := strings.Cut(released, "@")
	tag := named[strings.LastIndex(named, ":")+1:]
	createJob(t, ns, quickJob("across-helm-upgrade", "15s"))
	running := waitJob(t, ns, "across-helm-upgrade", "Running", inPhase(batch.JobRunning))
	before := map[string]bool{}
	for _, r := range running.Status.Tasks[0].Replicas {
		before[string(r.UID)] = true
	}
	if out, err := helm("upgrade", "t9k-jobs", chart, "--namespace", controllerNamespace, "--set", "image.tag="+tag, "--set", "image.digest="+digest); err != nil {
		t.Fatalf("helm upgrade: %v\n%s", err, out)
	}
	waitLeader(t, waitControllerPods(t, released))
	done := waitJob(t, ns, "across-helm-upgrade", "Succeeded", inPhase(batch.JobSucceeded))
	for _, r := range done.Status.Tasks[0].Replicas {
		if !before[string(r.UID)] || r.RestartCount != 0 {
			t.Errorf("replica %s after the upgrade: pod %s, %d restarts; want the pod it had before, not restarted", r.Name, r.UID, r.RestartCount)
		}
	}

	if out, err := helm("uninstall", "t9k-jobs", "--namespace", controllerNamespace, "--wait"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	ctx := context.Background()
	for what, get := range map[string]func() error{
		"Deployment": func() error {
			_, err := env.kube.AppsV1().Deployments(controllerNamespace).Get(ctx, controllerDeployment, metav1.GetOptions{})
			return err
		},
		"ServiceAccount": func() error {
			_, err := env.kube.CoreV1().ServiceAccounts(controllerNamespace).Get(ctx, "t9k-job-controller", metav1.GetOptions{})
			return err
		},
		"ClusterRole": func() error {
			_, err := env.kube.RbacV1().ClusterRoles().Get(ctx, "t9k-job-controller", metav1.GetOptions{})
			return err
		},
		"ClusterRole t9k-jobs-edit": func() error {
			_, err := env.kube.RbacV1().ClusterRoles().Get(ctx, "t9k-jobs-edit", metav1.GetOptions{})
			return err
		},
		"ValidatingAdmissionPolicy": func() error {
			_, err := env.kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, "t9k-job-controller-writes", metav1.GetOptions{})
			return err
		},
	} {
		if err := get(); !apierrors.IsNotFound(err) {
			t.Errorf("after helm uninstall, the %s is left (%v)", what, err)
		}
	}
	crds := apiextensionsclient.NewForConfigOrDie(env.config).ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Get(ctx, "genericjobs."+batch.GroupName, metav1.GetOptions{}); err != nil {
		t.Errorf("after helm uninstall the CRDs should stay, as Helm keeps a chart's crds/: %v", err)
	}
	if j := getJob(t, ns, "under-helm"); j.Status.Phase != batch.JobSucceeded {
		t.Errorf("a job after helm uninstall: phase %q, want it kept as it was", j.Status.Phase)
	}
}
