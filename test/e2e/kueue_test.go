package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	kueue "github.com/t9k-jobs/t9k-jobs/pkg/apis/kueue/v1beta2"
	kueueclient "github.com/t9k-jobs/t9k-jobs/pkg/client/kueue/clientset/versioned"
	"github.com/t9k-jobs/t9k-jobs/test/cluster"
)

// Jobs queued in Kueue (docs/queueing.md). The suite's cluster starts without Kueue, so the
// tests before these ran as on a cluster without it; the first test here shows a queued job
// waiting for Kueue, then starts Kueue (and restarts the controller, which looks for Kueue's
// API at start, with --scheduler=kueue); the suite's later tests run with Kueue present.

// podsReadyTimeout is the local Kueue's waitForPodsReady timeout: Kueue's own setting, for
// every queued job of the suite. The real node's jobs in a queue must get every pod Ready in
// it, startup probes included, while the suite loads both cores: at 15 s a busy node had
// one evicted before its pods were Ready (TestRealInPlaceRestartInKueueWithANodeGoneBad).
// The tests of the timeout itself wait for it, so it is no longer than that needs.
const podsReadyTimeout = 45 * time.Second

var kueueState struct {
	once    sync.Once
	err     error
	started bool
	client  kueueclient.Interface
}

// kueueServed reports whether the cluster serves Kueue's API.
func kueueServed() bool {
	_, err := env.kube.Discovery().ServerResourcesForGroupVersion(kueue.SchemeGroupVersion.String())
	return err == nil
}

// useKueue makes sure Kueue runs and the controller knows it: on the local cluster it starts
// Kueue once; on another cluster Kueue must be installed already.
func useKueue(t *testing.T) kueueclient.Interface {
	t.Helper()
	kueueState.once.Do(func() {
		if !kueueServed() {
			if env.cluster == nil {
				kueueState.err = fmt.Errorf("skip: the cluster under test does not serve Kueue's API")
				return
			}
			// A short waitForPodsReady timeout, so that a test sees Kueue evict a job whose
			// pods do not all start (only queued jobs are subject to it).
			// And a short wait for a lost MultiKueue worker (multikueue_test.go).
			if err := env.cluster.StartKueue(context.Background(), cluster.KueueOptions{PodsReadyTimeout: podsReadyTimeout, WorkerLostTimeout: workerLostTimeout}); err != nil {
				kueueState.err = err
				return
			}
		}
		kueueState.started = true
		// The controller looks for Kueue's API when it starts.
		controller.args = append(controller.args, "--scheduler=kueue")
		if !stopController() {
			kueueState.err = fmt.Errorf("the controller did not stop on SIGTERM")
			return
		}
		if err := startController(); err != nil {
			kueueState.err = err
			return
		}
		kueueState.client, kueueState.err = kueueclient.NewForConfig(env.config)
	})
	if err := kueueState.err; err != nil {
		if strings.HasPrefix(err.Error(), "skip: ") {
			t.Skip(strings.TrimPrefix(err.Error(), "skip: "))
		}
		t.Fatal(err)
	}
	return kueueState.client
}

