package e2e

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// How the tests share the cluster (docs/testing.md, "Tests side by side").
//
// Most tests have a namespace of their own, their own nodes where they count capacity, and
// change nothing another test reads: they call parallel and run beside each other. Those
// that stop or restart the shared controller, time what the controller does to the second,
// read a counter of the whole controller, or need it without Kueue run alone: they do not
// call parallel, and go test runs them first, one at a time, before any parallel test
// resumes. A test that must
// start something first (useKueue restarts the controller the first time) does so before it
// calls parallel: what a test does before t.Parallel runs in that sequential phase.
//
// How many run at once is set by shares, not by go test's -parallel (make test sets it
// higher than the shares allow in all, since a test waiting for a share holds one of its
// places): a part of the cluster that bears only so many tests at once is a share, and a
// test takes its weight of each share it uses for its whole run, released once its
// clean-up is done.

// share is a part of the cluster that holds only so many tests at once.
type share struct {
	name string
	size int64
	used int64 // guarded by shares.mu
}

func newShare(name string, size int64) *share {
	return &share{name: name, size: size}
}

// shares guards every share's count: a test takes all it uses at once, when all have room,
// and holds none while it waits, so that no two tests wait on each other and no share
// stands idle for a test that waits for another (MultiKueue's real MPIJob, which uses the
// real node and MultiKueue's workers, once held the real node idle for two minutes while it
// waited for the workers, and the other way round, the workers while it waited its turn on
// the real node).
var shares struct {
	mu   sync.Mutex
	cond *sync.Cond
}

func init() { shares.cond = sync.NewCond(&shares.mu) }

// The shares.
var (
	// fakeNodes: tests on the fake nodes, two at a time: beyond that, on two cores, the API
	// server, kwok and the controller are so busy that a test's timing is the machine's (pods
	// Ready past Kueue's waitForPodsReady timeout, kwok's status of a new node after the
	// test's own).
	fakeNodes = newShare("the fake nodes", 2)
	// realNode: one real run at a time, which takes it all: a run's processes (Python,
	// torch, mpirun) use the machine's two cores, and with two at once MPIJobs' runs hung
	// (docs/testing.md). A test whose pods only run a shell, sleep or a probe (the kubelet's
	// API, its probes, limits and kills) takes one of its two places: two such tests run
	// side by side, never one beside a real run.
	realNode = newShare("the real node", 2)
	// multiKueue: one test at a time on MultiKueue's worker clusters: a test stops a worker's
	// API server, and the workers' quotas are small.
	multiKueue = newShare("MultiKueue's workers", 1)
)

// use is a weight of a share a test takes.
type use struct {
	share  *share
	weight int64
}

// all is the whole share.
func (s *share) all() use { return use{s, s.size} }

// one is one place of a share.
func (s *share) one() use { return use{s, 1} }

// parallel lets the test run beside the others once it holds what it uses, all taken at
// once; a test that names none takes a place on the fake nodes.
func parallel(t *testing.T, uses ...use) {
	t.Helper()
	t.Parallel()
	if len(uses) == 0 {
		uses = []use{fakeNodes.one()}
	}
	start := time.Now()
	take(uses)
	t.Cleanup(func() { give(uses) })
	// hack/testsummary reads this line: the slowest tests are timed less their waits.
	if waited := time.Since(start); waited > 100*time.Millisecond {
		names := make([]string, len(uses))
		for i, u := range uses {
			names[i] = u.share.name
		}
		t.Logf("waited %.1fs for a place on %s", waited.Seconds(), strings.Join(names, " and "))
	}
}

// take waits until every share has room for its use, and takes them all.
func take(uses []use) {
	shares.mu.Lock()
	defer shares.mu.Unlock()
	for !fits(uses) {
		shares.cond.Wait()
	}
	for _, u := range uses {
		u.share.used += u.weight
	}
}

func fits(uses []use) bool {
	for _, u := range uses {
		if u.share.used+u.weight > u.share.size {
			return false
		}
	}
	return true
}

// give hands the uses back and wakes the tests that wait.
func give(uses []use) {
	shares.mu.Lock()
	defer shares.mu.Unlock()
	for _, u := range uses {
		u.share.used -= u.weight
	}
	shares.cond.Broadcast()
}
