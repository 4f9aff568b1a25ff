package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
	"github.com/t9k-jobs/t9k-jobs/test/harness"
)

// -finished N: does a cache full of finished jobs slow the controller down? Each round runs
// the same burst on an empty cluster and on one prefilled with N finished jobs, in
// alternating order, so that neither always runs on a warmer machine.

// idlePeriod is how long the idle controller's CPU is measured.
const idlePeriod = 30 * time.Second

// finishedRun is one controller run of -finished: the burst, and what the prefill left
// before it.
type finishedRun struct {
	controllerRun
	prefillTime  time.Duration // from the first job's creation until the controller settled
	afterPrefill memory
	idle         idle // before the burst
}

func finishedRuns(ctx context.Context, c config, dir string) error {
	fmt.Printf("\n%d GenericJobs x %d replicas (with services) on an empty cluster and after %d finished jobs of %d replicas (pods kept); controller: %d workers, QPS %.0f, burst %d; %d rounds\n",
		c.jobs, c.replicas, c.finished, c.replicas, c.workers, c.qps, c.burst, c.rounds)
	var empty, prefilled []finishedRun
	for round := range c.rounds {
		order := []bool{false, true}
		if round%2 == 1 {
			order = []bool{true, false}
		}
		fmt.Printf("\nround %d of %d\n", round+1, c.rounds)
		for _, prefill := range order {
			name := map[bool]string{false: "empty", true: "prefilled"}[prefill]
			fmt.Printf("  %s:\n", name)
			r, err := finishedPhase(ctx, c, filepath.Join(dir, fmt.Sprintf("%d-%s", round+1, name)), prefill)
			if err != nil {
				return err
			}
			if prefill {
				prefilled = append(prefilled, r)
			} else {
				empty = append(empty, r)
			}
		}
		fmt.Printf("  ratio prefilled/empty: %.2f\n", prefilled[round].elapsed.Seconds()/empty[round].elapsed.Seconds())
	}
	reportFinished(c, empty, prefilled)
	return nil
}

// finishedPhase runs the controller on a fresh cluster: the prefill if asked for, the
// controller's idle CPU, then the burst.
func finishedPhase(ctx context.Context, c config, dir string, prefill bool) (finishedRun, error) {
	var r finishedRun
	run, err := controllerPhase(ctx, c, dir, func(ctx context.Context, ctl *controllerProcess, admin *rest.Config, kube kubernetes.Interface) error {
		var err error
		if prefill {
			if r.prefillTime, r.afterPrefill, err = prefillFinished(ctx, c, ctl, admin, kube); err != nil {
				return err
			}
			fmt.Printf("  controller: %d finished jobs settled in %.1fs; %s\n", c.finished, r.prefillTime.Seconds(), r.afterPrefill)
		}
		if r.idle, err = ctl.idle("GenericJob", idlePeriod); err != nil {
			return err
		}
		fmt.Printf("  controller: %s\n", r.idle)
		return nil
	})
	r.controllerRun = run
	if err == nil {
		fmt.Printf("  controller: after the burst %s\n", r.afterBurst)
	}
	return r, err
}

// prefillFinished creates c.finished finished jobs and waits until they and the controller
// have settled; it returns the time that took and the controller's memory then.
func prefillFinished(ctx context.Context, c config, ctl *controllerProcess, admin *rest.Config, kube kubernetes.Interface) (time.Duration, memory, error) {
	if err := namespace(ctx, kube, jobNamespace); err != nil {
		return 0, memory{}, err
	}
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	jobs := tallyJobs(watchCtx, versioned.NewForConfigOrDie(admin), jobNamespace, prefillLabel)
	pods := tallyPods(watchCtx, kube, jobNamespace, prefillLabel)
	defer func() {
		if w := gcWarning(pods); w != "" {
			fmt.Printf("  %s\n", w)
		}
	}()
	defer every(30*time.Second, func() { fmt.Fprintf(os.Stderr, "bench: %d jobs Succeeded\n", jobs.succeeded.Load()) })()
	start := time.Now()
	if err := createFinished(ctx, c, admin, 0, c.finished); err != nil {
		return 0, memory{}, err
	}
	if err := settleFinished(ctx, ctl, jobs, c.finished, 30*time.Minute); err != nil {
		return 0, memory{}, err
	}
	took := time.Since(start)
	mem, err := ctl.memory()
	fmt.Printf("  %d finished jobs, %d pods\n", jobs.succeeded.Load(), pods.all.Load())
	return took, mem, err
}

