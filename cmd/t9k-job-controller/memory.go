package main

import (
	"fmt"
	"os"
	"runtime/debug"

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
