package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/t9k-jobs/t9k-jobs/test/cluster"
)

// install is what the in-cluster tests install: the image `make image` builds, under the
// name and tag manifests/kustomization.yaml gives the Deployment, and a release made by
// `make release`. Both are built once, by the first test that needs them, and imported into
// the real node's containerd, where its kubelet finds them by name or by digest (nothing is
// pulled).
var install struct {
	once    sync.Once
	err     error
	release string // the release's directory: install.yaml, the archive, SHA256SUMS
	version string // the release's version
}

// Where the controller is installed (manifests/rbac.yaml, deployment.yaml).
const (
	controllerNamespace  = "t9k-system"
	controllerDeployment = "t9k-job-controller"
	controllerBinary     = "/usr/local/bin/t9k-job-controller" // in the image (hack/image)
)

// needInstall skips (or fails, where CI is set) a test that installs the controller where
// there is no real node to run it, and builds the image and the release for it.
func needInstall(t *testing.T) {
	t.Helper()
	needRealNode(t, controllerNamespace)
	install.once.Do(func() { install.err = buildInstall() })
	if install.err != nil {
		t.Fatal(install.err)
	}
}

// buildInstall builds the image (needControllerImage) and the release with the project's make
// targets, and imports both archives into the real node.
func buildInstall() error {
	if err := buildControllerImage(); err != nil {
		return err
	}
	dir, err := scratchDir("t9k-install-")
	if err != nil {
		return err
	}
	install.version, install.release = "v0.0.1-e2e", filepath.Join(dir, "dist")
	// The plugin and the image for this machine only: the release's other platforms are the
	// same build for another GOOS and GOARCH, minutes of compiling that prove nothing more
	// here (hack/image's tests build the image's two).
	if err := makeTarget("release", "VERSION="+install.version, "DIST="+install.release, "PLUGIN_PLATFORMS="+runtime.GOOS+"/"+runtime.GOARCH, imagePlatforms); err != nil {
		return err
	}
	// ImportImages names it by digest too: install.yaml pins the release's image so.
	return env.cluster.ImportImages(filepath.Join(install.release, "t9k-job-controller-"+install.version+".oci.tar"))
}

// controllerImage is the image `make image` builds, under the name and tag the Deployment
// and the suite's controller (--agent-image, for jobs that restart in place) give it, built
// and imported into the real node once.
var controllerImage struct {
	once sync.Once
	err  error
}

// imagePlatforms builds the images for the real node's platform, this machine's, alone.
var imagePlatforms = "IMAGE_PLATFORMS=linux/" + runtime.GOARCH

// agentImage is the controller's image as `make image` names it (manifests/kustomization.yaml).
const agentImage = "ghcr.io/t9k-jobs/t9k-job-controller:dev"

func buildControllerImage() error {
	controllerImage.once.Do(func() {
		dir, err := scratchDir("t9k-image-")
		if err != nil {
			controllerImage.err = err
			return
		}
		image := filepath.Join(dir, "image.oci.tar")
		if err := makeTarget("image", "IMAGE_ARCHIVE="+image, "VERSION=v0.0.0-e2e", imagePlatforms); err != nil {
			controllerImage.err = err
			return
		}
		controllerImage.err = env.cluster.ImportImages(image)
	})
	return controllerImage.err
}

// makeTarget runs one of the project's make targets, and says how long it took.
func makeTarget(args ...string) error {
	start := time.Now()
	cmd := exec.Command("make", append([]string{"--no-print-directory"}, args...)...)
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("make %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	fmt.Fprintf(os.Stderr, "e2e: make %s: %.1fs\n", args[0], time.Since(start).Seconds())
	return nil
}

// handOverToInstalled stops the suite's controller, so that the installed one runs jobs alone,
// and makes the real node the only node the controller's pods fit: the kwok nodes get a taint
// that only the tests' job pods tolerate, the real node loses its own. When the test
// ends it puts back the nodes, the CRDs and the suite's controller with fresh credentials
// (uninstalling deleted the CRDs and the service account).
func handOverToInstalled(t *testing.T) {
	t.Helper()
	if !stopController() {
		t.Fatal("the suite's controller did not stop on SIGTERM")
	}
	restoreNodes := onlyRealNodeSchedulable(t)
	t.Cleanup(func() {
		restoreNodes()
		ctx := context.Background()
		// Whatever the test left installed goes first: two controllers must not run jobs.
		_, _ = kubectl("delete", "--ignore-not-found", "--wait=true", "-k", filepath.Join(repoRoot, "manifests"))
		waitGone(t, "namespace "+controllerNamespace, func(ctx context.Context) error {
			_, err := env.kube.CoreV1().Namespaces().Get(ctx, controllerNamespace, metav1.GetOptions{})
			return err
		})
		for _, step := range []func() error{
			func() error { return installCRDs(ctx) },
			func() error { return controllerCredentials(ctx) },
			startController,
		} {
			if err := step(); err != nil {
				t.Fatalf("putting the suite's controller back: %v", err)
			}
		}
	})
}

// installTaint keeps the suite's job pods, and nothing else, on the kwok nodes while the
// controller is installed.
var installTaint = corev1.Taint{Key: "e2e.t9k.dev/install", Value: "jobs-only", Effect: corev1.TaintEffectNoSchedule}

// onKwokDuringInstall puts a job's pods on the kwok nodes during an install test: they
// tolerate installTaint, and keep off the nodes with the runtime label (the real node, which
// has no taint then).
func onKwokDuringInstall(spec *corev1.PodSpec) {
	spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: installTaint.Key, Operator: corev1.TolerationOpExists})
	spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: cluster.RealNodeLabel, Operator: corev1.NodeSelectorOpDoesNotExist}}}}}}}
}

