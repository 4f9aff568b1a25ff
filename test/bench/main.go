// Command bench measures the controller on the local control plane: it creates N GenericJobs
// of R replicas (with services), waits until every pod and every job is Running, and reports
// time, throughput, the controller's API writes per job, status writes, conflicts and peak
// memory. For reference it creates the same pods and services with a plain client-go loop of
// the same concurrency, rate limits and wire format, and prints the ratio of the two times.
//
// Each run has a fresh cluster of its own. The runs repeat for -rounds rounds, in alternating
// order, and the summary takes medians: on a 2-core machine one run's time varies by a tenth
// or more with what the cluster's own controllers happen to do meanwhile.
//
// Every controller run also reports two latencies per job, p50 and p99, from this process's
// own clock at its informers' events (objects' timestamps have a resolution of a second):
// from just before the job's Create call to its first pod, and from its last pod Running to
// its phase Running.
//
// -kueue times the burst's jobs queued in Kueue, without and with placement by topology
// (kueue.go), for the writes per job that each costs the controller.
//
// -progress has every pod of the burst report its progress once a second for a minute
// (progress.go): the status writes per job per minute, the reports' time, and the
// controller's CPU against a minute without reports. Only this mode runs the controller with
// its progress endpoint.
//
// -elastic makes the burst's jobs elastic and resizes every one to twice its replicas and
// back through the scale subresource (elastic.go): the time per job to the new size, and the
// controller's writes per resize. With -kueue the jobs are in a queue: they grow through
// Kueue's workload slices, and it also times each job's resize to Kueue holding its quota at
// the new size (the slice admitted; the shrink's quota handed back).
//
// Two more modes ask what a cluster full of jobs costs, each without the raw loop:
//
//   - -finished N: each round has two controller runs, alternating which goes first: "empty",
//     just the burst, and "prefilled", where N GenericJobs whose pods end at once (their pods
//     kept, cleanUpPolicy None) are created and settled in the burst's namespace first. It
//     reports the controller's RSS and heap after the prefill and after the burst, its idle
//     CPU over 30 s, the burst's time and latencies, and the ratio prefilled/empty of the
//     burst's time.
//   - -scale N: one cluster, one controller; N such finished jobs, created -scale-step at a
//     time, each step settled and then measured (RSS, heap in use and allocated), with the
//     cost per job at the end; then the controller is restarted and measured: time until
//     ready, until its queue is empty, its writes (target none) and memory. -foreign N then
//     adds N pods that are not the controller's, in another namespace, and compares memory.
//
// $BENCH_CONTROLLER_ARGS (space-separated) is appended to the controller's flags in every
// mode, e.g. --memory-limit=256Mi or --namespace=bench-controller.
//
//	go run ./test/bench -jobs 250 -replicas 4   (make bench)
//	go run ./test/bench -finished 5000          (make bench BENCH_FINISHED=5000)
//	go run ./test/bench -scale 10000            (make bench BENCH_SCALE=10000)
//	go run ./test/bench -kueue                  (make bench BENCH_KUEUE=1)
//	go run ./test/bench -progress               (make bench BENCH_PROGRESS=1)
//	go run ./test/bench -elastic                (make bench BENCH_ELASTIC=1)
//	go run ./test/bench -elastic -kueue         (make bench BENCH_ELASTIC=1 BENCH_KUEUE=1)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

type config struct {
	kind                            string
	jobs, replicas, workers, rounds int
	qps                             float64
	burst                           int
	binDir                          string
	finished, scale, scaleStep      int
	foreign                         int
	// kueue: the -kueue mode (kueue.go); queue, of one controller run: its jobs' queue
	// (queueNone: none).
	kueue bool
	queue string
	// progress: the -progress mode (progress.go); the controller serves its progress endpoint
	// only then.
	progress bool
	// elastic: the -elastic mode (elastic.go); the burst's jobs are elastic then.
	elastic bool
}

