package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/expectations"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/metrics"
)

// FieldManager names the controller in the managedFields of every object it writes, so that
// `kubectl get -o yaml --show-managed-fields` and server-side apply conflicts say who wrote
// what.
const FieldManager = "t9k-job-controller"

// podBatchPeriod coalesces the syncs (and status writes) that children's changes cause, as
// long as the job's phase stays as it is.
const podBatchPeriod = time.Second

// gatedBatchPeriod is podBatchPeriod while scheduling gates hold a starting job's pods
// (holdStartingStatus).
const gatedBatchPeriod = 5 * time.Second

// statusWaitTTL bounds how long a sync waits for the cache to show its own status write.
const statusWaitTTL = 30 * time.Second

// Controller runs the jobs of one kind.
type Controller struct {
	adapter  Adapter
	kind     string
	clients  Clients
	options  Options
	recorder record.EventRecorder
	// queue is the workqueue of the jobs' keys; lanes its order: urgent keys first.
	queue  workqueue.TypedRateLimitingInterface[string]
	lanes  *lanes
	synced []cache.InformerSynced

	// kinds is the table of child kinds: the engine's own, then its admitters'.
	kinds kindTable
	// caches are the children's caches, one per kind of the table whose API is served,
	// indexed by the UID of the job that owns them (IndexByJob).
	caches []childCache

	// expect holds the writes of children the cache has yet to show, per job and kind.
	expect *expectations.Expectations
	// written holds, per job key, the resourceVersion of the controller's last status write,
	// until the cache shows it: a sync on an older copy would count a restart again.
	written sync.Map // key -> writtenStatus
	// held holds, per job key, when the job's first status that waits for the batch to close
	// was decided (holdStartingStatus), until a status of the job is written.
	held sync.Map // key -> *heldStatus
	// endSeen holds, per pod UID, when the pod was first seen ended: restart backoffs count
	// from there (a container's finishedAt has one-second resolution).
	endSeen sync.Map // types.UID -> time.Time
	// inPlaceWritten holds, per pod UID, the attempts last written to a pod that restarts in
	// place, until the pod goes (inplace.go).
	inPlaceWritten sync.Map // types.UID -> inPlaceWrite
	// gone holds, per job, the last state of its disrupted pods, for the syncs that find
	// them gone (gone.go); shared by the controllers of one Informers.
	gone *goneMemory
	// failing holds, per job, the state of its pods that restart in place as a container
	// failed, before the kubelet restarted them all (gone.go, rememberFailing).
	failing *goneMemory
	// announced holds, per job key, the reasons its waiting replicas were announced for
	// (waitevents.go), while they wait.
	announced sync.Map // key -> []string

	now func() time.Time
}

// childCache is one kind of child and its informer's cache.
type childCache struct {
	kind    *ChildKind
	indexer cache.Indexer
}

// Options are the choices of the controller's operator.
type Options struct {
	// Admitters decide when jobs' pods may be made (admission.go), asked in this order.
	Admitters []Admitter
	// Progress is the progress endpoint every pod is told of (progress.go); nil: none.
	Progress *ProgressEndpoint
	// AgentImage is the image of the agent in the pods of jobs that restart in place
	// (inplace.go): the controller's own.
	AgentImage string
	// Namespace is the namespace children's and jobs' informers watch when a process runs a
	// controller of the kind for each of several namespaces: its queue's metrics are named
	// <kind>/<namespace>. Empty: the kind alone.
	Namespace string
}

// New builds the controller of one kind. children are the informer factories of the
// project's children; the controller takes from them an informer for every kind of child in
// the table whose API is served, and registers its event handlers.
func New(adapter Adapter, clients Clients, children Informers, recorder record.EventRecorder, options Options) *Controller {
	kind := adapter.GroupVersionKind().Kind
	c := &Controller{
		adapter:  adapter,
		kind:     kind,
		clients:  clients,
		options:  options,
		recorder: recorder,
		lanes:    newLanes(),
		synced:   []cache.InformerSynced{adapter.Informer().HasSynced},
		expect:   expectations.New(expectations.DefaultTTL),
		now:      time.Now,
		gone:     children.gone,
		failing:  children.failing,
	}
	if c.failing == nil {
		c.failing = &goneMemory{}
	}

	if c.gone == nil {
		c.gone = &goneMemory{}
	}
	queueName := kind
	if options.Namespace != "" {
		queueName += "/" + options.Namespace
	}
	c.queue = newQueue(queueName, clock.RealClock{}, c.lanes)
	c.kinds = ownKinds()
	for _, a := range options.Admitters {
		c.kinds = append(c.kinds, a.Kinds()...)
	}
	for _, k := range c.kinds {
		informer := k.Informer(children)
		if informer == nil {
			continue // its API is not served
		}
		if _, ok := informer.GetIndexer().GetIndexers()[IndexByJob]; !ok {
			if err := informer.AddIndexers(cache.Indexers{IndexByJob: jobUIDOf}); err != nil {
				panic(fmt.Sprintf("indexing %s by job: %v", k.Resource, err)) // only before the informer starts
			}
		}
		c.caches = append(c.caches, childCache{kind: k, indexer: informer.GetIndexer()})
		c.synced = append(c.synced, informer.HasSynced)
		c.watchChildren(k, informer)
	}
	for _, a := range options.Admitters {
		c.synced = append(c.synced, a.Watch(controllerJobs{c})...)
	}
	c.watchJobs()
	metrics.ReportJobs(kind, func() []string {
		var phases []string
		for _, obj := range adapter.Informer().GetStore().List() {
			if job, ok := obj.(Job); ok {
				phases = append(phases, string(job.JobStatus().Phase))
			}
		}
		return phases
	})
	return c
}

