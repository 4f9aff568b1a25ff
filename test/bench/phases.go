package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
	"github.com/t9k-jobs/t9k-jobs/test/cluster"
	"github.com/t9k-jobs/t9k-jobs/test/harness"
)

// rawPhase times the raw client-go loop on a fresh cluster of its own.
func rawPhase(ctx context.Context, c config, dir string) (phase, error) {
	var p phase
	err := withCluster(ctx, c, dir, nil, func(cl *cluster.Cluster, admin *rest.Config, kube kubernetes.Interface) error {
		usage := func() map[string]float64 { return cpuUse(cl, nil) }
		cpu, requests := usage(), apiserverRequests(ctx, kube)
		profiled := profile(ctx, filepath.Base(dir), nil, kube)
		elapsed, err := runRaw(ctx, c, cl.Config, kube)
		if err != nil {
			return err
		}
		p = printCPU("raw", elapsed, usage, cpu)
		profiled() // after the CPU is read: the profile's 15 s outlast the run
		printRequests("raw", requests, apiserverRequests(ctx, kube))
		return nil
	})
	return p, err
}

// controllerPhase times the controller on a fresh cluster of its own, whose CRDs were
// installed before its controllers started. prepare, if any, runs before the burst, with the
// controller running; neither its time nor its requests count.
func controllerPhase(ctx context.Context, c config, dir string, prepare func(context.Context, *controllerProcess, *rest.Config, kubernetes.Interface) error) (controllerRun, error) {
	var r controllerRun
	err := withCluster(ctx, c, dir, cluster.InstallCRDs, func(cl *cluster.Cluster, admin *rest.Config, kube kubernetes.Interface) error {
		if c.queue != queueNone {
			if err := startQueue(ctx, cl, kube, c.queue); err != nil {
				return err
			}
		}
		ctl, err := startController(ctx, c, cl.Kubeconfig, filepath.Dir(cl.Dir))
		if err != nil {
			return err
		}
		defer ctl.stop()
		if prepare != nil {
			if err := prepare(ctx, ctl, admin, kube); err != nil {
				return err
			}
		}
		before, err := scrape(ctl.metrics)
		if err != nil {
			return err
		}
		usage := func() map[string]float64 { return cpuUse(cl, ctl) }
		cpu, requests := usage(), apiserverRequests(ctx, kube)
		profiled := profile(ctx, filepath.Base(dir), ctl, kube)
		b, err := runJobs(ctx, c, admin, kube)
		if err != nil {
			return err
		}
		r.phase, r.latencies = printCPU("controller", b.elapsed, usage, cpu), b.latencies
		profiled()
		if r.afterBurst, err = ctl.memory(); err != nil {
			return err
		}
		printRequests("controller", requests, apiserverRequests(ctx, kube))
		after, err := scrape(ctl.metrics)
		if err != nil {
			return err
		}
		r.requests = requestCounts{}
		for k, v := range after {
			r.requests[k] = v - before[k]
		}
		r.peakRSS = ctl.peakRSS()
		return nil
	})
	return r, err
}

// withSettledJobs runs f on a fresh cluster whose controller runs and has settled the
// burst's jobs (the elastic and progress modes measure what follows).
func withSettledJobs(ctx context.Context, c config, dir string, f func(ctl *controllerProcess, admin *rest.Config, kube kubernetes.Interface) error) error {
	return withCluster(ctx, c, dir, cluster.InstallCRDs, func(cl *cluster.Cluster, admin *rest.Config, kube kubernetes.Interface) error {
		if c.queue != queueNone {
			if err := startQueue(ctx, cl, kube, c.queue); err != nil {
				return err
			}
		}
		ctl, err := startController(ctx, c, cl.Kubeconfig, filepath.Dir(cl.Dir))
		if err != nil {
			return err
		}
		defer ctl.stop()
		if _, err := runJobs(ctx, c, admin, kube); err != nil {
			return err
		}
		if _, err := ctl.settle(ctx, "GenericJob", 5*time.Minute); err != nil {
			return err
		}
		return f(ctl, admin, kube)
	})
}

