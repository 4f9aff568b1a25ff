package progress

import (
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// Reports are coalesced (docs/progress.md, "Coalescing"): a job's status is written at most
// once an interval, whatever its replicas send. The first report of a job is written at once;
// the next ones wait for the interval since the last write, and then go together, each
// replica's last. A write is a JSON merge patch of the status subresource that carries the
// job's resourceVersion as the cache shows it: a status the engine wrote meanwhile makes it
// conflict instead of being overwritten, and it is tried again at the next interval, from
// the cache then.

// forgetAfter: the reports of a job none of whose pods reported for this long are forgotten
// (the status keeps them); so are those of a job that is gone.
const forgetAfter = 5 * time.Minute

type writer struct {
	interval time.Duration
	kinds    map[string]Kind
	pods     Pods
	clock    clock.WithTicker
	queue    workqueue.TypedDelayingInterface[JobRef]

	mu   sync.Mutex
	jobs map[JobRef]*jobReports
}

// jobReports are the reports this controller received of one job.
type jobReports struct {
	uid types.UID
	// held is the last report of each pod, by the pod's UID, written or not.
	held map[types.UID]*received
	// pending: a report not written yet; queued: the job's key is in the queue (or being
	// written).
	pending, queued       bool
	lastWrite, lastReport time.Time
}

func newWriter(kinds []Kind, pods Pods, interval time.Duration, clk clock.WithTicker) *writer {
	w := &writer{interval: interval, kinds: map[string]Kind{}, pods: pods, clock: clk, jobs: map[JobRef]*jobReports{},
		queue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[JobRef]{Name: "progress", Clock: clk})}
	for _, k := range kinds {
		w.kinds[k.Resource] = k
	}
	return w
}

// accept takes a pod's report of job (of UID jobUID), to be written with the job's next write.
func (w *writer) accept(job JobRef, jobUID types.UID, r *received) {
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	j := w.jobs[job]
	if j == nil || j.uid != jobUID {
		j = &jobReports{uid: jobUID, held: map[types.UID]*received{}}
		w.jobs[job] = j
	}
	j.held[r.UID] = r
	j.pending, j.lastReport = true, now
	if !j.queued {
		j.queued = true
		w.queue.AddAfter(job, max(0, j.lastWrite.Add(w.interval).Sub(now)))
	}
}

// run writes with workers until ctx ends.
func (w *writer) run(ctx context.Context, workers int) {
	go func() {
		<-ctx.Done()
		w.queue.ShutDown()
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for w.next(ctx) {
			}
		})
	}
	wg.Go(func() { wait.UntilWithContext(ctx, func(context.Context) { w.forget() }, time.Minute) })
	wg.Wait()
}

func (w *writer) next(ctx context.Context) bool {
	job, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(job)
	w.process(ctx, job)
	return true
}

// writeResult is what became of a write.
type writeResult int

const (
	written writeResult = iota
	retry               // at the next interval
	gone                // the job: its reports are forgotten
)

// process writes the job's held reports, if any is new.
func (w *writer) process(ctx context.Context, job JobRef) {
	w.mu.Lock()
	j := w.jobs[job]
	if j == nil {
		w.mu.Unlock()
		return
	}
	if !j.pending {
		j.queued = false
		w.mu.Unlock()
		return
	}
	held, uid := maps.Clone(j.held), j.uid
	j.pending = false
	w.mu.Unlock()

	// The interval runs from when the write was sent, not from when it returned: a slow
	// write does not push the next one back, and the next is due at the same time however
	// late this goroutine runs again.
	sent := w.clock.Now()
	result := w.write(ctx, job, uid, held)

	w.mu.Lock()
	defer w.mu.Unlock()
	if w.jobs[job] != j {
		return // forgotten meanwhile, or the job made again under its name
	}
	switch result {
	case gone:
		delete(w.jobs, job)
		return
	case written:
		j.lastWrite = sent
		member := w.member(uid)
		for podUID := range j.held {
			if !member(podUID) {
				delete(j.held, podUID)
			}
		}
	case retry:
		j.pending = true
	}
	if j.pending {
		w.queue.AddAfter(job, max(0, sent.Add(w.interval).Sub(w.clock.Now())))
	} else {
		j.queued = false
	}
}

// member tells whether a pod, by UID, is the job's now, as the pods' cache shows.
func (w *writer) member(jobUID types.UID) func(uid types.UID) bool {
	pods := map[types.UID]bool{}
	for _, p := range w.pods.OfJob(jobUID) {
		pods[p.GetUID()] = true
	}
	return func(uid types.UID) bool { return pods[uid] }
}

// write patches the job's status with its held reports.
func (w *writer) write(ctx context.Context, job JobRef, uid types.UID, held map[types.UID]*received) writeResult {
	logger := klog.FromContext(ctx).WithValues("job", job.String())
	kind := w.kinds[job.Resource]
	cached, err := kind.Get(job.Namespace, job.Name)
	if err != nil || cached.GetUID() != uid {
		return gone
	}
	m := merge(cached.JobStatus().Progress, held, w.member(uid))
	if cached.JobStatus().Finished() {
		// A finished job is looked at for stalls no more, and keeps no lines (the engine drops
		// them): a last report, sent as its pod ended, still counts at the job's level.
		m.Progress.Replicas = nil
	}
	patch, err := statusPatch(cached.GetResourceVersion(), m)
	if err != nil {
		logger.Error(err, "Building a progress patch")
		return gone
	}
	err = kind.Patch(ctx, job.Namespace, job.Name, patch)
	switch {
	case err == nil:
		statusWrites.WithLabelValues("written").Inc()
		logger.V(4).Info("Wrote progress", "replicas", len(m.Progress.Replicas), "jobLevel", m.Top)
		return written
	case apierrors.IsNotFound(err):
		return gone
	case apierrors.IsConflict(err):
		statusWrites.WithLabelValues("conflict").Inc()
		logger.V(4).Info("Progress write conflicted; retrying at the next interval", "resourceVersion", cached.GetResourceVersion())
		return retry
	default:
		statusWrites.WithLabelValues("error").Inc()
		logger.Error(err, "Writing progress; retrying at the next interval")
		return retry
	}
}

// forget drops the reports of jobs that are gone or quiet (forgetAfter).
func (w *writer) forget() {
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for job, j := range w.jobs {
		if j.queued {
			continue
		}
		cached, err := w.kinds[job.Resource].Get(job.Namespace, job.Name)
		if err != nil || cached.GetUID() != j.uid || now.Sub(j.lastReport) > forgetAfter {
			delete(w.jobs, job)
		}
	}
}

// jobLevelFields are the JSON names of status.progress's fields but its replicas.
var jobLevelFields = func() []string {
	var names []string
	t := reflect.TypeFor[batch.JobProgress]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "replicas" {
			names = append(names, name)
		}
	}
	return names
}()

// statusPatch is the JSON merge patch of m, at resourceVersion. A merge patch keeps what it
// does not name, so the job-level fields, when written, are each named: null when unset.
func statusPatch(resourceVersion string, m merged) ([]byte, error) {
	progress := map[string]any{}
	if m.Top {
		data, err := json.Marshal(m.Progress)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, &progress); err != nil {
			return nil, err
		}
		for _, name := range jobLevelFields {
			if _, ok := progress[name]; !ok {
				progress[name] = nil
			}
		}
	}
	if len(m.Progress.Replicas) > 0 {
		progress["replicas"] = m.Progress.Replicas
	} else {
		progress["replicas"] = nil
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": resourceVersion},
		"status":   map[string]any{"progress": progress},
	})
}