// settleFinished waits until n jobs have Succeeded and the controller's queue has settled.
func settleFinished(ctx context.Context, ctl *controllerProcess, jobs *tally, n int, timeout time.Duration) error {
	err := harness.WaitFor(ctx, fmt.Sprintf("%d jobs to succeed", n), 250*time.Millisecond, timeout, func(context.Context) (bool, error) {
		if failed := jobs.failed.Load(); failed > 0 {
			return false, fmt.Errorf("%d jobs failed", failed)
		}
		return jobs.succeeded.Load() >= int64(n), nil
	})
	if err != nil {
		return err
	}
	_, err = ctl.settle(ctx, "GenericJob", timeout)
	return err
}

func reportFinished(c config, empty, prefilled []finishedRun) {
	fmt.Printf("\nsummary of %d rounds (medians): %d GenericJobs x %d replicas, empty against %d finished jobs\n",
		len(empty), c.jobs, c.replicas, c.finished)
	rows := []struct {
		name   string
		format string
		f      func(finishedRun) float64
		before bool // only of the prefilled runs
	}{
		{"burst time", "%.1fs", func(r finishedRun) float64 { return r.elapsed.Seconds() }, false},
		{"creation → first pod p50", "%.0fms", func(r finishedRun) float64 { return msOf(r.latencies.firstPod50) }, false},
		{"creation → first pod p99", "%.0fms", func(r finishedRun) float64 { return msOf(r.latencies.firstPod99) }, false},
		{"last pod Running → job Running p50", "%.0fms", func(r finishedRun) float64 { return msOf(r.latencies.running50) }, false},
		{"last pod Running → job Running p99", "%.0fms", func(r finishedRun) float64 { return msOf(r.latencies.running99) }, false},
		{"writes per job of the burst", "%.2f", func(r finishedRun) float64 { return writesPerJob(r.requests, c.jobs) }, false},
		{"RSS after prefill", "%.0f MiB", func(r finishedRun) float64 { return r.afterPrefill.rss }, true},
		{"heap in use after prefill", "%.0f MiB", func(r finishedRun) float64 { return r.afterPrefill.heapInuse }, true},
		{"RSS after burst", "%.0f MiB", func(r finishedRun) float64 { return r.afterBurst.rss }, false},
		{"heap in use after burst", "%.0f MiB", func(r finishedRun) float64 { return r.afterBurst.heapInuse }, false},
		{"peak RSS", "%.0f MiB", func(r finishedRun) float64 { return r.peakRSS }, false},
		{"idle CPU (% of a core)", "%.2f%%", func(r finishedRun) float64 { return r.idle.cpu }, false},
	}
	// %-36s pads bytes, and an arrow is three of them.
	pad := func(s string) string { return s + strings.Repeat(" ", max(36-utf8.RuneCountInString(s), 0)) }
	fmt.Printf("  %s %12s %12s\n", pad(""), "empty", "prefilled")
	for _, row := range rows {
		e := "-"
		if !row.before {
			e = fmt.Sprintf(row.format, medianOf(empty, row.f))
		}
		fmt.Printf("  %s %12s %12s\n", pad(row.name), e, fmt.Sprintf(row.format, medianOf(prefilled, row.f)))
	}
	var ratios []string
	var rs []float64
	for i := range prefilled {
		rs = append(rs, prefilled[i].elapsed.Seconds()/empty[i].elapsed.Seconds())
		ratios = append(ratios, fmt.Sprintf("%.2f", rs[i]))
	}
	fmt.Printf("ratio prefilled/empty of the burst time: %.2f (target <= 1.10); by round: %s\n", median(rs), strings.Join(ratios, " "))
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
