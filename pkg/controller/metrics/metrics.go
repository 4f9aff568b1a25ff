// Package metrics defines the controller's Prometheus metrics, and plugs client-go's workqueue
// and REST client metrics into the same registry.
package metrics

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	clientmetrics "k8s.io/client-go/tools/metrics"
	"k8s.io/client-go/util/workqueue"

	"github.com/t9k-jobs/t9k-jobs/pkg/version"
)

// Registry holds every metric the controller serves on /metrics.
var Registry = prometheus.NewRegistry()

var (
	// PhaseTransitions counts job phase changes, once per change the controller writes.
	PhaseTransitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "t9k_job_phase_transitions_total",
		Help: "Job phase transitions written by the controller, by kind and the phases left and entered.",
	}, []string{"kind", "from", "to"})

	// SyncDuration times each sync of a job.
	SyncDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "t9k_job_sync_duration_seconds",
		Help:    "Time to sync one job, by kind and result (success, error).",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	}, []string{"kind", "result"})

	// ChildrenCreated, ChildrenUpdated and ChildrenDeleted count the children the controller
	// wrote, of every kind.
	ChildrenCreated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "t9k_job_children_created_total",
		Help: "Child objects created, by kind of job and resource (pods, services, ...).",
	}, []string{"kind", "resource"})
	ChildrenUpdated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "t9k_job_children_updated_total",
		Help: "Child objects updated to follow a changed spec, by kind of job and resource.",
	}, []string{"kind", "resource"})
	ChildrenDeleted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "t9k_job_children_deleted_total",
		Help: "Child objects deleted, by kind of job and resource (pods, services, ...).",
	}, []string{"kind", "resource"})

	// Restarts counts replica restarts.
	Restarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "t9k_job_replica_restarts_total",
		Help: "Replica restarts carried out by the controller, by kind of job.",
	}, []string{"kind"})

	// JobRestarts counts whole-job restarts, each the beginning of an attempt, by cause.
	JobRestarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "t9k_job_restarts_total",
		Help: "Whole-job restarts begun (each a new attempt), by kind of job and cause: Failure (restartScope Job), Rule, Stall, Disruption, Request.",
	}, []string{"kind", "cause"})

	// Disruptions counts replicas whose pods were disrupted (evicted, preempted, deleted by
	// others) and replaced without a restart.
	Disruptions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "t9k_job_replica_disruptions_total",
		Help: "Replicas replaced because their pods were disrupted, not failed, by kind of job.",
	}, []string{"kind"})
	// FailurePolicyDecisions counts what spec.failurePolicy rules decided, by action.
	FailurePolicyDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "t9k_job_failure_policy_decisions_total",
		Help: "Replica endings a spec.failurePolicy rule decided, by the rule's action (FailJob, RestartReplica, RestartJob, Ignore).",
	}, []string{"kind", "action"})
	// Stalls counts the decisions that found a running job's replicas stalled.
	Stalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "t9k_job_stalls_total",
		Help: "Times a running job was found stalled: a replica that reported progress reported nothing for spec.progressDeadlineSeconds.",
	}, []string{"kind"})
	// TTLDeletions counts the finished jobs deleted for their ttlSecondsAfterFinished.
	TTLDeletions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "t9k_job_ttl_deletions_total",
		Help: "Finished jobs deleted once their ttlSecondsAfterFinished passed, by kind of job.",
	}, []string{"kind"})

	// QueueEvictions counts the times Kueue evicted a running job and the controller stopped
	// it, by kind and Kueue's reason (Preempted, PodsReadyTimeout, ...).
	QueueEvictions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "t9k_job_queue_evictions_total",
		Help: "Jobs stopped because Kueue evicted them, by kind of job and the eviction's reason.",
	}, []string{"kind", "reason"})

	// BuildInfo is 1, labelled with the running build: a dashboard tells which version each
	// replica runs, and when an upgrade reached it.
	BuildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "t9k_build_info",
		Help: "Always 1, labelled with the controller's version, source revision and Go version.",
	}, []string{"version", "revision", "goversion"})

	// APIRequests counts the controller's requests to the API server by verb, resource and
	// status code; it tells how many writes a job costs.
	APIRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "t9k_api_requests_total",
		Help: "Requests of the controller to the API server, by verb, resource (with subresource) and status code.",
	}, []string{"verb", "resource", "code"})
)

