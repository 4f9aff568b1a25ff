// Command t9k-job-controller runs the jobs of batch.tensorstack.dev: it watches the job kinds
// and their children, and drives each job to the end its spec describes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"reflect"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/t9k-jobs/t9k-jobs/pkg/agent"
	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned/scheme"
	jobinformers "github.com/t9k-jobs/t9k-jobs/pkg/client/informers/externalversions"
	kueueclient "github.com/t9k-jobs/t9k-jobs/pkg/client/kueue/clientset/versioned"
	kueueinformers "github.com/t9k-jobs/t9k-jobs/pkg/client/kueue/informers/externalversions"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/colossalaijob"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/gang"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/genericjob"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/kueue"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/leadership"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/metrics"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/mpijob"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/tensorflowjob"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/xgboostjob"
	"github.com/t9k-jobs/t9k-jobs/pkg/features"
	"github.com/t9k-jobs/t9k-jobs/pkg/version"
)

type options struct {
	kubeconfig     string
	namespaces     []string
	workers        int
	qps            float64
	burst          int
	leaderElect    bool
	leaseNamespace string
	leaseName      string
	leaseDuration  time.Duration
	renewDeadline  time.Duration
	retryPeriod    time.Duration
	resyncPeriod   time.Duration
	memoryLimit    string
	bindAddress    string
	profiling      bool
	scheduler      string
	agentImage     string
	progress       progressOptions
}

