package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/t9k-jobs/t9k-jobs/test/procnode"
)

// TestProcNodeTeardown: pods leave nothing on the machine, and a process node stopped with
// SIGTERM, or killed, leaves no process, namespace or mount behind (every one of them hangs
// on a child of the node).
//
// Pods first (podsLeaveNothing): two run at once, each doing what used to leave traces on
// the machine; neither sees the other's /tmp or /dev/shm, and afterwards nothing is new
// under /, /tmp or /dev/shm. This file's name puts the test after the real runs of the
// other files (go test runs them file by file, in the order of their names), so that the
// listing taken before the process node started checks what those left, too.
func TestProcNodeTeardown(t *testing.T) {
	ns := namespace(t)
	needProcNode(t, ns)
	podsLeaveNothing(t, ns)

	const name, marker = "procnode-teardown", "sleep 6220"
	t.Cleanup(func() { _ = env.kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		dir := t.TempDir()
		t.Cleanup(func() {
			if t.Failed() {
				data, _ := os.ReadFile(filepath.Join(dir, "log"))
				t.Logf("--- %s's log\n%s", name, data)
			}
		})
		state := filepath.Join(dir, "state")
		node, err := runProcNode(name, "10.251.0.0/24", state, filepath.Join(dir, "log"))
		if err != nil {
			t.Fatal(err)
		}
		if err := waitNodeReady(context.Background(), name); err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "teardown"}, Spec: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelHostname: name},
			Tolerations:  []corev1.Toleration{{Key: procnode.RuntimeLabel, Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "main", Image: "machine", Command: []string{"sh", "-c", "sleep 6220 & sleep 6220"},
				VolumeMounts: []corev1.VolumeMount{{Name: "mem", MountPath: "/dev/shm/mem"}}}},
			Volumes: []corev1.Volume{{Name: "mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}},
		}}
		if _, err := env.kube.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitReal(t, "the pod's processes", func(context.Context) (bool, error) { return len(processesWith(marker)) >= 2, nil })
		helpers := childrenOf(node.Pid()) // namespace holders, the pod's file system holder, container inits
		if len(helpers) < 4 {
			t.Fatalf("the node has %d helper processes, want its namespace's, the pod's two and the container's", len(helpers))
		}
		_ = node.Cmd.Process.Signal(sig)
		waitFor(t, fmt.Sprintf("nothing left after %v", sig), 30*time.Second, func(context.Context) (bool, error) {
			for _, pid := range helpers {
				if alive(pid) {
					return false, nil
				}
			}
			return len(processesWith(marker)) == 0 && len(processesWith(" --name "+name+" ")) == 0, nil
		})
		// The pod's mounts were in namespaces of its own only: the machine never had one.
		if mounts, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mounts), dir) {
			t.Errorf("a mount under the node's state directory is left after %v:\n%s", sig, mounts)
		}
		// Stopped, the node removed the pod's scratch (killed, it cannot; its tmpfs went with it).
		scratch := filepath.Join(state, "pods", ns+"_teardown")
		for _, sub := range []string{"tmp", "fs", "volumes"} {
			if _, err := os.Stat(filepath.Join(scratch, sub)); sig == syscall.SIGTERM && err == nil {
				t.Errorf("the pod's %s is left in %s after %v", sub, scratch, sig)
			}
		}
		if err := env.kube.CoreV1().Pods(ns).Delete(context.Background(), "teardown", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the pod gone", 30*time.Second, func(ctx context.Context) (bool, error) {
			_, err := env.kube.CoreV1().Pods(ns).Get(ctx, "teardown", metav1.GetOptions{})
			return err != nil, nil
		})
	}
}

