// Command t9k-job-controller runs the jobs of batch.tensorstack.dev: it watches the job kinds
// and their pods and services, and drives each job to the end its spec describes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned/scheme"
	jobinformers "github.com/t9k-jobs/t9k-jobs/pkg/client/informers/externalversions"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/colossalaijob"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/genericjob"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/metrics"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/mpijob"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/tensorflowjob"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/xgboostjob"
	"github.com/t9k-jobs/t9k-jobs/pkg/features"
)

type options struct {
	kubeconfig     string
	namespace      string
	workers        int
	qps            float64
	burst          int
	leaderElect    bool
	leaseNamespace string
	leaseName      string
	bindAddress    string
	profiling      bool
}

func main() {
	o := options{}
	fs := pflag.CommandLine
	fs.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file; in-cluster configuration when empty")
	fs.StringVar(&o.namespace, "namespace", "", "namespace whose jobs to run; all namespaces when empty")
	fs.IntVar(&o.workers, "workers", 8, "jobs of one kind synced at once")
	fs.Float64Var(&o.qps, "kube-api-qps", 200, "steady requests per second to the API server")
	fs.IntVar(&o.burst, "kube-api-burst", 400, "requests allowed in a burst above --kube-api-qps")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "elect a leader among replicas of the controller with a Lease, so that one runs at a time")
	fs.StringVar(&o.leaseNamespace, "leader-elect-namespace", "", "namespace of the leader election Lease; the controller's own namespace (or default) when empty")
	fs.StringVar(&o.leaseName, "leader-elect-name", "t9k-job-controller", "name of the leader election Lease")
	fs.StringVar(&o.bindAddress, "bind-address", ":8080", "address of /metrics, /healthz and /readyz")
	fs.BoolVar(&o.profiling, "profiling", false, "serve Go profiles at /debug/pprof/ on --bind-address")
	features.Gates.AddFlag(fs)
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	pflag.Parse()

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	if err := run(ctx, o); err != nil {
		klog.ErrorS(err, "t9k-job-controller failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(ctx context.Context, o options) error {
	logger := klog.FromContext(ctx)
	config, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading the client configuration: %w", err)
	}
	config.QPS, config.Burst = float32(o.qps), o.burst
	config.UserAgent = "t9k-job-controller"
	config.Wrap(metrics.CountRequests)
	// Built-in kinds travel as protobuf, which costs the API server (and us) less than JSON;
	// the job kinds are custom resources, which only speak JSON.
	kubeConfig := rest.CopyConfig(config)
	kubeConfig.ContentType = "application/vnd.kubernetes.protobuf"
	kubeConfig.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	kube, err := kubernetes.NewForConfig(kubeConfig)
	if err != nil {
		return err
	}
	jobs, err := versioned.NewForConfig(config)
	if err != nil {
		return err
	}
	if err := checkCRDs(kube); err != nil {
		return err
	}

	var ready atomic.Bool
	server := serve(o.bindAddress, o.profiling, &ready)
	defer func() {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = server.Shutdown(shutdownCtx)
	}()

	// Events get a client of their own, so that a burst of them never delays the writes that
	// run jobs (each client has its own rate limiter).
	events, err := kubernetes.NewForConfig(kubeConfig)
	if err != nil {
		return err
	}
	runControllers := func(ctx context.Context) {
		runAll(ctx, o, kube, jobs, events, &ready)
	}
	if !o.leaderElect {
		runControllers(ctx)
		return nil
	}
	return leaderElect(ctx, o, kube, runControllers, logger)
}

// checkCRDs refuses to start without the API: the informers would retry forever, silently.
func checkCRDs(kube kubernetes.Interface) error {
	resources, err := kube.Discovery().ServerResourcesForGroupVersion(batch.SchemeGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("the API %s is not installed: install the CRDs with `kubectl apply -f manifests/crds/`", batch.SchemeGroupVersion)
	}
	if err != nil {
		return fmt.Errorf("checking for the API %s: %w", batch.SchemeGroupVersion, err)
	}
	for _, r := range resources.APIResources {
		if r.Kind == "GenericJob" {
			return nil
		}
	}
	return fmt.Errorf("the API %s has no GenericJob: install the current CRDs with `kubectl apply -f manifests/crds/`", batch.SchemeGroupVersion)
}

