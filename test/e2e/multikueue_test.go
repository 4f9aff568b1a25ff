package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/t9k-jobs/t9k-jobs/examples"
	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	kueue "github.com/t9k-jobs/t9k-jobs/pkg/apis/kueue/v1beta2"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
	"github.com/t9k-jobs/t9k-jobs/test/cluster"
	"github.com/t9k-jobs/t9k-jobs/test/harness"
)

// Jobs across clusters with MultiKueue (docs/queueing.md, "Across clusters with MultiKueue").
// The suite's cluster is the manager; two more local clusters, each with Kueue and the
// controller, are its workers. They start with the first test that needs them and stop when
// the suite ends. TestMultiKueueRealMPIJob turns the roles round, since the real node is the
// suite's cluster's: worker-1 dispatches to the suite's cluster.

// multiKueueCheck names the manager's AdmissionCheck, MultiKueueConfig and ClusterQueue.
const multiKueueCheck = cluster.MultiKueueQueue

// mkWorker is one worker cluster.
type mkWorker struct {
	name       string
	cluster    *cluster.Cluster
	kube       kubernetes.Interface
	jobs       versioned.Interface
	dynamic    dynamic.Interface
	controller *harness.Process
}

var mkState struct {
	once    sync.Once
	err     error
	workers []*mkWorker
}

var workloadsGVR = schema.GroupVersionResource{Group: kueue.GroupName, Version: "v1beta2", Resource: "workloads"}

// useMultiKueue starts the workers once and returns them.
func useMultiKueue(t *testing.T) []*mkWorker {
	t.Helper()
	useKueue(t)
	if env.cluster == nil {
		t.Skip("MultiKueue's workers are local clusters: the suite runs against another cluster")
	}
	mkState.once.Do(func() { mkState.workers, mkState.err = startWorkers(context.Background()) })
	if mkState.err != nil {
		t.Fatal(mkState.err)
	}
	return mkState.workers
}

// parallelMultiKueue is parallel for a test on MultiKueue's workers: Kueue first, in the
// sequential phase (its first start restarts the controller), then the workers, started once
// by the first test that holds them, beside the tests that need no workers.
//
// Every worker is connected before the test goes on: MultiKueue dispatches a Workload to the
// workers connected when it reserves quota and does not come back to one that connects later,
// and a test before may have stopped a worker's API server.
func parallelMultiKueue(t *testing.T, uses ...use) []*mkWorker {
	t.Helper()
	useKueue(t)
	parallel(t, uses...)
	workers := useMultiKueue(t)
	for _, w := range workers {
		waitWorkerActive(t, w)
	}
	return workers
}

// startWorkers starts two worker clusters with Kueue, the CRDs and a controller each, and
// connects the manager to them.
func startWorkers(ctx context.Context) ([]*mkWorker, error) {
	binDir, err := toolsBinDir()
	if err != nil {
		return nil, err
	}
	var workers []*mkWorker
	clusters := map[string]*cluster.Cluster{}
	for _, name := range []string{"worker-1", "worker-2"} {
		dir, err := os.MkdirTemp("", "t9k-e2e-"+name+"-")
		if err != nil {
			return nil, err
		}
		c, err := cluster.Start(ctx, cluster.Options{BinDir: binDir, Dir: dir, Nodes: 2, Kueue: true, Progress: cluster.WorkerProgress(name),
			BeforeControllers: cluster.InstallCRDs})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		w := &mkWorker{name: name, cluster: c}
		workers = append(workers, w)
		mkState.workers = workers // stopped at the end of the suite, whatever happens next
		if w.kube, err = kubernetes.NewForConfig(c.Config); err != nil {
			return nil, err
		}
		if w.jobs, err = versioned.NewForConfig(c.Config); err != nil {
			return nil, err
		}
		if w.dynamic, err = dynamic.NewForConfig(c.Config); err != nil {
			return nil, err
		}
		addr, err := harness.FreeAddr()
		if err != nil {
			return nil, err
		}
		// No progress endpoint: the workers' controllers run beside the suite's on this machine,
		// and no worker's pod reports.
		w.controller, err = harness.Start(controller.binary, []string{"--kubeconfig", c.Kubeconfig, "--leader-elect=false",
			"--bind-address", addr, "--scheduler=kueue", "--progress-bind-address=0", "-v=2"}, harness.Options{Log: filepath.Join(dir, "logs", "controller.log")})
		if err != nil {
			return nil, err
		}
		if err := harness.WaitFor(ctx, name+"'s controller to run jobs", 100*time.Millisecond, 30*time.Second, func(context.Context) (bool, error) {
			return runsJobs("http://" + addr), nil
		}); err != nil {
			return nil, err
		}
		clusters[name] = c
	}
	if err := env.cluster.SetUpMultiKueue(ctx, clusters); err != nil {
		return nil, err
	}
	// Active: MultiKueue reached a worker, with the project's kinds served there.
	err = harness.WaitFor(ctx, "the MultiKueue AdmissionCheck to be active", 200*time.Millisecond, 60*time.Second, func(ctx context.Context) (bool, error) {
		ac, err := env.dynamic.Resource(schema.GroupVersionResource{Group: kueue.GroupName, Version: "v1beta2", Resource: "admissionchecks"}).Get(ctx, multiKueueCheck, metav1.GetOptions{})
		return err == nil && cluster.ConditionTrue(ac, "Active"), nil
	})
	return workers, err
}

