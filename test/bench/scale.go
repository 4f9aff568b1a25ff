package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
	"github.com/t9k-jobs/t9k-jobs/test/cluster"
	"github.com/t9k-jobs/t9k-jobs/test/harness"
)

// -scale N: what does each finished job cost the controller, and what does a restart among
// N of them cost? One cluster, one controller: the jobs come -scale-step at a time, each step
// settled before it is measured, so that the figures are of a cache at rest, not of a queue.

// scaleStep is the controller at rest after one step.
type scaleStep struct {
	jobs, pods int
	mem        memory
	took       time.Duration // from the step's first job until the controller settled
}

// stepTimeout bounds each wait of -scale: a step of 1,000 jobs takes a minute or two here.
const stepTimeout = 30 * time.Minute

func scaleRun(ctx context.Context, c config, dir string) error {
	fmt.Printf("\n%d GenericJobs x %d replicas that end at once (pods kept), %d at a time; controller: %d workers, QPS %.0f, burst %d\n",
		c.scale, c.replicas, c.scaleStep, c.workers, c.qps, c.burst)
	return withCluster(ctx, c, filepath.Join(dir, "scale"), cluster.InstallCRDs, func(cl *cluster.Cluster, admin *rest.Config, kube kubernetes.Interface) error {
		runDir := filepath.Dir(cl.Dir)
		ctl, err := startController(ctx, c, cl.Kubeconfig, runDir)
		if err != nil {
			return err
		}
		defer func() { ctl.stop() }() // the one running at the end, after a restart
		if err := namespace(ctx, kube, jobNamespace); err != nil {
			return err
		}
		watchCtx, stopWatching := context.WithCancel(ctx)
		defer stopWatching() // before its cluster goes
		jobs := tallyJobs(watchCtx, versioned.NewForConfigOrDie(admin), jobNamespace, prefillLabel)
		pods := tallyPods(watchCtx, kube, jobNamespace, prefillLabel)
		steps, err := growJobs(ctx, c, ctl, admin, jobs, pods, func() float64 { return etcdMiB(cl) })
		if err != nil {
			return err
		}
		if w := gcWarning(pods); w != "" {
			fmt.Println(w)
		}
		reportCost(steps)
		heapProfile(ctl, "controller-heap")
		idle, err := ctl.idle("GenericJob", idlePeriod)
		if err != nil {
			return err
		}
		fmt.Printf("with %d jobs: %s\n", c.scale, idle)
		if ctl, err = restart(ctx, c, ctl, cl.Kubeconfig, runDir, steps[len(steps)-1]); err != nil {
			return err
		}
		if c.foreign > 0 {
			if err := foreignPods(ctx, c, ctl, kube); err != nil {
				return err
			}
			fmt.Printf("  etcd's database: %.0f MiB\n", etcdMiB(cl))
		}
		return nil
	})
}

// etcdMiB is the size of etcd's database file: its quota (2 GiB by default) is the first
// limit of the control plane that a cluster of 10,000 jobs could meet.
func etcdMiB(cl *cluster.Cluster) float64 {
	fi, err := os.Stat(filepath.Join(cl.Dir, "etcd", "member", "snap", "db"))
	if err != nil {
		return 0
	}
	return float64(fi.Size()) / (1 << 20)
}

// growJobs creates the jobs step by step and prints a line per step as it goes: a run of
// 10,000 jobs takes a while.
func growJobs(ctx context.Context, c config, ctl *controllerProcess, admin *rest.Config, jobs, pods *tally, etcdMiB func() float64) ([]scaleStep, error) {
	fmt.Printf("  %6s %7s %8s %16s %15s %8s %8s\n", "jobs", "pods", "RSS MiB", "heap in use MiB", "heap alloc MiB", "step", "etcd MiB")
	defer every(30*time.Second, func() {
		fmt.Fprintf(os.Stderr, "bench: %d jobs Succeeded, %d pods\n", jobs.succeeded.Load(), pods.all.Load())
	})()
	var steps []scaleStep
	for done := 0; done < c.scale; {
		next := min(done+c.scaleStep, c.scale)
		start := time.Now()
		if err := createFinished(ctx, c, admin, done, next); err != nil {
			return steps, err
		}
		if err := settleFinished(ctx, ctl, jobs, next, stepTimeout); err != nil {
			return steps, err
		}
		mem, err := ctl.memory()
		if err != nil {
			return steps, err
		}
		s := scaleStep{jobs: next, pods: int(pods.all.Load()), mem: mem, took: time.Since(start)}
		steps = append(steps, s)
		fmt.Printf("  %6d %7d %8.1f %16.1f %15.1f %7.1fs %8.0f\n", s.jobs, s.pods, s.mem.rss, s.mem.heapInuse, s.mem.heapAlloc, s.took.Seconds(), etcdMiB())
		done = next
	}
	return steps, nil
}

// reportCost prints what each job past the first step added: the first step carries the
// controller's fixed cost (code, caches' indexes, client buffers), so it is the baseline.
func reportCost(steps []scaleStep) {
	if len(steps) < 2 {
		return
	}
	first, last := steps[0], steps[len(steps)-1]
	n := float64(last.jobs - first.jobs)
	perJob := func(a, b float64) float64 { return (b - a) * 1024 / n }
	fmt.Printf("per job, from %d to %d jobs: RSS %.1f KiB, heap in use %.1f KiB, heap alloc %.1f KiB\n", first.jobs, last.jobs,
		perJob(first.mem.rss, last.mem.rss), perJob(first.mem.heapInuse, last.mem.heapInuse), perJob(first.mem.heapAlloc, last.mem.heapAlloc))
}