func main() {
	c := config{}
	flag.StringVar(&c.kind, "kind", "GenericJob", "kind of the jobs: GenericJob (against a raw loop), TensorFlowTrainingJob (workers), or MPIJob (replicas are its workers; time until every launcher runs)")
	flag.IntVar(&c.jobs, "jobs", 250, "jobs to create")
	flag.IntVar(&c.replicas, "replicas", 4, "replicas per job")
	flag.IntVar(&c.workers, "workers", 8, "controller workers; also the raw loop's concurrency")
	flag.IntVar(&c.rounds, "rounds", 3, "rounds of one raw and one controller run each")
	flag.Float64Var(&c.qps, "qps", 200, "client QPS of the controller and of the raw loop")
	flag.IntVar(&c.burst, "burst", 400, "client burst of the controller and of the raw loop")
	flag.StringVar(&c.binDir, "bin-dir", os.Getenv("T9K_TOOLS_BIN"), "control-plane binaries (hack/lib/tools.sh)")
	flag.IntVar(&c.finished, "finished", 0, "finished jobs to create before the burst, against a run without them (no raw loop)")
	flag.IntVar(&c.scale, "scale", 0, "finished jobs to grow to, measuring the controller's memory at every step, then its restart (no burst)")
	flag.IntVar(&c.scaleStep, "scale-step", 1000, "jobs per step of -scale")
	flag.BoolVar(&c.kueue, "kueue", false, "queued jobs under Kueue, without and with placement by topology (no raw loop): time, latencies, writes per job of each")
	flag.IntVar(&c.foreign, "foreign", 0, "after -scale, pods to create that are not the controller's, comparing its memory before and after")
	flag.BoolVar(&c.progress, "progress", false, "every pod of the burst reports its progress once a second: status writes per job per minute, the reports' time, the controller's CPU against no reports (no raw loop)")
	flag.BoolVar(&c.elastic, "elastic", false, "elastic jobs resized to twice their replicas and back through the scale subresource: time per job to the new size, writes per resize (no raw loop); with -kueue, in a queue: growing through workload slices, and the time to Kueue's quota at the new size")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// phase is what one timed run measured.
type phase struct {
	elapsed   time.Duration
	cpu       float64            // CPU seconds of every process of the run, summed
	fixedCPU  float64            // CPU seconds of fixedWork's processes
	byProcess map[string]float64 // CPU seconds of each process
}

// controllerRun is a controller phase and what the controller reported of it.
type controllerRun struct {
	phase
	latencies  latencySummary
	requests   requestCounts // the controller's own API requests during the run
	peakRSS    float64       // MiB
	afterBurst memory
}

func run(c config) error {
	if (c.finished > 0 || c.scale > 0) && c.kind != "GenericJob" {
		return fmt.Errorf("-finished and -scale fill the cluster with GenericJobs, so they time GenericJobs only")
	}
	if c.finished > 0 && c.scale > 0 {
		return fmt.Errorf("-finished and -scale are separate runs")
	}
	if c.kueue && (c.finished > 0 || c.scale > 0 || c.kind != "GenericJob") {
		return fmt.Errorf("-kueue times a burst of GenericJobs on its own")
	}
	if c.progress && (c.kueue || c.finished > 0 || c.scale > 0 || c.kind != "GenericJob") {
		return fmt.Errorf("-progress measures a burst of GenericJobs on its own")
	}
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "t9k-bench-")
	if err != nil {
		return err
	}
	if os.Getenv("BENCH_KEEP") == "" {
		defer os.RemoveAll(dir)
	} else {
		fmt.Fprintln(os.Stderr, "bench: keeping", dir)
	}
	if c.elastic && (c.progress || c.finished > 0 || c.scale > 0 || c.kind != "GenericJob") {
		return fmt.Errorf("-elastic resizes a burst of GenericJobs on its own (with -kueue: in a queue)")
	}
	switch {
	case c.elastic:
		return elasticRun(ctx, c, dir)
	case c.progress:
		return progressRun(ctx, c, dir)
	case c.kueue:
		return kueueRuns(ctx, c, dir)
	case c.scale > 0:
		return scaleRun(ctx, c, dir)
	case c.finished > 0:
		return finishedRuns(ctx, c, dir)
	}
	fmt.Printf("\n%d GenericJobs x %d replicas (with services); controller: %d workers, QPS %.0f, burst %d; %d rounds\n",
		c.jobs, c.replicas, c.workers, c.qps, c.burst, c.rounds)

	var raws []phase
	var controllers []controllerRun
	for round := range c.rounds {
		order := []string{"raw", "controller"}
		switch {
		case c.kind == "MPIJob":
			order = []string{"controller"} // the raw loop makes per-replica pods and services
		case round%2 == 1:
			order = []string{"controller", "raw"} // neither always runs second on a warmed machine
		}
		fmt.Printf("\nround %d of %d\n", round+1, c.rounds)
		for _, name := range order {
			runDir := filepath.Join(dir, fmt.Sprintf("%d-%s", round+1, name))
			if name == "raw" {
				p, err := rawPhase(ctx, c, runDir)
				if err != nil {
					return err
				}
				raws = append(raws, p)
				continue
			}
			r, err := controllerPhase(ctx, c, runDir, nil)
			if err != nil {
				return err
			}
			controllers = append(controllers, r)
		}
	}
	report(c, raws, controllers)
	return nil
}

