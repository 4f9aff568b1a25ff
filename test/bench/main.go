// Command bench measures the controller on the local control plane: it creates N GenericJobs
// of R replicas (with services), waits until every pod and every job is Running, and reports
// time, throughput, the controller's API writes per job, status writes, conflicts and peak
// memory. For reference it then creates the same pods and services with a plain client-go
// loop of the same concurrency and rate limits, and prints the ratio of the two times.
//
//	go run ./test/bench -jobs 250 -replicas 4   (make bench)
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/t9k-jobs/t9k-jobs/manifests"
	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
	jobinformers "github.com/t9k-jobs/t9k-jobs/pkg/client/informers/externalversions"
	"github.com/t9k-jobs/t9k-jobs/test/cluster"
)

type config struct {
	jobs, replicas, workers int
	qps                     float64
	burst                   int
	binDir                  string
}

func main() {
	c := config{}
	flag.IntVar(&c.jobs, "jobs", 250, "GenericJobs to create")
	flag.IntVar(&c.replicas, "replicas", 4, "replicas per job")
	flag.IntVar(&c.workers, "workers", 8, "controller workers; also the raw loop's concurrency")
	flag.Float64Var(&c.qps, "qps", 200, "client QPS of the controller and of the raw loop")
	flag.IntVar(&c.burst, "burst", 400, "client burst of the controller and of the raw loop")
	flag.StringVar(&c.binDir, "bin-dir", os.Getenv("T9K_TOOLS_BIN"), "control-plane binaries (hack/lib/tools.sh)")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "t9k-bench-")
	if err != nil {
		return err
	}
	if os.Getenv("BENCH_KEEP") == "" {
		defer os.RemoveAll(dir)
	} else {
		fmt.Fprintln(os.Stderr, "bench: keeping", dir)
	}
	fmt.Printf("\n%d GenericJobs x %d replicas (with services); controller: %d workers, QPS %.0f, burst %d\n",
		c.jobs, c.replicas, c.workers, c.qps, c.burst)

	// Each run gets a fresh cluster of its own, so that neither inherits the other's
	// objects, caches or garbage.
	var rawTime time.Duration
	if err := withCluster(ctx, c, filepath.Join(dir, "raw"), nil, func(cl *cluster.Cluster, admin *rest.Config, kube kubernetes.Interface) error {
		rawTime, err = runRaw(ctx, c, cl.Config, kube)
		return err
	}); err != nil {
		return err
	}
	return withCluster(ctx, c, filepath.Join(dir, "controller"), installCRDs, func(cl *cluster.Cluster, admin *rest.Config, kube kubernetes.Interface) error {
		ctl, err := startController(ctx, c, cl.Kubeconfig, filepath.Dir(cl.Dir))
		if err != nil {
			return err
		}
		defer ctl.stop()
		before, err := scrape(ctl.metrics)
		if err != nil {
			return err
		}
		controllerTime, err := runJobs(ctx, c, admin, kube)
		if err != nil {
			return err
		}
		after, err := scrape(ctl.metrics)
		if err != nil {
			return err
		}
		report(c, controllerTime, rawTime, before, after, ctl.peakRSS())
		fmt.Printf("controller CPU time: %.1fs (user+system, whole run)\n", ctl.cpuSeconds())
		return nil
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

func installCRDs(ctx context.Context, config *rest.Config) error {
	crds, err := manifests.CRDs()
	if err != nil {
		return err
	}
	client := apiextensionsclient.NewForConfigOrDie(config)
	for _, crd := range crds {
		if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := versioned.NewForConfigOrDie(config).BatchV1beta1().GenericJobs("default").List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
}

func namespace(ctx context.Context, kube kubernetes.Interface, name string) error {
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

const rawNamespace = "bench-raw"

func podSpec() corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "trainer", Command: []string{"train"}}}}
}

