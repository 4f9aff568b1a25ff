package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/test/cluster"
)

// The kubelet API of the real node (docs/testing.md, "The real node"): kubectl logs, exec,
// cp, attach and port-forward on pods that really run, in the training image, through the
// API server, which reaches the kubelet with its kubelet client certificate.

// startJob creates a GenericJob and returns the name of its first pod once that pod runs.
func startJob(t *testing.T, ns string, job *batch.GenericJob) string {
	t.Helper()
	if _, err := env.jobs.BatchV1beta1().GenericJobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := job.Name + "-" + job.Spec.ReplicaSpecs[0].Type + "-0"
	waitReal(t, pod+" running", func(ctx context.Context) (bool, error) {
		p, err := env.kube.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	})
	return pod
}

// containerState is the state of a pod's container as the node reports it.
func containerState(ctx context.Context, ns, pod, container string) (corev1.ContainerState, error) {
	p, err := env.kube.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return corev1.ContainerState{}, err
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == container {
			return s.State, nil
		}
	}
	return corev1.ContainerState{}, fmt.Errorf("%s has no status of container %s", pod, container)
}

// TestKubeletLogsMPILauncher: `kubectl logs` of a finished MPIJob's launcher (examples/mpi's
// MPIJob, on the real node in the training image) shows mpirun's output, the 9 ranks'
// results, as the kubelet wrote it to its log file.
func TestKubeletLogsMPILauncher(t *testing.T) {
	parallel(t, realNode.all())
	ns := namespace(t)
	needRealNode(t, ns, trainingImage)
	createMPIScript(t, ns)
	job := exampleMPIJob(t, "mpi-logs")
	if _, err := env.jobs.BatchV1beta1().MPIJobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := waitStatus(t, "the end", mpiStatus(ns, job.Name), func(s *batch.JobStatus) bool { return s.Phase == batch.JobSucceeded || s.Phase == batch.JobFailed })
	if s.Phase != batch.JobSucceeded {
		t.Fatalf("the MPIJob ended %s: %+v", s.Phase, s.Conditions)
	}
	launcher := job.Name + "-launcher"
	out, err := kubectl("logs", "-n", ns, launcher)
	if err != nil {
		t.Fatalf("kubectl logs: %v: %s", err, out)
	}
	if n := strings.Count(out, "all-reduce sum 45, want 45"); n != 9 {
		t.Errorf("kubectl logs shows %d of the 9 ranks' results:\n%s", n, out)
	}
	if want := kubeletLogFile(t, ns, launcher, "launcher"); out != want {
		t.Errorf("kubectl logs shows\n%s\nthe kubelet's log file has\n%s", out, want)
	}
}

// kubeletLogFile is the text of a container's first run as the real node's kubelet keeps it,
// in /var/log/pods/<ns>_<pod>_<uid>/<container>/0.log: lines in the CRI log format, <time>
// <stream> <P|F> <text>, where P marks a line the runtime cut, continued by the next.
func kubeletLogFile(t *testing.T, ns, pod, container string) string {
	t.Helper()
	p, err := env.kube.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("/var/log/pods", fmt.Sprintf("%s_%s_%s", ns, pod, p.UID), container, "0.log")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if line == "" {
			continue
		}
		fields := strings.SplitN(strings.TrimSuffix(line, "\n"), " ", 4)
		if len(fields) < 3 {
			t.Fatalf("%s: not a CRI log line: %q", path, line)
		}
		if len(fields) == 4 {
			out.WriteString(fields[3])
		}
		if fields[2] == "F" {
			out.WriteString("\n")
		}
	}
	return out.String()
}