// runAll starts the informers and the controller of every kind, and returns once ctx ends
// and in-flight syncs are done.
func runAll(ctx context.Context, o options, kube kubernetes.Interface, jobs versioned.Interface, events kubernetes.Interface, ready *atomic.Bool) {
	// Jobs without managedFields too: the cache is smaller, and so is every status write, which
	// sends the whole object (the API server keeps the managedFields a write leaves out).
	jobFactory := jobinformers.NewSharedInformerFactoryWithOptions(jobs, 0, jobinformers.WithNamespace(o.namespace),
		jobinformers.WithTransform(dropManagedFields))
	// Pods, services, secrets and config maps: only the project's children, without
	// managedFields (memory).
	kubeFactory := informers.NewSharedInformerFactoryWithOptions(kube, 0,
		informers.WithNamespace(o.namespace),
		informers.WithTweakListOptions(func(opts *metav1.ListOptions) { opts.LabelSelector = batch.LabelJobName }),
		informers.WithTransform(dropManagedFields))
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: events.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "t9k-job-controller"})

	controllers := []*engine.Controller{
		engine.New(genericjob.New(jobs, jobFactory.Batch().V1beta1().GenericJobs()), kube, kubeFactory, recorder),
		engine.New(mpijob.New(jobs, jobFactory.Batch().V1beta1().MPIJobs()), kube, kubeFactory, recorder),
		engine.New(colossalaijob.New(jobs, jobFactory.Batch().V1beta1().ColossalAIJobs()), kube, kubeFactory, recorder),
		engine.New(tensorflowjob.New(jobs, jobFactory.Batch().V1beta1().TensorFlowTrainingJobs()), kube, kubeFactory, recorder),
		engine.New(xgboostjob.New(jobs, jobFactory.Batch().V1beta1().XGBoostTrainingJobs()), kube, kubeFactory, recorder),
	}
	jobFactory.Start(ctx.Done())
	kubeFactory.Start(ctx.Done())
	for _, synced := range jobFactory.WaitForCacheSync(ctx.Done()) {
		if !synced {
			return
		}
	}
	for _, synced := range kubeFactory.WaitForCacheSync(ctx.Done()) {
		if !synced {
			return
		}
	}
	ready.Store(true)
	var wg sync.WaitGroup
	for _, c := range controllers {
		wg.Go(func() { c.Run(ctx, o.workers) })
	}
	wg.Wait()
	jobFactory.Shutdown()
	kubeFactory.Shutdown()
}

func dropManagedFields(obj any) (any, error) {
	if accessor, ok := obj.(metav1.Object); ok {
		accessor.SetManagedFields(nil)
	}
	return obj, nil
}

func leaderElect(ctx context.Context, o options, kube kubernetes.Interface, run func(context.Context), logger klog.Logger) error {
	namespace := o.leaseNamespace
	if namespace == "" {
		namespace = "default"
		if data, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
			namespace = string(data)
		}
	}
	host, _ := os.Hostname()
	id := fmt.Sprintf("%s_%d", host, os.Getpid())
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, o.leaseName, kube.CoreV1(), kube.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		return err
	}
	var lost error
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   15 * time.Second,
		RenewDeadline:   10 * time.Second,
		RetryPeriod:     2 * time.Second,
		ReleaseOnCancel: true,
		Name:            o.leaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				logger.Info("Leading", "lease", namespace+"/"+o.leaseName, "identity", id)
				run(ctx)
			},
			OnStoppedLeading: func() {
				if ctx.Err() == nil {
					lost = errors.New("lost the leader election lease")
				}
			},
		},
	})
	return lost
}

func serve(addr string, profiling bool, ready *atomic.Bool) *http.Server {
	mux := http.NewServeMux()
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.Handle("/metrics", promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "informer caches not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	server := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := server.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "Serving metrics and health checks failed", "address", addr)
		}
	}()
	return server
}
