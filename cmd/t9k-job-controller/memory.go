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

// At rest, the free heap goes back to the system. Go's background scavenger hands free heap
// pages back only down to about a tenth above the collector's goal, so a controller that has
// settled after a burst or a restart keeps tens of MiB resident that it does not use, for as
// long as it rests. A look (every gcTuneEvery) that finds it at rest, having allocated less
// than restAllocs since the last look (it may serve its metrics and keep its Lease, not sync
// a burst of jobs), with more than restFree of free heap pages not handed back, hands
// them back (debug.FreeOSMemory: one collection). It does not repeat while the controller
// rests, since nothing is freed until a collection: one that allocates slowly pays at most
// one more collection for each of its own.
const (
	restAllocs = 8 << 20
	restFree   = 16 << 20
)

// releaseAtRest reports whether a look's figures ask for the free heap to be handed back:
// allocated is what the controller allocated since the last look, free the heap's free pages
// not handed back yet.
func releaseAtRest(allocated, free uint64) bool {
	return allocated < restAllocs && free > restFree
}

// tuneGC keeps the growth target as the live heap's size asks, and hands the free heap back
// at rest, until ctx ends, unless GOGC set a target.
func tuneGC(ctx context.Context) {
	if _, set := os.LookupEnv("GOGC"); set {
		return
	}
	samples := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/allocs:bytes"}, {Name: "/memory/classes/heap/free:bytes"}}
	percent := smallHeapGCPercent
	var allocs uint64
	tick := time.NewTicker(gcTuneEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		metrics.Read(samples)
		for _, s := range samples {
			if s.Value.Kind() != metrics.KindUint64 {
				return // a runtime without these figures: leave the collector as Go sets it
			}
		}
		live, allocated, free := samples[0].Value.Uint64(), samples[1].Value.Uint64()-allocs, samples[2].Value.Uint64()
		allocs = samples[1].Value.Uint64()
		want := gcPercentFor(live, percent)
		switch {
		case want < percent:
			// A heap grown under the larger target (the first list of a big cluster) is
			// collected now and handed back.
			debug.SetGCPercent(want)
			debug.FreeOSMemory()
		case want != percent:
			debug.SetGCPercent(want)
		case releaseAtRest(allocated, free):
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
