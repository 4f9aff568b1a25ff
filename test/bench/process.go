package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/t9k-jobs/t9k-jobs/test/cluster"
)

type controllerProcess struct {
	cmd     *exec.Cmd
	addr    string
	metrics string
	done    chan struct{}
}

func startController(ctx context.Context, c config, kubeconfig, dir string) (*controllerProcess, error) {
	binary := filepath.Join(dir, "t9k-job-controller")
	if out, err := exec.Command("go", "build", "-o", binary, "./cmd/t9k-job-controller").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the controller: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	log, err := os.Create(filepath.Join(dir, "controller.log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command(binary, "--kubeconfig", kubeconfig, "--leader-elect=false", "--bind-address", addr,
		"--workers", strconv.Itoa(c.workers), "--kube-api-qps", fmt.Sprint(c.qps), "--kube-api-burst", strconv.Itoa(c.burst),
		"--profiling="+strconv.FormatBool(os.Getenv("BENCH_PPROF") != ""))
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &controllerProcess{cmd: cmd, addr: "http://" + addr, metrics: "http://" + addr + "/metrics", done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("the controller did not get ready: %w", err)
	}
	return p, nil
}

func (p *controllerProcess) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
	}
}

// peakRSS is the controller's peak resident memory (VmHWM), in MiB.
func (p *controllerProcess) peakRSS() float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// cpuSeconds is the controller's CPU time so far (user and system).
func (p *controllerProcess) cpuSeconds() float64 {
	return cluster.ProcessCPUSeconds(p.cmd.Process.Pid)
}

// requestCounts maps "verb resource code" to the count of t9k_api_requests_total.
type requestCounts map[string]float64

func scrape(url string) (requestCounts, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	counts := requestCounts{}
	for _, line := range strings.Split(string(body), "\n") {
		for _, prefix := range []string{"rest_client_rate_limiter_duration_seconds_sum", "rest_client_rate_limiter_duration_seconds_count",
			"rest_client_request_duration_seconds_sum", "rest_client_request_duration_seconds_count",
			"workqueue_queue_duration_seconds_sum", "workqueue_queue_duration_seconds_count", "workqueue_work_duration_seconds_sum", "workqueue_work_duration_seconds_count"} {
			if strings.HasPrefix(line, prefix) {
				name, value, _ := strings.Cut(line, " ")
				n, _ := strconv.ParseFloat(value, 64)
				counts["diag "+name] = n
			}
		}
		if l, n, ok := sample(line, "t9k_api_requests_total"); ok {
			counts[l["verb"]+" "+l["resource"]+" "+l["code"]] = n
		}
	}
	return counts, nil
}