// withCluster runs f on a fresh local control plane in dir (setup, if any, runs before its
// controllers start), with an admin client whose own rate limits never limit the run.
func withCluster(ctx context.Context, c config, dir string, setup func(context.Context, *rest.Config) error, f func(*cluster.Cluster, *rest.Config, kubernetes.Interface) error) error {
	cl, err := cluster.Start(ctx, cluster.Options{BinDir: c.binDir, Dir: filepath.Join(dir, "cluster"), Progress: os.Stderr, BeforeControllers: setup})
	if err != nil {
		return err
	}
	defer cl.Stop()
	admin := rest.CopyConfig(cl.Config)
	admin.QPS, admin.Burst = 2000, 4000
	return f(cl, admin, kubernetes.NewForConfigOrDie(admin))
}

// namespace creates a namespace, if it is not there yet, and waits until pods can be created
// in it.
func namespace(ctx context.Context, kube kubernetes.Interface, name string) error {
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return harness.WaitFor(ctx, "namespace "+name+"'s default service account", 100*time.Millisecond, time.Minute, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

const (
	rawNamespace = "bench-raw"
	// jobNamespace holds the controller's jobs: the burst's, and the finished ones of
	// -finished and -scale, which share it as they would on a real cluster.
	jobNamespace = "bench-controller"
	// prefillLabel marks the finished jobs and their pods, so that the burst's informers
	// leave them out.
	prefillLabel = "bench.t9k-jobs/prefill"
)

func podSpec() corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "trainer", Command: []string{"train"}}}}
}

// burst is what runJobs measured.
type burst struct {
	elapsed   time.Duration
	latencies latencySummary
}