// Run syncs jobs with the given number of workers until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	logger := klog.FromContext(ctx).WithValues("kind", c.kind)
	logger.Info("Starting controller", "workers", workers)
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			wait.UntilWithContext(ctx, c.worker, time.Second)
		})
	}
	<-ctx.Done()
	logger.Info("Stopping controller")
	c.queue.ShutDown()
	wg.Wait()
}

func (c *Controller) worker(ctx context.Context) {
	for c.processNext(ctx) {
	}
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	start := c.now()
	requeueAfter, err := c.sync(ctx, key)
	result := "success"
	if err != nil {
		result = "error"
	}
	metrics.SyncDuration.WithLabelValues(c.kind, result).Observe(time.Since(start).Seconds())
	switch {
	case err != nil:
		if !apierrors.IsConflict(err) {
			klog.FromContext(ctx).Error(err, "Sync failed; retrying", "kind", c.kind, "job", key)
		}
		c.queue.AddRateLimited(key)
	default:
		c.queue.Forget(key)
		if requeueAfter > 0 {
			c.queue.AddAfter(key, requeueAfter)
		}
	}
	return true
}

// withKind is a copy of a job of the cache, with its kind: client-go clears an object's kind
// as it decodes it, and the admitters name the children they look up by it (a Workload is
// <kind>-<name>).
func (c *Controller) withKind(cached Job) Job {
	job := cached.DeepCopyObject().(Job)
	job.GetObjectKind().SetGroupVersionKind(c.adapter.GroupVersionKind())
	return job
}

// sync brings one job closer to its plan. It returns how soon to look again (a restart
// backoff, a deadline, or the longest a wait for the cache can last) or an error to retry
// with the rate limiter. Every return that leaves work undone comes back by itself.
func (c *Controller) sync(ctx context.Context, key string) (requeue time.Duration, err error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil
	}
	cached, err := c.adapter.Get(namespace, name)
	if apierrors.IsNotFound(err) {
		c.forget(key)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if cached.GetDeletionTimestamp() != nil {
		return 0, nil // the garbage collector deletes the children
	}
	if left, ok := c.ttlLeft(ctx, cached); ok {
		if left <= 0 {
			return c.deleteExpired(ctx, key, cached)
		}
		defer func() {
			if err == nil {
				requeue = decision.MinPositive(requeue, left)
			}
		}()
	}
	// The cache lags behind the controller's own writes: wait until it shows them. The event
	// that shows them syncs the job; if it never comes, the wait runs out and so does this.
	if wait := max(c.statusWait(key, cached), c.expectationsWait(key)); wait > 0 {
		return wait, nil
	}
	job := c.withKind(cached)
	if job.JobStatus().Finished() && len(job.JobStatus().Tasks) == 0 && !job.JobLifecycle().ManagedElsewhere() {
		// Failed before anything was created: nothing left to do but tell the admitters,
		// which may hold something for it (a queued job's quota).
		return 0, c.ended(ctx, job)
	}
	return c.decideAndApply(ctx, key, job)
}

// decideAndApply is a sync's one write path (docs/architecture.md, "How a sync flows"): it
// plans the job, asks the admitters, decides, and carries the decision out; a failure found
// on the way (a spec that cannot run, a child's name held by another object) is a decision
// too, carried out the same way.
func (c *Controller) decideAndApply(ctx context.Context, key string, job Job) (time.Duration, error) {
	children, err := c.children(job)
	if err != nil {
		return 0, err
	}
	plan, err := c.adapter.Plan(job)
	if err != nil {
		return 0, c.failJob(ctx, key, job, children, "InvalidSpec", err)
	}
	c.planProgress(job, plan)
	c.planInPlace(job, plan)
	verdicts, err := c.admit(job, plan, children)
	var invalid *InvalidSpecError
	switch {
	case errors.As(err, &invalid):
		return 0, c.failJob(ctx, key, job, children, "InvalidSpec", invalid)
	case err != nil:
		return 0, err
	}
	verdict := verdicts.combined()
	d, err := decision.Decide(job, plan, children, verdict, c.now())
	if err != nil {
		return 0, err
	}
	if job.JobLifecycle().ManagedElsewhere() {
		d = c.keepAdmittersOnly(job, plan, verdict, children, d)
	}
	done, err := c.apply(ctx, key, job, d)
	var taken *NameTakenError
	switch {
	case errors.As(err, &taken):
		return 0, c.failJob(ctx, key, done, withCreated(children, d), "NameTaken", taken)
	case err != nil:
		return 0, err
	}
	if err := c.decided(ctx, job, done, verdicts, d, children); err != nil {
		return 0, err
	}
	if d.Elsewhere {
		return d.RequeueAfter, nil
	}
	c.announceWaits(key, done, d.Waits)
	if d.Status.Finished() {
		// A finished job restarts nothing: when its pods ended no longer matters, and
		// remembering it for pods kept by the clean-up policy would cost memory for good.
		for _, p := range children.Pods {
			c.endSeen.Delete(p.UID)
		}
	}
	// The status now tells how the gone pods ended.
	c.gone.forget(job.GetUID(), children.Gone)
	klog.FromContext(ctx).V(4).Info("Synced", "kind", c.kind, "job", key, "phase", d.Status.Phase, "created", len(d.CreatePods)+len(d.CreateObjects),
		"updated", len(d.UpdateObjects), "deleted", len(d.DeletePods)+len(d.DeleteObjects))
	return d.RequeueAfter, nil
}