// medianOf is the median of f over xs.
func medianOf[T any](xs []T, f func(T) float64) float64 {
	vs := make([]float64, len(xs))
	for i, x := range xs {
		vs[i] = f(x)
	}
	return median(vs)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func report(c config, raws []phase, controllers []controllerRun) {
	var rawTimes, rawCPU, ctlTimes, ctlCPU, ratios, atEqualSpeed []float64
	var lats []latencySummary
	for i := range controllers {
		ctlTimes, ctlCPU = append(ctlTimes, controllers[i].elapsed.Seconds()), append(ctlCPU, controllers[i].cpu)
		lats = append(lats, controllers[i].latencies)
	}
	for i := range raws {
		rawTimes, rawCPU = append(rawTimes, raws[i].elapsed.Seconds()), append(rawCPU, raws[i].cpu)
		ratios = append(ratios, controllers[i].elapsed.Seconds()/raws[i].elapsed.Seconds())
		if raws[i].fixedCPU > 0 && controllers[i].fixedCPU > 0 {
			atEqualSpeed = append(atEqualSpeed, ratios[i]/(controllers[i].fixedCPU/raws[i].fixedCPU))
		}
	}
	pods := float64(c.jobs * podsPerJob(c))
	ctl := median(ctlTimes)
	fmt.Printf("\nsummary of %d rounds (medians)\n", len(controllers))
	fmt.Printf("controller: %.1fs, %.0f pods/s\n", ctl, pods/ctl)
	fmt.Printf("controller: %s\n", medianLatencies(lats))
	fmt.Printf("controller: last pod Running → job Running p99 by round:")
	for _, l := range lats {
		fmt.Printf(" %s", ms(l.running99))
	}
	fmt.Printf(" (target <= %s)\ncontroller: creation → first pod is the burst's queue at the client's rate limit (%d children a job at QPS %.0f, burst %d): BENCH_QPS and BENCH_BURST move it\n",
		ms(runningTarget), childrenPerJob(c), c.qps, c.burst)
	if len(raws) > 0 {
		raw := median(rawTimes)
		fmt.Printf("raw client-go loop: %.1fs, %.0f pods/s\n", raw, pods/raw)
		fmt.Printf("ratio controller/raw: %.2f (target <= 1.15); by round:", ctl/raw)
		for _, r := range ratios {
			fmt.Printf(" %.2f", r)
		}
		if len(atEqualSpeed) == len(ratios) {
			fmt.Printf("\nratio at equal machine speed (over the ratio of the CPU %s took for the same pods): %.2f; by round:",
				strings.Join(fixedWork, " and "), median(atEqualSpeed))
			for _, r := range atEqualSpeed {
				fmt.Printf(" %.2f", r)
			}
		}
		fmt.Printf("\nCPU of every process, controller/raw: %.1fs / %.1fs = %.2f\n", median(ctlCPU), median(rawCPU), median(ctlCPU)/median(rawCPU))
		reportCPUBound(raws, controllers, ratios)
		reportRateFloor(c, raws, controllers)
	}

	// The controller's requests, summed over its runs.
	total := requestCounts{}
	peakRSS := 0.0
	for _, r := range controllers {
		for k, v := range r.requests {
			total[k] += v
		}
		peakRSS = max(peakRSS, r.peakRSS)
	}
	perJob := float64(c.jobs * len(controllers))
	fmt.Println("\ncontroller API writes per job, by verb and resource:")
	var keys []string
	for k := range total {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	writes, statusWrites, conflicts := 0.0, 0.0, 0.0
	for _, k := range keys {
		n := total[k]
		verb := strings.Fields(k)[0]
		if verb == "diag" {
			if os.Getenv("BENCH_DIAG") != "" {
				fmt.Printf("  %s %.3f\n", k, n/float64(len(controllers)))
			}
			continue
		}
		if n == 0 || !isWrite(verb) {
			continue
		}
		fmt.Printf("  %-40s %6.2f\n", k, n/perJob)
		if strings.Contains(k, "events") {
			continue // events are reported, not counted against the budget
		}
		writes += n
		if strings.Contains(k, "jobs/status") {
			statusWrites += n
		}
		if strings.HasSuffix(k, " 409") {
			conflicts += n
		}
	}
	if c.kind == "MPIJob" {
		fmt.Printf("writes per job (pods, Secret, ConfigMap, Service, status): %.2f (target <= R+1+3+3 = %d)\n", writes/perJob, c.replicas+7)
	} else {
		fmt.Printf("writes per job (pods, services, status): %.2f (target <= 2R+3 = %d)\n", writes/perJob, 2*c.replicas+3)
	}
	fmt.Printf("status writes per job: %.2f\n", statusWrites/perJob)
	fmt.Printf("409 conflicts: %.0f (target 0)\n", conflicts)
	fmt.Printf("controller peak RSS: %.0f MiB\n", peakRSS)
}
