package main

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// latencies records, per job of a burst, when this process created it and when its
// informers first saw its first pod, its last pod Running and its phase Running. The times are
// this process's own clock at each event, not the objects' timestamps, whose resolution is a
// second: what the informers see is also what any client of the API would see, later by the
// same watch delay for pods and for jobs.
//
// Creation → first pod is, in a burst, the queue at the controller's client rate limit: every
// job's children are created in the order the jobs came, at -qps once -burst is spent, so the
// jobs created last wait for the children of all those before them. The summary gives beside
// it that wait alone (rateLimitWait): what the same jobs would wait were the controller's
// children its only requests and the API server answered at once.
type latencies struct {
	podsPerJob int
	// qps, burst and writesPerJob (the children the controller creates per job, at one client
	// rate limit) give each job's rateLimitWait.
	qps          float64
	burst        int
	writesPerJob int

	mu             sync.Mutex
	created        map[string]time.Time // just before the job's Create call
	firstPod       map[string]time.Time
	runningPods    map[string]int      // per job, its pods seen Running
	seenRunning    map[string]struct{} // the pods (namespace/name) counted there
	lastPodRunning map[string]time.Time
	jobRunning     map[string]time.Time
}

func newLatencies(c config) *latencies {
	return &latencies{podsPerJob: podsPerJob(c), qps: c.qps, burst: c.burst, writesPerJob: childrenPerJob(c), created: map[string]time.Time{}, firstPod: map[string]time.Time{},
		runningPods: map[string]int{}, seenRunning: map[string]struct{}{}, lastPodRunning: map[string]time.Time{},
		jobRunning: map[string]time.Time{}}
}

// creating marks the job's creation; call it just before the Create call.
func (l *latencies) creating(job string) {
	now := time.Now()
	l.mu.Lock()
	l.created[job] = now
	l.mu.Unlock()
}

// podHandler records the first pod of each job and its last pod's start. It runs on the
// informer's one delivery goroutine, so it only takes the time and updates maps: a slow
// handler would delay the events behind it, and with them the times.
func (l *latencies) podHandler() cache.ResourceEventHandler {
	seen := func(obj any) {
		now := time.Now()
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		job := pod.Labels[batch.LabelJobName]
		l.mu.Lock()
		defer l.mu.Unlock()
		if _, ours := l.created[job]; !ours {
			return
		}
		if _, ok := l.firstPod[job]; !ok {
			l.firstPod[job] = now
		}
		key := pod.Namespace + "/" + pod.Name
		if _, counted := l.seenRunning[key]; pod.Status.Phase != corev1.PodRunning || counted {
			return
		}
		l.seenRunning[key] = struct{}{}
		l.runningPods[job]++
		if l.runningPods[job] == l.podsPerJob {
			l.lastPodRunning[job] = now
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, obj any) { seen(obj) }}
}

