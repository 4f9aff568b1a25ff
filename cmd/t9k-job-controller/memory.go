package main

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// memoryLimitEnv is where the Deployment passes the container's memory limit (the downward
// API's limits.memory, in bytes).
const memoryLimitEnv = "T9K_MEMORY_LIMIT"

// goMemoryLimit is the Go runtime's soft memory limit for a process allowed limit bytes: 90%
// of it, so that the garbage collector works harder before the kernel kills the process,
// and the process's resident memory stays near its heap rather than twice it. 0: no limit
// (none given, or GOMEMLIMIT set, which the runtime already follows).
func goMemoryLimit(limit string, goMemLimitSet bool) (int64, error) {
	if limit == "" || goMemLimitSet {
		return 0, nil
	}
	q, err := resource.ParseQuantity(limit)
	if err != nil {
		return 0, fmt.Errorf("--memory-limit %q: %w", limit, err)
	}
	return q.Value() / 10 * 9, nil
}

// setMemoryLimit tells the Go runtime its budget.
func setMemoryLimit(limit string) (int64, error) {
	_, goMemLimitSet := os.LookupEnv("GOMEMLIMIT")
	soft, err := goMemoryLimit(limit, goMemLimitSet)
	if err != nil || soft == 0 {
		return 0, err
	}
	debug.SetMemoryLimit(soft)
	return soft, nil
}

// The garbage collector's growth target, unless GOGC sets one (docs/install.md, "Memory").
// Go's default lets the heap grow to twice what is live before it collects, and the
// process's resident memory follows that goal. A controller that holds many jobs has a heap
// that is mostly its informers' caches, which live as long as it does: once the live heap
// passes largeHeap, the target is halved (the heap grows to 1.5 times what is live), so that
// resident memory stays nearer what the controller holds. A small heap (a burst of a few
// hundred jobs) keeps Go's default, and the collector's time stays out of a burst's way; the
// target goes back to it only below smallHeap, so that a heap near the line does not switch
// (and free memory) at every look.
const (
	smallHeapGCPercent = 100
	largeHeapGCPercent = 50
	largeHeap          = 64 << 20
	smallHeap          = 48 << 20
	gcTuneEvery        = 5 * time.Second
)

// tuneGC keeps the growth target as the live heap's size asks, until ctx ends, unless GOGC
// set one.
func tuneGC(ctx context.Context) {
	if _, set := os.LookupEnv("GOGC"); set {
		return
	}
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	percent := smallHeapGCPercent
	tick := time.NewTicker(gcTuneEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return
		}
		want := gcPercentFor(sample[0].Value.Uint64(), percent)
		if want == percent {
			continue
		}
		debug.SetGCPercent(want)
		if want < percent {
			// A heap grown under the larger target (the first list of a big cluster) is
			// collected now and handed back: a controller at rest collects nothing.
			debug.FreeOSMemory()
		}
		percent = want
	}
}

// gcPercentFor is the growth target for a live heap of the given size, given the one set.
func gcPercentFor(live uint64, current int) int {
	switch {
	case live >= largeHeap:
		return largeHeapGCPercent
	case live < smallHeap:
		return smallHeapGCPercent
	}
	return current
}