// TestKubeletLogsFollow: `kubectl logs -f` of a running replica streams its lines as they are
// written, stdout and stderr, and ends when the container ends; the options work on its log
// (--timestamps, --tail, --limit-bytes, --since), and on an init container's (-c);
// --previous says there is none.
func TestKubeletLogsFollow(t *testing.T) {
	parallel(t, realNode.one())
	ns := namespace(t)
	needRealNode(t, ns, trainingImage)
	trigger := t.TempDir() // the replica writes its last line once the test makes a file here
	job := realNodeJob("follow", "sh", "-c",
		"echo first; sleep 0.5; echo to stderr >&2; until [ -e /trigger/go ]; do sleep 0.1; done; echo last")
	r := &job.Spec.ReplicaSpecs[0]
	r.Template.Spec.Volumes = []corev1.Volume{{Name: "trigger", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: trigger}}}}
	r.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "trigger", MountPath: "/trigger"}}
	r.Template.Spec.InitContainers = []corev1.Container{{Name: "prepare", Image: trainingImage, Command: []string{"sh", "-c", "echo init output; echo init error >&2"}}}
	pod := startJob(t, ns, job)

	follow := kubectlCommand("logs", "-f", "-n", ns, pod, "-c", "main")
	stdout, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	follow.Stderr = &stderr
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = follow.Process.Kill() })
	lines := make(chan string)
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	next := func(want string) {
		t.Helper()
		select {
		case line, ok := <-lines:
			if !ok || line != want {
				t.Fatalf("kubectl logs -f: got %q (open: %v), want %q; stderr: %s", line, ok, want, stderr.String())
			}
		case <-time.After(realTimeout):
			t.Fatalf("kubectl logs -f: no line %q; stderr: %s", want, stderr.String())
		}
	}
	next("first")
	next("to stderr")
	// Streamed, not read after the end: the container cannot end before the trigger.
	if s, err := containerState(context.Background(), ns, pod, "main"); err != nil || s.Running == nil {
		t.Fatalf("the container is not running while its lines stream: %+v, %v", s, err)
	}
	if err := os.WriteFile(filepath.Join(trigger, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	next("last")
	ended := make(chan error)
	go func() { ended <- follow.Wait() }()
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("kubectl logs -f: %v: %s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("kubectl logs -f did not end when the container did")
	}
	// It ended with the container: the node reports the container's end (its status is
	// written within a second) no later than that.
	followEnded := time.Now()
	var state corev1.ContainerState
	waitFor(t, "the container's end in its status", 30*time.Second, func(ctx context.Context) (bool, error) {
		var err error
		state, err = containerState(ctx, ns, pod, "main")
		return err == nil && state.Terminated != nil, nil
	})
	if finished := state.Terminated.FinishedAt.Time; finished.After(followEnded) { // whole seconds: never later
		t.Errorf("kubectl logs -f ended at %s, before the container did (%s)", followEnded.Format(time.RFC3339Nano), finished)
	}

	logs := func(args ...string) string {
		t.Helper()
		out, err := kubectl(append([]string{"logs", "-n", ns, pod}, args...)...)
		if err != nil {
			t.Fatalf("kubectl logs %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return out
	}
	if out := logs("-c", "main"); out != "first\nto stderr\nlast\n" {
		t.Errorf("kubectl logs: %q", out)
	}
	if out := logs("-c", "main", "--since=1h"); out != "first\nto stderr\nlast\n" {
		t.Errorf("kubectl logs --since=1h: %q", out)
	}
	if out := logs("-c", "main", "--tail=1"); out != "last\n" {
		t.Errorf("kubectl logs --tail=1: %q", out)
	}
	if out := logs("-c", "main", "--limit-bytes=8"); out != "first\nto" {
		t.Errorf("kubectl logs --limit-bytes=8: %q", out)
	}
	stamped := strings.Split(strings.TrimSuffix(logs("-c", "main", "--timestamps"), "\n"), "\n")
	var times []time.Time
	for i, want := range []string{"first", "to stderr", "last"} {
		stamp, text, _ := strings.Cut(stamped[min(i, len(stamped)-1)], " ")
		at, err := time.Parse(time.RFC3339Nano, stamp)
		if len(stamped) != 3 || err != nil || text != want {
			t.Fatalf("kubectl logs --timestamps: %q, want 3 lines of <RFC 3339 time> <text>", stamped)
		}
		times = append(times, at)
	}
	if !times[0].Before(times[1]) || !times[1].Before(times[2]) || time.Since(times[0]) > 10*time.Minute {
		t.Errorf("kubectl logs --timestamps: times out of order or wrong: %v", times)
	}
	// --since-time (whole seconds): the lines written from then on.
	since := times[1].Truncate(time.Second).Add(time.Second)
	wantSince := ""
	if !times[2].Before(since) {
		wantSince = "last\n"
	}
	if out := logs("-c", "main", "--since-time="+since.Format(time.RFC3339)); out != wantSince {
		t.Errorf("kubectl logs --since-time=%s: %q, want %q (lines at %v)", since.Format(time.RFC3339), out, wantSince, times)
	}
	if out := logs("-c", "prepare"); out != "init output\ninit error\n" && out != "init error\ninit output\n" {
		t.Errorf("kubectl logs -c prepare (the init container): %q", out)
	}
	if out, err := kubectl("logs", "-n", ns, pod, "-c", "main", "--previous"); err == nil || !strings.Contains(out, `previous terminated container "main"`) {
		t.Errorf("kubectl logs --previous: %v: %s", err, out)
	}
}

// TestKubeletExec: `kubectl exec` into a running replica: the command's stdout, stderr and
// exit code come back; with -i, stdin reaches it; with -t, it has a terminal of the client's
// size, resized with it; and it runs where the container's command runs: its host name,
// network, mount, UTS and PID namespaces, its volumes, environment and working directory.
func TestKubeletExec(t *testing.T) {
	parallel(t, realNode.one())
	ns := namespace(t)
	needRealNode(t, ns, trainingImage)
	if _, err := env.kube.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"key": "value from the ConfigMap"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	job := realNodeJob("exec", "sleep", "600")
	c := &job.Spec.ReplicaSpecs[0].Template.Spec.Containers[0]
	c.Env = []corev1.EnvVar{{Name: "GREETING", Value: "hello"}, {Name: "MESSAGE", Value: "$(GREETING) from the pod"}}
	c.WorkingDir = "/data/work" // inside a volume: only the container's mount namespace has it
	c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "settings", MountPath: "/settings"}}
	job.Spec.ReplicaSpecs[0].Template.Spec.Volumes = []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "settings", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
	}
	pod := startJob(t, ns, job)

	// stdout, stderr and the exit code, apart.
	cmd := kubectlCommand("exec", "-n", ns, pod, "--", "sh", "-c", "echo to stdout; echo to stderr >&2; exit 7")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != 7 || stdout.String() != "to stdout\n" || !strings.HasPrefix(stderr.String(), "to stderr\n") {
		t.Errorf("kubectl exec: exit code %d (%v), stdout %q, stderr %q; want 7, %q, %q", code, err, stdout.String(), stderr.String(), "to stdout\n", "to stderr\n")
	}

	// stdin.
	cmd = kubectlCommand("exec", "-i", "-n", ns, pod, "--", "sh", "-c", "cat; echo end of input")
	cmd.Stdin = strings.NewReader("piped in\n")
	if out, err := cmd.CombinedOutput(); err != nil || string(out) != "piped in\nend of input\n" {
		t.Errorf("kubectl exec -i: %v: %q", err, out)
	}

	// Where it runs: the namespaces of the container's command, its host name, volumes,
	// environment and working directory.
	p, err := env.kube.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	command := containerInit(t, p, "main") // sleep, on this machine
	namespaces := []string{"mnt", "uts", "pid", "net"}
	var want []string
	for _, kind := range namespaces {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", command, kind))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, link)
	}
	hostname := p.Name
	if p.Spec.Hostname != "" {
		hostname = p.Spec.Hostname
	}
	want = append(want, hostname, "hello from the pod", "/data/work", "value from the ConfigMap", p.Status.PodIP)
	out, err := kubectl("exec", "-n", ns, pod, "--", "sh", "-c",
		`for ns in mnt uts pid net; do readlink /proc/self/ns/$ns; done; hostname; echo "$MESSAGE"; pwd; cat /settings/key; echo; `+
			`python3 -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(("10.0.0.1", 9)); print(s.getsockname()[0])'`)
	t.Logf("kubectl exec ran in:\n%s", out)
	if got := strings.Split(strings.TrimSpace(out), "\n"); err != nil || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("kubectl exec ran in\n%s\n(%v), want\n%s\n(namespaces %v of the container's command, host name, $MESSAGE, working directory, a volume's file, the pod's address)",
			out, err, strings.Join(want, "\n"), namespaces)
	}

	// A terminal (-t): kubectl's own is 31x97, then 41x107.
	cmd = kubectlCommand("exec", "-it", "-n", ns, pod, "--", "sh", "-c", "tty; stty size; while read line; do stty size; done")
	terminal, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 31, Cols: 97})
	if err != nil {
		t.Fatal(err)
	}
	defer terminal.Close()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	seen := make(chan string, 64)
	go func() {
		r := bufio.NewReader(terminal)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				close(seen)
				return
			}
			seen <- strings.TrimRight(line, "\r\n")
		}
	}()
	await := func(what string, match func(string) bool, poke func()) {
		t.Helper()
		deadline := time.After(time.Minute)
		var other []string
		for {
			select {
			case line, ok := <-seen:
				if !ok {
					t.Fatalf("kubectl exec -it ended before %s; it printed %q", what, other)
				}
				if match(line) {
					return
				}
				other = append(other, line)
			case <-deadline:
				t.Fatalf("kubectl exec -it: no %s; it printed %q", what, other)
			case <-time.After(200 * time.Millisecond):
				poke()
			}
		}
	}
	await("terminal", func(l string) bool { return strings.HasPrefix(l, "/dev/pts/") }, func() {})
	// Each line typed prints the size. The client's size reaches the kubelet on a stream of
	// its own, as every resize does, and containerd starts the command on a terminal of 0x0:
	// its first `stty size` may say "0 0", the next ones the client's size.
	newline := func() { _, _ = terminal.Write([]byte("\n")) }
	await("size 31 97", func(l string) bool { return l == "31 97" }, newline)
	if err := pty.Setsize(terminal, &pty.Winsize{Rows: 41, Cols: 107}); err != nil { // kubectl gets SIGWINCH
		t.Fatal(err)
	}
	await("size 41 107 after the resize", func(l string) bool { return l == "41 107" }, newline)
}