// runJobs creates the jobs and returns the time until every pod and job is Running, and the
// jobs' latencies. Jobs and pods of a prefill in the same namespace are left out.
func runJobs(ctx context.Context, c config, config *rest.Config, kube kubernetes.Interface) (burst, error) {
	const ns = jobNamespace
	if err := namespace(ctx, kube, ns); err != nil {
		return burst{}, err
	}
	client := versioned.NewForConfigOrDie(config)
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching() // before its cluster goes
	lat := newLatencies(c)
	pods := watchPods(watchCtx, kube, ns, "!"+prefillLabel, lat.podHandler())
	runningJobs := watchRunningJobs(watchCtx, c.kind, client, ns, "!"+prefillLabel, lat.jobHandler())
	start := time.Now()
	defer showProgress("controller", pods, runningJobs)()
	err := parallel(16, c.jobs, func(i int) error {
		name := fmt.Sprintf("job-%04d", i)
		lat.creating(name)
		if c.kind == "TensorFlowTrainingJob" {
			_, err := client.BatchV1beta1().TensorFlowTrainingJobs(ns).Create(ctx, &batch.TensorFlowTrainingJob{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: batch.TensorFlowTrainingJobSpec{ReplicaSpecs: []batch.TrainingReplicaSpec{{Type: "worker", Replicas: ptr.To(int32(c.replicas)),
					Template: corev1.PodTemplateSpec{Spec: podSpec()}}}}}, metav1.CreateOptions{})
			return err
		}
		if c.kind == "MPIJob" {
			spec := podSpec()
			spec.Containers[0].Name = "mpi-worker"
			_, err := client.BatchV1beta1().MPIJobs(ns).Create(ctx, &batch.MPIJob{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: batch.MPIJobSpec{Worker: batch.MPIWorkerSpec{Replicas: ptr.To(int32(c.replicas)), Cmd: []string{"train"},
					Template: corev1.PodTemplateSpec{Spec: spec}}}}, metav1.CreateOptions{})
			return err
		}
		var labels map[string]string
		spec := podSpec()
		if c.queue != queueNone {
			// Kueue assigns a flavor, and so a topology, only to what pods request.
			labels = map[string]string{"kueue.x-k8s.io/queue-name": benchQueue}
			spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}
		}
		job := &batch.GenericJob{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: batch.GenericJobSpec{
				ReplicaSpecs: []batch.GenericReplicaSpec{{Type: "worker", Replicas: ptr.To(int32(c.replicas)),
					Template: corev1.PodTemplateSpec{Spec: spec}}},
				Service: &batch.ServiceOption{Ports: []batch.ServicePort{{Name: "http", Port: 2222}}},
			},
		}
		if c.elastic {
			job.Spec.ReplicaSpecs[0].Replicas = nil
			job.Spec.Elastic = &batch.ElasticPolicy{ReplicaType: "worker", Replicas: int32(c.replicas), MinReplicas: 1, MaxReplicas: 2 * int32(c.replicas)}
		}
		_, err := client.BatchV1beta1().GenericJobs(ns).Create(ctx, job, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return burst{}, err
	}
	jobsAt := time.Since(start)
	want := c.jobs * podsPerJob(c)
	var createdAt, podsAt time.Duration
	err = harness.WaitFor(ctx, "every pod and job Running", 50*time.Millisecond, 10*time.Minute, func(context.Context) (bool, error) {
		n, jobsRunning := pods(), runningJobs()
		if createdAt == 0 && n.created >= want {
			createdAt = time.Since(start)
		}
		if podsAt == 0 && n.running >= want {
			podsAt = time.Since(start)
		}
		return n.running >= want && jobsRunning == c.jobs, nil
	})
	elapsed := time.Since(start)
	fmt.Printf("  controller: jobs created %.1fs, every pod created %.1fs, Running %.1fs, every job Running %.1fs\n",
		jobsAt.Seconds(), createdAt.Seconds(), podsAt.Seconds(), elapsed.Seconds())
	b := burst{elapsed: elapsed, latencies: lat.summary()}
	fmt.Printf("  controller: %s\n", b.latencies)
	return b, err
}

// runRaw creates the pods and services the controller would, with a plain client of the
// controller's rate limits and wire format, c.workers jobs' worth at a time and each job's
// children in parallel; it returns the time until every pod is Running. The objects carry
// the controller's labels, selectors and settings, but no owner reference: there is no job to
// own them, and the garbage collector deletes what a missing owner owns.
func runRaw(ctx context.Context, c config, base *rest.Config, admin kubernetes.Interface) (time.Duration, error) {
	const ns = rawNamespace
	if err := namespace(ctx, admin, ns); err != nil {
		return 0, err
	}
	config := rest.CopyConfig(base)
	config.QPS, config.Burst = float32(c.qps), c.burst
	config.ContentType = "application/vnd.kubernetes.protobuf"
	kube := kubernetes.NewForConfigOrDie(config)
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching() // before its cluster goes
	pods := watchPods(watchCtx, admin, ns, "")
	start := time.Now()
	defer showProgress("raw", pods, func() int { return 0 })()
	err := parallel(c.workers, c.jobs, func(i int) error {
		job, uid := fmt.Sprintf("job-%04d", i), string(uuid.NewUUID())
		// All of a job's children at once, services and pods side by side, as the controller
		// sends them.
		return parallel(2*c.replicas, 2*c.replicas, func(k int) error {
			r := k % c.replicas
			name := fmt.Sprintf("%s-worker-%d", job, r)
			labels := map[string]string{batch.LabelJobName: job, batch.LabelReplicaType: "worker",
				batch.LabelReplicaIndex: strconv.Itoa(r), batch.LabelControllerUID: uid}
			if k >= c.replicas {
				_, err := kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
					ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
					Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: labels, PublishNotReadyAddresses: true,
						Ports: []corev1.ServicePort{{Name: "http", Port: 2222}}},
				}, metav1.CreateOptions{})
				return err
			}
			spec := podSpec()
			spec.RestartPolicy, spec.Hostname, spec.Subdomain = corev1.RestartPolicyNever, name, name
			_, err := kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: spec}, metav1.CreateOptions{})
			return err
		})
	})
	if err != nil {
		return 0, err
	}
	createdAt := time.Since(start)
	want := c.jobs * c.replicas
	err = harness.WaitFor(ctx, "every raw pod Running", 50*time.Millisecond, 10*time.Minute, func(context.Context) (bool, error) {
		return pods().running >= want, nil
	})
	fmt.Printf("  raw: every pod created %.1fs, Running %.1fs\n", createdAt.Seconds(), time.Since(start).Seconds())
	return time.Since(start), err
}
