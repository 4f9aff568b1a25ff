package engine

import (
	"slices"
	"testing"
	"time"

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

// A key of the slow lane is never given to the last free worker: with four workers, three
// sync slow keys and the fourth waits, and takes an urgent key at once. A worker that
// finishes takes the next slow key itself, once a worker is free again.
func TestAWorkerStaysFreeForUrgentKeys(t *testing.T) {
	l := newLanes()
	q := newQueue("", clock.RealClock{}, l)
	defer q.ShutDown()
	for _, k := range []string{"new-1", "new-2", "new-3", "new-4", "new-5"} {
		q.Add(k)
	}
	taken := make(chan string)
	release := map[string]chan struct{}{}
	for _, k := range []string{"new-1", "new-2", "new-3", "new-4", "new-5", "started"} {
		release[k] = make(chan struct{})
	}
	for range 4 {
		go func() {
			for {
				k, quit := q.Get()
				if quit {
					return
				}
				taken <- k
				<-release[k]
				q.Done(k)
			}
		}()
	}
	next := func() string {
		t.Helper()
		select {
		case k := <-taken:
			return k
		case <-time.After(5 * time.Second):
			t.Fatal("no worker took a key")
			return ""
		}
	}
	none := func(why string) {
		t.Helper()
		select {
		case k := <-taken:
			t.Fatalf("a worker took %s: %s", k, why)
		case <-time.After(100 * time.Millisecond):
		}
	}

	// Three workers take the first three keys; which worker reports first is the
	// scheduler's choice, so the keys are compared as a set (the order the queue hands them
	// out in is TestUrgentKeysGoFirst's).
	var got []string
	for range 3 {
		got = append(got, next())
	}
	slices.Sort(got)
	if want := []string{"new-1", "new-2", "new-3"}; !slices.Equal(got, want) {
		t.Fatalf("took %v, want %v", got, want)
	}
	none("the last free worker is kept for urgent keys")

	// A queued key made urgent moves to the fast lane, and the free worker, asleep while
	// only slow keys were queued, wakes for it.
	l.mark("new-5")
	q.Add("new-5")
	if k := next(); k != "new-5" {
		t.Fatalf("took %s, want new-5, queued and made urgent", k)
	}
	close(release["new-5"])

	l.mark("started")
	q.Add("started")
	if k := next(); k != "started" {
		t.Fatalf("took %s, want the urgent key", k)
	}
	// Four busy: a worker that finishes a slow key becomes the free one.
	close(release["new-1"])
	none("the worker that finished is the only free one")
	// Its urgent sync done, a worker is free beside it: the next slow key goes.
	close(release["started"])
	if k := next(); k != "new-4" {
		t.Fatalf("took %s, want new-4", k)
	}
	none("three slow keys are syncing")
	close(release["new-2"])
	none("no key is queued")
	for _, k := range []string{"new-3", "new-4"} {
		close(release[k])
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		l.mu.Lock()
		busy, queued := l.busy, len(l.queued)
		l.mu.Unlock()
		if busy == 0 && queued == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("left behind: %d busy, %d queued", busy, queued)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// One worker takes every key, the slow ones too: there is no other to keep free.
func TestASingleWorkerTakesEveryKey(t *testing.T) {
	l := newLanes()
	q := newQueue("", clock.RealClock{}, l)
	defer q.ShutDown()
	q.Add("new-1")
	q.Add("new-2")
	for _, want := range []string{"new-1", "new-2"} {
		k, _ := q.Get()
		if k != want {
			t.Fatalf("took %s, want %s", k, want)
		}
		q.Done(k)
	}
}

// A key taken as urgent whose sync has to wait for the cache stays urgent: added again, it
// goes before the keys queued meanwhile. A key taken from the slow lane does not become
// urgent by waiting.
func TestAnUrgentKeyThatWaitsForTheCacheStaysUrgent(t *testing.T) {
	l := newLanes()
	q := newQueue("", clock.RealClock{}, l)
	defer q.ShutDown()
	q.Add("new-1")
	l.mark("started")
	q.Add("started")
	k, _ := q.Get()
	if k != "started" {
		t.Fatalf("took %s, want started", k)
	}
	l.stillUrgent(k) // its sync found the cache behind
	q.Add("new-2")
	q.Done(k)
	q.Add("started") // the event that shows the controller's write

	k, _ = q.Get()
	if k != "started" {
		t.Fatalf("took %s, want started again, before the others", k)
	}
	q.Done(k)
	k, _ = q.Get()
	if k != "new-1" {
		t.Fatalf("took %s, want new-1", k)
	}
	l.stillUrgent(k)
	q.Done(k)
	q.Add("new-1")
	if k, _ = q.Get(); k != "new-2" {
		t.Fatalf("took %s, want new-2: new-1 was never urgent", k)
	}
	q.Done(k)
	l.forget("gone")
	if len(l.urgent) != 0 || len(l.takenUrgent) != 0 {
		t.Errorf("left behind: urgent %v, taken urgent %v", l.urgent, l.takenUrgent)
	}
}
