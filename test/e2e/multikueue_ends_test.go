package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	kueue "github.com/t9k-jobs/t9k-jobs/pkg/apis/kueue/v1beta2"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
	"github.com/t9k-jobs/t9k-jobs/test/cluster"
)

// How a job MultiKueue runs ends, and what the manager shows meanwhile (docs/queueing.md,
// "Across clusters with MultiKueue"): a short TTL, the manager's waitForPodsReady, a job in a
// MultiKueue queue that MultiKueue cannot run, and how soon the manager shows the worker's
// status.

// jobLog records, from a watch begun before the job exists, each status a cluster showed of a
// GenericJob and when the test saw it, until the job is deleted.
type jobLog struct {
	mu      sync.Mutex
	seen    []seenStatus
	deleted time.Time
}

type seenStatus struct {
	at     time.Time
	status batch.JobStatus
}

func watchJob(t *testing.T, client versioned.Interface, ns, name string) *jobLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := client.BatchV1beta1().GenericJobs(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	l := &jobLog{}
	go func() {
		defer w.Stop()
		for e := range w.ResultChan() {
			j, ok := e.Object.(*batch.GenericJob)
			if !ok {
				continue
			}
			l.mu.Lock()
			switch e.Type {
			case watch.Added, watch.Modified:
				l.seen = append(l.seen, seenStatus{time.Now(), *j.Status.DeepCopy()})
			case watch.Deleted:
				l.deleted = time.Now()
			}
			l.mu.Unlock()
		}
	}()
	return l
}

// first is when the job was first seen in a phase (zero: never).
func (l *jobLog) first(phase batch.JobPhase) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.seen {
		if s.status.Phase == phase {
			return s.at
		}
	}
	return time.Time{}
}

// last is the last status seen.
func (l *jobLog) last() batch.JobStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.seen) == 0 {
		return batch.JobStatus{}
	}
	return l.seen[len(l.seen)-1].status
}

// workloadLog records each status the manager showed of a Workload, from a watch begun before
// it exists.
type workloadLog struct {
	mu   sync.Mutex
	seen []seenWorkload
}

type seenWorkload struct {
	at     time.Time
	status kueue.WorkloadStatus
}

