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
// Going first is not enough when every worker is inside a sync: a creating sync holds its
// worker for as long as its writes wait for the client's rate limit (a third of a second and
// more in a burst at the default QPS), and an urgent sync for as long as its status write
// takes, so an urgent key would wait for one of them to end. So a key of the other lane is
// taken only while a quarter of the workers (at least one) stay free for urgent keys; the
// creating syncs of the others still fill the client's rate limit.
//
// A worker that waits while the slow lane is closed is woken by the workqueue when a key is
// pushed, not when a queued key is moved to the fast lane (Touch): for that, laneQueue.Add
// queues wakeKey, which the worker it wakes drops once it has taken the moved key.
//
// It is the queue's workqueue.Queue: Push, Touch, Len and Pop are called under the
// workqueue's lock, which never holds the same key twice; mark, stillUrgent and the count of
// the workers (enter, left, done: laneQueue) are called outside it.
type lanes struct {
	mu     sync.Mutex
	urgent map[string]bool     // marked and not yet taken
	queued map[string]laneSpot // each queued key's live entry
	gen    int
	fast   []laneEntry
	slow   []laneEntry
	nfast  int // queued keys whose live entry is in the fast lane

	// The workers: waiting in Get, or syncing a key taken (busy); workers is the most seen
	// at once, the number the controller runs once they have all asked for a key.
	waiting, busy, workers int
	// takenUrgent holds the keys taken from the fast lane until their sync is done: a sync
	// that has to wait for the cache to show the controller's own writes stays urgent
	// (stillUrgent).
	takenUrgent map[string]bool
	// stranded: Touch moved a key to the fast lane while a worker waits for one. The
	// workqueue wakes a waiting worker when a key is pushed, not when one is touched, so the
	// key would wait for a busy worker to finish; laneQueue.Add wakes one (wakeKey).
	stranded bool
}

// wakeKey is no job's key (a job's is namespace/name): it is queued urgent to wake a worker
// that waits while the slow lane is closed, and the worker that takes it drops it.
const wakeKey = "/wake"

type laneEntry struct {
	key string
	gen int
}

type laneSpot struct {
	gen  int
	fast bool
}

func newLanes() *lanes {
	return &lanes{urgent: map[string]bool{}, queued: map[string]laneSpot{}, takenUrgent: map[string]bool{}}
}

// mark makes key urgent: it goes into the fast lane when next added, or moves there if it is
// queued already (the workqueue then calls Touch).
func (l *lanes) mark(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.urgent[key] = true
}

// stillUrgent marks key urgent again if it is being synced after being taken from the fast
// lane: its sync found the cache behind the controller's own writes and returns early, and
// the event that shows them should bring it back as urgent as it was, not behind every key
// queued meanwhile.
func (l *lanes) stillUrgent(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.takenUrgent[key] {
		l.urgent[key] = true
	}
}

// forget drops the mark of a job that is gone; were its key queued, it stays where it is.
func (l *lanes) forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.urgent, key)
}

func (l *lanes) Push(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.push(key)
}

func (l *lanes) push(key string) {
	l.gen++
	if l.urgent[key] {
		if spot, ok := l.queued[key]; !ok || !spot.fast {
			l.nfast++
		}
		l.queued[key] = laneSpot{gen: l.gen, fast: true}
		l.fast = append(l.fast, laneEntry{key, l.gen})
	} else {
		l.queued[key] = laneSpot{gen: l.gen}
		l.slow = append(l.slow, laneEntry{key, l.gen})
	}
}

// Touch moves a queued key that became urgent to the fast lane; its entry in the slow lane
// is skipped when reached.
func (l *lanes) Touch(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.urgent[key] && !l.queued[key].fast {
		l.push(key)
		l.stranded = l.stranded || l.waiting > 0
	}
}

// takeStranded reports whether a touched key waits for a worker that is not woken, once.
func (l *lanes) takeStranded() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stranded
	l.stranded = false
	return s
}

// Len is the number of keys a worker may take now: the urgent ones, and the others unless
// they would take the last free worker (slowOpen). A key left out is taken by the next worker
// that finishes a sync of the slow lane, as that worker asks for its next key.
func (l *lanes) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.slowOpen() {
		return len(l.queued)
	}
	return l.nfast
}

// slowOpen reports whether a key of the slow lane may be taken: only while a quarter of the
// workers (at least one) would stay free for urgent keys. A single worker takes every key.
func (l *lanes) slowOpen() bool {
	return l.workers <= 1 || l.busy+max(1, l.workers/4) < l.workers
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
			spot, ok := l.queued[e.key]
			if !ok || spot.gen != e.gen {
				continue // moved to the fast lane
			}
			delete(l.queued, e.key)
			delete(l.urgent, e.key)
			l.waiting-- // the worker asking is now busy
			l.busy++
			if spot.fast {
				l.nfast--
				l.takenUrgent[e.key] = true
			}
			return e.key
		}
	}
	return ""
}

// enter counts a worker that asks for a key.
func (l *lanes) enter() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waiting++
	l.workers = max(l.workers, l.waiting+l.busy)
}

// left counts a worker that got no key: the queue shuts down. (One that got a key was
// counted busy by Pop.)
func (l *lanes) left() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waiting--
}

// done counts a worker that finished the sync of key.
func (l *lanes) done(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.busy--
	delete(l.takenUrgent, key)
}

// laneQueue is the controller's queue: the workqueue over lanes, which it tells when a
// worker asks for a key, gets one and is done with it.
type laneQueue struct {
	workqueue.TypedRateLimitingInterface[string]
	lanes *lanes
}

func (q laneQueue) Get() (string, bool) {
	for {
		q.lanes.enter()
		key, shutdown := q.TypedRateLimitingInterface.Get()
		if shutdown {
			q.lanes.left()
			return key, shutdown
		}
		if key != wakeKey {
			return key, false
		}
		q.Done(key) // woken: the key it was woken for is taken, or next
	}
}

// Add queues key, and wakes a waiting worker if the key was queued already and moved to the
// fast lane (lanes.stranded).
func (q laneQueue) Add(key string) {
	q.TypedRateLimitingInterface.Add(key)
	if q.lanes.takeStranded() {
		q.lanes.mark(wakeKey)
		q.TypedRateLimitingInterface.Add(wakeKey)
	}
}

func (q laneQueue) Done(key string) {
	q.lanes.done(key)
	q.TypedRateLimitingInterface.Done(key)
}

// newQueue is the controller's rate-limited, delaying workqueue over lanes, named for its
// metrics (unnamed: none).
func newQueue(name string, clk clock.WithTicker, l *lanes) workqueue.TypedRateLimitingInterface[string] {
	return laneQueue{lanes: l, TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Clock: clk,
			DelayingQueue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{Name: name, Clock: clk,
				Queue: workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: name, Clock: clk, Queue: l})})})}
}
