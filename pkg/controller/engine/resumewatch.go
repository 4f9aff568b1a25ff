package engine

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/watchlist"
	"k8s.io/klog/v2"
)

// The pods' watch outlives the API server's closes (docs/testing.md, "The benchmark").
//
// An API server whose cores are busy closes watches (most likely its cacher's "watcher close
// due to unresponsiveness", for a watcher it cannot hand the events over to fast enough): in
// a burst of new jobs, the controller's pod watch, the busiest it has, up to 11 times in
// the benchmark's eight seconds. client-go's reflector opens a new watch at
// once after a close, unless the close came within a second and before any event: that it
// takes for an error, waits its backoff (0.8 to 1.6 s, doubling each time) and lists every
// pod again, and until then the controller sees no pod change, so no job turns Running (a
// p99 of 2-6 s in one round of the benchmark in five or so, where the others stay below
// 500 ms). resumingPods opens the next watch itself, from the resource version of the last
// event it passed on, so the reflector sees one watch that goes on: the events are those
// its own next watch would have brought, without the wait and the list.

// Resumption's pace after a watch that closed within a second and before any event: the
// first wait, doubled each time up to the last (one that brought an event, or lasted a
// second, resets it), so that a server that closes every watch at once is not asked in a
// hot loop.
const (
	resumeFirstWait = 100 * time.Millisecond
	resumeLastWait  = 1600 * time.Millisecond
	resumeShortLife = time.Second
)

// resumingPods is a clientset whose pod watches resume (resumeWatch); the informers watch
// with it.
type resumingPods struct{ kubernetes.Interface }

func (c resumingPods) CoreV1() corev1client.CoreV1Interface {
	return resumingCoreV1{c.Interface.CoreV1()}
}

// IsWatchListSemanticsUnSupported says what the clientset it wraps says: a fake clientset
// serves no streaming list, and the informers then list first (client-go's watchlist).
func (c resumingPods) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(c.Interface)
}

type resumingCoreV1 struct{ corev1client.CoreV1Interface }

func (c resumingCoreV1) Pods(namespace string) corev1client.PodInterface {
	return resumingPodClient{c.CoreV1Interface.Pods(namespace)}
}

type resumingPodClient struct{ corev1client.PodInterface }

func (c resumingPodClient) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return resumeWatch(ctx, opts, c.PodInterface.Watch)
}

// resumeWatch opens a watch with open, and, each time the server ends it, opens the next
// from the resource version of the last event passed on. It ends, as the watch it stands
// for would, on an error event (passed on: a resource version too old makes the reflector
// list again), on an error opening the next watch, and on Stop. A watch without a resource
// version to start from (one that begins with the current objects) is not resumed.
func resumeWatch(ctx context.Context, opts metav1.ListOptions, open func(context.Context, metav1.ListOptions) (watch.Interface, error)) (watch.Interface, error) {
	if opts.ResourceVersion == "" || opts.ResourceVersion == "0" || opts.SendInitialEvents != nil {
		return open(ctx, opts)
	}
	w, err := open(ctx, opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &resumingWatch{out: make(chan watch.Event), stop: cancel}
	go r.run(ctx, w, opts, open)
	return r, nil
}

type resumingWatch struct {
	out  chan watch.Event
	stop context.CancelFunc
}

func (r *resumingWatch) Stop()                          { r.stop() }
func (r *resumingWatch) ResultChan() <-chan watch.Event { return r.out }

func (r *resumingWatch) run(ctx context.Context, w watch.Interface, opts metav1.ListOptions, open func(context.Context, metav1.ListOptions) (watch.Interface, error)) {
	defer close(r.out)
	defer r.stop()
	var wait time.Duration
	for {
		opened := time.Now()
		passed, closedByServer := r.forward(ctx, w, &opts.ResourceVersion)
		w.Stop()
		if !closedByServer {
			return
		}
		if passed > 0 || time.Since(opened) >= resumeShortLife {
			wait = 0
		} else {
			wait = min(max(2*wait, resumeFirstWait), resumeLastWait)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		var err error
		if w, err = open(ctx, opts); err != nil {
			return // the reflector sees its watch end, and opens the next itself
		}
		klog.FromContext(ctx).V(4).Info("Resumed the pods' watch the API server ended", "resourceVersion", opts.ResourceVersion, "after", wait)
	}
}

// forward passes the events of w on, keeping the resource version of the last, until w
// ends (closedByServer) or an error event or Stop ends the resuming watch. passed counts
// the events other than bookmarks.
func (r *resumingWatch) forward(ctx context.Context, w watch.Interface, resourceVersion *string) (passed int, closedByServer bool) {
	for {
		select {
		case <-ctx.Done():
			return passed, false
		case e, open := <-w.ResultChan():
			if !open {
				return passed, true
			}
			if e.Type != watch.Error {
				if m, err := meta.Accessor(e.Object); err == nil && m.GetResourceVersion() != "" {
					*resourceVersion = m.GetResourceVersion()
				}
			}
			select {
			case r.out <- e:
			case <-ctx.Done():
				return passed, false
			}
			if e.Type == watch.Error {
				return passed, false
			}
			if e.Type != watch.Bookmark {
				passed++
			}
		}
	}
}