func watchWorkload(t *testing.T, ns, name string) *workloadLog {
	t.Helper()
	client := useKueue(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := client.KueueV1beta2().Workloads(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	l := &workloadLog{}
	go func() {
		defer w.Stop()
		for e := range w.ResultChan() {
			if wl, ok := e.Object.(*kueue.Workload); ok && e.Type != watch.Deleted {
				l.mu.Lock()
				l.seen = append(l.seen, seenWorkload{time.Now(), *wl.Status.DeepCopy()})
				l.mu.Unlock()
			}
		}
	}()
	return l
}

// ever reports whether the Workload ever had the condition True, the first such, and when
// the test saw it.
func (l *workloadLog) ever(conditionType string) (*metav1.Condition, time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.seen {
		if c := meta.FindStatusCondition(s.status.Conditions, conditionType); c != nil && c.Status == metav1.ConditionTrue {
			return c, s.at, true
		}
	}
	return nil, time.Time{}, false
}

// TestMultiKueueShortTTL: a job MultiKueue runs with ttlSecondsAfterFinished 0 or 2 ends on
// the manager with its copy's outcome, its Workload Finished, and only then is deleted by its
// TTL; the copy on the worker is not deleted by the TTL first (MultiKueue removes it once the
// manager's Workload is finished).
func TestMultiKueueShortTTL(t *testing.T) {
	workers := parallelMultiKueue(t, multiKueue.all())
	for _, ttl := range []int32{0, 2} {
		t.Run(fmt.Sprintf("ttl-%d", ttl), func(t *testing.T) {
			ns := mkNamespace(t, workers)
			job := multiKueueJob("mk-ttl", 2)
			exits(&job.Spec.ReplicaSpecs[0], 0, "2s")
			job.Spec.TTLSecondsAfterFinished = ptr.To(ttl)
			manager := watchJob(t, env.jobs, ns, job.Name)
			wl := watchWorkload(t, ns, "genericjob-"+job.Name)
			var copies []*jobLog
			for _, w := range workers {
				copies = append(copies, watchJob(t, w.jobs, ns, job.Name))
			}
			createJob(t, ns, job)
			gone := waitDeleted(t, ns, job.Name, 60*time.Second)
			end := manager.last()
			if end.Phase != batch.JobSucceeded || end.CompletionTime == nil {
				t.Fatalf("the manager's job was deleted in phase %q (completionTime %v): want Succeeded, as its copy", end.Phase, end.CompletionTime)
			}
			finished, finishedAt, ok := wl.ever(kueue.WorkloadFinished)
			if !ok {
				t.Errorf("the manager's Workload was never Finished before the job was deleted")
			} else if finished.Reason != "Succeeded" {
				t.Errorf("the manager's Workload finished %s (%s), want Succeeded", finished.Reason, finished.Message)
			}
			after := gone.Sub(end.CompletionTime.Time)
			var copyDone time.Time
			for _, c := range copies {
				if at := c.first(batch.JobSucceeded); !at.IsZero() {
					copyDone = at
				}
			}
			t.Logf("deleted %.1fs after its completionTime (ttlSecondsAfterFinished %d, completionTime in whole seconds); after the copy said Succeeded: the manager's job Succeeded %.2fs, its Workload Finished %.2fs, the job deleted %.2fs",
				after.Seconds(), ttl, manager.first(batch.JobSucceeded).Sub(copyDone).Seconds(), finishedAt.Sub(copyDone).Seconds(), gone.Sub(copyDone).Seconds())
			if after < time.Duration(ttl)*time.Second {
				t.Errorf("deleted %s after its completionTime, before its TTL of %ds", after.Round(100*time.Millisecond), ttl)
			}
			for i, c := range copies {
				if !c.first(batch.JobSucceeded).IsZero() {
					t.Logf("the copy ran on %s", workers[i].name)
				}
			}
			waitFor(t, "the copy gone from every worker", 60*time.Second, func(ctx context.Context) (bool, error) {
				return len(copiesOf(ctx, workers, ns, job.Name)) == 0, nil
			})
		})
	}
}

// copiesOf lists the workers that hold a GenericJob of the name, one being deleted included.
func copiesOf(ctx context.Context, workers []*mkWorker, ns, name string) []*mkWorker {
	var out []*mkWorker
	for _, w := range workers {
		if _, err := w.jobs.BatchV1beta1().GenericJobs(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			out = append(out, w)
		}
	}
	return out
}

// TestMultiKueueRunsPastPodsReadyTimeout: a job MultiKueue runs on a worker for longer than
// the manager's waitForPodsReady timeout is not evicted on the manager: the manager's Workload
// says PodsReady once the copied status shows every replica running.
func TestMultiKueueRunsPastPodsReadyTimeout(t *testing.T) {
	workers := parallelMultiKueue(t, multiKueue.all())
	client := useKueue(t)
	ns := mkNamespace(t, workers)
	job := multiKueueJob("mk-long", 2) // runs until deleted
	createJob(t, ns, job)
	worker := waitCopyRunning(t, workers, ns, job.Name, "a copy running on a worker")
	name := "genericjob-" + job.Name
	// The worker may run the copy before the manager marks its admission check ready, and
	// with it its Workload admitted.
	var admitted *metav1.Condition
	waitFor(t, "the manager's Workload admitted while its copy runs", jobTimeout, func(context.Context) (bool, error) {
		admitted = meta.FindStatusCondition(workloadOf(t, client, ns, name).Status.Conditions, kueue.WorkloadAdmitted)
		return admitted != nil && admitted.Status == metav1.ConditionTrue, nil
	})
	// What is checked is that nothing happens: watched until well past the timeout.
	until := admitted.LastTransitionTime.Add(podsReadyTimeout + 5*time.Second)
	t.Logf("admitted on the manager at %s; watched until %s", admitted.LastTransitionTime.Format(time.TimeOnly), until.Format(time.TimeOnly))
	for time.Now().Before(until) {
		wl := workloadOf(t, client, ns, name)
		if ev := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted); ev != nil && ev.Status == metav1.ConditionTrue {
			t.Fatalf("the manager evicted the job %.1fs after its admission: %s: %s", ev.LastTransitionTime.Sub(admitted.LastTransitionTime.Time).Seconds(), ev.Reason, ev.Message)
		}
		if found := copies(context.Background(), workers, ns, job.Name); len(found) != 1 || found[0] != worker {
			t.Fatalf("the copy left %s", worker.name)
		}
		time.Sleep(500 * time.Millisecond)
	}
	wl := workloadOf(t, client, ns, name)
	if ready := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPodsReady); ready == nil || ready.Status != metav1.ConditionTrue {
		t.Errorf("the manager's Workload of a running copy says PodsReady %+v, want True", ready)
	} else {
		t.Logf("PodsReady on the manager %.1fs after its admission", ready.LastTransitionTime.Sub(admitted.LastTransitionTime.Time).Seconds())
	}
	if j := getJob(t, ns, job.Name); j.Status.Phase != batch.JobRunning {
		t.Errorf("the manager's job is %s, want Running", j.Status.Phase)
	}
	if err := env.jobs.BatchV1beta1().GenericJobs(ns).Delete(context.Background(), job.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestMultiKueueWithoutManagedBy: a job in a MultiKueue queue without spec.managedBy, which
// MultiKueue does not run, fails saying so and what to do; it never runs anywhere, and nothing
// says it waits to be admitted again.
func TestMultiKueueWithoutManagedBy(t *testing.T) {
	workers := parallelMultiKueue(t, multiKueue.all())
	client := useKueue(t)
	ns := mkNamespace(t, workers)
	job := multiKueueJob("mk-unmanaged", 1)
	job.Spec.ManagedBy = ""
	createJob(t, ns, job)
	done := waitJob(t, ns, job.Name, "Failed", inPhase(batch.JobFailed))
	failed := done.Status.Condition(batch.JobConditionFailed)
	t.Logf("Failed %s: %s", failed.Reason, failed.Message)
	if failed.Reason != "InvalidSpec" || !strings.Contains(failed.Message, "spec.managedBy: "+batch.MultiKueueControllerName) {
		t.Errorf("Failed %s: %q; want InvalidSpec, naming spec.managedBy: %s", failed.Reason, failed.Message, batch.MultiKueueControllerName)
	}
	waitWorkloadFinished(t, client, ns, "genericjob-"+job.Name)
	var events string
	waitFor(t, "the InvalidSpec event", 30*time.Second, func(context.Context) (bool, error) {
		events = eventsOf(t, ns, job.Name)
		return strings.Contains(events, "InvalidSpec: "), nil
	})
	t.Logf("events:\n%s", events)
	for _, bad := range []string{"admitted again", "waits in LocalQueue"} {
		if strings.Contains(events, bad) {
			t.Errorf("an event says the job %s", bad)
		}
	}
	if len(copiesOf(context.Background(), workers, ns, job.Name)) != 0 {
		t.Errorf("a copy of a job MultiKueue rejected was made on a worker")
	}
	if pods := podNames(t, ns); len(pods) != 0 {
		t.Errorf("the manager ran pods of a job MultiKueue rejected: %v", pods)
	}
}

// TestMultiKueueManagedByInALocalQueue: the converse, a job with spec.managedBy:
// kueue.x-k8s.io/multikueue in a LocalQueue of the manager's own ClusterQueue, which has no
// MultiKueue check: Kueue admits it here, nothing would ever run it, and it fails saying so
// and what to do, its Workload Finished (its quota released).
func TestMultiKueueManagedByInALocalQueue(t *testing.T) {
	workers := parallelMultiKueue(t, multiKueue.all())
	client := useKueue(t)
	ns := mkNamespace(t, workers)
	if _, err := cluster.CreateObjects(context.Background(), env.dynamic, fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: here, namespace: %s}
spec: {clusterQueue: %s}
`, ns, cluster.KueueClusterQueue)); err != nil {
		t.Fatal(err)
	}
	job := multiKueueJob("mk-here", 1)
	job.Labels[kueue.LabelQueueName] = "here"
	createJob(t, ns, job)
	done := waitJob(t, ns, job.Name, "Failed", inPhase(batch.JobFailed))
	failed := done.Status.Condition(batch.JobConditionFailed)
	t.Logf("Failed %s: %s", failed.Reason, failed.Message)
	if failed.Reason != "InvalidSpec" || !strings.Contains(failed.Message, `LocalQueue "here" with no admission check`) {
		t.Errorf("Failed %s: %q; want InvalidSpec, saying the queue admitted it with no MultiKueue check", failed.Reason, failed.Message)
	}
	waitWorkloadFinished(t, client, ns, "genericjob-"+job.Name)
	if len(copiesOf(context.Background(), workers, ns, job.Name)) != 0 {
		t.Errorf("a copy of a job its queue does not dispatch was made on a worker")
	}
	if pods := podNames(t, ns); len(pods) != 0 {
		t.Errorf("the manager ran pods of a job another controller is to run: %v", pods)
	}
}

// TestMultiKueueStatusLag: how soon the manager shows the status of the copy: five jobs one
// after another, then five at once, each timed from watches of both clusters: the last of the
// copy's pods seen running (and ended), the copy's status Running (Succeeded), then the
// manager's. The figures are logged; the test fails when the manager lags the worker by more
// than 2 s (docs/queueing.md says about a second: MultiKueue batches a worker's changes for
// one). It runs alone, in the sequential phase (parallel_test.go): beside other tests, the
// manager's lag is the machine's.
func TestMultiKueueStatusLag(t *testing.T) {
	workers := useMultiKueue(t)
	ns := mkNamespace(t, workers)
	type timed struct {
		name    string
		manager *jobLog
		copies  []*jobLog
		pods    []*podLog
	}
	start := func(name string) *timed {
		job := multiKueueJob(name, 2)
		exits(&job.Spec.ReplicaSpecs[0], 0, "3s")
		j := &timed{name: name, manager: watchJob(t, env.jobs, ns, name)}
		for _, w := range workers {
			j.copies = append(j.copies, watchJob(t, w.jobs, ns, name))
			j.pods = append(j.pods, watchPodPhases(t, w, ns, name))
		}
		createJob(t, ns, job)
		return j
	}
	var lines []string
	var worst time.Duration
	report := func(j *timed) {
		waitJob(t, ns, j.name, "Succeeded", inPhase(batch.JobSucceeded))
		w := slices.IndexFunc(j.copies, func(c *jobLog) bool { return !c.first(batch.JobSucceeded).IsZero() })
		if w < 0 {
			t.Fatalf("no worker showed %s Succeeded", j.name)
		}
		copied, pods := j.copies[w], j.pods[w]
		runLag := j.manager.first(batch.JobRunning).Sub(copied.first(batch.JobRunning))
		endLag := j.manager.first(batch.JobSucceeded).Sub(copied.first(batch.JobSucceeded))
		worst = max(worst, runLag, endLag)
		lines = append(lines, fmt.Sprintf("%s on %s: pods running -> copy Running %.2fs -> manager Running %.2fs; pods ended -> copy Succeeded %.2fs -> manager Succeeded %.2fs",
			j.name, workers[w].name, copied.first(batch.JobRunning).Sub(pods.last(corev1.PodRunning, 2)).Seconds(), runLag.Seconds(),
			copied.first(batch.JobSucceeded).Sub(pods.last(corev1.PodSucceeded, 2)).Seconds(), endLag.Seconds()))
	}
	for i := range 5 {
		report(start(fmt.Sprintf("mk-lag-%d", i)))
	}
	var burst []*timed
	for i := range 5 {
		burst = append(burst, start(fmt.Sprintf("mk-burst-%d", i)))
	}
	for _, j := range burst {
		report(j)
	}
	t.Logf("how far the manager lags its worker:\n%s", strings.Join(lines, "\n"))
	if worst > 2*time.Second {
		t.Errorf("the manager showed a phase %s after the worker: docs/queueing.md says about a second", worst.Round(10*time.Millisecond))
	}
}

// podLog records when each pod of a job was first seen in each phase on a cluster.
type podLog struct {
	mu   sync.Mutex
	seen map[corev1.PodPhase]map[string]time.Time
}

func watchPodPhases(t *testing.T, w *mkWorker, ns, job string) *podLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	watcher, err := w.kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: batch.LabelJobName + "=" + job})
	if err != nil {
		t.Fatal(err)
	}
	l := &podLog{seen: map[corev1.PodPhase]map[string]time.Time{}}
	go func() {
		defer watcher.Stop()
		for e := range watcher.ResultChan() {
			if p, ok := e.Object.(*corev1.Pod); ok {
				l.mu.Lock()
				if l.seen[p.Status.Phase] == nil {
					l.seen[p.Status.Phase] = map[string]time.Time{}
				}
				if _, seen := l.seen[p.Status.Phase][p.Name]; !seen {
					l.seen[p.Status.Phase][p.Name] = time.Now()
				}
				l.mu.Unlock()
			}
		}
	}()
	return l
}

// last is when the last of n pods was first seen in a phase (zero: not all were).
func (l *podLog) last(phase corev1.PodPhase, n int) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var last time.Time
	for _, at := range l.seen[phase] {
		if at.After(last) {
			last = at
		}
	}
	if len(l.seen[phase]) < n {
		return time.Time{}
	}
	return last
}
