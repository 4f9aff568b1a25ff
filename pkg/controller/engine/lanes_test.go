package engine

import (
	"slices"
	"testing"

	"k8s.io/utils/clock"
)

// An urgent key is taken before the keys queued ahead of it, whether it was queued already
// or is added after being marked; otherwise the queue is first in, first out, and no key is
// ever taken twice for one add.
func TestUrgentKeysGoFirst(t *testing.T) {
	l := newLanes()
	q := newQueue("", clock.RealClock{}, l)
	defer q.ShutDown()
	for _, k := range []string{"new-1", "new-2", "started", "new-3"} {
		q.Add(k)
	}
	l.mark("started")
	q.Add("started") // queued already: moves ahead
	l.mark("ran")
	q.Add("ran") // not queued: goes ahead of the rest, after the earlier urgent key
	q.Add("new-4")

	var got []string
	for q.Len() > 0 {
		k, _ := q.Get()
		got = append(got, k)
		q.Done(k)
	}
	want := []string{"started", "ran", "new-1", "new-2", "new-3", "new-4"}
	if !slices.Equal(got, want) {
		t.Fatalf("taken in order %v, want %v", got, want)
	}
	if l.Len() != 0 || len(l.urgent) != 0 {
		t.Errorf("left behind: %d queued, urgent %v", l.Len(), l.urgent)
	}

	// Once taken, a key is no longer urgent: added again, it queues behind the others.
	q.Add("a")
	q.Add("started")
	if k, _ := q.Get(); k != "a" {
		t.Errorf("took %s first, want a: the mark was not cleared when the key was taken", k)
	}
}
