package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/t9k-jobs/t9k-jobs/test/cluster"
	"github.com/t9k-jobs/t9k-jobs/test/harness"
)

// What a run costs the machine: on 2 cores both runs are bound by CPU, mostly the API
// server's, so these show where it went.

// cpuUse is the CPU time used so far by each control-plane component, the controller (when
// running) and this process, which creates the jobs or runs the raw loop.
func cpuUse(cl *cluster.Cluster, ctl *controllerProcess) map[string]float64 {
	use := cl.CPUSeconds()
	if ctl != nil {
		use["controller"] = ctl.cpuSeconds()
	}
	use["bench"] = cluster.ProcessCPUSeconds(os.Getpid())
	return use
}

// printCPU prints the CPU time each process used since before, and returns the run's phase
// of elapsed time: their sum (on 2 cores the runs are bound by CPU, so the sum is the work a
// run costs the machine) and the CPU of the fixed work (fixedWork).
func printCPU(run string, elapsed time.Duration, usage func() map[string]float64, before map[string]float64) phase {
	after := usage()
	var names []string
	for name := range after {
		names = append(names, name)
	}
	sort.Strings(names)
	total := 0.0
	fmt.Printf("  %s: CPU", run)
	for _, name := range names {
		fmt.Printf(" %s %.1fs", name, after[name]-before[name])
		total += after[name] - before[name]
	}
	fmt.Printf(", in all %.1fs\n", total)
	p := phase{elapsed: elapsed, cpu: total, byProcess: map[string]float64{}}
	for _, name := range names {
		p.byProcess[name] = after[name] - before[name]
	}
	for _, name := range fixedWork {
		p.fixedCPU += after[name] - before[name]
	}
	return p
}

// fixedWork are the processes whose work is the same in a raw and a controller run: binding
// and running the same pods. The CPU they take for it measures how fast the machine ran (a
// virtual machine's cores do not run at one speed: in rounds of one bench their CPU for the
// same work spread by 20%, and so did every other process's), so the ratio of two runs'
// times over the ratio of this CPU compares them at equal speed.
var fixedWork = []string{"kube-scheduler", "kwok"}

// apiserverRequests reads the API server's count of finished requests by verb, resource and
// subresource, from every client (controllers, kwok, the scheduler, the bench itself).
func apiserverRequests(ctx context.Context, kube kubernetes.Interface) map[string]float64 {
	counts := map[string]float64{}
	body, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return counts
	}
	for _, sm := range harness.Metrics(body).Samples("apiserver_request_total") {
		l := sm.Labels
		if l["code"] == "0" || l["verb"] == "WATCH" {
			continue // long-running watches are counted when they end
		}
		key := l["verb"] + " " + l["resource"]
		if l["subresource"] != "" {
			key += "/" + l["subresource"]
		}
		counts[key] += sm.Value
	}
	return counts
}

// printRequests prints, with BENCH_DIAG set, the requests the API server served between two
// readings.
func printRequests(run string, before, after map[string]float64) {
	if os.Getenv("BENCH_DIAG") == "" {
		return
	}
	var keys []string
	for k := range after {
		if after[k] > before[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	fmt.Printf("  %s: API server requests", run)
	for _, k := range keys {
		fmt.Printf(", %s %.0f", k, after[k]-before[k])
	}
	fmt.Println()
}

// profile, when $BENCH_PPROF names a directory, records CPU profiles of the API server and,
// in a controller run (ctl not nil), of the controller over the next 15 seconds, into
// <run>.kube-apiserver.pprof and <run>.controller.pprof there, run being the round's run
// directory's name (1-raw, 1-controller, ...): each round keeps its own, so a round whose
// ratio stands out can be compared with one that does not (go tool pprof reads them, and
// -diff_base compares the API server's two runs of a round). The returned func waits until
// they are written.
func profile(ctx context.Context, run string, ctl *controllerProcess, kube kubernetes.Interface) (wait func()) {
	dir := os.Getenv("BENCH_PPROF")
	if dir == "" {
		return func() {}
	}
	const seconds = "15"
	var wg sync.WaitGroup
	if ctl != nil {
		wg.Go(func() {
			saveProfile(dir, run+".controller", httpBody(ctl.addr+"/debug/pprof/profile?seconds="+seconds))
		})
	}
	wg.Go(func() {
		saveProfile(dir, run+".kube-apiserver", func() ([]byte, error) {
			return kube.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", seconds).DoRaw(ctx)
		})
	})
	return wg.Wait
}

// heapProfile, when $BENCH_PPROF names a directory, writes the controller's heap profile
// there as name.pprof (go tool pprof -sample_index=inuse_space reads what it keeps).
func heapProfile(ctl *controllerProcess, name string) {
	if dir := os.Getenv("BENCH_PPROF"); dir != "" {
		saveProfile(dir, name, httpBody(ctl.addr+"/debug/pprof/heap?gc=1"))
	}
}

// saveProfile writes what get returns to dir/name.pprof, and says on stderr why it could not.
func saveProfile(dir, name string, get func() ([]byte, error)) {
	body, err := get()
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, name+".pprof"), body, 0o644)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: profiling %s: %v\n", name, err)
	}
}