// jobHandler records when each job's phase is first seen Running.
func (l *latencies) jobHandler() cache.ResourceEventHandler {
	seen := func(obj any) {
		now := time.Now()
		job, ok := obj.(interface {
			metav1.Object
			JobStatus() *batch.JobStatus
		})
		if !ok || job.JobStatus().Phase != batch.JobRunning {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if _, ours := l.created[job.GetName()]; !ours {
			return
		}
		if _, ok := l.jobRunning[job.GetName()]; !ok {
			l.jobRunning[job.GetName()] = now
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, obj any) { seen(obj) }}
}

// childrenPerJob is how many children the controller creates for a job of the bench before
// its pods run: a pod and a Service per replica (GenericJob with spec.service,
// TensorFlowTrainingJob), and a queued job's Workload; an MPIJob's workers and launcher, its
// Secret, ConfigMap and Service. Its status writes go through another client, with a rate
// limit of its own.
func childrenPerJob(c config) int {
	switch {
	case c.kind == "MPIJob":
		return c.replicas + 4
	case c.queue != queueNone:
		return 2*c.replicas + 1
	}
	return 2 * c.replicas
}

// rateLimitWait is, per job, the least time from its creation to its first pod that the
// client's rate limit allows: the jobs are taken in the order they were created, and the
// first pod of the n-th needs the children of the n-1 before it and one of its own, of which
// the first -burst go at once and the rest at -qps from the first job's creation.
func (l *latencies) rateLimitWait() []time.Duration {
	created := slices.SortedFunc(maps.Values(l.created), time.Time.Compare)
	var waits []time.Duration
	for n, t := range created {
		at := rateLimitFloor(n*l.writesPerJob+1, l.burst, l.qps)
		waits = append(waits, max(0, at-t.Sub(created[0])))
	}
	return waits
}

// rateLimitFloor is the least time a client with this burst and qps takes to send writes
// requests: the first burst go at once, the rest at qps.
func rateLimitFloor(writes, burst int, qps float64) time.Duration {
	return time.Duration(float64(max(0, writes-burst)) / qps * float64(time.Second))
}

// latencySummary is a burst's latencies: creation → first pod, the client's rate limit's
// share of it (rateLimitWait), and last pod Running → job Running (negative if the job said
// Running first), with the jobs that had none.
type latencySummary struct {
	firstPod50, firstPod99, running50, running99 time.Duration
	rateLimit50, rateLimit99                     time.Duration
	noFirstPod, noRunning                        int
	// slowest are the three jobs slowest from their last pod Running to Running, told
	// when the p99 misses its target: when, in the burst, each was created, its last pod
	// ran and it said Running.
	slowest []string
}

// runningTarget is the p99 of last pod Running → job Running the bench aims at.
const runningTarget = 500 * time.Millisecond

func (l *latencies) summary() latencySummary {
	l.mu.Lock()
	defer l.mu.Unlock()
	var s latencySummary
	var firstPod, running []time.Duration
	type late struct {
		job                    string
		created, last, running time.Time
	}
	var lates []late
	start := time.Time{}
	for _, created := range l.created {
		if start.IsZero() || created.Before(start) {
			start = created
		}
	}
	for job, created := range l.created {
		if t, ok := l.firstPod[job]; ok {
			firstPod = append(firstPod, t.Sub(created))
		} else {
			s.noFirstPod++
		}
		last, ok1 := l.lastPodRunning[job]
		t, ok2 := l.jobRunning[job]
		if ok1 && ok2 {
			running = append(running, t.Sub(last))
			lates = append(lates, late{job, created, last, t})
		} else {
			s.noRunning++
		}
	}
	s.firstPod50, s.firstPod99 = percentile(firstPod, 0.50), percentile(firstPod, 0.99)
	if l.qps > 0 {
		waits := l.rateLimitWait()
		s.rateLimit50, s.rateLimit99 = percentile(waits, 0.50), percentile(waits, 0.99)
	}
	s.running50, s.running99 = percentile(running, 0.50), percentile(running, 0.99)
	if s.running99 > runningTarget {
		slices.SortFunc(lates, func(a, b late) int { return cmp.Compare(b.running.Sub(b.last), a.running.Sub(a.last)) })
		for _, j := range lates[:min(3, len(lates))] {
			s.slowest = append(s.slowest, fmt.Sprintf("%s (created at %.1fs, its last pod Running at %.1fs, Running at %.1fs)",
				j.job, j.created.Sub(start).Seconds(), j.last.Sub(start).Seconds(), j.running.Sub(start).Seconds()))
		}
	}
	return s
}

func (s latencySummary) String() string {
	text := fmt.Sprintf("creation → first pod p50 %s p99 %s (the client's rate limit alone: p50 %s p99 %s), last pod Running → job Running p50 %s p99 %s",
		ms(s.firstPod50), ms(s.firstPod99), ms(s.rateLimit50), ms(s.rateLimit99), ms(s.running50), ms(s.running99))
	if len(s.slowest) > 0 {
		text += "; slowest: " + strings.Join(s.slowest, ", ")
	}
	if s.noFirstPod+s.noRunning > 0 {
		text += fmt.Sprintf(" (jobs without a first pod: %d, without both Running times: %d)", s.noFirstPod, s.noRunning)
	}
	return text
}

// percentile is the nearest-rank percentile of ds (0 when empty).
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(float64(len(s))*p)) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0fms", msOf(d)) }

// medianLatencies takes, field by field, the median of several bursts' latencies.
func medianLatencies(ls []latencySummary) latencySummary {
	field := func(f func(latencySummary) time.Duration) time.Duration {
		return time.Duration(medianOf(ls, func(l latencySummary) float64 { return float64(f(l)) }))
	}
	return latencySummary{
		firstPod50:  field(func(l latencySummary) time.Duration { return l.firstPod50 }),
		firstPod99:  field(func(l latencySummary) time.Duration { return l.firstPod99 }),
		rateLimit50: field(func(l latencySummary) time.Duration { return l.rateLimit50 }),
		rateLimit99: field(func(l latencySummary) time.Duration { return l.rateLimit99 }),
		running50:   field(func(l latencySummary) time.Duration { return l.running50 }),
		running99:   field(func(l latencySummary) time.Duration { return l.running99 }),
	}
}
