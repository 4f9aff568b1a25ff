package main

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/t9k-jobs/t9k-jobs/test/cluster"
	"github.com/t9k-jobs/t9k-jobs/test/harness"
)

type controllerProcess struct {
	*harness.Process
	binary  string
	addr    string
	metrics string
	// progress is the base URL of its progress endpoint ("" when it serves none).
	progress string
	started  time.Time // just before the process started
}

// startController builds the controller from the working tree and starts it, and returns
// once it is ready.
func startController(ctx context.Context, c config, kubeconfig, dir string) (*controllerProcess, error) {
	binary := filepath.Join(dir, "t9k-job-controller")
	if err := harness.Build(".", "./cmd/t9k-job-controller", binary); err != nil {
		return nil, err
	}
	p, err := launchController(c, binary, kubeconfig, dir)
	if err != nil {
		return nil, err
	}
	if _, err := p.waitReady(ctx); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// launchController starts a built controller with the bench's flags, then
// $BENCH_CONTROLLER_ARGS (space-separated), so that a caller can try e.g. --memory-limit.
// Its log goes to dir/controller.log, appended to, so that a restarted controller's log
// follows the first one's.
func launchController(c config, binary, kubeconfig, dir string) (*controllerProcess, error) {
	addr, err := harness.FreeAddr()
	if err != nil {
		return nil, err
	}
	// The progress endpoint only where it is measured (-progress): elsewhere the controller
	// is timed against a raw loop that makes no job's ConfigMap of its CA.
	progressFlags, progressURL := []string{"--progress-bind-address=0"}, ""
	if c.progress {
		progressAddr, err := harness.FreeAddr()
		if err != nil {
			return nil, err
		}
		progressURL = "https://" + progressAddr
		progressFlags = []string{"--progress-bind-address", progressAddr, "--progress-url", progressURL}
	}
	args := []string{"--kubeconfig", kubeconfig, "--leader-elect=false", "--bind-address", addr,
		"--workers", strconv.Itoa(c.workers), "--kube-api-qps", fmt.Sprint(c.qps), "--kube-api-burst", strconv.Itoa(c.burst),
		"--profiling=" + strconv.FormatBool(os.Getenv("BENCH_PPROF") != "")}
	args = append(args, progressFlags...)
	started := time.Now()
	proc, err := harness.Start(binary, append(args, strings.Fields(os.Getenv("BENCH_CONTROLLER_ARGS"))...),
		harness.Options{Log: filepath.Join(dir, "controller.log")})
	if err != nil {
		return nil, err
	}
	return &controllerProcess{Process: proc, binary: binary, addr: "http://" + addr, metrics: "http://" + addr + "/metrics", progress: progressURL, started: started}, nil
}

// waitReady waits until /readyz answers 200 (the informers' caches have synced) and returns
// that moment.
func (p *controllerProcess) waitReady(ctx context.Context) (time.Time, error) {
	var ready time.Time
	err := harness.WaitFor(ctx, "the controller to get ready", 50*time.Millisecond, 5*time.Minute, func(context.Context) (bool, error) {
		if exited, _ := p.Exited(); exited {
			return false, fmt.Errorf("the controller exited")
		}
		resp, err := http.Get(p.addr + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		ready = time.Now()
		return resp.StatusCode == http.StatusOK, nil
	})
	return ready, err
}

func (p *controllerProcess) stop() { _ = p.Stop(10 * time.Second) }

// peakRSS is the controller's peak resident memory (VmHWM), in MiB.
func (p *controllerProcess) peakRSS() float64 { return p.procStatusMiB("VmHWM") }

// procStatusMiB reads a memory field of /proc/PID/status (VmRSS, VmHWM, ...) in MiB.
func (p *controllerProcess) procStatusMiB(field string) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), field+":"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// cpuSeconds is the controller's CPU time so far (user and system).
func (p *controllerProcess) cpuSeconds() float64 {
	return cluster.ProcessCPUSeconds(p.Pid())
}

// requestCounts maps "verb resource code" to the count of t9k_api_requests_total.
type requestCounts map[string]float64

func scrape(url string) (requestCounts, error) {
	page, err := harness.ReadMetrics(url)
	if err != nil {
		return nil, err
	}
	counts := requestCounts{}
	for _, s := range page.Samples("") {
		switch s.Name {
		case "rest_client_rate_limiter_duration_seconds_sum", "rest_client_rate_limiter_duration_seconds_count",
			"rest_client_request_duration_seconds_sum", "rest_client_request_duration_seconds_count",
			"workqueue_queue_duration_seconds_sum", "workqueue_queue_duration_seconds_count",
			"workqueue_work_duration_seconds_sum", "workqueue_work_duration_seconds_count":
			counts["diag "+s.Name+labelText(s.Labels)] = s.Value
		case "t9k_api_requests_total":
			counts[s.Labels["verb"]+" "+s.Labels["resource"]+" "+s.Labels["code"]] = s.Value
		}
	}
	return counts, nil
}

// labelText spells labels as the text format does, sorted: {a="x",b="y"}.
func labelText(labels map[string]string) string {
	if len(labels) == 0 {
		return ""
	}
	keys := slices.Sorted(maps.Keys(labels))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%q", k, labels[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// series reads the current values of the named series from the controller's /metrics, each
// named as the text format spells it: go_memstats_heap_inuse_bytes,
// workqueue_depth{name="GenericJob"}. A series the controller does not serve is missing.
func (p *controllerProcess) series(names ...string) (map[string]float64, error) {
	page, err := harness.ReadMetrics(p.metrics)
	if err != nil {
		return nil, err
	}
	values := map[string]float64{}
	for _, name := range names {
		if v, ok := page.Value(name); ok {
			values[name] = v
		}
	}
	return values, nil
}

// memory is what the controller holds at one moment, in MiB: its resident set (of which its
// binary's pages, file-backed, and the rest, anonymous) and its Go heap (in use: spans with
// live or not yet swept objects; alloc: the objects themselves; free: free spans not yet
// handed back to the system, resident).
type memory struct{ rss, rssFile, heapInuse, heapAlloc, heapFree float64 }

const (
	heapInuse    = "go_memstats_heap_inuse_bytes"
	heapAlloc    = "go_memstats_heap_alloc_bytes"
	heapIdle     = "go_memstats_heap_idle_bytes"
	heapReleased = "go_memstats_heap_released_bytes"
)

func (p *controllerProcess) memory() (memory, error) {
	v, err := p.series(heapInuse, heapAlloc, heapIdle, heapReleased)
	if err != nil {
		return memory{}, err
	}
	return memory{rss: p.procStatusMiB("VmRSS"), rssFile: p.procStatusMiB("RssFile"), heapInuse: v[heapInuse] / (1 << 20),
		heapAlloc: v[heapAlloc] / (1 << 20), heapFree: (v[heapIdle] - v[heapReleased]) / (1 << 20)}, nil
}

// restingMemory waits for the controller's next GC cycle (the runtime forces one every two
// minutes at the latest) and then reads its memory: right after a burst of work, such as a
// restart's initial lists, the heap still holds that work's garbage.
func (p *controllerProcess) restingMemory(ctx context.Context) (memory, time.Duration, error) {
	const gcs = "go_gc_duration_seconds_count"
	start := time.Now()
	before, err := p.series(gcs)
	if err != nil {
		return memory{}, 0, err
	}
	err = harness.WaitFor(ctx, "the controller's next GC cycle", time.Second, 3*time.Minute, func(context.Context) (bool, error) {
		v, err := p.series(gcs)
		return err == nil && v[gcs] > before[gcs], err
	})
	if err != nil {
		return memory{}, 0, err
	}
	m, err := p.memory()
	return m, time.Since(start), err
}

func (m memory) String() string {
	return fmt.Sprintf("RSS %.0f MiB, heap %.0f MiB", m.rss, m.heapInuse)
}

// detailed is every figure of m, to a tenth of a MiB.
func (m memory) detailed() string {
	return fmt.Sprintf("RSS %.1f MiB (%.1f MiB of it the binary's), heap in use %.1f MiB, heap alloc %.1f MiB, heap free and resident %.1f MiB",
		m.rss, m.rssFile, m.heapInuse, m.heapAlloc, m.heapFree)
}

// settle waits until the controller's queue of kind is empty and has seen no add for a
// second (two scrapes at least: an item re-queued with a delay is not in the depth until it
// is due), and returns the last moment it saw either change: when the controller went idle.
func (p *controllerProcess) settle(ctx context.Context, kind string, timeout time.Duration) (time.Time, error) {
	depth, adds := fmt.Sprintf("workqueue_depth{name=%q}", kind), fmt.Sprintf("workqueue_adds_total{name=%q}", kind)
	var last map[string]float64
	busy := time.Now()
	err := harness.WaitFor(ctx, "the controller's "+kind+" queue to settle", 250*time.Millisecond, timeout, func(context.Context) (bool, error) {
		v, err := p.series(depth, adds)
		if err != nil {
			return false, err
		}
		now := time.Now()
		if v[depth] > 0 || last == nil || v[adds] != last[adds] {
			busy = now
		}
		last = v
		return now.Sub(busy) >= time.Second, nil
	})
	return busy, err
}

// idle is what the controller did over a period with nothing to do: CPU, queue adds and GC
// cycles, which tell whether something woke it up or its heap cost it the CPU.
type idle struct {
	period         time.Duration
	cpu            float64 // percent of one core
	queueAdds, gcs float64
}

func (i idle) String() string {
	return fmt.Sprintf("idle CPU %.2f%% of a core over %s (meanwhile %.0f queue adds, %.0f GC cycles)", i.cpu, i.period, i.queueAdds, i.gcs)
}

// idle measures the controller over d. The scrapes lie outside the CPU reading.
func (p *controllerProcess) idle(kind string, d time.Duration) (idle, error) {
	adds, gcs := fmt.Sprintf("workqueue_adds_total{name=%q}", kind), "go_gc_duration_seconds_count"
	before, err := p.series(adds, gcs)
	if err != nil {
		return idle{}, err
	}
	cpu := p.cpuSeconds()
	time.Sleep(d)
	cpu = p.cpuSeconds() - cpu
	after, err := p.series(adds, gcs)
	if err != nil {
		return idle{}, err
	}
	return idle{period: d, cpu: cpu / d.Seconds() * 100, queueAdds: after[adds] - before[adds], gcs: after[gcs] - before[gcs]}, nil
}
