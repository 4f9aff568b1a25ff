package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/watchlist"
)

// server stands for the API server's watches: each open gets the next fake watch, and
// records the resource version it was asked to start from.
type server struct {
	mu      sync.Mutex
	from    []string
	watches chan *watch.FakeWatcher
	fail    error // returned by opens after the first, if set
}

func newServer() *server { return &server{watches: make(chan *watch.FakeWatcher, 8)} }

func (s *server) open(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.from = append(s.from, opts.ResourceVersion)
	if s.fail != nil && len(s.from) > 1 {
		return nil, s.fail
	}
	w := watch.NewFakeWithChanSize(8, false)
	s.watches <- w
	return w, nil
}

func (s *server) opened() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.from...)
}

func pod(name, resourceVersion string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: resourceVersion}}
}

// next is the next event of w, or fails after a while.
func next(t *testing.T, w watch.Interface) (watch.Event, bool) {
	t.Helper()
	select {
	case e, ok := <-w.ResultChan():
		return e, ok
	case <-time.After(10 * time.Second):
		t.Fatal("no event in 10s")
		return watch.Event{}, false
	}
}

// A watch the server closes goes on: the next is opened from the last event's resource
// version, and its events come on the same channel, which the reflector never sees close.
func TestPodWatchResumesAfterTheServerClosesIt(t *testing.T) {
	s := newServer()
	w, err := resumeWatch(context.Background(), metav1.ListOptions{ResourceVersion: "10", LabelSelector: "a=b"}, s.open)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	first := <-s.watches
	first.Add(pod("p-0", "11"))
	first.Modify(pod("p-0", "12"))
	if e, _ := next(t, w); e.Type != watch.Added || e.Object.(*corev1.Pod).ResourceVersion != "11" {
		t.Fatalf("first event %v", e)
	}
	next(t, w)
	first.Stop() // the server ends the watch

	second := <-s.watches
	second.Modify(pod("p-1", "15"))
	e, ok := next(t, w)
	if !ok || e.Object.(*corev1.Pod).Name != "p-1" {
		t.Fatalf("after the server's close: %v (open %v), want p-1's event on the same watch", e, ok)
	}
	if got := s.opened(); len(got) != 2 || got[0] != "10" || got[1] != "12" {
		t.Errorf("watches opened from %v, want 10 then 12 (the last event passed on)", got)
	}

	// A bookmark moves the resource version too.
	second.Action(watch.Bookmark, pod("", "20"))
	next(t, w)
	second.Stop()
	third := <-s.watches
	if got := s.opened(); got[2] != "20" {
		t.Errorf("the third watch opened from %s, want the bookmark's 20", got[2])
	}

	w.Stop()
	if _, ok := <-w.ResultChan(); ok {
		t.Error("an event after Stop")
	}
	if !third.IsStopped() {
		t.Error("Stop left the server's watch open")
	}
}

// What ends the watch it stands for ends the resuming watch too: an error event (a
// resource version too old: the reflector lists again), and a failure to open the next.
func TestPodWatchEndsAsTheServerSays(t *testing.T) {
	t.Run("error event", func(t *testing.T) {
		s := newServer()
		w, _ := resumeWatch(context.Background(), metav1.ListOptions{ResourceVersion: "10"}, s.open)
		defer w.Stop()
		gone := apierrors.NewResourceExpired("too old resource version: 10 (40)")
		(<-s.watches).Error(&gone.ErrStatus)
		if e, _ := next(t, w); e.Type != watch.Error {
			t.Fatalf("got %v, want the error event passed on", e)
		}
		if _, ok := next(t, w); ok {
			t.Error("the watch goes on after an error event")
		}
		if n := len(s.opened()); n != 1 {
			t.Errorf("%d watches opened, want 1", n)
		}
	})
	t.Run("next open fails", func(t *testing.T) {
		s := newServer()
		s.fail = apierrors.NewServiceUnavailable("shutting down")
		w, _ := resumeWatch(context.Background(), metav1.ListOptions{ResourceVersion: "10"}, s.open)
		defer w.Stop()
		(<-s.watches).Stop()
		if _, ok := next(t, w); ok {
			t.Error("the watch goes on though the next could not be opened")
		}
	})
}

// A watch that starts with the current objects (no resource version, or a watch list's
// initial events) is the server's own, not resumed; a failure to open the first is
// returned.
func TestPodWatchWithoutAStartIsNotResumed(t *testing.T) {
	for _, opts := range []metav1.ListOptions{{ResourceVersion: ""}, {ResourceVersion: "0"}, {ResourceVersion: "10", SendInitialEvents: new(bool)}} {
		s := newServer()
		w, err := resumeWatch(context.Background(), opts, s.open)
		if err != nil {
			t.Fatal(err)
		}
		if _, own := w.(*watch.FakeWatcher); !own {
			t.Errorf("%+v: a %T, want the server's watch as it is", opts, w)
		}
		w.Stop()
	}
	refused := func(context.Context, metav1.ListOptions) (watch.Interface, error) { return nil, errors.New("refused") }
	if _, err := resumeWatch(context.Background(), metav1.ListOptions{ResourceVersion: "10"}, refused); err == nil {
		t.Error("a failed first open was not returned")
	}
}

// A server that closes every watch at once, before any event, is asked again at a pace
// that doubles, not in a hot loop.
func TestPodWatchClosedAtOnceIsAskedAgainAtAPace(t *testing.T) {
	s := newServer()
	w, _ := resumeWatch(context.Background(), metav1.ListOptions{ResourceVersion: "10"}, s.open)
	defer w.Stop()
	start := time.Now()
	for range 4 {
		(<-s.watches).Stop()
	}
	<-s.watches
	// Waits of 100, 200, 400 and 800 ms before the fifth open: 1.5 s at least.
	if took := time.Since(start); took < 1500*time.Millisecond {
		t.Errorf("five opens in %s, want waits of 100, 200, 400 and 800 ms between them", took)
	}
}

// The informers' clientset resumes pod watches, and only those.
func TestInformersResumePodWatchesOnly(t *testing.T) {
	kube := fake.NewClientset()
	kube.PrependWatchReactor("*", func(k8stesting.Action) (bool, watch.Interface, error) {
		return true, watch.NewFake(), nil
	})
	client := resumingPods{kube}
	opts := metav1.ListOptions{ResourceVersion: "10"}
	pods, err := client.CoreV1().Pods("ns").Watch(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer pods.Stop()
	if _, ok := pods.(*resumingWatch); !ok {
		t.Errorf("the pods' watch is a %T, want one that resumes", pods)
	}
	services, _ := client.CoreV1().Services("ns").Watch(context.Background(), opts)
	if _, ok := services.(*resumingWatch); ok {
		t.Error("the Services' watch resumes too")
	}
	// A fake clientset serves no streaming list; wrapped, it says so still, or the
	// informers would wait for the stream's end for good.
	if !watchlist.DoesClientNotSupportWatchListSemantics(client) {
		t.Error("the wrapped fake clientset claims to serve streaming lists")
	}
}