// runJobs creates the jobs and returns the time until every pod and job is Running.
func runJobs(ctx context.Context, c config, config *rest.Config, kube kubernetes.Interface) (time.Duration, error) {
	const ns = "bench-controller"
	if err := namespace(ctx, kube, ns); err != nil {
		return 0, err
	}
	client := versioned.NewForConfigOrDie(config)
	jobs := client.BatchV1beta1().GenericJobs(ns)
	running, created := watchPods(ctx, kube, ns)
	runningJobs := watchRunningJobs(ctx, client, ns)
	start := time.Now()
	err := parallel(16, c.jobs, func(i int) error {
		_, err := jobs.Create(ctx, &batch.GenericJob{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("job-%04d", i)},
			Spec: batch.GenericJobSpec{
				ReplicaSpecs: []batch.GenericReplicaSpec{{Type: "worker", Replicas: ptr.To(int32(c.replicas)),
					Template: corev1.PodTemplateSpec{Spec: podSpec()}}},
				Service: &batch.ServiceOption{Ports: []batch.ServicePort{{Name: "http", Port: 2222}}},
			},
		}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return 0, err
	}
	jobsAt := time.Since(start)
	want := c.jobs * c.replicas
	var createdAt, podsAt time.Duration
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Minute, true, func(context.Context) (bool, error) {
		if createdAt == 0 && created() >= want {
			createdAt = time.Since(start)
		}
		if podsAt == 0 && running() >= want {
			podsAt = time.Since(start)
		}
		return running() >= want && runningJobs() == c.jobs, nil
	})
	fmt.Printf("controller: jobs created %.1fs, every pod created %.1fs, Running %.1fs, every job Running %.1fs\n",
		jobsAt.Seconds(), createdAt.Seconds(), podsAt.Seconds(), time.Since(start).Seconds())
	return time.Since(start), err
}

// runRaw creates the same pods and services with a plain client of the controller's rate
// limits, c.workers jobs' worth at a time, each job's children in parallel, as the
// controller sends them; it returns the time until every pod is Running.
func runRaw(ctx context.Context, c config, base *rest.Config, admin kubernetes.Interface) (time.Duration, error) {
	const ns = rawNamespace
	if err := namespace(ctx, admin, ns); err != nil {
		return 0, err
	}
	config := rest.CopyConfig(base)
	config.QPS, config.Burst = float32(c.qps), c.burst
	kube := kubernetes.NewForConfigOrDie(config)
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching() // before its namespace goes
	running, _ := watchPods(watchCtx, admin, ns)
	start := time.Now()
	err := parallel(c.workers, c.jobs, func(i int) error {
		return parallel(c.replicas, c.replicas, func(r int) error {
			name := fmt.Sprintf("job-%04d-worker-%d", i, r)
			labels := map[string]string{"bench/job": fmt.Sprintf("job-%04d", i), "bench/rank": strconv.Itoa(r)} // not the controller's labels: its informers ignore these
			if _, err := kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
				Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: labels, Ports: []corev1.ServicePort{{Name: "http", Port: 2222}}},
			}, metav1.CreateOptions{}); err != nil {
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
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Minute, true, func(context.Context) (bool, error) {
		return running() >= want, nil
	})
	fmt.Printf("raw: every pod created %.1fs, Running %.1fs\n", createdAt.Seconds(), time.Since(start).Seconds())
	return time.Since(start), err
}

// watchPods counts the pods of a namespace from an informer: Running ones, and all.
func watchPods(ctx context.Context, kube kubernetes.Interface, ns string) (running, all func() int) {
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(ns))
	informer := factory.Core().V1().Pods().Informer()
	factory.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), informer.HasSynced)
	return func() int {
			n := 0
			for _, obj := range informer.GetStore().List() {
				if obj.(*corev1.Pod).Status.Phase == corev1.PodRunning {
					n++
				}
			}
			return n
		}, func() int {
			return len(informer.GetStore().ListKeys())
		}
}

// watchRunningJobs counts the Running GenericJobs of a namespace from an informer, so that
// waiting costs the API server nothing.
func watchRunningJobs(ctx context.Context, client versioned.Interface, ns string) func() int {
	factory := jobinformers.NewSharedInformerFactoryWithOptions(client, 0, jobinformers.WithNamespace(ns))
	informer := factory.Batch().V1beta1().GenericJobs().Informer()
	factory.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), informer.HasSynced)
	return func() int {
		n := 0
		for _, obj := range informer.GetStore().List() {
			if obj.(*batch.GenericJob).Status.Phase == batch.JobRunning {
				n++
			}
		}
		return n
	}
}

func parallel(workers, n int, f func(i int) error) error {
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
		next  = make(chan int)
	)
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

type controllerProcess struct {
	cmd     *exec.Cmd
	metrics string
	done    chan struct{}
}

