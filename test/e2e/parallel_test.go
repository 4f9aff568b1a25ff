package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"
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
	sem  *semaphore.Weighted
	size int64
}

func newShare(name string, size int64) *share {
	return &share{name: name, sem: semaphore.NewWeighted(size), size: size}
}

// The shares, in the order a test takes them (so that no two tests wait on each other).
var (
	// fakeNodes: tests on the fake nodes, two at a time: beyond that, on two cores, the API
	// server, kwok and the controller are so busy that a test's timing is the machine's (pods
	// Ready past Kueue's waitForPodsReady timeout, kwok's status of a new node after the
	// test's own).
	fakeNodes = newShare("the fake nodes", 2)
	// multiKueue: one test at a time on MultiKueue's worker clusters: a test stops a worker's
	// API server, and the workers' quotas are small.
	multiKueue = newShare("MultiKueue's workers", 1)
	// realNode: one real run at a time: a run's processes (Python, torch, mpirun) use the
	// machine's two cores, and with two at once MPIJobs' runs hung (docs/testing.md). Last:
	// its tests, one after another, are what the suite waits for at its end, so a test that
	// uses another share too takes the real node only once it holds the other (holding the
	// real node while waiting for MultiKueue's workers left it idle for two minutes).
	realNode = newShare("the real node", 1)
)

// shareOrder is the order above, in which parallel takes a test's shares.
var shareOrder = []*share{fakeNodes, multiKueue, realNode}

// use is a weight of a share a test takes.
type use struct {
	share  *share
	weight int64
}

// all is the whole share.
func (s *share) all() use { return use{s, s.size} }

// one is one place of a share.
func (s *share) one() use { return use{s, 1} }

// parallel lets the test run beside the others once it holds what it uses, taken in the
// order of the shares above whatever the order named (so that no two tests wait on each
// other); a test that names none takes a place on the fake nodes.
func parallel(t *testing.T, uses ...use) {
	t.Helper()
	t.Parallel()
	if len(uses) == 0 {
		uses = []use{fakeNodes.one()}
	}
	uses = slices.Clone(uses)
	slices.SortFunc(uses, func(a, b use) int {
		return slices.Index(shareOrder, a.share) - slices.Index(shareOrder, b.share)
	})
	for _, u := range uses {
		start := time.Now()
		if err := u.share.sem.Acquire(context.Background(), u.weight); err != nil {
			t.Fatalf("waiting for %s: %v", u.share.name, err)
		}
		t.Cleanup(func() { u.share.sem.Release(u.weight) })
		// hack/testsummary reads this line: the slowest tests are timed less their waits.
		if waited := time.Since(start); waited > 100*time.Millisecond {
			t.Logf("waited %.1fs for a place on %s", waited.Seconds(), u.share.name)
		}
	}
}
