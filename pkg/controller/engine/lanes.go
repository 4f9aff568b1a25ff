package engine

import (
	"sync"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// lanes orders the controller's workqueue: a key marked urgent (a pod of its job began to
// run, or changed readiness) goes before the others, first in first out within each lane.
// In a burst of new jobs the syncs that create children wait for the API's rate limits, and
// the queue grows long behind them; a job whose last pod runs should not wait for all of them
// to say Running.
//
// It is the queue's workqueue.Queue: Push, Touch and Pop are called under the workqueue's
// lock, which never holds the same key twice; mark is called by event handlers, outside it.
type lanes struct {
	mu     sync.Mutex
	urgent map[string]bool // marked and not yet taken
	queued map[string]int  // each queued key's entry: its lane's generation of it
	gen    int
	fast   []laneEntry
	slow   []laneEntry
}

type laneEntry struct {
	key string
	gen int
}

func newLanes() *lanes {
	return &lanes{urgent: map[string]bool{}, queued: map[string]int{}}
}

// mark makes key urgent: it goes into the fast lane when next added, or moves there if it is
// queued already (the workqueue then calls Touch).
func (l *lanes) mark(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.urgent[key] = true
}

func (l *lanes) Push(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.push(key)
}

func (l *lanes) push(key string) {
	l.gen++
	l.queued[key] = l.gen
	if l.urgent[key] {
		l.fast = append(l.fast, laneEntry{key, l.gen})
	} else {
		l.slow = append(l.slow, laneEntry{key, l.gen})
	}
}

// Touch moves a queued key that became urgent to the fast lane; its entry in the slow lane
// is skipped when reached.
func (l *lanes) Touch(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.urgent[key] && !l.inFast(key) {
		l.push(key)
	}
}

func (l *lanes) inFast(key string) bool {
	for _, e := range l.fast {
		if e.key == key && e.gen == l.queued[key] {
			return true
		}
	}
	return false
}

func (l *lanes) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queued)
}

// Pop takes the oldest urgent key, else the oldest other one. The workqueue calls it only
// when Len is above 0.
func (l *lanes) Pop() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, lane := range []*[]laneEntry{&l.fast, &l.slow} {
		for len(*lane) > 0 {
			e := (*lane)[0]
			(*lane)[0] = laneEntry{}
			*lane = (*lane)[1:]
			if l.queued[e.key] != e.gen {
				continue // moved to the fast lane
			}
			delete(l.queued, e.key)
			delete(l.urgent, e.key)
			return e.key
		}
	}
	return ""
}

// newQueue is the controller's rate-limited, delaying workqueue over lanes, named for its
// metrics (unnamed: none).
func newQueue(name string, clk clock.WithTicker, l *lanes) workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Clock: clk,
			DelayingQueue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{Name: name, Clock: clk,
				Queue: workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: name, Clock: clk, Queue: l})})})
}