// restart stops the controller and starts a new one from the same binary, and measures it:
// until ready (its caches synced), until its queue settled, what it wrote meanwhile (for
// finished jobs that did not change: nothing) and its memory then.
func restart(ctx context.Context, c config, old *controllerProcess, kubeconfig, dir string, at scaleStep) (*controllerProcess, error) {
	stopping := time.Now()
	old.stop()
	stopped := time.Since(stopping)
	p, err := launchController(c, old.binary, kubeconfig, dir)
	if err != nil {
		return old, err
	}
	ready, err := p.waitReady(ctx)
	if err != nil {
		return p, err
	}
	idle, err := p.settle(ctx, "GenericJob", stepTimeout)
	if err != nil {
		return p, err
	}
	requests, err := scrape(p.metrics)
	if err != nil {
		return p, err
	}
	mem, err := p.memory()
	if err != nil {
		return p, err
	}
	toReady, toIdle := ready.Sub(p.started), max(idle.Sub(ready), 0)
	fmt.Printf("\nrestart with %d jobs and %d pods: stopped in %.1fs; ready %.1fs after start; queue empty %.1fs after ready (%.1fs after start; target <= 30s)\n",
		at.jobs, at.pods, stopped.Seconds(), toReady.Seconds(), toIdle.Seconds(), (toReady + toIdle).Seconds())
	total, events := writes(requests)
	fmt.Printf("  writes after the restart: %.0f (target 0); events %.0f\n", total, events)
	fmt.Printf("  requests after the restart:%s\n", describeRequests(requests))
	fmt.Printf("  after the restart settled: %s\n", mem.detailed())
	rest, after, err := p.restingMemory(ctx)
	if err != nil {
		return p, err
	}
	fmt.Printf("  at rest (its next GC cycle, %.0fs later): %s\n", after.Seconds(), rest.detailed())
	// The controller hands the free heap back at rest, at its next look (every 5 s) after
	// the cycle: what it holds at rest is what it holds then.
	select {
	case <-ctx.Done():
		return p, ctx.Err()
	case <-time.After(restLook):
	}
	later, err := p.memory()
	if err != nil {
		return p, err
	}
	fmt.Printf("  %.0fs after that cycle: %s\n", restLook.Seconds(), later.detailed())
	return p, nil
}

// restLook is how long after its GC cycle the controller at rest is looked at again: past
// its next look at its own memory (cmd/t9k-job-controller/memory.go, every 5 s).
const restLook = 12 * time.Second

// describeRequests lists a controller's requests by verb, resource and code.
func describeRequests(requests requestCounts) string {
	var keys []string
	for k, n := range requests {
		if n > 0 && !strings.HasPrefix(k, "diag ") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s %.0f;", k, requests[k])
	}
	return strings.TrimSuffix(b.String(), ";")
}

// foreignPods creates c.foreign pods that are not the controller's (no job label, another
// namespace), waits until they run, and compares the controller's memory before and after:
// its caches should not hold them.
func foreignPods(ctx context.Context, c config, ctl *controllerProcess, kube kubernetes.Interface) error {
	const ns = "bench-foreign"
	if err := namespace(ctx, kube, ns); err != nil {
		return err
	}
	// Both at rest, after a GC cycle: a GC's timing would otherwise weigh more than the pods.
	before, _, err := ctl.restingMemory(ctx)
	if err != nil {
		return err
	}
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	pods := tallyPods(watchCtx, kube, ns, "")
	var created atomic.Int64
	defer every(30*time.Second, func() {
		fmt.Fprintf(os.Stderr, "bench: foreign pods: %d created, %d Running\n", created.Load(), pods.running.Load())
	})()
	start := time.Now()
	err = parallel(32, c.foreign, func(i int) error {
		_, err := kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("foreign-%05d", i)}, Spec: podSpec()}, metav1.CreateOptions{})
		created.Add(1)
		return err
	})
	if err != nil {
		return err
	}
	createdIn := time.Since(start)
	if err := harness.WaitFor(ctx, fmt.Sprintf("%d foreign pods to run", c.foreign), 250*time.Millisecond, 2*stepTimeout, func(context.Context) (bool, error) {
		return pods.running.Load() >= int64(c.foreign), nil
	}); err != nil {
		return err
	}
	runningIn := time.Since(start)
	if _, err := ctl.settle(ctx, "GenericJob", stepTimeout); err != nil {
		return err
	}
	after, _, err := ctl.restingMemory(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("\n%d foreign pods in %s (created %.0fs, Running %.0fs):\n", c.foreign, ns, createdIn.Seconds(), runningIn.Seconds())
	fmt.Printf("  %-8s %s (at rest: after a GC cycle)\n", "before", before.detailed())
	fmt.Printf("  %-8s %s (target: no growth)\n", "after", after.detailed())
	return nil
}

// every calls f every period until the returned stop is called; stop returns once f no
// longer runs.
func every(period time.Duration, f func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				f()
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
