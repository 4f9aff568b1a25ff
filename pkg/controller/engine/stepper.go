package engine

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Stepper drives a controller by hand, for the tests of what lies outside the engine (an
// admitter's protocol): no informer runs, the test's clock is the controller's, a sync runs
// when the test says, and the children's caches hold what the test shows them.
type Stepper struct{ c *Controller }

// NewStepper takes over c, which must not run.
func NewStepper(c *Controller, clk clock.WithTicker) *Stepper {
	c.now = clk.Now
	c.expect.SetClock(clk.Now)
	c.queue.ShutDown()
	c.queue = newQueue("", clk, c.lanes)
	return &Stepper{c: c}
}

// Sync syncs a job once, and returns how soon it asks to be synced again.
func (s *Stepper) Sync(ctx context.Context, key string) (time.Duration, error) {
	return s.c.sync(ctx, key)
}

// Held reports whether the job's decided status waits for the batch to close (holdStartingStatus).
func (s *Stepper) Held(key string) bool {
	_, held := s.c.held.Load(key)
	return held
}

// Show replaces what the cache of a kind of child holds with objs.
func (s *Stepper) Show(kind ObjectKind, objs []metav1.Object) error {
	for _, cc := range s.c.caches {
		if cc.kind.Kind != kind {
			continue
		}
		for _, o := range cc.indexer.List() {
			if err := cc.indexer.Delete(o); err != nil {
				return err
			}
		}
		for _, o := range objs {
			if err := cc.indexer.Add(o); err != nil {
				return err
			}
		}
	}
	return nil
}

// Settle forgets what the controller waits for its caches to show of the job: its expected
// writes, and its last status write. The test shows the caches what the API holds instead.
func (s *Stepper) Settle(key string) {
	for _, cc := range s.c.caches {
		s.c.expect.Forget(expectKey(key, cc.kind))
	}
	s.c.written.Delete(key)
}

// Watches reports whether the controller watches a kind of child.
func (s *Stepper) Watches(kind ObjectKind) bool {
	for _, cc := range s.c.caches {
		if cc.kind.Kind == kind {
			return true
		}
	}
	return false
}

// Queue is the controller's workqueue.
func (s *Stepper) Queue() workqueue.TypedRateLimitingInterface[string] { return s.c.queue }

// Deleted hands the controller the deletion of a job, as its informer's delete event would.
func (s *Stepper) Deleted(job Job) { s.c.deleteJob(job) }