// stopMultiKueue stops the workers when the suite ends, keeping their logs when failed.
func stopMultiKueue(failed bool) {
	mkState.once.Do(func() {}) // none started: none to start later
	workers := mkState.workers
	mkState.workers = nil
	var stopped sync.WaitGroup // the workers stop side by side: each waits on its own processes
	for _, w := range workers {
		stopped.Go(func() {
			if w.controller != nil {
				_ = w.controller.Stop(10 * time.Second)
			}
			_ = w.cluster.Stop()
			if failed {
				fmt.Fprintf(os.Stderr, "e2e: %s's logs kept in %s\n", w.name, filepath.Join(w.cluster.Dir, "logs"))
			} else {
				_ = os.RemoveAll(w.cluster.Dir)
			}
		})
	}
	stopped.Wait()
}

// waitWorkerActive waits until the manager's MultiKueue reaches a worker (its
// MultiKueueCluster Active): after an outage it reconnects with a backoff.
func waitWorkerActive(t *testing.T, w *mkWorker) {
	t.Helper()
	gvr := schema.GroupVersionResource{Group: kueue.GroupName, Version: "v1beta2", Resource: "multikueueclusters"}
	waitFor(t, "MultiKueue to reach "+w.name, 3*time.Minute, func(ctx context.Context) (bool, error) {
		c, err := env.dynamic.Resource(gvr).Get(ctx, w.name, metav1.GetOptions{})
		return err == nil && cluster.ConditionTrue(c, "Active"), nil
	})
}