// onlyRealNodeSchedulable lifts the real node's taint and puts installTaint on the kwok nodes
// (the nodes without the runtime label) until restore.
func onlyRealNodeSchedulable(t *testing.T) (restore func()) {
	t.Helper()
	ctx := context.Background()
	nodes, err := env.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setTaints := func(name string, edit func([]corev1.Taint) []corev1.Taint) {
		node, err := env.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("node %s: %v", name, err)
			return
		}
		node.Spec.Taints = edit(node.Spec.Taints)
		if _, err := env.kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Errorf("node %s: %v", name, err)
		}
	}
	without := func(key string) func([]corev1.Taint) []corev1.Taint {
		return func(ts []corev1.Taint) []corev1.Taint {
			var out []corev1.Taint
			for _, x := range ts {
				if x.Key != key {
					out = append(out, x)
				}
			}
			return out
		}
	}
	with := func(taint corev1.Taint) func([]corev1.Taint) []corev1.Taint {
		return func(ts []corev1.Taint) []corev1.Taint { return append(without(taint.Key)(ts), taint) }
	}
	realTaint := corev1.Taint{Key: cluster.RealNodeToleration.Key, Value: cluster.RealNodeToleration.Value, Effect: cluster.RealNodeToleration.Effect}
	for _, n := range nodes.Items {
		switch _, special := n.Labels[cluster.RealNodeLabel]; {
		case n.Name == cluster.RealNodeName:
			setTaints(n.Name, without(realTaint.Key))
		case !special:
			setTaints(n.Name, with(installTaint))
		}
	}
	return func() {
		for _, n := range nodes.Items {
			switch _, special := n.Labels[cluster.RealNodeLabel]; {
			case n.Name == cluster.RealNodeName:
				setTaints(n.Name, with(realTaint))
			case !special:
				setTaints(n.Name, without(installTaint.Key))
			}
		}
	}
}

// waitControllerPods waits until the Deployment's rollout is complete with 2 ready replicas,
// and returns its pods.
func waitControllerPods(t *testing.T, image string) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	waitReal(t, "2 ready controller replicas of "+image, func(ctx context.Context) (bool, error) {
		d, err := env.kube.AppsV1().Deployments(controllerNamespace).Get(ctx, controllerDeployment, metav1.GetOptions{})
		if err != nil || !rolledOut(d) {
			return false, nil
		}
		list, err := env.kube.CoreV1().Pods(controllerNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=t9k-job-controller"})
		if err != nil {
			return false, nil
		}
		pods = pods[:0]
		for _, p := range list.Items {
			if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || p.Spec.Containers[0].Image != image {
				continue
			}
			pods = append(pods, p)
		}
		return len(pods) == 2, nil
	})
	return pods
}

func rolledOut(d *appsv1.Deployment) bool {
	return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == 2 && d.Status.ReadyReplicas == 2 &&
		d.Status.Replicas == 2 && d.Status.AvailableReplicas == 2
}

// controllerLeader is the pod whose controller holds the Lease: its identity is
// <hostname>_<pid>_<random>, and a pod's hostname is its name (which has no '_').
func controllerLeader(ctx context.Context) string {
	holder, _, _ := strings.Cut(leaseHolder(ctx, "t9k-job-controller"), "_")
	return holder
}

// waitLeader waits until one of pods holds the Lease and returns it.
func waitLeader(t *testing.T, pods []corev1.Pod) string {
	t.Helper()
	var leader string
	waitReal(t, "a controller replica to lead", func(ctx context.Context) (bool, error) {
		leader = controllerLeader(ctx)
		for _, p := range pods {
			if p.Name == leader {
				return true, nil
			}
		}
		return false, nil
	})
	return leader
}

// controllerProcess is the pid, on this machine, of the controller in a pod of the real node:
// its container's pid 1, which runs the image's binary.
func controllerProcess(t *testing.T, pod *corev1.Pod) int {
	t.Helper()
	pid := containerInit(t, pod, "controller")
	if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err != nil || !strings.HasSuffix(exe, controllerBinary) {
		t.Fatalf("pid 1 of pod %s's container (%d here) runs %q (%v), want %s", pod.Name, pid, exe, err, controllerBinary)
	}
	return pid
}

// waitGone waits until get says NotFound.
func waitGone(t *testing.T, what string, get func(ctx context.Context) error) {
	t.Helper()
	waitReal(t, what+" to be gone", func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(get(ctx)), nil
	})
}
