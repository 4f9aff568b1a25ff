package engine

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned/fake"
	jobinformers "github.com/t9k-jobs/t9k-jobs/pkg/client/informers/externalversions"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision/decisiontest"
)

// stallTest is a controller whose job cache holds job as given, on a fake clock, with no
// informer running: no event will ever bring the job back.
type stallTest struct {
	c     *Controller
	clock *clocktesting.FakeClock
	jobs  *fake.Clientset
}

func newStallTest(t *testing.T, job *batch.GenericJob) *stallTest {
	t.Helper()
	jobs := fake.NewClientset(job)
	jobFactory := jobinformers.NewSharedInformerFactory(jobs, 0)
	informer := jobFactory.Batch().V1beta1().GenericJobs()
	if err := informer.Informer().GetIndexer().Add(job); err != nil {
		t.Fatal(err)
	}
	adapter := NewAdapter[*batch.GenericJob]("GenericJob", informer.Informer(), informer.Lister().GenericJobs, jobs.BatchV1beta1().GenericJobs,
		func(*batch.GenericJob) (*Plan, error) {
			return &Plan{Groups: []Group{workers(1, batch.RestartNever, nil)}, Judge: whenAllSucceed}, nil
		})
	kube := kubefake.NewClientset()
	c := New(adapter, Clients{Kube: kube}, NewInformers(kube), record.NewFakeRecorder(100), Options{})
	clock := clocktesting.NewFakeClock(now)
	c.now = clock.Now
	c.expect.SetClock(clock.Now)
	c.queue = newQueue("", clock, c.lanes)
	t.Cleanup(c.queue.ShutDown)
	return &stallTest{c: c, clock: clock, jobs: jobs}
}

// processOnce takes the job's key from the queue and syncs it.
func (s *stallTest) processOnce(t *testing.T) {
	t.Helper()
	s.c.queue.Add("ns/job")
	if !s.c.processNext(context.Background()) {
		t.Fatal("queue shut down")
	}
}

// comesBack reports whether the job's key is queued again once the clock has moved by d.
func (s *stallTest) comesBack(t *testing.T, d time.Duration) bool {
	t.Helper()
	// The delaying queue arms its timer for a key on its own goroutine, from the time it read
	// before: a step taken before the timer is armed moves the timer's target past the step,
	// and the key never comes back. Its heartbeat ticker is one waiter of the clock; the
	// timer of the earliest key, once armed, another.
	armed := time.Now().Add(5 * time.Second)
	for s.clock.Waiters() < 2 && time.Now().Before(armed) {
		time.Sleep(time.Millisecond)
	}
	s.clock.Step(d)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if s.c.queue.Len() > 0 {
			return true
		}
		time.Sleep(5 * time.Millisecond) // the delaying queue moves due keys on its own goroutine
	}
	return false
}

// created counts the pods the controller created.
func created(c *Controller) int {
	n := 0
	for _, a := range c.clients.Kube.(*kubefake.Clientset).Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "pods" {
			n++
		}
	}
	return n
}

// A sync that waits for the cache to show its own status write, and the event that would show
// it never comes (an edit landed between the write and its record), is synced again by
// itself once the wait runs out, and then decides.
func TestWaitForOwnStatusComesBack(t *testing.T) {
	job := decisiontest.Job(batch.JobStatus{})
	job.ResourceVersion = "7"
	s := newStallTest(t, job)
	s.c.written.Store("ns/job", writtenStatus{resourceVersion: "x9", at: now}) // never shown as such
	if wait, err := s.c.sync(context.Background(), "ns/job"); err != nil || wait != statusWaitTTL {
		t.Fatalf("sync waiting for its own write returned %s, %v: want to come back in %s", wait, err, statusWaitTTL)
	}
	s.processOnce(t)
	if n := created(s.c); n != 0 {
		t.Fatalf("decided on a cache without its own write: %d pods created", n)
	}
	if !s.comesBack(t, statusWaitTTL+time.Second) {
		t.Fatal("the job was not synced again when the wait ran out: it would stall until an unrelated event")
	}
	if !s.c.processNext(context.Background()) {
		t.Fatal("queue shut down")
	}
	if n := created(s.c); n != 1 {
		t.Errorf("the sync after the wait created %d pods, want 1", n)
	}
}

// A write of the job's status seen in the cache as an older resourceVersion is waited for;
// a newer one (a second writer changed the job since) counts as seen.
func TestStatusSeenOnceCacheIsNewer(t *testing.T) {
	for cached, want := range map[string]time.Duration{"9": 0, "12": 0, "8": statusWaitTTL} {
		job := decisiontest.Job(batch.JobStatus{})
		job.ResourceVersion = cached
		s := newStallTest(t, job)
		s.c.written.Store("ns/job", writtenStatus{resourceVersion: "9", at: now})
		if got := s.c.statusWait("ns/job", job); got != want {
			t.Errorf("cached resourceVersion %s after a write of 9: wait %s, want %s", cached, got, want)
		}
	}
}

// Expectations of creations whose events never come (lost from the watch) hold the job back
// only until they expire, and the job is synced again then.
func TestUnmetExpectationsComeBack(t *testing.T) {
	s := newStallTest(t, decisiontest.Job(batch.JobStatus{}))
	s.c.expect.ExpectCreations(expectKey("ns/job", podKind), 1)
	if wait, err := s.c.sync(context.Background(), "ns/job"); err != nil || wait != 5*time.Minute {
		t.Fatalf("sync with unmet expectations returned %s, %v: want to come back when they expire", wait, err)
	}
	s.processOnce(t)
	if n := created(s.c); n != 0 {
		t.Fatalf("decided with unmet expectations: %d pods created", n)
	}
	if !s.comesBack(t, 5*time.Minute+time.Second) {
		t.Fatal("the job was not synced again when its expectations expired")
	}
	if !s.c.processNext(context.Background()) {
		t.Fatal("queue shut down")
	}
	if n := created(s.c); n != 1 {
		t.Errorf("created %d pods after the expectations expired, want 1", n)
	}
}

// A sync that leaves a restart waiting for its backoff asks to come back when it is due:
// nothing else would bring the job back.
func TestSyncComesBackForARestartBackoff(t *testing.T) {
	running := decisiontest.ReplicaStatus("job-worker-0", "pod-uid", batch.ReplicaRunning, 1)
	s := newStallTest(t, decisiontest.Job(decisiontest.StatusWith(batch.JobRunning, running)))
	s.c.adapter = &planOverride{Adapter: s.c.adapter, plan: func() *Plan {
		return &Plan{Groups: []Group{workers(1, batch.RestartOnFailure, nil)}, Judge: whenAllSucceed}
	}}
	failed := s.ownedPod(t, corev1.PodFailed)
	failed.Status.ContainerStatuses[0].State.Terminated.FinishedAt = metav1.NewTime(now) // the second restart waits 1s from here
	if err := s.c.caches[kindIndex(PodKind)].indexer.Update(failed); err != nil {
		t.Fatal(err)
	}
	s.c.noteEnd(failed)
	wait, err := s.c.sync(context.Background(), "ns/job")
	if backoff := time.Second; err != nil || wait <= 0 || wait > backoff {
		t.Fatalf("sync returned %s, %v: want to come back within the %s backoff", wait, err, backoff)
	}
}

// planOverride is an adapter whose plan is given.
type planOverride struct {
	Adapter
	plan func() *Plan
}

func (p *planOverride) Plan(Job) (*Plan, error) { return p.plan(), nil }