// waitWorkerServes waits until a job submitted to worker w itself, in namespace ns, runs
// there. After its API server is back, the worker's Kueue, controller and kwok reconnect by
// their own backoff (client-go's reflectors wait up to a minute): the tests after one that
// stopped the API server need them back, not only the manager's connection.
func waitWorkerServes(t *testing.T, w *mkWorker, ns string) {
	t.Helper()
	job := multiKueueJob("probe", 1)
	job.Spec.Lifecycle.ManagedBy = "" // run by the worker's own controller, queued in its own Kueue
	jobs := w.jobs.BatchV1beta1().GenericJobs(ns)
	start := time.Now()
	if _, err := jobs.Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a job submitted to "+w.name+" running there", 3*time.Minute, func(ctx context.Context) (bool, error) {
		j, err := jobs.Get(ctx, job.Name, metav1.GetOptions{})
		return err == nil && j.Status.Phase == batch.JobRunning, nil
	})
	t.Logf("a job submitted to %s ran there in %.1fs", w.name, time.Since(start).Seconds())
	if err := jobs.Delete(context.Background(), job.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// mkNamespace makes the test's namespace on the manager and on every worker, with a
// LocalQueue "mk" in each: on the manager to the MultiKueue ClusterQueue, on the workers to
// their own (the Workload MultiKueue makes there keeps its queue's name).
func mkNamespace(t *testing.T, workers []*mkWorker) string {
	t.Helper()
	ns := namespace(t)
	ctx := context.Background()
	queue := func(client dynamic.Interface, clusterQueue string) error {
		_, err := cluster.CreateObjects(ctx, client, fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: mk, namespace: %s}
spec: {clusterQueue: %s}
`, ns, clusterQueue))
		return err
	}
	if err := queue(env.dynamic, multiKueueCheck); err != nil {
		t.Fatal(err)
	}
	for _, w := range workers {
		if _, err := w.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := queue(w.dynamic, cluster.KueueClusterQueue); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	}
	return ns
}

// copies lists the workers that hold a GenericJob of the name.
func copies(ctx context.Context, workers []*mkWorker, ns, name string) []*mkWorker {
	var out []*mkWorker
	for _, w := range workers {
		if _, err := w.jobs.BatchV1beta1().GenericJobs(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			out = append(out, w)
		}
	}
	return out
}

// waitCopyRunning waits until one worker holds a copy of the GenericJob and it runs there,
// and returns that worker.
func waitCopyRunning(t *testing.T, workers []*mkWorker, ns, name, what string) *mkWorker {
	t.Helper()
	var worker *mkWorker
	waitFor(t, what, 90*time.Second, func(ctx context.Context) (bool, error) {
		found := copies(ctx, workers, ns, name)
		if len(found) != 1 {
			return false, nil
		}
		worker = found[0]
		j, err := worker.jobs.BatchV1beta1().GenericJobs(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && j.Status.Phase == batch.JobRunning, nil
	})
	return worker
}

// multiKueueJob is a GenericJob for the manager's MultiKueue queue.
func multiKueueJob(name string, replicas int32) *batch.GenericJob {
	r := replica("worker", "trainer")
	r.Replicas = ptr.To(replicas)
	return &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{kueue.LabelQueueName: "mk"}},
		Spec: batch.GenericJobSpec{ReplicaSpecs: []batch.GenericReplicaSpec{r}, Lifecycle: batch.Lifecycle{ManagedBy: batch.MultiKueueControllerName}}}
}

// TestMultiKueueRunsOnAWorker: a GenericJob submitted on the manager never gets a pod there;
// exactly one copy runs on a worker, under exactly one Workload (the one MultiKueue made,
// adopted); the manager's job shows the copy's phase and replicas, and ends Succeeded, its
// Workload Finished and naming the worker.
func TestMultiKueueRunsOnAWorker(t *testing.T) {
	workers := parallelMultiKueue(t, multiKueue.all())
	ns := mkNamespace(t, workers)
	ctx := context.Background()
	job := multiKueueJob("mk-run", 2)
	exits(&job.Spec.ReplicaSpecs[0], 0, "4s")
	added := watchCopiesAdded(t, workers, ns, job.Name)
	createJob(t, ns, job)

	var worker *mkWorker
	var copied *batch.GenericJob
	waitFor(t, "a copy running on a worker", 90*time.Second, func(ctx context.Context) (bool, error) {
		found := copies(ctx, workers, ns, job.Name)
		if len(found) > 1 {
			return false, fmt.Errorf("copies on %d workers", len(found))
		}
		if len(found) == 1 {
			worker = found[0]
			j, err := worker.jobs.BatchV1beta1().GenericJobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
			copied = j
			return err == nil && j.Status.Phase == batch.JobRunning, nil
		}
		return false, nil
	})
	t.Logf("running on %s", worker.name)
	// The prebuilt Workload's name: an annotation since Kueue v0.18, a label before.
	prebuilt := copied.Annotations[kueue.AnnotationPrebuiltWorkload]
	if prebuilt == "" {
		prebuilt = copied.Labels[kueue.LabelPrebuiltWorkload]
	}
	if copied.Spec.ManagedBy != "" || prebuilt == "" {
		t.Errorf("the copy's managedBy %q, labels %v and annotations %v: want no managedBy, and the prebuilt Workload's name", copied.Spec.ManagedBy, copied.Labels, copied.Annotations)
	}
	wls, err := worker.dynamic.Resource(workloadsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(wls.Items) != 1 || wls.Items[0].GetName() != prebuilt {
		t.Errorf("%s holds %d Workloads, want the prebuilt one alone", worker.name, len(wls.Items))
	} else if ref := metav1.GetControllerOf(&wls.Items[0]); ref == nil || ref.UID != copied.UID {
		t.Errorf("the worker's Workload is controlled by %v, want the copy of the job", ref)
	}
	// The manager shows the copy's status.
	waitJob(t, ns, job.Name, "Running, as on the worker", func(j *batch.GenericJob) bool {
		return j.Status.Phase == batch.JobRunning && len(j.Status.Tasks) == 1 && len(j.Status.Tasks[0].Replicas) == 2 &&
			j.Status.Tasks[0].Replicas[0].UID == copied.Status.Tasks[0].Replicas[0].UID
	})

	var workerDone time.Time
	waitFor(t, "the copy Succeeded", 60*time.Second, func(ctx context.Context) (bool, error) {
		j, err := worker.jobs.BatchV1beta1().GenericJobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		workerDone = time.Now()
		return err == nil && j.Status.Phase == batch.JobSucceeded, nil
	})
	done := waitJob(t, ns, job.Name, "Succeeded, as on the worker", inPhase(batch.JobSucceeded))
	t.Logf("the manager's job showed Succeeded %.1fs after the worker's", time.Since(workerDone).Seconds())
	if done.Status.CompletionTime == nil || done.Status.Tasks[0].Replicas[1].Phase != batch.ReplicaSucceeded {
		t.Errorf("the manager's status %+v: want the worker's, completed", done.Status)
	}
	waitFor(t, "the manager's Workload Finished, naming the worker", 30*time.Second, func(ctx context.Context) (bool, error) {
		wl, err := env.dynamic.Resource(workloadsGVR).Namespace(ns).Get(ctx, "genericjob-"+job.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		clusterName, _, _ := unstructured.NestedString(wl.Object, "status", "clusterName")
		return cluster.ConditionTrue(wl, "Finished") && clusterName == worker.name, nil
	})
	if pods, _ := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); len(pods.Items) != 0 {
		t.Errorf("the manager ran %d pods of a job MultiKueue manages", len(pods.Items))
	}
	for _, line := range strings.Split(eventsOf(t, ns, job.Name), "\n") {
		if strings.HasPrefix(line, "Created: ") && line != "Created: Created workloads genericjob-"+job.Name {
			t.Errorf("the manager's controller created more than the job's Workload: %s", line)
		}
	}
	// MultiKueue made the copy once: no worker saw it created, deleted and created again.
	if n := added(); n != 1 {
		t.Errorf("the workers saw the copy created %d times, want once", n)
	}
}

// watchCopiesAdded watches every worker's GenericJobs of a name in ns from now on, and
// returns how many times they were created (ADDED events of a watch begun before the job).
func watchCopiesAdded(t *testing.T, workers []*mkWorker, ns, name string) func() int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var mu sync.Mutex
	added := 0
	for _, w := range workers {
		watcher, err := w.jobs.BatchV1beta1().GenericJobs(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer watcher.Stop()
			for e := range watcher.ResultChan() {
				if e.Type == watch.Added {
					mu.Lock()
					added++
					mu.Unlock()
				}
			}
		}()
	}
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return added
	}
}

// TestMultiKueueDeleteOnManager: deleting the job on the manager deletes its copy, and the
// copy's pods, on the worker.
func TestMultiKueueDeleteOnManager(t *testing.T) {
	workers := parallelMultiKueue(t, multiKueue.all())
	ns := mkNamespace(t, workers)
	job := multiKueueJob("mk-delete", 2) // runs until deleted
	createJob(t, ns, job)
	var worker *mkWorker
	waitFor(t, "a copy with its pods on a worker", 90*time.Second, func(ctx context.Context) (bool, error) {
		found := copies(ctx, workers, ns, job.Name)
		if len(found) != 1 {
			return false, nil
		}
		worker = found[0]
		pods, err := worker.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 2, nil
	})
	t.Logf("running on %s", worker.name)
	if err := env.jobs.BatchV1beta1().GenericJobs(ns).Delete(context.Background(), job.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	defer func() {
		t.Logf("the copy and its pods were gone %.1fs after the delete", time.Since(deleted).Seconds())
	}()
	waitFor(t, "the copy and its pods gone from "+worker.name, 60*time.Second, func(ctx context.Context) (bool, error) {
		_, err := worker.jobs.BatchV1beta1().GenericJobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		pods, _ := worker.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return apierrors.IsNotFound(err) && pods != nil && len(pods.Items) == 0, nil
	})
}

// TestMultiKueueEveryKind: each kind's documented example, submitted on the manager, runs as
// one copy on one worker under one Workload and ends Succeeded on both clusters, its
// manager's Workload Finished and naming the worker, with no pod on the manager.
func TestMultiKueueEveryKind(t *testing.T) {
	workers := parallelMultiKueue(t, multiKueue.all())
	set := func(o map[string]any, value any, path ...string) {
		if err := unstructured.SetNestedField(o, value, path...); err != nil {
			t.Fatal(err)
		}
	}
	kwokExits := map[string]any{exitCodeAnnotation: "0", runTimeAnnotation: "2s"}
	launcherExit := map[string]any{launcherExitCode: "0", launcherRunTime: "2s"}
	for _, tc := range []struct {
		example, resource string
		edit              func(o map[string]any)
	}{
		{"generic-example.yaml", "genericjobs", func(o map[string]any) {
			specs := o["spec"].(map[string]any)["replicaSpecs"].([]any)
			set(specs[0].(map[string]any), kwokExits, "template", "metadata", "annotations")
		}},
		{"mpi-example.yaml", "mpijobs", func(o map[string]any) { set(o, launcherExit, "spec", "worker", "template", "metadata", "annotations") }},
		{"colossalai-example.yaml", "colossalaijobs", func(o map[string]any) {
			set(o, launcherExit, "spec", "worker", "template", "metadata", "annotations")
			// Workers kept running hold the quota: the Workload finishes once they are gone.
			set(o, true, "spec", "runPolicy", "cleanUpWorkers")
		}},
		{"tensorflow-example.yaml", "tensorflowtrainingjobs", func(o map[string]any) {
			specs := o["spec"].(map[string]any)["replicaSpecs"].([]any)
			set(specs[0].(map[string]any), kwokExits, "template", "metadata", "annotations")
		}},
		{"xgboost-example.yaml", "xgboosttrainingjobs", func(o map[string]any) {
			specs := o["spec"].(map[string]any)["replicaSpecs"].([]any)
			set(specs[0].(map[string]any), kwokExits, "template", "metadata", "annotations")
		}},
	} {
		t.Run(tc.resource, func(t *testing.T) {
			ns := mkNamespace(t, workers)
			ctx := context.Background()
			if tc.resource == "colossalaijobs" {
				for _, w := range workers { // the example mounts it, wherever it runs
					boundClaimOn(t, w.kube, ns, "colossalai")
				}
			}
			obj, err := examples.Object(tc.example)
			if err != nil {
				t.Fatal(err)
			}
			tc.edit(obj)
			set(obj, map[string]any{kueue.LabelQueueName: "mk"}, "metadata", "labels")
			set(obj, batch.MultiKueueControllerName, "spec", "managedBy")
			u := &unstructured.Unstructured{Object: obj}
			gvr := batch.SchemeGroupVersion.WithResource(tc.resource)
			if _, err := env.dynamic.Resource(gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			phase := func(c dynamic.Interface) string {
				got, err := c.Resource(gvr).Namespace(ns).Get(ctx, u.GetName(), metav1.GetOptions{})
				if err != nil {
					return ""
				}
				p, _, _ := unstructured.NestedString(got.Object, "status", "phase")
				return p
			}
			// MultiKueue removes the copy once the job has finished: it is seen while it runs.
			var ran []*mkWorker
			waitFor(t, "a copy on a worker", 60*time.Second, func(ctx context.Context) (bool, error) {
				ran = ran[:0]
				for _, w := range workers {
					if p := phase(w.dynamic); p != "" {
						ran = append(ran, w)
					}
				}
				if len(ran) > 1 {
					return false, fmt.Errorf("copies on %d workers", len(ran))
				}
				return len(ran) == 1, nil
			})
			if wls, _ := ran[0].dynamic.Resource(workloadsGVR).Namespace(ns).List(ctx, metav1.ListOptions{}); len(wls.Items) != 1 {
				t.Errorf("%s holds %d Workloads for the job, want one", ran[0].name, len(wls.Items))
			}
			waitFor(t, "Succeeded on the manager", 90*time.Second, func(ctx context.Context) (bool, error) {
				return phase(env.dynamic) == string(batch.JobSucceeded), nil
			})
			for _, w := range workers {
				if w != ran[0] && phase(w.dynamic) != "" {
					t.Errorf("a copy appeared on %s too", w.name)
				}
			}
			waitFor(t, "the manager's Workload Finished, naming "+ran[0].name, 30*time.Second, func(ctx context.Context) (bool, error) {
				list, err := env.dynamic.Resource(workloadsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
				if err != nil || len(list.Items) != 1 {
					return false, nil
				}
				clusterName, _, _ := unstructured.NestedString(list.Items[0].Object, "status", "clusterName")
				return cluster.ConditionTrue(&list.Items[0], "Finished") && clusterName == ran[0].name, nil
			})
			if pods, _ := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); len(pods.Items) != 0 {
				t.Errorf("the manager ran %d pods", len(pods.Items))
			}
			t.Logf("%s ran on %s", u.GetName(), ran[0].name)
		})
	}
}

// setQuota sets the CPU quota of a worker's default ClusterQueue.
func setQuota(t *testing.T, w *mkWorker, cpu string) {
	t.Helper()
	gvr := schema.GroupVersionResource{Group: kueue.GroupName, Version: "v1beta2", Resource: "clusterqueues"}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cq, err := w.dynamic.Resource(gvr).Get(context.Background(), cluster.KueueClusterQueue, metav1.GetOptions{})
		if err != nil {
			return err
		}
		groups, _, _ := unstructured.NestedSlice(cq.Object, "spec", "resourceGroups")
		flavor := groups[0].(map[string]any)["flavors"].([]any)[0].(map[string]any)
		for _, r := range flavor["resources"].([]any) {
			if r := r.(map[string]any); r["name"] == "cpu" {
				r["nominalQuota"] = cpu
			}
		}
		if err := unstructured.SetNestedSlice(cq.Object, groups, "spec", "resourceGroups"); err != nil {
			return err
		}
		_, err = w.dynamic.Resource(gvr).Update(context.Background(), cq, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMultiKueueGoesWhereQuotaIs: with one worker out of quota, the job runs on the other;
// when the first gets quota back, nothing moves: the job keeps its one copy.
func TestMultiKueueGoesWhereQuotaIs(t *testing.T) {
	workers := parallelMultiKueue(t, multiKueue.all())
	full, free := workers[1], workers[0]
	setQuota(t, full, "0")
	t.Cleanup(func() { setQuota(t, full, "1k") })
	ns := mkNamespace(t, workers)
	job := multiKueueJob("mk-quota", 2)
	job.Spec.ReplicaSpecs[0].Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	createJob(t, ns, job)
	waitFor(t, "the copy running on "+free.name, 90*time.Second, func(ctx context.Context) (bool, error) {
		j, err := free.jobs.BatchV1beta1().GenericJobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		return err == nil && j.Status.Phase == batch.JobRunning, nil
	})
	setQuota(t, full, "1k")
	// Nothing may move once the job runs: watched for a while, since what is checked is that
	// nothing happens.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		ctx := context.Background()
		if found := copies(ctx, workers, ns, job.Name); len(found) != 1 || found[0] != free {
			t.Fatalf("after %s got quota back the job has copies on %d workers", full.name, len(found))
		}
		if wls, _ := full.dynamic.Resource(workloadsGVR).Namespace(ns).List(ctx, metav1.ListOptions{}); len(wls.Items) != 0 {
			t.Fatalf("%s, out of quota, holds a Workload of the running job", full.name)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := env.jobs.BatchV1beta1().GenericJobs(ns).Delete(context.Background(), job.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestMultiKueueWaitingAndPaused: on the manager a job says why it waits before MultiKueue
// dispatches it (no copy runs then, so nothing else would), and a pause there removes the
// copy, says Paused, and on resume runs the job on a worker again.
func TestMultiKueueWaitingAndPaused(t *testing.T) {
	workers := parallelMultiKueue(t, multiKueue.all())
	ns := mkNamespace(t, workers)
	queued := func(j *batch.GenericJob) bool {
		c := j.Status.Condition(batch.JobConditionRunning)
		return j.Status.Phase == batch.JobPending && c.Reason == "Queued" && strings.Contains(c.Message, "quota")
	}
	// More CPU than the manager's queue has: Kueue keeps it there.
	big := multiKueueJob("mk-big", 2)
	big.Spec.ReplicaSpecs[0].Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("600")}
	createJob(t, ns, big)
	j := waitJob(t, ns, big.Name, "Pending, saying the quota is short", queued)
	t.Logf("the manager's job waits: %s", j.Status.Condition(batch.JobConditionRunning).Message)

	job := multiKueueJob("mk-pause", 1) // runs until deleted
	createJob(t, ns, job)
	running := func(what string) {
		t.Helper()
		waitCopyRunning(t, workers, ns, job.Name, what)
		waitJob(t, ns, job.Name, "Running on the manager, as on the worker", inPhase(batch.JobRunning))
	}
	running("a copy running on a worker")
	setPause(t, ns, job.Name, true)
	waitFor(t, "the copy gone from every worker", 60*time.Second, func(ctx context.Context) (bool, error) {
		return len(copies(ctx, workers, ns, job.Name)) == 0, nil
	})
	waitJob(t, ns, job.Name, "Paused on the manager", inPhase(batch.JobPaused))
	setPause(t, ns, job.Name, false)
	running("a copy running again once resumed")
}

// realMKQueue names what TestMultiKueueRealMPIJob adds: on worker-1, MultiKueue to the
// suite's cluster (an AdmissionCheck and a MultiKueueConfig, and a ClusterQueue behind them)
// and a LocalQueue to it; on the suite's cluster, a LocalQueue of the same name to its own
// default ClusterQueue, where the copies run.
const realMKQueue = "to-real-node"

// TestMultiKueueRealMPIJob: the MPI example, submitted on a MultiKueue manager, runs for real
// on the real node of the worker cluster MultiKueue sends it to, and its launcher's log is
// read there with kubectl logs. The real node belongs to the suite's cluster (one per
// machine: its bridge, address and paths are fixed), so here the roles turn round: worker-1
// is the manager, its one worker the suite's cluster. The manager runs no pod of the job;
// the copy's pods run on the real node, in the training image, and the manager's job ends
// Succeeded as the copy did.
func TestMultiKueueRealMPIJob(t *testing.T) {
	workers := parallelMultiKueue(t, realNode.all(), multiKueue.all())
	ns := mkNamespace(t, workers)
	needRealNode(t, ns, trainingImage)
	ctx := context.Background()
	manager := workers[0]
	connectToSuite(t, manager, ns)
	createMPIScript(t, ns)
	job := exampleMPIJob(t, "mk-mpi")
	job.Labels = map[string]string{kueue.LabelQueueName: realMKQueue}
	job.Spec.ManagedBy = batch.MultiKueueControllerName
	job.Spec.RunPolicy.CleanUpWorkers = false // the copy stays while its workers run, for its log
	jobs := manager.jobs.BatchV1beta1().MPIJobs(ns)
	if _, err := jobs.Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	status := func(ctx context.Context) (*batch.JobStatus, error) {
		j, err := jobs.Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return &j.Status, nil
	}
	s := waitStatus(t, "the outcome, on "+manager.name, status, func(s *batch.JobStatus) bool {
		return s.Phase == batch.JobSucceeded || s.Phase == batch.JobFailed
	})
	if s.Phase != batch.JobSucceeded {
		t.Fatalf("the MPIJob ended %s on %s: %+v", s.Phase, manager.name, s.Conditions)
	}
	copied, err := env.jobs.BatchV1beta1().MPIJobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no copy of the job on the suite's cluster: %v", err)
	}
	if copied.Spec.ManagedBy != "" || copied.Status.Phase != batch.JobSucceeded {
		t.Errorf("the copy: managedBy %q, phase %s; want no managedBy, Succeeded", copied.Spec.ManagedBy, copied.Status.Phase)
	}
	pods, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 4 {
		t.Errorf("the copy has %d pods, want the launcher and 3 workers", len(pods.Items))
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != cluster.RealNodeName {
			t.Errorf("%s ran on %q, want the real node", p.Name, p.Spec.NodeName)
		}
	}
	if pods, err := manager.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil || len(pods.Items) != 0 {
		t.Errorf("the manager, %s, ran pods of a job MultiKueue manages (%v)", manager.name, err)
	}
	log, err := kubectl("logs", "-n", ns, job.Name+"-launcher")
	if err != nil {
		t.Fatalf("kubectl logs: %v\n%s", err, log)
	}
	if n := strings.Count(log, "all-reduce sum 45, want 45"); n != 9 {
		t.Errorf("the launcher's log shows %d of 9 ranks:\n%s", n, log)
	}
	if err := jobs.Delete(ctx, job.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the copy gone from the suite's cluster", 60*time.Second, func(ctx context.Context) (bool, error) {
		_, err := env.jobs.BatchV1beta1().MPIJobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// connectToSuite makes a worker cluster a MultiKueue manager whose one worker is the suite's
// cluster, under realMKQueue, with a LocalQueue realMKQueue in ns on both (on the suite's
// cluster, to its default ClusterQueue), and undoes it when the test ends. The manager's
// ClusterQueue covers pods, as SetUpMultiKueue's does, so that every admission keeps the
// MultiKueue check.
func connectToSuite(t *testing.T, manager *mkWorker, ns string) {
	t.Helper()
	ctx := context.Background()
	gvr := func(resource string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: kueue.GroupName, Version: "v1beta2", Resource: resource}
	}
	t.Cleanup(func() {
		ctx := context.Background()
		for _, o := range []struct{ resource, name string }{
			{"clusterqueues", realMKQueue}, {"admissionchecks", realMKQueue}, {"multikueueconfigs", realMKQueue}, {"multikueueclusters", "suite"},
		} {
			_ = manager.dynamic.Resource(gvr(o.resource)).Delete(ctx, o.name, metav1.DeleteOptions{})
		}
		_ = manager.kube.CoreV1().Secrets(cluster.KueueNamespace).Delete(ctx, "suite-kubeconfig", metav1.DeleteOptions{})
	})
	if err := manager.cluster.ConnectMultiKueue(ctx, realMKQueue, map[string]*cluster.Cluster{"suite": env.cluster}); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.CreateObjects(ctx, manager.dynamic, fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: %[1]s
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory, pods]
    flavors:
    - name: %[2]s
      resources:
      - {name: cpu, nominalQuota: "100"}
      - {name: memory, nominalQuota: 100Gi}
      - {name: pods, nominalQuota: "100"}
  admissionChecksStrategy:
    admissionChecks:
    - name: %[1]s
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: %[1]s, namespace: %[3]s}
spec: {clusterQueue: %[1]s}
`, realMKQueue, cluster.KueueResourceFlavor, ns)); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.CreateObjects(ctx, env.dynamic, fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: %s, namespace: %s}
spec: {clusterQueue: %s}
`, realMKQueue, ns, cluster.KueueClusterQueue)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, manager.name+"'s MultiKueue to reach the suite's cluster", 60*time.Second, func(ctx context.Context) (bool, error) {
		ac, err := manager.dynamic.Resource(gvr("admissionchecks")).Get(ctx, realMKQueue, metav1.GetOptions{})
		return err == nil && cluster.ConditionTrue(ac, "Active"), nil
	})
}

// workerLostTimeout is the manager's MultiKueue workerLostTimeout: a job whose worker cannot
// be reached for that long is queued again.
const workerLostTimeout = 20 * time.Second

// TestMultiKueueWorkerLost: a worker whose API server stops while a job runs there is lost;
// after workerLostTimeout Kueue queues the job again and it runs on the other worker, the
// manager's job saying it was requeued; once the lost worker is back, one copy of the job
// runs, not two.
func TestMultiKueueWorkerLost(t *testing.T) {
	workers := parallelMultiKueue(t, multiKueue.all())
	ns := mkNamespace(t, workers)
	job := multiKueueJob("mk-lost", 1) // runs until deleted
	createJob(t, ns, job)
	lost := waitCopyRunning(t, workers, ns, job.Name, "a copy running on a worker")
	other := workers[0]
	if other == lost {
		other = workers[1]
	}
	if err := lost.cluster.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = lost.cluster.StartAPIServer(context.Background())
		}
	})
	t.Logf("stopped %s's API server", lost.name)
	waitFor(t, "the job running on "+other.name, workerLostTimeout+90*time.Second, func(ctx context.Context) (bool, error) {
		j, err := other.jobs.BatchV1beta1().GenericJobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		return err == nil && j.Status.Phase == batch.JobRunning, nil
	})
	t.Logf("running on %s %.1fs after %s was lost", other.name, time.Since(stopped).Seconds(), lost.name)
	if events, ok := eventsSaying(t, ns, job.Name, "Requeued: "); !ok {
		t.Errorf("the manager's job does not say it was queued again:\n%s", events)
	}

	if err := lost.cluster.StartAPIServer(context.Background()); err != nil {
		t.Fatal(err)
	}
	restarted = true
	waitFor(t, "one copy left once "+lost.name+" is back", 120*time.Second, func(ctx context.Context) (bool, error) {
		return len(copies(ctx, workers, ns, job.Name)) == 1, nil
	})
	found := copies(context.Background(), workers, ns, job.Name)
	t.Logf("once %s was back, the copy on %s is left", lost.name, found[0].name)
	waitJob(t, ns, job.Name, "Running on "+found[0].name, func(j *batch.GenericJob) bool { return j.Status.Phase == batch.JobRunning })
	waitWorkerActive(t, lost) // for the tests after this one
	waitWorkerServes(t, lost, ns)
	if err := env.jobs.BatchV1beta1().GenericJobs(ns).Delete(context.Background(), job.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}
