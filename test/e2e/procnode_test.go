package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/t9k-jobs/t9k-jobs/test/cluster"
	"github.com/t9k-jobs/t9k-jobs/test/harness"
	"github.com/t9k-jobs/t9k-jobs/test/procnode"
)

// procNode is the process node beside kwok's fake nodes (docs/testing.md, "The process node"): pods
// that select it really run. Without root its tests skip, saying so, or fail where $CI is set;
// as root without the packages (hack/install-deps.sh) they fail.
var procNode struct {
	binary, stateDir, log string
	// images is the directory of image archives the node is given (--image-archive): a test
	// puts an archive there (whole: written beside it, then renamed in) before it creates the
	// pods that name its image; the node reads the directory again when a pod names an image
	// it does not know. procnode_image_test.go adds the test images.
	images string
	proc   *harness.Process
	skip   string
	// listing is what /, /tmp and /dev/shm held before the process node started: the real
	// runs must add nothing to them (TestProcNodeTeardown).
	listing map[string]bool
}

const procNodeName = "procnode-e2e"

// startProcNode builds and starts the process node, and waits until its Node is Ready.
func startProcNode(ctx context.Context) error {
	if os.Geteuid() != 0 {
		procNode.skip = "the process node needs root"
		if os.Getenv("CI") != "" {
			fmt.Fprintln(os.Stderr, "e2e: not root: the tests that run pods for real fail, since CI is set")
		} else {
			fmt.Fprintln(os.Stderr, "e2e: not root: the tests that run pods for real skip")
		}
		return nil
	}
	procNode.listing = machineEntries()
	dir, err := os.MkdirTemp("", "t9k-procnode-")
	if err != nil {
		return err
	}
	procNode.binary, procNode.stateDir, procNode.log = filepath.Join(dir, "procnode"), filepath.Join(dir, "state"), filepath.Join(dir, "procnode.log")
	procNode.images = filepath.Join(dir, "images")
	if err := os.Mkdir(procNode.images, 0o755); err != nil {
		return err
	}
	if err := harness.Build(repoRoot, "./hack/procnode", procNode.binary); err != nil {
		return err
	}
	proc, err := runProcNode(procNodeName, "10.250.0.0/24", procNode.stateDir, procNode.log)
	if err != nil {
		return err
	}
	procNode.proc = proc
	return waitNodeReady(ctx, procNodeName)
}

// runProcNode starts a process node; it dies with the tests.
func runProcNode(name, cidr, stateDir, logPath string) (*harness.Process, error) {
	return startProcNodeFor(env.kubeconfig, env.kubelet, name, cidr, stateDir, logPath)
}

// runProcNodeOn runs a process node for another local cluster (a MultiKueue worker), and
// waits until it is Ready there.
func runProcNodeOn(c *cluster.Cluster, name, cidr, stateDir, logPath string) (*harness.Process, error) {
	p, err := startProcNodeFor(c.Kubeconfig, c.Kubelet(), name, cidr, stateDir, logPath)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return nil, err
	}
	if err := waitNodeReadyIn(context.Background(), kube, name, logPath); err != nil {
		p.Kill()
		return nil, err
	}
	return p, nil
}

func startProcNodeFor(kubeconfig string, kubelet cluster.KubeletTLS, name, cidr, stateDir, logPath string) (*harness.Process, error) {
	args := []string{"--kubeconfig", kubeconfig, "--name", name, "--pod-cidr", cidr, "--state-dir", stateDir, "--port", "0",
		"--image-archive", procNode.images, "--service-cidr", cluster.ServiceCIDR}
	if k := kubelet; k.ClientCAFile != "" {
		args = append(args, "--client-ca-file", k.ClientCAFile, "--tls-cert-file", k.CertFile, "--tls-private-key-file", k.KeyFile)
	}
	return harness.Start(procNode.binary, args, harness.Options{Log: logPath})
}