// The values of --scheduler: what spec.scheduler.t9kScheduler asks for.
const (
	schedulerT9k   = "t9k-scheduler"
	schedulerKueue = "kueue"
	schedulerGang  = "gang"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "agent" {
		// The restart agent in the pods of jobs that restart in place (pkg/agent).
		os.Exit(agent.Main(os.Args[2:], os.Stderr))
	}
	o := options{}
	fs := pflag.CommandLine
	fs.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file; in-cluster configuration when empty")
	fs.StringSliceVar(&o.namespaces, "namespace", nil, "namespaces whose jobs to run, separated by commas; all namespaces when empty (a namespaced install lists them: docs/install.md)")
	fs.IntVar(&o.workers, "workers", 8, "jobs of one kind synced at once")
	fs.Float64Var(&o.qps, "kube-api-qps", 200, "steady requests per second to the API server")
	fs.IntVar(&o.burst, "kube-api-burst", 400, "requests allowed in a burst above --kube-api-qps")
	fs.DurationVar(&o.resyncPeriod, "resync-period", 10*time.Minute,
		"how often every job is synced even when nothing about it changed: a safety net for an event that never came (0: never)")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "elect a leader among replicas of the controller with a Lease, so that one runs at a time")
	fs.StringVar(&o.leaseNamespace, "leader-elect-namespace", "", "namespace of the leader election Lease; the controller's own namespace (or default) when empty")
	fs.StringVar(&o.leaseName, "leader-elect-name", "t9k-job-controller", "name of the leader election Lease")
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 15*time.Second,
		"how long the other replicas wait after the leader's last renewal of the Lease before one of them takes it; whole seconds")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", 10*time.Second,
		"how long the leader may go without renewing the Lease; past it, it writes nothing more and exits. Shorter than the lease duration")
	fs.DurationVar(&o.retryPeriod, "leader-elect-retry-period", 2*time.Second,
		"time between two attempts to take or renew the Lease")
	fs.StringVar(&o.bindAddress, "bind-address", ":8080", "address of /metrics, /healthz and /readyz")
	fs.BoolVar(&o.profiling, "profiling", false, "serve Go profiles at /debug/pprof/ on --bind-address")
	fs.StringVar(&o.scheduler, "scheduler", schedulerT9k, "what a job's spec.scheduler.t9kScheduler asks for: "+schedulerT9k+
		" (its pods are placed by T9k Scheduler) or "+schedulerKueue+" (the job waits in Kueue's LocalQueue named by its queue, with its priority; its pods are placed by the default scheduler) or "+schedulerGang+
		" (the job starts whole: its pods are gang-scheduled by the default scheduler through a PodGroup; its queue and priority are ignored)")
	fs.StringVar(&o.memoryLimit, "memory-limit", os.Getenv(memoryLimitEnv),
		"the container's memory limit (e.g. 512Mi; $"+memoryLimitEnv+" by default): the Go runtime's soft limit is set to 90% of it, unless GOMEMLIMIT is set")
	fs.StringVar(&o.agentImage, "agent-image", "", "image of the restart agent in the pods of jobs that restart in place (spec.restartStrategy: InPlace): the controller's own image; in a cluster, the image of the controller's pod when empty")
	printVersion := fs.Bool("version", false, "print the controller's version, source revision and Go version, and exit")
	o.progress.addFlags(fs)
	features.Gates.AddFlag(fs)
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	pflag.Parse()
	if *printVersion {
		fmt.Println(version.Get())
		return
	}

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
	build := version.Get()
	logger.Info("Starting", "version", build.Version, "revision", build.Revision, "goVersion", build.GoVersion, "platform", build.Platform)
	go tuneGC(ctx)
	if soft, err := setMemoryLimit(o.memoryLimit); err != nil {
		return err
	} else if soft > 0 {
		logger.Info("Go memory limit set", "bytes", soft, "containerLimit", o.memoryLimit)
	}
	config, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading the client configuration: %w", err)
	}
	config.QPS, config.Burst = float32(o.qps), o.burst
	config.UserAgent = "t9k-job-controller"
	config.Wrap(metrics.CountRequests)
	// The Lease is renewed with a client of its own, outside the fence: its renewals are what
	// keeps the fence open.
	election, err := kubernetes.NewForConfig(protobuf(config))
	if err != nil {
		return err
	}
	// The progress endpoint's clients are outside the fence too: it serves on every replica
	// (docs/progress.md, "Every replica serves").
	if err := o.progress.check(); err != nil {
		return err
	}
	progressKube, err := kubernetes.NewForConfig(protobuf(config))
	if err != nil {
		return err
	}
	progressJobs, err := versioned.NewForConfig(rest.CopyConfig(config))
	if err != nil {
		return err
	}
	// With leader election every write that runs jobs, events included, asks the fence first:
	// none once this process cannot know that it still leads. Without, nothing is fenced.
	var fence *leadership.Fence
	if o.leaderElect {
		if err := checkLeaseTimings(o); err != nil {
			return err
		}
		fence = leadership.New(o.renewDeadline, clock.RealClock{})
		config.Wrap(fence.WrapTransport)
		config.Dial = fence.Dial((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	}
	kubeConfig := protobuf(config)
	kube, err := kubernetes.NewForConfig(kubeConfig)
	if err != nil {
		return err
	}
	jobs, err := versioned.NewForConfig(config)
	if err != nil {
		return err
	}
	// The informers watch on connections of their own (ownConnection), not on the one that
	// carries the writes.
	watchConfig := ownConnection(config)
	watchJobs, err := versioned.NewForConfig(watchConfig)
	if err != nil {
		return err
	}
	watchKube, err := kubernetes.NewForConfig(protobuf(watchConfig))
	if err != nil {
		return err
	}
	if err := checkNamespaces(o.namespaces); err != nil {
		return err
	}
	scopes := newScopes(o, jobs, watchJobs, watchKube)
	if err := checkCRDs(kube.Discovery(), scopes[0].kinds); err != nil {
		return err
	}
	endpoint, err := startProgress(ctx, o, progressKube, progressJobs, scopes)
	if err != nil {
		return err
	}
	kueueClient, err := kueueClientIfServed(kube, config, o, logger)
	if err != nil {
		return err
	}
	gangServed, err := podGroupsServed(ctx, kube.Discovery(), election, o, logger)
	if err != nil {
		return err
	}

	// /readyz: a replica that runs jobs is ready once its caches are synced (runAll); one that
	// stands by for the Lease is ready as it is, since it can take over: a Deployment of two
	// replicas is then fully available, and a rollout waits for each new one to stand by.
	var ready atomic.Int32
	if o.leaderElect {
		ready.Store(standingBy)
	}
	server, err := serve(o.bindAddress, o.profiling, &ready)
	if err != nil {
		return err
	}
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
		runAll(ctx, o, engine.Clients{Kube: kube}, scopes, endpoint, kueueClient, gangServed, events, &ready)
	}
	if !o.leaderElect {
		runControllers(ctx)
		return nil
	}
	return leaderElect(ctx, o, election, fence, runControllers, logger)
}

