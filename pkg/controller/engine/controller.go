package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/expectations"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/metrics"
	"github.com/t9k-jobs/t9k-jobs/pkg/features"
)

// podBatchPeriod coalesces the syncs (and status writes) that pod phase changes cause.
const podBatchPeriod = time.Second

// statusWaitTTL bounds how long a sync waits for the cache to show its own status write.
const statusWaitTTL = 30 * time.Second

// Controller runs the jobs of one kind.
type Controller struct {
	adapter  Adapter
	kind     string
	kube     kubernetes.Interface
	recorder record.EventRecorder
	queue    workqueue.TypedRateLimitingInterface[string]
	synced   []cache.InformerSynced

	// The children's caches, indexed by the UID of the job that owns them (byJob).
	pods, services, secrets, configMaps, deployments cache.Indexer

	// expect holds the pod and service writes the cache has yet to show.
	expect *expectations.Expectations
	// written holds, per job key, the resourceVersion of the controller's last status write,
	// until the cache shows it: a sync on an older copy would count a restart again.
	written sync.Map // key -> writtenStatus
	// endSeen holds, per pod UID, when the pod was first seen ended: restart backoffs count
	// from there (a container's finishedAt has one-second resolution).
	endSeen sync.Map // types.UID -> time.Time

	now func() time.Time
}

type writtenStatus struct {
	resourceVersion string
	at              time.Time
}

// Informers are the shared informers of the children every kind may have, filtered to the
// project's children.
type Informers struct {
	Pods        coreinformers.PodInformer
	Services    coreinformers.ServiceInformer
	Secrets     coreinformers.SecretInformer
	ConfigMaps  coreinformers.ConfigMapInformer
	Deployments appsinformers.DeploymentInformer
}

// New builds the controller of one kind on the shared informers of the children and
// registers its event handlers.
func New(adapter Adapter, kube kubernetes.Interface, inf Informers, recorder record.EventRecorder) *Controller {
	kind := adapter.GroupVersionKind().Kind
	pods, services, secrets, configMaps := inf.Pods.Informer(), inf.Services.Informer(), inf.Secrets.Informer(), inf.ConfigMaps.Informer()
	deployments := inf.Deployments.Informer()
	c := &Controller{
		adapter:     adapter,
		kind:        kind,
		kube:        kube,
		pods:        pods.GetIndexer(),
		services:    services.GetIndexer(),
		secrets:     secrets.GetIndexer(),
		configMaps:  configMaps.GetIndexer(),
		deployments: deployments.GetIndexer(),
		recorder:    recorder,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: kind}),
		synced: []cache.InformerSynced{adapter.Informer().HasSynced, pods.HasSynced, services.HasSynced, secrets.HasSynced, configMaps.HasSynced, deployments.HasSynced},
		expect: expectations.New(expectations.DefaultTTL),
		now:    time.Now,
	}
	for _, informer := range []cache.SharedIndexInformer{pods, services, secrets, configMaps, deployments} {
		if _, ok := informer.GetIndexer().GetIndexers()[byJob]; !ok {
			if err := informer.AddIndexers(cache.Indexers{byJob: jobUIDOf}); err != nil {
				panic(fmt.Sprintf("indexing children by job: %v", err)) // only before the informer starts
			}
		}
	}
	_, _ = adapter.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addJob,
		UpdateFunc: func(_, cur any) { c.addJob(cur) },
		DeleteFunc: c.deleteJob,
	})
	_, _ = pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addPod,
		UpdateFunc: c.updatePod,
		DeleteFunc: c.deletePod,
	})
	_, _ = services.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addObject(servicesKey),
		DeleteFunc: c.deleteObject(servicesKey),
	})
	_, _ = secrets.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addObject(secretsKey),
		DeleteFunc: c.deleteObject(secretsKey),
	})
	_, _ = configMaps.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addObject(configMapsKey),
		DeleteFunc: c.deleteObject(configMapsKey),
	})
	_, _ = deployments.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addObject(deploymentsKey),
		UpdateFunc: func(_, cur any) { c.addObject(nil)(cur) }, // readiness shows in the kind's status
		DeleteFunc: c.deleteObject(deploymentsKey),
	})
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