func waitNodeReady(ctx context.Context, name string) error {
	return waitNodeReadyIn(ctx, env.kube, name, procNode.log)
}

// waitNodeReadyIn waits until the node is Ready in the cluster of kube; log is the node's.
func waitNodeReadyIn(ctx context.Context, kube kubernetes.Interface, name, log string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		node, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the process node %s is not Ready (log: %s)", name, log)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stopProcNode stops the process node with SIGTERM and waits for it. Its directory (its
// binary, its log, the pods' logs) goes when the tests passed, and is kept otherwise.
func stopProcNode(passed bool) {
	if procNode.proc != nil {
		_ = procNode.proc.Stop(time.Minute) // it stops its pods first
	}
	if passed && procNode.binary != "" {
		_ = os.RemoveAll(filepath.Dir(procNode.binary))
	}
}

// needProcNode skips a test that needs real pods where there is no process node, and fails
// it where there should be one but the packages are missing. Where the environment variable
// CI is set, a test that cannot run fails instead of skipping: CI must not pass on tests it
// never ran. On failure, the test prints the logs of its namespace's containers.
func needProcNode(t *testing.T, ns string) {
	t.Helper()
	if procNode.skip != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s, and CI is set: real runs must not skip in CI (unset CI to let them skip)", procNode.skip)
		}
		t.Skip(procNode.skip)
	}
	for _, f := range []string{"/usr/bin/python3", "/usr/sbin/sshd", "/usr/bin/mpirun", "/usr/bin/torchrun"} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("%s is missing: run hack/install-deps.sh", f)
		}
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		logs, _ := filepath.Glob(filepath.Join(procNode.stateDir, "pods", ns+"_*", "logs", "*.log"))
		for _, l := range logs {
			data, err := procnode.ReadLog(l)
			if err != nil {
				data += fmt.Sprintf("(reading it: %v)", err)
			}
			t.Logf("--- %s\n%s", l, data)
		}
		// What the node did with the namespace's pods (started, stopped, addresses), for a CI
		// log that is all there is of a failed run.
		if data, err := os.ReadFile(procNode.log); err == nil {
			var lines []string
			for _, l := range strings.Split(string(data), "\n") {
				if strings.Contains(l, " "+ns+"/") {
					lines = append(lines, l)
				}
			}
			t.Logf("--- process node, pods of %s:\n%s", ns, strings.Join(lines[max(0, len(lines)-200):], "\n"))
		}
		t.Logf("process node log: %s", procNode.log)
	})
}

// onProcNode puts a pod template on the process node.
func onProcNode(spec *corev1.PodSpec) {
	spec.NodeSelector = map[string]string{procnode.RuntimeLabel: procnode.RuntimeValue}
	spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: procnode.RuntimeLabel, Operator: corev1.TolerationOpExists})
}

// containerLog reads the output of a container of a pod of the process node, as `kubectl
// logs` shows it, from the node's log file.
func containerLog(ns, pod, container string) string {
	data, _ := procnode.ReadLog(procnode.LogPath(procNode.stateDir, ns, pod, container))
	return data
}

// processesWith lists the machine's processes whose command line contains s.
func processesWith(s string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(strings.ReplaceAll(string(data), "\x00", " "), s) {
			out = append(out, e.Name())
		}
	}
	return out
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after the last ')'.
		fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		var ppid, child int
		if len(fields) > 1 {
			fmt.Sscan(fields[1], &ppid)
			fmt.Sscan(e.Name(), &child)
		}
		if ppid == pid {
			out = append(out, child)
		}
	}
	return out
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// machineEntries lists the entries of the machine's /, /tmp and /dev/shm, by full path.
func machineEntries() map[string]bool {
	out := map[string]bool{}
	for _, dir := range []string{"/", "/tmp", "/dev/shm"} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			out[filepath.Join(dir, e.Name())] = true
		}
	}
	return out
}