func startController(ctx context.Context, c config, kubeconfig, dir string) (*controllerProcess, error) {
	binary := filepath.Join(dir, "t9k-job-controller")
	if out, err := exec.Command("go", "build", "-o", binary, "./cmd/t9k-job-controller").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the controller: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	log, err := os.Create(filepath.Join(dir, "controller.log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command(binary, "--kubeconfig", kubeconfig, "--leader-elect=false", "--bind-address", addr,
		"--workers", strconv.Itoa(c.workers), "--kube-api-qps", fmt.Sprint(c.qps), "--kube-api-burst", strconv.Itoa(c.burst))
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &controllerProcess{cmd: cmd, metrics: "http://" + addr + "/metrics", done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("the controller did not get ready: %w", err)
	}
	return p, nil
}

func (p *controllerProcess) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
	}
}

// peakRSS is the controller's peak resident memory (VmHWM), in MiB.
func (p *controllerProcess) peakRSS() float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// cpuSeconds is the controller's CPU time so far (user and system).
func (p *controllerProcess) cpuSeconds() float64 {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the command (which is in parentheses): utime and stime are the 12th and
	// 13th, in clock ticks of 1/100 s.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100
}

// requestCounts maps "verb resource code" to the count of t9k_api_requests_total.
type requestCounts map[string]float64

func scrape(url string) (requestCounts, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	counts := requestCounts{}
	for _, line := range strings.Split(string(body), "\n") {
		for _, prefix := range []string{"rest_client_rate_limiter_duration_seconds_sum", "rest_client_rate_limiter_duration_seconds_count",
			"rest_client_request_duration_seconds_sum", "rest_client_request_duration_seconds_count",
			"workqueue_queue_duration_seconds_sum", "workqueue_queue_duration_seconds_count", "workqueue_work_duration_seconds_sum", "workqueue_work_duration_seconds_count"} {
			if strings.HasPrefix(line, prefix) {
				name, value, _ := strings.Cut(line, " ")
				n, _ := strconv.ParseFloat(value, 64)
				counts["diag "+name] = n
			}
		}
		rest, ok := strings.CutPrefix(line, "t9k_api_requests_total{")
		if !ok {
			continue
		}
		labels, value, _ := strings.Cut(rest, "} ")
		l := map[string]string{}
		for _, kv := range strings.Split(labels, ",") {
			k, v, _ := strings.Cut(kv, "=")
			l[k] = strings.Trim(v, `"`)
		}
		n, _ := strconv.ParseFloat(value, 64)
		counts[l["verb"]+" "+l["resource"]+" "+l["code"]] = n
	}
	return counts, nil
}

func report(c config, controllerTime, rawTime time.Duration, before, after requestCounts, peakRSS float64) {
	pods := float64(c.jobs * c.replicas)
	fmt.Printf("\ncontroller: %.1fs, %.0f pods/s\n", controllerTime.Seconds(), pods/controllerTime.Seconds())
	fmt.Printf("raw client-go loop: %.1fs, %.0f pods/s\n", rawTime.Seconds(), pods/rawTime.Seconds())
	ratio := controllerTime.Seconds() / rawTime.Seconds()
	fmt.Printf("ratio controller/raw: %.2f (target <= 1.15)\n", ratio)

	fmt.Println("\ncontroller API writes per job, by verb and resource:")
	var keys []string
	for k := range after {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	writes, statusWrites, conflicts := 0.0, 0.0, 0.0
	for _, k := range keys {
		n := after[k] - before[k]
		verb := strings.Fields(k)[0]
		if verb == "diag" {
			if os.Getenv("BENCH_DIAG") != "" {
				fmt.Printf("  %s %.3f\n", k, n)
			}
			continue
		}
		if n == 0 || verb == "get" || verb == "list" || verb == "watch" {
			continue
		}
		fmt.Printf("  %-40s %6.2f\n", k, n/float64(c.jobs))
		if strings.Contains(k, "events") {
			continue // events are reported, not counted against the budget
		}
		writes += n
		if strings.Contains(k, "genericjobs/status") {
			statusWrites += n
		}
		if strings.HasSuffix(k, " 409") {
			conflicts += n
		}
	}
	perJob := writes / float64(c.jobs)
	fmt.Printf("writes per job (pods, services, status): %.2f (target <= 2R+3 = %d)\n", perJob, 2*c.replicas+3)
	fmt.Printf("status writes per job: %.2f\n", statusWrites/float64(c.jobs))
	fmt.Printf("409 conflicts: %.0f (target 0)\n", conflicts)
	fmt.Printf("controller peak RSS: %.0f MiB\n", peakRSS)
}