// sync brings one job closer to its plan. It returns how soon to look again (restart
// backoff) or an error to retry with the rate limiter.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
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
	if !c.statusSeen(key, cached) || !c.expectationsMet(key) {
		return 0, nil // an informer event will bring the job back
	}
	job := cached.DeepCopyObject().(Job)
	job.GetObjectKind().SetGroupVersionKind(c.adapter.GroupVersionKind())
	logger := klog.FromContext(ctx).WithValues("kind", c.kind, "job", key)

	if Finished(job.JobStatus()) && len(job.JobStatus().Tasks) == 0 {
		return 0, nil // failed before anything was created: nothing left to do
	}
	plan, err := c.adapter.Plan(job)
	if err != nil {
		return 0, c.fail(ctx, key, job, "InvalidSpec", err)
	}
	children, err := c.children(job)
	if err != nil {
		return 0, err
	}
	d := Decide(job, plan, children, c.now())
	if r, ok := c.adapter.(StatusReporter); ok {
		d.Reported = r.Report(job, children)
	}
	if err := c.apply(ctx, key, job, d); err != nil {
		var taken *NameTakenError
		if errors.As(err, &taken) {
			return 0, c.fail(ctx, key, job, "NameTaken", taken)
		}
		return 0, err
	}
	logger.V(4).Info("Synced", "phase", d.Status.Phase, "created", len(d.CreatePods), "deleted", len(d.DeletePods))
	return d.RequeueAfter, nil
}

// apply carries out a decision: the status and the writes, in an order that survives a
// controller stopping at any point.
func (c *Controller) apply(ctx context.Context, key string, job Job, d *Decision) error {
	// A status that counts restarts or ends the job goes first, so that a restart is never
	// lost nor counted twice, and an outcome never undone, if the controller stops half-way.
	statusFirst := len(d.Restarted) > 0 || d.Outcome != nil
	if statusFirst {
		if err := c.writeStatus(ctx, key, job, d.Status, d.Reported); err != nil {
			return err
		}
		c.recordOutcome(job, d)
	}
	if err := c.deleteAll(ctx, key, job, d); err != nil {
		return err
	}
	created, err := c.createAll(ctx, key, job, d)
	switch {
	case statusFirst:
	case err != nil:
		_ = c.writeStatus(ctx, key, job, d.Status, d.Reported) // show what was created; the retry creates the rest
	case created == 0:
		return c.writeStatus(ctx, key, job, d.Status, d.Reported)
	default:
		// The new children's add events bring a sync within podBatchPeriod that reports
		// them as they are, so a status saying "Creating" would be written only to be
		// overwritten: one write per job saved.
	}
	return err
}

// fail fails a job that cannot run, once: its spec cannot run as written (its plan failed),
// or a child's name is held by another object. If that happens to a running job, its
// unfinished replicas stop, as at any failure.
func (c *Controller) fail(ctx context.Context, key string, job Job, reason string, cause error) error {
	if Finished(job.JobStatus()) {
		return nil
	}
	c.recorder.Event(job, corev1.EventTypeWarning, reason, cause.Error())
	if err := c.writeStatus(ctx, key, job, FailedStatus(job, reason, cause.Error(), c.now()), false); err != nil {
		return err
	}
	children, err := c.children(job)
	if err != nil {
		return err
	}
	return c.deleteAll(ctx, key, job, &Decision{DeletePods: cleanUp(&Plan{CleanUp: batch.CleanUpUnfinished}, children.Pods, nil), DeleteServices: live(children.Services)})
}

func (c *Controller) recordOutcome(job Job, d *Decision) {
	if d.Outcome != nil {
		eventType, reason := corev1.EventTypeNormal, "Succeeded"
		if !d.Outcome.Succeeded {
			eventType, reason = corev1.EventTypeWarning, "Failed"
		}
		if d.Outcome.Reason != "" {
			reason = d.Outcome.Reason
		}
		c.recorder.Event(job, eventType, reason, d.Outcome.Message)
	}
	for _, name := range d.Restarted {
		c.recorder.Eventf(job, corev1.EventTypeWarning, "Restarting", "Restarting replica %s%s", name, endingText(d.Status, name))
		metrics.Restarts.WithLabelValues(c.kind).Inc()
	}
}

// endingText says how the last pod of a replica ended, for events: ": its pod failed with exit
// code 137 (OOMKilled) on node-1".
func endingText(s *batch.JobStatus, name string) string {
	for _, t := range s.Tasks {
		for _, r := range t.Replicas {
			if r.Name != name || r.LastTermination == nil {
				continue
			}
			e := r.LastTermination
			text := ": its pod " + strings.ToLower(string(e.Phase))
			for _, cs := range e.Containers {
				if cs.ExitCode != nil && *cs.ExitCode != 0 {
					text += fmt.Sprintf(" with exit code %d", *cs.ExitCode)
					if cs.Reason != "" {
						text += " (" + cs.Reason + ")"
					}
					break
				}
			}
			if e.Reason != "" {
				text += ", " + e.Reason
			}
			if e.Node != "" {
				text += " on " + e.Node
			}
			return text
		}
	}
	return ""
}

