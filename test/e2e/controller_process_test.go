package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// controller is the controller process under test, built from cmd/t9k-job-controller and run
// against the cluster under test, as a user would run it.
var controller struct {
	mu         sync.Mutex
	binary     string
	cmd        *exec.Cmd
	metrics    string   // base URL of /metrics
	kubeconfig string   // the controller's own credentials (manifests/rbac.yaml)
	args       []string // flags beyond the usual ones, for every later start
	log        string
	exited     chan struct{}
}

// startController builds the controller (once) and starts it.
func startController() error {
	controller.mu.Lock()
	defer controller.mu.Unlock()
	if controller.binary == "" {
		dir, err := os.MkdirTemp("", "t9k-controller-")
		if err != nil {
			return err
		}
		controller.binary = filepath.Join(dir, "t9k-job-controller")
		build := exec.Command("go", "build", "-o", controller.binary, "./cmd/t9k-job-controller")
		build.Dir = repoRoot
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("building: %v\n%s", err, out)
		}
		controller.log = filepath.Join(dir, "controller.log")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := l.Addr().String()
	l.Close()
	logFile, err := os.OpenFile(controller.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	args := append([]string{"--kubeconfig", controller.kubeconfig, "--leader-elect-namespace", "t9k-system", "--bind-address", addr, "-v=2"}, controller.args...)
	cmd := exec.Command(controller.binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return err
	}
	logFile.Close()
	controller.cmd = cmd
	controller.metrics = "http://" + addr
	exited := make(chan struct{})
	controller.exited = exited
	go func() { _ = cmd.Wait(); close(exited) }()
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		select {
		case <-exited:
			return false, fmt.Errorf("the controller exited; its log is %s", controller.log)
		default:
		}
		return runsJobs(controller.metrics), nil
	})
	if err != nil {
		_ = cmd.Process.Kill()
		return err
	}
	return nil
}

// stopController stops the controller with SIGTERM, as Kubernetes would, and reports whether
// it exited by itself in time.
func stopController() bool {
	controller.mu.Lock()
	defer controller.mu.Unlock()
	_ = controller.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-controller.exited:
		return true
	case <-time.After(15 * time.Second):
		_ = controller.cmd.Process.Kill()
		<-controller.exited
		return false
	}
}

// killController kills the controller at once, as a crash would.
func killController() {
	controller.mu.Lock()
	defer controller.mu.Unlock()
	_ = controller.cmd.Process.Kill()
	<-controller.exited
}

// runsJobs tells whether the controller serving base runs jobs: it leads (or runs without
// election) and its caches are synced. A standby answers /readyz too, with another text.
func runsJobs(base string) bool {
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK && string(body) == "ok"
}

func httpGet(url string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}