// protobuf returns a copy of config for the built-in kinds, which travel as protobuf: it costs
// the API server (and us) less than JSON. The job kinds are custom resources, which only speak
// JSON.
func protobuf(config *rest.Config) *rest.Config {
	c := rest.CopyConfig(config)
	c.ContentType = "application/vnd.kubernetes.protobuf"
	c.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return c
}

// ownConnection returns a copy of config whose clients each open a connection of their own.
// client-go shares one HTTP/2 connection among all the clients of equal TLS settings, and an
// API server busy with a burst of the controller's writes sends the events of watches on that
// connection late: in `make bench` pods' events reached the controller up to a second after
// a client on another connection saw them, and a job said Running that much later. The
// writes and the watches are kept apart. (A config that dials by itself is never shared.)
func ownConnection(config *rest.Config) *rest.Config {
	c := rest.CopyConfig(config)
	c.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	return c
}

// adapters is every kind the controller runs, one adapter each. The CRDs checked for at start
// are theirs, so a kind added here is checked for too.
func adapters(jobs versioned.Interface, f jobinformers.SharedInformerFactory) []engine.Adapter {
	b := f.Batch().V1beta1()
	return []engine.Adapter{
		genericjob.New(jobs, b.GenericJobs()),
		mpijob.New(jobs, b.MPIJobs()),
		colossalaijob.New(jobs, b.ColossalAIJobs()),
		tensorflowjob.New(jobs, b.TensorFlowTrainingJobs()),
		xgboostjob.New(jobs, b.XGBoostTrainingJobs()),
	}
}

// onlyChildren lists only the project's children: objects labelled with their job's name.
func onlyChildren(opts *metav1.ListOptions) { opts.LabelSelector = batch.LabelJobName }

