package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/t9k-jobs/t9k-jobs/test/cluster"
	"github.com/t9k-jobs/t9k-jobs/test/harness"
)

// controller is the controller process under test, built from cmd/t9k-job-controller and run
// against the cluster under test, as a user would run it.
var controller struct {
	mu         sync.Mutex
	binary     string
	proc       *harness.Process
	metrics    string   // base URL of /metrics
	progress   string   // base URL of the progress endpoint, as pods reach it
	kubeconfig string   // the controller's own credentials (manifests/rbac.yaml)
	args       []string // flags beyond the usual ones, for every later start
	log        string
}

// startController builds the controller (once) and starts it.
func startController() error {
	controller.mu.Lock()
	defer controller.mu.Unlock()
	if controller.binary == "" {
		dir, err := scratchDir("t9k-controller-")
		if err != nil {
			return err
		}
		keepLogsOf(dir)
		controller.binary = filepath.Join(dir, "t9k-job-controller")
		if err := harness.Build(repoRoot, "./cmd/t9k-job-controller", controller.binary); err != nil {
			return err
		}
		controller.log = filepath.Join(dir, "controller.log")
	}
	addr, err := harness.FreeAddr()
	if err != nil {
		return err
	}
	// The progress endpoint listens on every address of this machine: the real node's pods
	// reach it at the node's address, their gateway, which its certificate is made for too.
	progressAddr, err := harness.FreeAddr()
	if err != nil {
		return err
	}
	_, port, _ := net.SplitHostPort(progressAddr)
	progressHost := "127.0.0.1"
	if env.cluster != nil && env.cluster.HasRealNode() {
		progressHost = cluster.RealNodeIP
	}
	progressURL := "https://" + net.JoinHostPort(progressHost, port)
	args := append([]string{"--kubeconfig", controller.kubeconfig, "--leader-elect-namespace", "t9k-system", "--bind-address", addr, "-v=2",
		"--progress-bind-address", ":" + port, "--progress-url", progressURL, "--agent-image", agentImage}, controller.args...)
	proc, err := harness.Start(controller.binary, args, harness.Options{Log: controller.log})
	if err != nil {
		return err
	}
	controller.proc, controller.metrics, controller.progress = proc, "http://"+addr, progressURL
	err = harness.WaitFor(context.Background(), "the controller to run jobs", 100*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, error) {
		if exited, _ := proc.Exited(); exited {
			return false, fmt.Errorf("the controller exited; its log is %s", controller.log)
		}
		return runsJobs(controller.metrics), nil
	})
	if err != nil {
		proc.Kill()
		return err
	}
	return nil
}

// stopController stops the controller with SIGTERM, as Kubernetes would, and reports whether
// it exited by itself in time.
func stopController() bool {
	controller.mu.Lock()
	defer controller.mu.Unlock()
	return controller.proc.Stop(15*time.Second) == nil
}

// killController kills the controller at once, as a crash would.
func killController() {
	controller.mu.Lock()
	defer controller.mu.Unlock()
	controller.proc.Kill()
}

// controllerMetrics reads the controller's /metrics.
func controllerMetrics(t *testing.T) harness.Metrics {
	t.Helper()
	page, err := harness.ReadMetrics(controller.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return page
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