func init() {
	Register(PhaseTransitions, SyncDuration, ChildrenCreated, ChildrenUpdated, ChildrenDeleted, Restarts, JobRestarts, Disruptions, FailurePolicyDecisions, Stalls, TTLDeletions, QueueEvictions, APIRequests, BuildInfo,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	build := version.Get()
	BuildInfo.WithLabelValues(build.Version, build.Revision, build.GoVersion).Set(1)
	registerWorkqueueMetrics()
	registerRESTClientMetrics()
}

// CountRequests wraps a client's transport so that APIRequests counts its requests.
func CountRequests(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		code := "error"
		if err == nil {
			code = strconv.Itoa(resp.StatusCode)
		}
		verb, resource := describe(req)
		APIRequests.WithLabelValues(verb, resource, code).Inc()
		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// describe names a request's verb and resource from its method and path:
// /api/v1/namespaces/ns/pods/name/status is ("update", "pods/status"). A dry run, which
// writes nothing (the start's probe of the PodGroup fields the API server keeps), is its
// verb after "dryrun-": ("dryrun-create", "podgroups").
func describe(req *http.Request) (verb, resource string) {
	verb, resource = describePath(req)
	if req.URL.Query().Get("dryRun") != "" {
		verb = "dryrun-" + verb
	}
	return verb, resource
}

// describePath is describe but for a dry run: the verb of the method, the resource of the path.
func describePath(req *http.Request) (verb, resource string) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	// Drop the group-version prefix: api/v1 or apis/<group>/<version>.
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return strings.ToLower(req.Method), "other"
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) > 2 {
		parts = parts[2:]
	}
	named := len(parts) >= 2
	if len(parts) == 0 {
		return strings.ToLower(req.Method), "other"
	}
	resource = parts[0]
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	switch req.Method {
	case http.MethodGet:
		verb = "get"
		if !named {
			verb = "list"
		}
		if req.URL.Query().Get("watch") == "true" {
			verb = "watch"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	default:
		verb = strings.ToLower(req.Method)
	}
	return verb, resource
}

// client-go workqueue metrics, under the names client-go's own provider uses.
type workqueueProvider struct {
	depth, unfinished, longestRun *prometheus.GaugeVec
	latency, workDuration         *prometheus.HistogramVec
	addsCounter, retriesCounter   *prometheus.CounterVec
}

func registerWorkqueueMetrics() {
	p := &workqueueProvider{
		depth:       prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_depth", Help: "Current depth of the workqueue."}, []string{"name"}),
		addsCounter: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_adds_total", Help: "Adds handled by the workqueue."}, []string{"name"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "workqueue_queue_duration_seconds", Help: "Time an item waits in the workqueue.",
			Buckets: prometheus.ExponentialBuckets(1e-6, 10, 10)}, []string{"name"}),
		workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "workqueue_work_duration_seconds", Help: "Time processing an item takes.",
			Buckets: prometheus.ExponentialBuckets(1e-6, 10, 10)}, []string{"name"}),
		unfinished:     prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_unfinished_work_seconds", Help: "Seconds of work in progress not yet observed by work_duration."}, []string{"name"}),
		longestRun:     prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_longest_running_processor_seconds", Help: "Seconds the longest running processor has been running."}, []string{"name"}),
		retriesCounter: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_retries_total", Help: "Retries handled by the workqueue."}, []string{"name"}),
	}
	Register(p.depth, p.addsCounter, p.latency, p.workDuration, p.unfinished, p.longestRun, p.retriesCounter)
	workqueue.SetProvider(p)
}

func (p *workqueueProvider) NewDepthMetric(name string) workqueue.GaugeMetric {
	return p.depth.WithLabelValues(name)
}
func (p *workqueueProvider) NewAddsMetric(name string) workqueue.CounterMetric {
	return p.addsCounter.WithLabelValues(name)
}
func (p *workqueueProvider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return p.latency.WithLabelValues(name)
}
func (p *workqueueProvider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return p.workDuration.WithLabelValues(name)
}
func (p *workqueueProvider) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.unfinished.WithLabelValues(name)
}
func (p *workqueueProvider) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.longestRun.WithLabelValues(name)
}
func (p *workqueueProvider) NewRetriesMetric(name string) workqueue.CounterMetric {
	return p.retriesCounter.WithLabelValues(name)
}

// client-go REST client metrics: request latency and results.
var (
	restLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "rest_client_request_duration_seconds", Help: "Request latency of the REST client, by verb and host.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
	}, []string{"verb", "host"})
	restResults = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rest_client_requests_total", Help: "Requests of the REST client, by status code, method and host.",
	}, []string{"code", "method", "host"})
	restRateLimiterLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "rest_client_rate_limiter_duration_seconds", Help: "Time requests waited for the client-side rate limiter (QPS/burst), by verb and host.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
	}, []string{"verb", "host"})
)

type latencyAdapter struct{ m *prometheus.HistogramVec }

func (a latencyAdapter) Observe(_ context.Context, verb string, u url.URL, latency time.Duration) {
	a.m.WithLabelValues(verb, u.Host).Observe(latency.Seconds())
}

type resultAdapter struct{ m *prometheus.CounterVec }

func (a resultAdapter) Increment(_ context.Context, code, method, host string) {
	a.m.WithLabelValues(code, method, host).Inc()
}

func registerRESTClientMetrics() {
	Register(restLatency, restResults, restRateLimiterLatency)
	clientmetrics.Register(clientmetrics.RegisterOpts{
		RequestLatency:     latencyAdapter{restLatency},
		RateLimiterLatency: latencyAdapter{restRateLimiterLatency},
		RequestResult:      resultAdapter{restResults},
	})
}