// createKueueObjects creates Kueue objects from YAML (ClusterQueues, LocalQueues,
// WorkloadPriorityClasses); the cluster-wide ones are deleted when the test ends.
func createKueueObjects(t *testing.T, manifests string) {
	t.Helper()
	created, err := cluster.CreateObjects(context.Background(), env.dynamic, manifests)
	for _, obj := range created {
		if obj.GetNamespace() == "" {
			gvr, _ := meta.UnsafeGuessKindToResource(obj.GroupVersionKind())
			t.Cleanup(func() {
				_ = env.dynamic.Resource(gvr).Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{})
			})
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

// queueFor makes a ClusterQueue of cpu CPUs of the default flavor (preempting lower
// priorities within it) and a LocalQueue of the same name in ns.
func queueFor(t *testing.T, ns string, cpu int) string {
	t.Helper()
	return queueOfFlavor(t, ns, cluster.KueueResourceFlavor, cpu)
}

// queueOfFlavor is queueFor with another ResourceFlavor.
func queueOfFlavor(t *testing.T, ns, flavor string, cpu int) string {
	t.Helper()
	return queueOfCPU(t, ns, flavor, strconv.Itoa(cpu))
}

// queueOfCPU is queueOfFlavor with a quota of CPU of any quantity ("300m").
func queueOfCPU(t *testing.T, ns, flavor, cpu string) string {
	t.Helper()
	createKueueObjects(t, fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: %[1]s
spec:
  namespaceSelector: {}
  preemption:
    withinClusterQueue: LowerPriority
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: %[2]s
      resources:
      - {name: cpu, nominalQuota: "%[3]s"}
      - {name: memory, nominalQuota: 100Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: %[1]s
  namespace: %[1]s
spec:
  clusterQueue: %[1]s`, ns, flavor, cpu))
	return ns
}

// queuedJob is a GenericJob in queue of n replicas of 1 CPU that succeed after runTime.
func queuedJob(name, queue string, n int32, runTime string) *batch.GenericJob {
	r := replica("worker", "trainer")
	r.Replicas = ptr.To(n)
	r.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	exits(&r, 0, runTime)
	return &batch.GenericJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{kueue.LabelQueueName: queue}},
		Spec:       batch.GenericJobSpec{ReplicaSpecs: []batch.GenericReplicaSpec{r}},
	}
}

// podCounter counts, per job, the most pods that existed at once, and in all the namespace
// the most CPU that pods which had not ended asked for at once, from a pod informer.
type podCounter struct {
	mu      sync.Mutex
	live    map[string]map[string]bool // job -> pod names
	most    map[string]int
	running map[string]int64 // pod name -> milli-CPUs, while it has not ended
	mostCPU int64
}

func countPods(t *testing.T, ns string) *podCounter {
	t.Helper()
	pc := &podCounter{live: map[string]map[string]bool{}, most: map[string]int{}, running: map[string]int64{}}
	update := func(obj any, gone bool) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj, gone = tomb.Obj, true
		}
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		job := p.Labels[batch.LabelJobName]
		pc.mu.Lock()
		defer pc.mu.Unlock()
		if pc.live[job] == nil {
			pc.live[job] = map[string]bool{}
		}
		if gone {
			delete(pc.live[job], p.Name)
		} else {
			pc.live[job][p.Name] = true
		}
		pc.most[job] = max(pc.most[job], len(pc.live[job]))
		// A pod uses its CPU until it has ended or is gone (one being deleted still runs).
		if gone || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			delete(pc.running, p.Name)
		} else {
			cpu := int64(0)
			for _, c := range p.Spec.Containers {
				cpu += c.Resources.Requests.Cpu().MilliValue()
			}
			pc.running[p.Name] = cpu
		}
		total := int64(0)
		for _, cpu := range pc.running {
			total += cpu
		}
		pc.mostCPU = max(pc.mostCPU, total)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(env.kube, 0, informers.WithNamespace(ns))
	_, _ = factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { update(obj, false) },
		UpdateFunc: func(_, obj any) { update(obj, false) },
		DeleteFunc: func(obj any) { update(obj, true) },
	})
	stop := make(chan struct{})
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	return pc
}

func (pc *podCounter) mostOf(job string) int {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.most[job]
}

// mostCPUs is the most CPUs that the namespace's pods which had not ended asked for at once.
func (pc *podCounter) mostCPUs() float64 {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return float64(pc.mostCPU) / 1000
}

func workloadOf(t *testing.T, client kueueclient.Interface, ns, name string) *kueue.Workload {
	t.Helper()
	wl, err := client.KueueV1beta2().Workloads(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Workload %s: %v", name, err)
	}
	return wl
}

// TestKueueAbsentJobWaits: on a cluster without Kueue a job that asks for a queue creates
// nothing and says why; once Kueue runs (and the controller restarted), it is admitted and
// runs. (Skipped when Kueue runs already.)
func TestKueueAbsentJobWaits(t *testing.T) {
	if kueueState.started || kueueServed() {
		t.Skip("Kueue runs already")
	}
	ns := namespace(t)
	job := queuedJob("early", ns, 2, "1s")
	createJob(t, ns, job)
	got := waitJob(t, ns, job.Name, "waiting for Kueue", func(j *batch.GenericJob) bool {
		return j.Status.Condition(batch.JobConditionRunning).Reason == "KueueNotInstalled"
	})
	if msg := got.Status.Condition(batch.JobConditionRunning).Message; !strings.Contains(msg, ns) || !strings.Contains(msg, "install Kueue") {
		t.Errorf("Running condition %q: want the queue named and the fix", msg)
	}
	if names := podNames(t, ns); len(names) != 0 {
		t.Fatalf("a job waiting for Kueue created pods %v", names)
	}
	useKueue(t)
	queueFor(t, ns, 4)
	waitJob(t, ns, job.Name, "succeeded once Kueue runs", inPhase(batch.JobSucceeded))
}

// TestKueueQuotaFitsOneJob: two 4-replica jobs in a queue whose quota fits one. The first
// runs; the second has no pod at all until the first ends, then starts whole.
func TestKueueQuotaFitsOneJob(t *testing.T) {
	client := useKueue(t)
	parallel(t)
	ns := namespace(t)
	queue := queueFor(t, ns, 4)
	pods := countPods(t, ns)
	first, second := queuedJob("first", queue, 4, "4s"), queuedJob("second", queue, 4, "1s")
	createJob(t, ns, first)
	waitJob(t, ns, first.Name, "running", inPhase(batch.JobRunning))
	createJob(t, ns, second)
	waiting := waitJob(t, ns, second.Name, "queued for want of quota", func(j *batch.GenericJob) bool {
		running := j.Status.Condition(batch.JobConditionRunning)
		return running.Reason == "Queued" && strings.Contains(running.Message, "quota")
	})
	if waiting.Status.Phase != batch.JobPending {
		t.Errorf("queued job's phase %s, want Pending", waiting.Status.Phase)
	}
	wl := workloadOf(t, client, ns, "genericjob-second")
	if len(wl.Spec.PodSets) != 1 || wl.Spec.PodSets[0].Name != "worker" || wl.Spec.PodSets[0].Count != 4 || wl.Spec.QueueName != queue {
		t.Errorf("Workload spec %+v: want one pod set worker x4 in queue %s", wl.Spec, queue)
	}
	done := waitJob(t, ns, first.Name, "succeeded", inPhase(batch.JobSucceeded))
	if n := pods.mostOf(second.Name); n != 0 {
		t.Fatalf("the second job had %d pods while the first ran (%s): a queued job must have none", n, done.Status.Phase)
	}
	waitWorkloadFinished(t, client, ns, "genericjob-first")
	waitJob(t, ns, second.Name, "running", func(j *batch.GenericJob) bool {
		return j.Status.Phase == batch.JobRunning || j.Status.Phase == batch.JobSucceeded
	})
	if n := pods.mostOf(second.Name); n != 4 {
		t.Errorf("the second job ran with at most %d pods at once, want all 4", n)
	}
	waitJob(t, ns, second.Name, "succeeded", inPhase(batch.JobSucceeded))
}

// waitWorkloadFinished waits until a Workload says Finished: the controller writes it just
// after the job's final status.
func waitWorkloadFinished(t *testing.T, client kueueclient.Interface, ns, name string) *kueue.Workload {
	t.Helper()
	var wl *kueue.Workload
	waitFor(t, "Workload "+name+" Finished", jobTimeout, func(ctx context.Context) (bool, error) {
		var err error
		wl, err = client.KueueV1beta2().Workloads(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished), nil
	})
	return wl
}

// TestKueuePreemption: a higher-priority job preempts a running lower-priority one; the low
// one's pods go, it waits, and it finishes later, its restart counts untouched, its status and
// events saying what happened.
func TestKueuePreemption(t *testing.T) {
	client := useKueue(t)
	parallel(t)
	ns := namespace(t)
	queue := queueFor(t, ns, 4)
	createKueueObjects(t, fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata:
  name: %[1]s-low
value: 10
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata:
  name: %[1]s-high
value: 1000`, ns))
	low := queuedJob("low", queue, 4, "6s")
	low.Labels[kueue.LabelPriorityClass] = ns + "-low"
	createJob(t, ns, low)
	waitJob(t, ns, low.Name, "running", inPhase(batch.JobRunning))
	if wl := workloadOf(t, client, ns, "genericjob-low"); wl.Spec.Priority == nil || *wl.Spec.Priority != 10 {
		t.Errorf("low Workload priority %v, want 10 from its class", wl.Spec.Priority)
	}

	high := queuedJob("high", queue, 4, "2s")
	high.Labels[kueue.LabelPriorityClass] = ns + "-high"
	createJob(t, ns, high)
	highUID := string(getJob(t, ns, high.Name).UID)
	preempted := waitJob(t, ns, low.Name, "preempted", func(j *batch.GenericJob) bool {
		return j.Status.Condition(batch.JobConditionRunning).Reason == "Preempted"
	})
	if preempted.Status.Phase != batch.JobPending {
		t.Errorf("preempted job's phase %s, want Pending", preempted.Status.Phase)
	}
	// Kueue names the preempting job by its Workload's kueue.x-k8s.io/job-uid label, and the
	// controller by its kind and name.
	if wl := workloadOf(t, client, ns, "genericjob-high"); wl.Labels[kueue.LabelJobUID] != highUID {
		t.Errorf("the high Workload's labels %v, want %s: %s", wl.Labels, kueue.LabelJobUID, highUID)
	}
	msg := preempted.Status.Condition(batch.JobConditionRunning).Message
	for _, want := range []string{"JobUID: " + highUID + ")", "GenericJob " + ns + "/high took its place."} {
		if !strings.Contains(msg, want) {
			t.Errorf("the preempted job's Running message %q does not say %q", msg, want)
		}
	}
	waitFor(t, "the low job's pods gone", jobTimeout, func(ctx context.Context) (bool, error) {
		pods, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batch.LabelJobName + "=low"})
		return err == nil && len(pods.Items) == 0, nil
	})
	waitJob(t, ns, high.Name, "succeeded", inPhase(batch.JobSucceeded))
	done := waitJob(t, ns, low.Name, "succeeded after the high one", inPhase(batch.JobSucceeded))
	for _, task := range done.Status.Tasks {
		if task.RestartCount != 0 {
			t.Errorf("type %s counts %d restarts: a preemption is not a restart", task.Type, task.RestartCount)
		}
		for _, r := range task.Replicas {
			if r.RestartCount != 0 || r.Phase != batch.ReplicaSucceeded {
				t.Errorf("replica %s: %+v, want Succeeded without restarts", r.Name, r)
			}
		}
	}
	if events, ok := eventsSaying(t, ns, "low", "Preempted", "Requeued", "Admitted"); !ok {
		t.Errorf("the low job's events do not say it was Preempted, Requeued and Admitted:\n%s", events)
	}
}

