package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/t9k-jobs/t9k-jobs/test/cluster"
)

// The real node (docs/testing.md, "The real node"): a kubelet with containerd on this
// machine, started with the local cluster when the tests run as root. Its pods run in real
// containers, from images built here and imported (nothing is pulled): the training image
// (hack/lib/images.sh: Debian's PyTorch, OpenMPI with mpi4py and sshd, XGBoost, bash and
// coreutils) and the tests' own small images.

// trainingImage is the image of the real runs' pods (hack/lib/images.sh names it).
const trainingImage = "localhost/t9k/training:bookworm"

// realNodeSkip says why there is no real node ("" when there is one).
func realNodeSkip() string {
	switch {
	case env.cluster == nil:
		return "the real node runs only on the local cluster"
	case !env.cluster.HasRealNode():
		return "the real node needs root"
	}
	return ""
}

// needRealNode skips a test that needs real containers where there is no real node; where
// the environment variable CI is set it fails instead: CI must not pass on tests it never
// ran. With image set, the image is imported first (the training image, once). On failure,
// the test prints the logs of its namespace's containers.
func needRealNode(t *testing.T, ns string, images ...string) {
	t.Helper()
	if why := realNodeSkip(); why != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s, and CI is set: real runs must not skip in CI (unset CI to let them skip)", why)
		}
		t.Skip(why)
	}
	for _, image := range images {
		switch image {
		case trainingImage:
			importTrainingImage(t)
		case agentImage:
			if err := buildControllerImage(); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			logNamespace(t, ns)
		}
	})
}

// training is the training image's archive, imported into the real node once.
var training struct {
	once sync.Once
	err  error
}

func importTrainingImage(t *testing.T) {
	t.Helper()
	if err := loadTrainingImage(); err != nil {
		t.Fatal(err)
	}
}

// loadTrainingImage builds (hack/lib/images.sh, cached) and imports the training image, once.
func loadTrainingImage() error {
	training.once.Do(func() {
		archive := os.Getenv("T9K_TRAINING_IMAGE")
		if archive == "" {
			cmd := exec.Command(filepath.Join(repoRoot, "hack", "lib", "images.sh"))
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				training.err = fmt.Errorf("building the training image: %w", err)
				return
			}
			archive = strings.TrimSpace(string(out))
		}
		training.err = env.cluster.ImportImages(archive)
	})
	return training.err
}

// prefetch builds what the tests on the real node and the plugin's tests need in the
// background, from the suite's start, when the whole suite runs on a cluster with a real
// node: the training image, the controller's image (the agent of the jobs that restart in
// place, and the installed controller), then the kubectl plugin, which shares most of its
// packages with the controller and so compiles in a few seconds after it. The first test
// that needs one waits only for what is left (sync.Once). On a fresh machine, which builds
// them, the builds run side by side and beside the serial tests on the fake nodes (the serial
// tests on the real node are in realnode_*.go, which sort after those: go test runs a
// package's serial tests in the order of its files), and the plugin's compile is not among
// the parallel tests' load. A run of some tests (-run) builds only what they need, when they
// need it. The returned wait is for the builds to end, before the cluster stops.
func prefetch() (wait func()) {
	var builds sync.WaitGroup
	if env.cluster == nil || !env.cluster.HasRealNode() || flag.Lookup("test.run").Value.String() != "" {
		return builds.Wait
	}
	builds.Go(func() { _ = loadTrainingImage() })
	builds.Go(func() {
		_ = buildControllerImage()
		_ = buildPlugin()
	})
	return builds.Wait
}

// realNodeLeftovers is what the stopped cluster's real node left on the machine (nothing
// when it ran none).
func realNodeLeftovers(c *cluster.Cluster, dir string) []string {
	if !c.HasRealNode() {
		return nil
	}
	return cluster.RealNodeLeftovers(dir)
}

// onRealNode puts a pod template on the real node.
func onRealNode(spec *corev1.PodSpec) {
	spec.NodeSelector = cluster.RealNodeSelector
	spec.Tolerations = append(spec.Tolerations, cluster.RealNodeToleration)
}

// containerLogs is a container's log, as `kubectl logs` shows it ("" when it cannot be read yet).
func containerLogs(ns, pod, container string) string {
	data, err := env.kube.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(context.Background())
	if err != nil {
		return ""
	}
	return string(data)
}

// logNamespace prints the logs of every container of the namespace's pods, the previous
// run's too, and each pod's status: for a CI log that is all there is of a failed run.
func logNamespace(t *testing.T, ns string) {
	pods, err := env.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Logf("listing the pods of %s: %v", ns, err)
		return
	}
	for _, p := range pods.Items {
		t.Logf("--- pod %s on %s: %s %s", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Message)
		for _, cs := range p.Status.ContainerStatuses {
			t.Logf("--- %s/%s (restarts %d):\n%s", p.Name, cs.Name, cs.RestartCount, containerLogs(ns, p.Name, cs.Name))
		}
	}
}