// podsLeaveNothing runs two pods at once on the process node. Each writes to /tmp and
// /dev/shm, makes a directory at /, has its volumes mounted and its workingDir where the
// machine has no directory, fills a memory emptyDir, makes a temporary directory with Python,
// and leaves an OpenMPI session directory in /tmp (mpirun still runs when the pod ends, and
// is killed). Each sees its own files, not the other's; the machine sees neither, while
// they run or after; and once they are gone nothing is new under /, /tmp or /dev/shm since
// the listing taken before them, nor since the process node started (the other real runs).
func podsLeaveNothing(t *testing.T, ns string) {
	t.Helper()
	token := "t9k-leave-" + ns // in every name the pods make
	signal := filepath.Join("/tmp", "t9k-e2e-"+ns+"-signal")
	if err := os.Mkdir(signal, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(signal) })
	before := machineEntries()

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "leave"}, Data: map[string]string{"key": "value"}}
	if _, err := env.kube.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	script := `set -e
echo "$POD" > /tmp/$TOKEN-$POD
echo "$POD" > /dev/shm/$TOKEN-$POD
mkdir /$TOKEN-$POD
echo "$POD" > /$TOKEN/mem/file
python3 -c 'import tempfile, os; print("tempdir", tempfile.mkdtemp(prefix=os.environ["TOKEN"] + "-py-"))'
mpirun --allow-run-as-root -np 1 sh -c 'echo "session $(ls -d /tmp/ompi.*)"; exec sleep 600' </dev/null &
until ls -d /tmp/ompi.* >/dev/null 2>&1; do sleep 0.1; done
echo "cwd $(pwd)"
echo "config $(cat /$TOKEN/config/key)"
echo written
until [ -e /signal/go ]; do sleep 0.2; done
echo "tmp: $(ls /tmp | tr '\n' ' ')"
echo "shm: $(ls /dev/shm | tr '\n' ' ')"
`
	pods := []string{"leave-a", "leave-b"}
	for _, name := range pods {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "main", Image: "machine", Command: []string{"sh", "-c", script},
				WorkingDir: "/" + token + "/work",
				Env: []corev1.EnvVar{{Name: "TOKEN", Value: token},
					{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "config", MountPath: "/" + token + "/config", ReadOnly: true},
					{Name: "mem", MountPath: "/" + token + "/mem"},
					{Name: "signal", MountPath: "/signal", ReadOnly: true},
				}}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "leave"}}}},
				{Name: "mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
				{Name: "signal", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: signal}}},
			},
		}}
		onProcNode(&pod.Spec)
		if _, err := env.kube.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitReal(t, "both pods' files written", func(context.Context) (bool, error) {
		for _, name := range pods {
			if !strings.Contains(containerLog(ns, name, "main"), "written") {
				return false, nil
			}
		}
		return true, nil
	})
	// While they run, the machine does not see what they made.
	if left := namesWith(machineEntries(), token); len(left) > 0 {
		t.Errorf("the machine sees what the pods made: %v", left)
	}
	if err := os.WriteFile(filepath.Join(signal, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitReal(t, "both pods Succeeded", func(ctx context.Context) (bool, error) {
		for _, name := range pods {
			p, err := env.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil || p.Status.Phase != corev1.PodSucceeded {
				if err == nil && p.Status.Phase == corev1.PodFailed {
					t.Fatalf("%s failed; its log:\n%s", name, containerLog(ns, name, "main"))
				}
				return false, nil
			}
		}
		return true, nil
	})
	for i, name := range pods {
		other := pods[1-i]
		log := containerLog(ns, name, "main")
		want := map[string]string{
			"tmp:":    token + "-" + name,
			"shm:":    token + "-" + name,
			"session": "/tmp/ompi." + name + ".",
			"tempdir": "/tmp/" + token + "-py-",
			"cwd":     "/" + token + "/work",
			"config":  "value",
		}
		lines := map[string]string{} // "tmp: a b" is "a b" for "tmp:"
		for _, line := range strings.Split(log, "\n") {
			for k := range want {
				if _, v, ok := strings.Cut(line, k+" "); ok {
					lines[k] = v
				}
			}
		}
		for k, v := range want {
			if !strings.Contains(lines[k], v) {
				t.Errorf("%s's %q line does not have %q (its log is below)", name, k, v)
			}
		}
		// Its own /tmp holds the session directory of its mpirun, killed as the pod ended.
		if !strings.Contains(lines["tmp:"], "ompi."+name+".") {
			t.Errorf("%s's /tmp has no OpenMPI session directory (its log is below)", name)
		}
		for _, k := range []string{"tmp:", "shm:"} {
			for _, f := range strings.Fields(lines[k]) {
				if strings.HasPrefix(f, token+"-"+other) || strings.HasPrefix(f, "ompi."+other+".") {
					t.Errorf("%s sees %s's %s in its %s", name, other, f, strings.TrimSuffix(k, ":"))
				}
			}
		}
	}
	for _, name := range pods {
		if err := env.kube.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitReal(t, "the pods gone, and their scratch", func(ctx context.Context) (bool, error) {
		for _, name := range pods {
			if _, err := env.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
				return false, nil
			}
			dir := filepath.Join(procNode.stateDir, "pods", ns+"_"+name)
			for _, sub := range []string{"tmp", "fs", "volumes"} {
				if _, err := os.Stat(filepath.Join(dir, sub)); err == nil {
					return false, nil
				}
			}
		}
		return true, nil
	})
	after := machineEntries()
	if left := namesWith(after, token); len(left) > 0 {
		t.Errorf("the pods left %v on the machine", left)
	}
	if left := newEntries(before, after); len(left) > 0 {
		t.Errorf("new on the machine since the pods started: %v", left)
	}
	// Since the process node started, the other real runs left nothing either. Other
	// programs of the machine may write to /tmp in those minutes: there, only what the real
	// runs made before counts (OpenMPI's session directories, torchrun's).
	for _, e := range newEntries(procNode.listing, after) {
		if base := strings.TrimPrefix(e, "/tmp/"); base == e || strings.HasPrefix(base, "ompi.") || strings.HasPrefix(base, "torchelastic_") {
			t.Errorf("new on the machine since the process node started: %s", e)
		}
	}
}

// newEntries are the entries of after that are not in before, but the test's own temporary
// directories and those of Go builds, which may run beside the tests.
func newEntries(before, after map[string]bool) []string {
	var out []string
	for e := range after {
		base := filepath.Base(e)
		own := filepath.Dir(e) == "/tmp" && (strings.HasPrefix(base, "t9k-e2e-") || strings.HasPrefix(base, "t9k-procnode-") ||
			strings.HasPrefix(base, "t9k-controller-") || strings.HasPrefix(base, "go-build") || strings.HasPrefix(base, "Test"))
		if !before[e] && !own {
			out = append(out, e)
		}
	}
	sort.Strings(out)
	return out
}

// namesWith are the entries whose name contains s.
func namesWith(entries map[string]bool, s string) []string {
	var out []string
	for e := range entries {
		if strings.Contains(filepath.Base(e), s) {
			out = append(out, e)
		}
	}
	sort.Strings(out)
	return out
}