// httpBody reads the body of a GET of url.
func httpBody(url string) func() ([]byte, error) {
	return func() ([]byte, error) {
		resp, err := http.Get(url)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		return io.ReadAll(resp.Body)
	}
}

// writes sums the writes among a controller's requests (isWrite), without events, which it
// counts apart.
func writes(requests requestCounts) (total, events float64) {
	for k, n := range requests {
		f := strings.Fields(k)
		if len(f) < 2 || !isWrite(f[0]) {
			continue
		}
		if strings.HasPrefix(f[1], "events") {
			events += n
			continue
		}
		total += n
	}
	return total, events
}

// isWrite reports whether a verb of requestCounts writes: not a read, a dry run (the start's
// probe of the PodGroup fields the API server keeps) or one of the diagnostic series.
func isWrite(verb string) bool {
	switch verb {
	case "get", "list", "watch", "diag":
		return false
	}
	return !strings.HasPrefix(verb, "dryrun-")
}

func writesPerJob(requests requestCounts, jobs int) float64 {
	total, _ := writes(requests)
	return total / float64(jobs)
}

// reportCPUBound says what bounds the ratio to the raw loop when both runs keep the
// machine's cores busy: each round's time ratio is then its CPU ratio, and the controller's
// run costs more CPU by what the raw loop does not do (the jobs' creation and status writes
// through the API server's CRD handler, the controller's own work), so a round's ratio moves
// with the CPU that work took in it.
func reportCPUBound(raws []phase, controllers []controllerRun, ratios []float64) {
	fmt.Printf("cores busy (CPU seconds a second of the run), raw and controller, by round:")
	for i := range raws {
		fmt.Printf(" %.1f/%.1f", raws[i].cpu/raws[i].elapsed.Seconds(), controllers[i].cpu/controllers[i].elapsed.Seconds())
	}
	fmt.Printf("\nratio of CPU, controller/raw, by round:")
	for i := range raws {
		fmt.Printf(" %.2f", controllers[i].cpu/raws[i].cpu)
	}
	fmt.Printf(" (the time's: ")
	for i, r := range ratios {
		if i > 0 {
			fmt.Print(" ")
		}
		fmt.Printf("%.2f", r)
	}
	fmt.Printf(")\nCPU the controller's run took beyond the raw loop's, by process and round:")
	names := map[string]bool{}
	for i := range raws {
		for name := range raws[i].byProcess {
			names[name] = true
		}
		for name := range controllers[i].byProcess {
			names[name] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		fmt.Printf("\n  %-24s", name)
		for i := range raws {
			fmt.Printf(" %+5.1fs", controllers[i].byProcess[name]-raws[i].byProcess[name])
		}
	}
	fmt.Println()
}

// reportRateFloor prints the least time each run's client allows (its children, the first
// -burst at once and the rest at -qps) beside each round's time. A run at its floor is bound
// by its client; one above it with its cores busy is bound by the CPU, and then the ratio is
// the runs' CPU ratio. The raw loop creates a pod and a Service per replica.
func reportRateFloor(c config, raws []phase, controllers []controllerRun) {
	rawChildren, ctlChildren := c.jobs*2*c.replicas, c.jobs*childrenPerJob(c)
	fmt.Printf("the client's rate limit allows no less than %.1fs for the raw loop's %d children and %.1fs for the controller's %d (burst %d, then QPS %.0f); by round, raw/controller:",
		rateLimitFloor(rawChildren, c.burst, c.qps).Seconds(), rawChildren,
		rateLimitFloor(ctlChildren, c.burst, c.qps).Seconds(), ctlChildren, c.burst, c.qps)
	for i := range raws {
		fmt.Printf(" %.1fs/%.1fs", raws[i].elapsed.Seconds(), controllers[i].elapsed.Seconds())
	}
	fmt.Println()
}