// TestKubeletCopy: `kubectl cp` (tar through exec) copies a directory into a running replica,
// contents and modes, and a directory and a file the replica wrote out of it.
func TestKubeletCopy(t *testing.T) {
	parallel(t, realNode.one())
	ns := namespace(t)
	needRealNode(t, ns, trainingImage)
	job := realNodeJob("cp", "sh", "-c", "mkdir -p /data/out && echo written in the pod > /data/out/result.txt && exec sleep 600")
	spec := &job.Spec.ReplicaSpecs[0].Template.Spec
	spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	pod := startJob(t, ns, job)

	local := t.TempDir()
	in := filepath.Join(local, "in")
	if err := os.MkdirAll(filepath.Join(in, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(in, "notes.txt"), []byte("copied in\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(in, "bin", "run.sh"), []byte("#!/bin/sh\necho run from the copy\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := kubectl("cp", "-c", "main", in, ns+"/"+pod+":/data/in"); err != nil {
		t.Fatalf("kubectl cp into the pod: %v: %s", err, out)
	}
	out, err := kubectl("exec", "-n", ns, pod, "--", "sh", "-c", "cat /data/in/notes.txt; stat -c %a /data/in/notes.txt /data/in/bin/run.sh; /data/in/bin/run.sh")
	if want := "copied in\n644\n755\nrun from the copy\n"; err != nil || out != want {
		t.Errorf("the copy in the pod: %v: %q, want %q", err, out, want)
	}

	if out, err := kubectl("cp", "-c", "main", ns+"/"+pod+":/data/out", filepath.Join(local, "out")); err != nil {
		t.Fatalf("kubectl cp of a directory out of the pod: %v: %s", err, out)
	}
	if out, err := kubectl("cp", "-c", "main", ns+"/"+pod+":/data/out/result.txt", filepath.Join(local, "result.txt")); err != nil {
		t.Fatalf("kubectl cp of a file out of the pod: %v: %s", err, out)
	}
	for _, f := range []string{filepath.Join(local, "out", "result.txt"), filepath.Join(local, "result.txt")} {
		if data, err := os.ReadFile(f); err != nil || string(data) != "written in the pod\n" {
			t.Errorf("%s copied out of the pod: %v: %q", f, err, data)
		}
	}
}

// TestKubeletAttach: `kubectl attach -i` to a replica that keeps stdin open (stdin,
// stdinOnce): its input reaches the container's command and its output comes back; when
// the input ends, the command's stdin closes and attach ends with the container.
func TestKubeletAttach(t *testing.T) {
	parallel(t, realNode.one())
	ns := namespace(t)
	needRealNode(t, ns, trainingImage)
	job := realNodeJob("attach", "sh", "-c", "echo started; while read line; do echo got $line; done; echo stdin closed")
	c := &job.Spec.ReplicaSpecs[0].Template.Spec.Containers[0]
	c.Stdin, c.StdinOnce = true, true
	pod := startJob(t, ns, job)
	cmd := kubectlCommand("attach", "-i", "-n", ns, pod)
	cmd.Stdin = strings.NewReader("one\ntwo\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil || !strings.Contains(stdout.String(), "got one\ngot two\nstdin closed\n") {
		t.Errorf("kubectl attach -i: %v: stdout %q, stderr %q", err, stdout.String(), stderr.String())
	}
	waitGenericPhase(t, ns, "attach", batch.JobSucceeded)
}

// TestKubeletPortForward: `kubectl port-forward` to a replica serving HTTP on its own
// loopback only returns its answers, to more than one connection.
func TestKubeletPortForward(t *testing.T) {
	parallel(t, realNode.one())
	ns := namespace(t)
	needRealNode(t, ns, trainingImage)
	job := realNodeJob("web", "sh", "-c", "echo served from $(hostname) > index.html; exec python3 -u -m http.server --bind 127.0.0.1 8000")
	spec := &job.Spec.ReplicaSpecs[0].Template.Spec
	spec.Containers[0].WorkingDir = "/www"
	spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "www", MountPath: "/www"}}
	spec.Volumes = []corev1.Volume{{Name: "www", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	pod := startJob(t, ns, job)
	waitReal(t, "the server", func(context.Context) (bool, error) {
		return strings.Contains(containerLogs(ns, pod, "main"), "Serving HTTP"), nil
	})

	cmd := kubectlCommand("port-forward", "-n", ns, "pod/"+pod, ":8000")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	local := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		forwarding := regexp.MustCompile(`^Forwarding from 127\.0\.0\.1:(\d+) -> 8000`)
		for s.Scan() {
			if m := forwarding.FindStringSubmatch(s.Text()); m != nil {
				local <- m[1]
			}
		}
	}()
	var port string
	select {
	case port = <-local:
	case <-time.After(time.Minute):
		t.Fatalf("kubectl port-forward did not start: %s", stderr.String())
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 2 {
		resp, err := client.Get("http://127.0.0.1:" + port + "/index.html")
		if err != nil {
			t.Fatalf("GET %d through kubectl port-forward: %v; kubectl: %s", i, err, stderr.String())
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != "served from "+pod+"\n" {
			t.Errorf("GET %d through kubectl port-forward: %s %q", i, resp.Status, body)
		}
	}
}

// TestKubeletAPIRefusesOthers: the real node's kubelet port, which its Node status gives with
// its address, serves a certificate of the cluster's CA for that address and answers the API
// server's client certificate; it refuses (401) a client without a certificate, one with a
// certificate of another CA, and a ServiceAccount's token (x509 alone authenticates:
// anonymous and webhook authentication are off). Pods reach that address, their gateway, so
// this is all that keeps them out. The unauthenticated read-only port is closed, and the port
// answers on the node's address only.
func TestKubeletAPIRefusesOthers(t *testing.T) {
	parallel(t, realNode.one())
	ns := namespace(t)
	needRealNode(t, ns)
	node, err := env.kube.CoreV1().Nodes().Get(context.Background(), cluster.RealNodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	port := node.Status.DaemonEndpoints.KubeletEndpoint.Port
	if port == 0 || len(node.Status.Addresses) == 0 || node.Status.Addresses[0] != (corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: cluster.RealNodeIP}) {
		t.Fatalf("the Node gives port %d and addresses %v, want a port and InternalIP %s", port, node.Status.Addresses, cluster.RealNodeIP)
	}
	caPEM, err := os.ReadFile(env.kubelet.ClientCAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	kubeletAddr := net.JoinHostPort(cluster.RealNodeIP, strconv.Itoa(int(port)))
	// /pods lists the node's pods, with their specs: what an unauthenticated client must not read.
	get := func(token string, certs ...tls.Certificate) (int, string) {
		t.Helper()
		config := &tls.Config{RootCAs: roots} // the kubelet's serving certificate is verified too
		if len(certs) > 0 {
			// Sent even when the kubelet's request names other CAs.
			config.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &certs[0], nil }
		}
		req, err := http.NewRequest(http.MethodGet, "https://"+kubeletAddr+"/pods", nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: config}}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET /pods from the kubelet: %v", err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	apiServer, err := tls.LoadX509KeyPair(env.kubelet.APIServerCertFile, env.kubelet.APIServerKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get("", apiServer); code != http.StatusOK || !strings.Contains(body, `"kind":"PodList"`) {
		t.Fatalf("with the API server's certificate: %d %.200s; want 200 and the node's PodList", code, body)
	}
	token, err := env.kube.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), "default", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what, token string
		certs       []tls.Certificate
	}{
		{what: "without a client certificate"},
		{what: "with a client certificate of another CA", certs: []tls.Certificate{otherCACert(t)}},
		{what: "with a ServiceAccount's token", token: token.Status.Token},
	} {
		if code, body := get(c.token, c.certs...); code != http.StatusUnauthorized {
			t.Errorf("%s: the kubelet answered %d %.200s, want 401 Unauthorized", c.what, code, body)
		}
	}

	// The read-only port (10255 by default), which would serve /pods to anyone, is off.
	if c, err := net.DialTimeout("tcp", net.JoinHostPort(cluster.RealNodeIP, "10255"), 5*time.Second); err == nil {
		c.Close()
		t.Errorf("the kubelet's read-only port 10255 answers on %s", cluster.RealNodeIP)
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		ip, ok := a.(*net.IPNet)
		if !ok || ip.IP.To4() == nil || ip.IP.String() == cluster.RealNodeIP {
			continue
		}
		if c, err := net.DialTimeout("tcp", net.JoinHostPort(ip.IP.String(), strconv.Itoa(int(port))), 5*time.Second); err == nil {
			c.Close()
			t.Errorf("the kubelet port answers on %s, want %s only", ip.IP, cluster.RealNodeIP)
		}
	}
}

// otherCACert is a client certificate of a CA of its own.
func otherCACert(t *testing.T) tls.Certificate {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another CA"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	client := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, client, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