// TestKueuePriorityClassCreatedLater: a job whose WorkloadPriorityClass does not exist waits,
// naming it; the class's creation makes its Workload within seconds (the controller watches
// the classes), with the class's priority, and the job runs.
func TestKueuePriorityClassCreatedLater(t *testing.T) {
	client := useKueue(t)
	parallel(t)
	ns := namespace(t)
	queue := queueFor(t, ns, 4)
	job := queuedJob("later", queue, 2, "1s")
	job.Labels[kueue.LabelPriorityClass] = ns + "-later"
	createJob(t, ns, job)
	waitJob(t, ns, job.Name, "waiting for its priority class", func(j *batch.GenericJob) bool {
		running := j.Status.Condition(batch.JobConditionRunning)
		return running.Reason == "Queued" && strings.Contains(running.Message, `WorkloadPriorityClass "`+ns+`-later"`)
	})
	if _, err := client.KueueV1beta2().Workloads(ns).Get(context.Background(), "genericjob-later", metav1.GetOptions{}); err == nil {
		t.Fatal("a Workload was made before its priority class existed")
	}
	createKueueObjects(t, fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata:
  name: %s-later
value: 500`, ns))
	created := time.Now()
	waitFor(t, "the Workload, once its class exists", 5*time.Second, func(ctx context.Context) (bool, error) {
		_, err := client.KueueV1beta2().Workloads(ns).Get(ctx, "genericjob-later", metav1.GetOptions{})
		return err == nil, nil
	})
	t.Logf("the Workload was made %s after its class", time.Since(created).Round(time.Millisecond))
	if wl := workloadOf(t, client, ns, "genericjob-later"); wl.Spec.Priority == nil || *wl.Spec.Priority != 500 {
		t.Errorf("Workload priority %v, want the class's 500", wl.Spec.Priority)
	}
	waitJob(t, ns, job.Name, "succeeded", inPhase(batch.JobSucceeded))
}

// TestKueueQuotaKeptWhileWorkersRun: Kueue never counts less than what runs. In a queue of 4
// CPUs, MPIJobs of 4 CPUs (a launcher and 3 workers of 1 CPU): the first succeeds, its
// workers kept running (cleanUpWorkers: false), and keeps their quota, saying so, until the
// test deletes them, while its ended launcher's CPU goes back at once (a 1-CPU job runs in
// it); the second then starts, succeeds with its workers cleaned up
// (cleanUpWorkers: true), and the third starts once they are gone. Never more than 4 CPUs of
// pods run at once.
func TestKueueQuotaKeptWhileWorkersRun(t *testing.T) {
	client := useKueue(t)
	parallel(t)
	ns := namespace(t)
	queue := queueFor(t, ns, 4)
	pods := countPods(t, ns)
	create := func(name string, cleanUpWorkers bool) {
		t.Helper()
		tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "mpi-worker", Image: "trainer",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
		launcherExits(&tmpl, "0") // the workers run until deleted
		job := &batch.MPIJob{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{kueue.LabelQueueName: queue}}, Spec: batch.MPIJobSpec{
			Worker:    batch.MPIWorkerSpec{Replicas: ptr.To[int32](3), Cmd: []string{"train"}, Template: tmpl},
			RunPolicy: batch.WorkerCleanUpPolicy{CleanUpWorkers: cleanUpWorkers},
		}}
		if _, err := env.jobs.BatchV1beta1().MPIJobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	phase := func(phases ...batch.JobPhase) func(*batch.JobStatus) bool {
		return func(s *batch.JobStatus) bool { return slices.Contains(phases, s.Phase) }
	}
	queued := func(s *batch.JobStatus) bool { return s.Condition(batch.JobConditionRunning).Reason == "Queued" }

	create("first", false)
	waitStatus(t, "first running", mpiStatus(ns, "first"), phase(batch.JobRunning, batch.JobSucceeded))
	create("second", true)
	waitStatus(t, "second queued", mpiStatus(ns, "second"), queued)
	waitStatus(t, "first succeeded", mpiStatus(ns, "first"), phase(batch.JobSucceeded))
	var events string
	waitFor(t, "first's QuotaKept event", jobTimeout, func(context.Context) (bool, error) {
		events = eventsOf(t, ns, "first")
		return strings.Contains(events, "QuotaKept"), nil
	})
	if want := "the 3 replicas of the job that still run (first-worker-0, first-worker-1, first-worker-2)"; !strings.Contains(events, want) {
		t.Errorf("first's events do not say %q:\n%s", want, events)
	}
	if c := meta.FindStatusCondition(workloadOf(t, client, ns, "mpijob-first").Status.Conditions, kueue.WorkloadFinished); c != nil && c.Status == metav1.ConditionTrue {
		t.Fatalf("first's Workload is Finished while its workers run: %+v", c)
	}
	// The ended launcher's CPU goes back to the queue at once: a 1-CPU job runs beside
	// first's workers while second, which needs 4, still waits.
	waitFor(t, "first's launcher reclaimable", jobTimeout, func(context.Context) (bool, error) {
		got := workloadOf(t, client, ns, "mpijob-first").Status.ReclaimablePods
		return slices.Equal(got, []kueue.ReclaimablePod{{Name: "launcher", Count: 1}}), nil
	})
	small := queuedJob("small", queue, 1, "1s")
	createJob(t, ns, small)
	waitJob(t, ns, small.Name, "the 1-CPU job succeeded in the launcher's quota", func(j *batch.GenericJob) bool { return j.Status.Phase == batch.JobSucceeded })
	if n := pods.mostOf("second"); n != 0 {
		t.Fatalf("second had %d pods while first's workers ran", n)
	}
	if s, err := mpiStatus(ns, "second")(context.Background()); err != nil || !queued(s) {
		t.Fatalf("second is not queued while first's workers run: %v %+v", err, s)
	}

	workers := metav1.ListOptions{LabelSelector: batch.LabelJobName + "=first," + batch.LabelReplicaType + "=" + batch.WorkerType}
	if err := env.kube.CoreV1().Pods(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, workers); err != nil {
		t.Fatal(err)
	}
	waitWorkloadFinished(t, client, ns, "mpijob-first")
	waitStatus(t, "second running once first's workers are gone", mpiStatus(ns, "second"), phase(batch.JobRunning, batch.JobSucceeded))
	create("third", true)
	waitStatus(t, "third queued", mpiStatus(ns, "third"), queued)
	waitStatus(t, "second succeeded", mpiStatus(ns, "second"), phase(batch.JobSucceeded))
	waitWorkloadFinished(t, client, ns, "mpijob-second")
	waitStatus(t, "third succeeded once second's workers are gone", mpiStatus(ns, "third"), phase(batch.JobSucceeded))
	waitWorkloadFinished(t, client, ns, "mpijob-third")
	if n := pods.mostOf("third"); n != 4 {
		t.Errorf("third ran with at most %d pods, want its launcher and 3 workers", n)
	}
	if most := pods.mostCPUs(); most > 4 {
		t.Errorf("pods asking for %g CPUs ran at once in a queue of 4", most)
	}
}

// TestKueueMissingLocalQueue: a job in a LocalQueue that does not exist waits, its condition
// naming the queue, and starts once the queue is created.
func TestKueueMissingLocalQueue(t *testing.T) {
	useKueue(t)
	parallel(t)
	ns := namespace(t)
	job := queuedJob("lost", ns, 2, "1s")
	createJob(t, ns, job)
	waitJob(t, ns, job.Name, "waiting for the missing LocalQueue", func(j *batch.GenericJob) bool {
		running := j.Status.Condition(batch.JobConditionRunning)
		return running.Reason == "Queued" && strings.Contains(running.Message, ns) && strings.Contains(running.Message, "doesn't exist")
	})
	if names := podNames(t, ns); len(names) != 0 {
		t.Fatalf("pods %v of a job whose queue does not exist", names)
	}
	queueFor(t, ns, 4)
	waitJob(t, ns, job.Name, "succeeded once its queue exists", inPhase(batch.JobSucceeded))
}

// TestKueueEveryKind: each kind runs through Kueue once, its Workload holding every replica
// type (an MPIJob's launcher, a TensorFlow job's chief, workers and ps). The XGBoost job asks
// through spec.scheduler.t9kScheduler (the controller runs with --scheduler=kueue).
func TestKueueEveryKind(t *testing.T) {
	client := useKueue(t)
	parallel(t)
	ns := namespace(t)
	queue := queueFor(t, ns, 100)
	labels := map[string]string{kueue.LabelQueueName: queue}
	ctx := context.Background()
	cpu := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	// template is a replica's pod template; with an exit code, its pods end so after 1s.
	template := func(code string) corev1.PodTemplateSpec {
		tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "trainer",
			Command: []string{"train"}, Resources: corev1.ResourceRequirements{Requests: cpu}}}}}
		if code != "" {
			annotate(&tmpl, code, "1s")
		}
		return tmpl
	}
	type check struct {
		name     string
		podSets  map[string]int32
		finished func(ctx context.Context) (*batch.JobStatus, error)
	}
	var checks []check

	// The launcher kinds clean their workers up: a queued job's quota goes once none of its
	// pods runs (TestKueueQuotaKeptWhileWorkersRun).
	mpi := &batch.MPIJob{ObjectMeta: metav1.ObjectMeta{Name: "mpi", Labels: labels}, Spec: batch.MPIJobSpec{
		Worker:    batch.MPIWorkerSpec{Replicas: ptr.To[int32](2), Cmd: []string{"train"}, Template: template("")},
		RunPolicy: batch.WorkerCleanUpPolicy{CleanUpWorkers: true},
	}}
	mpi.Spec.Worker.Template.Spec.Containers[0].Name = "mpi-worker"
	launcherExits(&mpi.Spec.Worker.Template, "0") // workers run until the launcher ends
	if _, err := env.jobs.BatchV1beta1().MPIJobs(ns).Create(ctx, mpi, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	checks = append(checks, check{"mpijob-mpi", map[string]int32{"launcher": 1, "worker": 2}, mpiStatus(ns, "mpi")})

	tf := &batch.TensorFlowTrainingJob{ObjectMeta: metav1.ObjectMeta{Name: "tf", Labels: labels}, Spec: batch.TensorFlowTrainingJobSpec{
		ReplicaSpecs: []batch.TrainingReplicaSpec{
			{Type: "chief", Replicas: ptr.To[int32](1), Template: template("0")},
			{Type: "worker", Replicas: ptr.To[int32](2), Template: template("")},
			{Type: "ps", Replicas: ptr.To[int32](1), Template: template("")},
		},
	}}
	if _, err := env.jobs.BatchV1beta1().TensorFlowTrainingJobs(ns).Create(ctx, tf, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	checks = append(checks, check{"tensorflowtrainingjob-tf", map[string]int32{"chief": 1, "worker": 2, "ps": 1}, tfStatus(ns, "tf")})

	xgb := &batch.XGBoostTrainingJob{ObjectMeta: metav1.ObjectMeta{Name: "xgb"}, Spec: batch.XGBoostTrainingJobSpec{
		Scheduler: &batch.SchedulePolicy{T9kScheduler: &batch.T9kScheduler{Queue: queue, Priority: 50}},
		ReplicaSpecs: []batch.TrainingReplicaSpec{
			{Type: "master", Replicas: ptr.To[int32](1), Template: template("0")},
			{Type: "worker", Replicas: ptr.To[int32](2), Template: template("")},
		},
	}}
	if _, err := env.jobs.BatchV1beta1().XGBoostTrainingJobs(ns).Create(ctx, xgb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	checks = append(checks, check{"xgboosttrainingjob-xgb", map[string]int32{"master": 1, "worker": 2}, func(ctx context.Context) (*batch.JobStatus, error) {
		j, err := env.jobs.BatchV1beta1().XGBoostTrainingJobs(ns).Get(ctx, "xgb", metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return &j.Status, nil
	}})

	caj := &batch.ColossalAIJob{ObjectMeta: metav1.ObjectMeta{Name: "caj", Labels: labels}, Spec: batch.ColossalAIJobSpec{
		Launcher:  batch.ColossalAILauncher{Image: "trainer"},
		Worker:    batch.ColossalAIWorkerSpec{Replicas: ptr.To[int32](2), Command: []string{"train.py"}, Template: template("")},
		RunPolicy: batch.WorkerCleanUpPolicy{CleanUpWorkers: true},
	}}
	caj.Spec.Worker.Template.Spec.Containers[0].Name = "worker"
	launcherExits(&caj.Spec.Worker.Template, "0")
	if _, err := env.jobs.BatchV1beta1().ColossalAIJobs(ns).Create(ctx, caj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	checks = append(checks, check{"colossalaijob-caj", map[string]int32{"launcher": 1, "worker": 2}, func(ctx context.Context) (*batch.JobStatus, error) {
		j, err := env.jobs.BatchV1beta1().ColossalAIJobs(ns).Get(ctx, "caj", metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return &j.Status, nil
	}})

	gj := queuedJob("gj", queue, 2, "1s")
	createJob(t, ns, gj)
	checks = append(checks, check{"genericjob-gj", map[string]int32{"worker": 2}, func(ctx context.Context) (*batch.JobStatus, error) {
		j, err := env.jobs.BatchV1beta1().GenericJobs(ns).Get(ctx, "gj", metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return &j.Status, nil
	}})

	for _, c := range checks {
		waitStatus(t, c.name+" succeeded", c.finished, func(s *batch.JobStatus) bool { return s.Phase == batch.JobSucceeded })
		wl := waitWorkloadFinished(t, client, ns, c.name)
		got := map[string]int32{}
		for _, ps := range wl.Spec.PodSets {
			got[ps.Name] = ps.Count
		}
		if fmt.Sprint(got) != fmt.Sprint(c.podSets) {
			t.Errorf("Workload %s has pod sets %v, want %v", c.name, got, c.podSets)
		}
		// PodsReady went True while every replica ran, and stays so once the job ended.
		if r := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPodsReady); r == nil || r.Status != metav1.ConditionTrue {
			t.Errorf("Workload %s: PodsReady %+v, want True", c.name, r)
		}
	}
	xgbWl := workloadOf(t, client, ns, "xgboosttrainingjob-xgb")
	if xgbWl.Spec.QueueName != queue || xgbWl.Spec.Priority == nil || *xgbWl.Spec.Priority != 50 {
		t.Errorf("the XGBoost job's Workload: queue %q priority %v, want %s and 50 from t9kScheduler", xgbWl.Spec.QueueName, xgbWl.Spec.Priority, queue)
	}
	pods, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batch.LabelJobName + "=xgb"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.SchedulerName == batch.T9kSchedulerName {
			t.Errorf("pod %s asks for T9k Scheduler though Kueue queued its job", p.Name)
		}
	}
}

// TestKueueFlavorPlacesPods: the flavor Kueue assigns decides where the pods go: its node
// labels become their node selector, its tolerations theirs, and they land on the one node
// that has the labels.
func TestKueueFlavorPlacesPods(t *testing.T) {
	useKueue(t)
	parallel(t)
	ns := namespace(t)
	const node = "kwok-node-2"
	labelKey := "e2e.t9k/pool"
	setNodeLabel(t, node, labelKey, ns)
	t.Cleanup(func() { setNodeLabel(t, node, labelKey, "") })
	createKueueObjects(t, fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: %[1]s
spec:
  nodeLabels:
    %[2]s: %[1]s
  tolerations:
  - {key: %[2]s, operator: Exists, effect: NoSchedule}`, ns, labelKey))
	queueOfFlavor(t, ns, ns, 8)
	job := queuedJob("placed", ns, 3, "2s")
	createJob(t, ns, job)
	waitJob(t, ns, job.Name, "running", inPhase(batch.JobRunning))
	pods, err := env.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(pods.Items) != 3 {
		t.Fatalf("%d pods (%v), want 3", len(pods.Items), err)
	}
	for _, p := range pods.Items {
		tolerated := slices.ContainsFunc(p.Spec.Tolerations, func(tol corev1.Toleration) bool { return tol.Key == labelKey })
		if p.Spec.NodeSelector[labelKey] != ns || !tolerated || p.Spec.NodeName != node {
			t.Errorf("pod %s: node selector %v, tolerations %v, on node %q: want the flavor's label and toleration, on %s",
				p.Name, p.Spec.NodeSelector, p.Spec.Tolerations, p.Spec.NodeName, node)
		}
	}
	waitJob(t, ns, job.Name, "succeeded", inPhase(batch.JobSucceeded))
}