// runAll starts the informers, the admitters and the controllers of every kind in every
// scope, and returns once ctx ends and in-flight syncs are done. The children's informers
// watch on a connection of their own; the progress endpoint may have started them, and those
// of the jobs, already. progress is what pods are told of it (nil: nothing). kueueClient is
// nil when Kueue's API is not served; gangServed is nil when PodGroups are not, and otherwise
// says which of their fields are.
func runAll(ctx context.Context, o options, clients engine.Clients, scopes []scope, progress *engine.ProgressEndpoint,
	kueueClient kueueclient.Interface, gangServed *gang.Features, events kubernetes.Interface, ready *atomic.Int32) {
	ready.Store(syncing)
	var factories []interface {
		Start(<-chan struct{})
		WaitForCacheSync(<-chan struct{}) map[reflect.Type]bool
		Shutdown()
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: events.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "t9k-job-controller"})

	// Kueue's cluster-wide objects (its ClusterQueues' flavors, priority classes): one
	// informer for every scope.
	var kueueCluster kueueinformers.SharedInformerFactory
	var maxPodSets int
	if kueueClient != nil {
		kueueCluster = kueueinformers.NewSharedInformerFactory(kueueClient, 0)
		maxPodSets = kueuePodSetLimit(ctx, clients.Kube.Discovery(), klog.FromContext(ctx))
		factories = append(factories, kueueCluster)
	}
	var controllers []*engine.Controller
	agentImage := agentImage(ctx, clients.Kube, o.agentImage)
	for _, s := range scopes {
		factories = append(factories, s.jobs, s.children.Kube)
		// The admitters, asked in this order. Each is always there: without its API a job
		// that asks for it waits, saying what is missing, rather than run otherwise. Kueue
		// comes first: a job both queued and gang-scheduled waits for its quota, then its
		// pods are made as a gang.
		queues := kueue.Config{Client: kueueClient, ForT9kScheduler: o.scheduler == schedulerKueue, Recorder: recorder}
		if kueueClient != nil {
			queues.Workloads = kueueinformers.NewSharedInformerFactoryWithOptions(kueueClient, 0,
				kueueinformers.WithNamespace(s.namespace),
				kueueinformers.WithTweakListOptions(onlyChildren),
				kueueinformers.WithTransform(kueue.TrimWorkload))
			queues.Cluster, queues.MaxPodSets = kueueCluster, maxPodSets
			factories = append(factories, queues.Workloads)
		}
		gangs := gang.Config{ForT9kScheduler: o.scheduler == schedulerGang, Recorder: recorder}
		if gangServed != nil {
			gangs.Client, gangs.Informers, gangs.Features = clients.Kube, s.children.Kube, *gangServed
		}
		options := engine.Options{Admitters: []engine.Admitter{kueue.New(queues), gang.New(gangs)}, Progress: progress, AgentImage: agentImage}
		if len(scopes) > 1 {
			options.Namespace = s.namespace
		}
		for _, a := range s.kinds {
			controllers = append(controllers, engine.New(a, clients, s.children, recorder, options))
		}
	}
	for _, f := range factories {
		f.Start(ctx.Done())
	}
	for _, f := range factories {
		for _, synced := range f.WaitForCacheSync(ctx.Done()) {
			if !synced {
				return
			}
		}
	}
	ready.Store(runningJobs)
	var wg sync.WaitGroup
	for _, c := range controllers {
		wg.Go(func() { c.Run(ctx, o.workers) })
	}
	wg.Wait()
	for _, f := range factories {
		f.Shutdown()
	}
}

// kueueClientIfServed returns the client of Kueue's API when the API server serves it (nil
// otherwise: nothing of Kueue is watched), and checks --scheduler.
func kueueClientIfServed(kube kubernetes.Interface, config *rest.Config, o options, logger klog.Logger) (kueueclient.Interface, error) {
	if o.scheduler != schedulerT9k && o.scheduler != schedulerKueue && o.scheduler != schedulerGang {
		return nil, fmt.Errorf("--scheduler=%q: want %s, %s or %s", o.scheduler, schedulerT9k, schedulerKueue, schedulerGang)
	}
	served, err := kueueServed(kube.Discovery())
	if err != nil {
		return nil, err
	}
	if !served {
		if o.scheduler == schedulerKueue {
			logger.Info("Kueue's API is not served: jobs that ask for a queue wait until Kueue is installed and the controller restarted", "scheduler", o.scheduler)
		}
		return nil, nil
	}
	logger.Info("Kueue's API is served: jobs that ask for a Kueue queue run as Kueue workloads", "scheduler", o.scheduler)
	return kueueclient.NewForConfig(config)
}

// What /readyz says: 503 while the caches sync; 200 with "ok" once the controller runs jobs,
// and with "standing by" while it waits for the Lease.
const (
	syncing int32 = iota
	standingBy
	runningJobs
)

// serve listens on addr before it returns: a controller that cannot serve its health checks
// stops at once, with the flag to change, rather than run with probes that can never answer.
func serve(addr string, profiling bool, ready *atomic.Int32) (*http.Server, error) {
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--bind-address=%s: %w", addr, err)
	}
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
		switch ready.Load() {
		case syncing:
			http.Error(w, "informer caches not synced", http.StatusServiceUnavailable)
		case standingBy:
			_, _ = w.Write([]byte("standing by for the Lease"))
		default:
			_, _ = w.Write([]byte("ok"))
		}
	})
	server := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := server.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "Serving metrics and health checks failed", "address", addr)
		}
	}()
	return server, nil
}