// byJob indexes pods and services by the UID of their job, so that a sync reads its own
// children instead of filtering every pod of the namespace.
const byJob = "t9k-job-uid"

func jobUIDOf(obj any) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	if uid := m.GetLabels()[batch.LabelControllerUID]; uid != "" {
		return []string{uid}, nil
	}
	return nil, nil
}

// children lists the pods and services job controls, from the informer caches, and when the
// ended ones were seen to end.
func (c *Controller) children(job Job) (Children, error) {
	podObjs, err := c.pods.ByIndex(byJob, string(job.GetUID()))
	if err != nil {
		return Children{}, err
	}
	pods := make([]*corev1.Pod, 0, len(podObjs))
	for _, o := range podObjs {
		pods = append(pods, o.(*corev1.Pod))
	}
	uid := string(job.GetUID())
	services, err := indexed[*corev1.Service](c.services, uid)
	if err != nil {
		return Children{}, err
	}
	secrets, err := indexed[*corev1.Secret](c.secrets, uid)
	if err != nil {
		return Children{}, err
	}
	configMaps, err := indexed[*corev1.ConfigMap](c.configMaps, uid)
	if err != nil {
		return Children{}, err
	}
	deployments, err := indexed[*appsv1.Deployment](c.deployments, uid)
	if err != nil {
		return Children{}, err
	}
	ch := Children{Pods: owned(job, pods), Services: owned(job, services), Secrets: owned(job, secrets), ConfigMaps: owned(job, configMaps),
		Deployments: owned(job, deployments)}
	for _, p := range ch.Pods {
		if seen, ok := c.endSeen.Load(p.UID); ok {
			if ch.EndSeen == nil {
				ch.EndSeen = map[types.UID]time.Time{}
			}
			ch.EndSeen[p.UID] = seen.(time.Time)
		}
	}
	return ch, nil
}

// writeStatus writes status when it differs from the job's, and counts the phase change.
func (c *Controller) writeStatus(ctx context.Context, key string, job Job, status *batch.JobStatus, reported bool) error {
	old := job.JobStatus()
	if !reported && equality.Semantic.DeepEqual(old, status) {
		return nil
	}
	from := old.Phase
	*old = *status
	written, err := c.adapter.UpdateStatus(ctx, job)
	if err != nil {
		return err
	}
	c.written.Store(key, writtenStatus{resourceVersion: written.GetResourceVersion(), at: c.now()})
	if from != status.Phase {
		fromLabel := string(from)
		if fromLabel == "" {
			fromLabel = "None"
		}
		metrics.PhaseTransitions.WithLabelValues(c.kind, fromLabel, string(status.Phase)).Inc()
		if from != "" {
			c.recorder.Eventf(job, corev1.EventTypeNormal, "PhaseChanged", "Phase changed from %s to %s", from, status.Phase)
		}
	}
	return nil
}

// statusSeen reports whether the cached job includes the controller's last status write.
func (c *Controller) statusSeen(key string, job Job) bool {
	v, ok := c.written.Load(key)
	if !ok {
		return true
	}
	w := v.(writtenStatus)
	if w.resourceVersion == job.GetResourceVersion() || c.now().Sub(w.at) > statusWaitTTL {
		c.written.Delete(key)
		return true
	}
	return false
}

// indexed lists the objects of one job from a cache.
func indexed[T any](indexer cache.Indexer, jobUID string) ([]T, error) {
	objs, err := indexer.ByIndex(byJob, jobUID)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(T))
	}
	return out, nil
}

// Expectations are kept per job and resource.
var expectationKeys = []func(string) string{podsKey, servicesKey, secretsKey, configMapsKey, deploymentsKey}

func (c *Controller) expectationsMet(key string) bool {
	for _, k := range expectationKeys {
		if !c.expect.Satisfied(k(key)) {
			return false
		}
	}
	return true
}

func (c *Controller) forget(key string) {
	for _, k := range expectationKeys {
		c.expect.Forget(k(key))
	}
	c.written.Delete(key)
}