// setNodeLabel sets a node's label (value "": removes it).
func setNodeLabel(t *testing.T, node, key, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
	if value == "" {
		patch = fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, key)
	}
	if _, err := env.kube.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestKueuePodsReadyTimeoutEvicts: all or nothing. An admitted job one of whose pods never
// starts does not hold the others' resources: when Kueue's waitForPodsReady timeout passes
// (the controller never reports PodsReady), Kueue evicts it, its pods go, it gives its
// admission back and waits; /metrics counts the eviction.
func TestKueuePodsReadyTimeoutEvicts(t *testing.T) {
	if env.cluster == nil {
		t.Skip("needs the local Kueue's short waitForPodsReady timeout")
	}
	client := useKueue(t)
	parallel(t)
	ns := namespace(t)
	queue := queueFor(t, ns, 4)
	job := queuedJob("stuck", queue, 1, "")
	delete(job.Spec.ReplicaSpecs[0].Template.Annotations, exitCodeAnnotation) // runs until deleted
	stuck := replica("stuck", "trainer")
	stuck.Template.Spec.NodeSelector = map[string]string{"e2e.t9k/no-such-node": "true"} // stays Pending
	job.Spec.ReplicaSpecs = append(job.Spec.ReplicaSpecs, stuck)
	createJob(t, ns, job)
	waitFor(t, "both pods created, one of them running", jobTimeout, func(ctx context.Context) (bool, error) {
		return len(podNames(t, ns)) == 2, nil
	})
	evicted := waitJobWithin(t, ns, job.Name, "evicted for want of ready pods", podsReadyTimeout+jobTimeout, func(j *batch.GenericJob) bool {
		running := j.Status.Condition(batch.JobConditionRunning)
		return running.Reason == "Evicted" && strings.Contains(running.Message, "PodsReadyTimeout")
	})
	if evicted.Status.Phase != batch.JobPending {
		t.Errorf("evicted job's phase %s, want Pending", evicted.Status.Phase)
	}
	waitFor(t, "its pods gone and its admission handed back", podsReadyTimeout+jobTimeout, func(ctx context.Context) (bool, error) {
		wl, err := client.KueueV1beta2().Workloads(ns).Get(ctx, "genericjob-stuck", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		reserved := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
		return len(podNames(t, ns)) == 0 && wl.Status.Admission == nil && reserved != nil && reserved.Status == metav1.ConditionFalse, nil
	})
	if want := `t9k_job_queue_evictions_total{kind="GenericJob",reason="PodsReadyTimeout"}`; !controllerMetrics(t).Has(want) {
		t.Errorf("/metrics lacks %s", want)
	}
}