func podsKey(key string) string        { return key + "/pods" }
func servicesKey(key string) string    { return key + "/services" }
func secretsKey(key string) string     { return key + "/secrets" }
func configMapsKey(key string) string  { return key + "/configmaps" }
func deploymentsKey(key string) string { return key + "/deployments" }

// owned keeps the objects whose controller is job (by UID, never by name alone).
func owned[T metav1.Object](job Job, objs []T) []T {
	var out []T
	for _, o := range objs {
		if ref := metav1.GetControllerOf(o); ref != nil && ref.UID == job.GetUID() {
			out = append(out, o)
		}
	}
	return out
}

// --- event handlers ---

func (c *Controller) enqueue(obj any) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(key)
}

func (c *Controller) addJob(obj any) {
	if job, ok := obj.(Job); ok {
		c.statusSeen(mustKey(job), job) // clears the wait once our write shows
	}
	c.enqueue(obj)
}

func (c *Controller) deleteJob(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		c.forget(key)
		c.queue.Add(key)
	}
}

// ownerKey returns the key of the job of this kind that controls obj, if any.
func (c *Controller) ownerKey(obj metav1.Object) (string, bool) {
	ref := metav1.GetControllerOf(obj)
	gvk := c.adapter.GroupVersionKind()
	if ref == nil || ref.Kind != gvk.Kind || ref.APIVersion != gvk.GroupVersion().String() {
		return "", false
	}
	return obj.GetNamespace() + "/" + ref.Name, true
}

func (c *Controller) addPod(obj any) {
	pod := obj.(*corev1.Pod)
	key, ok := c.ownerKey(pod)
	if !ok {
		return
	}
	if pod.DeletionTimestamp != nil {
		c.expect.DeletionObserved(podsKey(key), pod.UID)
	} else {
		c.expect.CreationObserved(podsKey(key))
	}
	c.noteEnd(pod)
	c.enqueuePodChange(key)
}

// noteEnd records when a pod was first seen ended.
func (c *Controller) noteEnd(pod *corev1.Pod) {
	if podEnded(pod) {
		c.endSeen.LoadOrStore(pod.UID, c.now())
	}
}

func (c *Controller) updatePod(old, cur any) {
	oldPod, pod := old.(*corev1.Pod), cur.(*corev1.Pod)
	if oldPod.ResourceVersion == pod.ResourceVersion {
		return // a resync
	}
	key, ok := c.ownerKey(pod)
	if !ok {
		return
	}
	if pod.DeletionTimestamp != nil && oldPod.DeletionTimestamp == nil {
		// A graceful delete: count it now; the deletion itself is ignored by UID.
		c.expect.DeletionObserved(podsKey(key), pod.UID)
		c.queue.Add(key)
		return
	}
	c.noteEnd(pod)
	c.enqueuePodChange(key)
}

func (c *Controller) deletePod(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		c.endSeen.Delete(pod.UID)
	}
	c.deleteChild(obj, podsKey)
}

// enqueuePodChange syncs the job after a pod change; with BatchedPodStatusUpdates the syncs
// of changes within podBatchPeriod are one, and so is their status write.
func (c *Controller) enqueuePodChange(key string) {
	if features.Enabled(features.BatchedPodStatusUpdates) {
		c.queue.AddAfter(key, podBatchPeriod)
		return
	}
	c.queue.Add(key)
}

// addObject observes the creation of a service, secret, config map or deployment (an update
// when expectKey is nil).
func (c *Controller) addObject(expectKey func(string) string) func(any) {
	return func(obj any) {
		if o, ok := obj.(metav1.Object); ok {
			if key, ok := c.ownerKey(o); ok {
				if expectKey != nil {
					c.expect.CreationObserved(expectKey(key))
				}
				c.enqueuePodChange(key)
			}
		}
	}
}

func (c *Controller) deleteObject(expectKey func(string) string) func(any) {
	return func(obj any) { c.deleteChild(obj, expectKey) }
}

// deleteChild observes the deletion of a pod or service (possibly a tombstone) in the
// expectations under expectKey(job key), and syncs its job at once.
func (c *Controller) deleteChild(obj any, expectKey func(string) string) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	child, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	if key, ok := c.ownerKey(child); ok {
		c.expect.DeletionObserved(expectKey(key), child.GetUID())
		c.queue.Add(key)
	}
}

func mustKey(obj any) string {
	key, _ := cache.MetaNamespaceKeyFunc(obj)
	return key
}
