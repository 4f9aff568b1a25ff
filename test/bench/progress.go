package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/t9k-jobs/t9k-jobs/pkg/progress"
)

// -progress: what progress reports cost (docs/progress.md). One cluster and controller, its
// progress endpoint on; the burst's jobs run; then the controller is measured over
// progressPeriod with nothing to do, and over progressPeriod while every pod reports once a
// second, sent from here with a token minted bound to the pod (as the kubelet mints it) and
// over connections kept open (the helper opens one a report: that costs a TLS handshake
// more each, docs/progress.md), after a first round that has every token reviewed. It
// reports the status writes per job per minute, the reports' answers and their time at the
// client and in the controller, the controller's CPU in both periods, and its API writes
// during the reports.

const progressPeriod = 60 * time.Second

func progressRun(ctx context.Context, c config, dir string) error {
	fmt.Printf("\n%d GenericJobs x %d replicas; every pod reports its progress once a second for %s, against %s without reports\n",
		c.jobs, c.replicas, progressPeriod, progressPeriod)
	return withSettledJobs(ctx, c, dir, func(ctl *controllerProcess, _ *rest.Config, kube kubernetes.Interface) error {
		pods, err := kube.CoreV1().Pods(jobNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		reporters, client, err := reportersOf(ctx, kube, ctl.progress, pods.Items)
		if err != nil {
			return err
		}

		quiet, err := ctl.idle("GenericJob", progressPeriod)
		if err != nil {
			return err
		}
		fmt.Printf("  without reports: %s\n", quiet)
		// A first round, not measured: each pod's token reviewed, each job's first write.
		first := sendReports(ctx, client, reporters, time.Nanosecond)
		fmt.Printf("  first reports (each token reviewed): answered %s; at the client p50 %s p99 %s\n", first.codes(), ms(percentile(first.took, 0.5)), ms(percentile(first.took, 0.99)))

		series := []string{`t9k_progress_status_writes_total{result="written"}`, `t9k_progress_status_writes_total{result="conflict"}`,
			`workqueue_adds_total{name="GenericJob"}`, "t9k_progress_report_duration_seconds_sum", "t9k_progress_report_duration_seconds_count",
			`t9k_progress_token_reviews_total{result="accepted"}`, "t9k_progress_reports_total{code=\"200\"}"}
		series = append(series, reportBuckets()...)
		before, err := ctl.series(series...)
		if err != nil {
			return err
		}
		requests, err := scrape(ctl.metrics)
		if err != nil {
			return err
		}
		cpu := ctl.cpuSeconds()
		sent := sendReports(ctx, client, reporters, progressPeriod)
		cpu = ctl.cpuSeconds() - cpu
		after, err := ctl.series(series...)
		if err != nil {
			return err
		}
		requestsAfter, err := scrape(ctl.metrics)
		if err != nil {
			return err
		}
		delta := func(s string) float64 { return after[s] - before[s] }
		minutes := progressPeriod.Minutes()
		fmt.Printf("  with reports: %d sent, answered %s; at the client p50 %s p99 %s\n", sent.total, sent.codes(), ms(percentile(sent.took, 0.5)), ms(percentile(sent.took, 0.99)))
		fmt.Printf("  with reports: controller CPU %.2f%% of a core (without: %.2f%%); in the controller a report took p50 %s p99 %s (a bucket's bound), %.0f TokenReviews\n",
			cpu/progressPeriod.Seconds()*100, quiet.cpu, quantile(before, after, 0.5), quantile(before, after, 0.99), delta(`t9k_progress_token_reviews_total{result="accepted"}`))
		fmt.Printf("  with reports: status writes of progress per job per minute %.2f (target <= %.0f), conflicts %.0f, syncs of the jobs %.0f\n",
			delta(`t9k_progress_status_writes_total{result="written"}`)/float64(c.jobs)/minutes, time.Minute.Seconds()/progress.DefaultWriteInterval.Seconds()+1,
			delta(`t9k_progress_status_writes_total{result="conflict"}`), delta(`workqueue_adds_total{name="GenericJob"}`))
		fmt.Println("  with reports: the controller's API writes per job per minute, by verb and resource:")
		for _, k := range slices.Sorted(maps.Keys(requestsAfter)) {
			verb := strings.Fields(k)[0]
			if n := requestsAfter[k] - requests[k]; n > 0 && isWrite(verb) {
				fmt.Printf("    %-40s %6.2f\n", k, n/float64(c.jobs)/minutes)
			}
		}
		return nil
	})
}

// reporter is one pod that reports: its endpoint and token.
type reporter struct{ url, token string }

// reportersOf mints a token for every pod, bound to it, for its job's audience, and makes a
// client that trusts the endpoint's CA (from a job's ConfigMap).
func reportersOf(ctx context.Context, kube kubernetes.Interface, base string, pods []corev1.Pod) ([]reporter, *http.Client, error) {
	reporters := make([]reporter, len(pods))
	err := parallel(16, len(pods), func(i int) error {
		p := &pods[i]
		job := progress.JobRef{Resource: "genericjobs", Namespace: p.Namespace, Name: p.Labels["batch.tensorstack.dev/job-name"]}
		tr, err := kube.CoreV1().ServiceAccounts(p.Namespace).CreateToken(ctx, p.Spec.ServiceAccountName, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: []string{progress.Audience(job)}, ExpirationSeconds: ptr.To[int64](3600),
				BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID}}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		reporters[i] = reporter{url: base + progress.Path(job), token: tr.Status.Token}
		return nil
	})
	if err != nil || len(pods) == 0 {
		return nil, nil, err
	}
	cm, err := kube.CoreV1().ConfigMaps(jobNamespace).Get(ctx, pods[0].Labels["batch.tensorstack.dev/job-name"]+"-progress-ca", metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(cm.Data["ca.crt"])) {
		return nil, nil, fmt.Errorf("the CA's ConfigMap holds no certificate")
	}
	return reporters, &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool},
		MaxIdleConnsPerHost: 64}}, nil
}

// sent is what the reports' answers were.
type sent struct {
	mu     sync.Mutex
	total  int
	byCode map[int]int
	took   []time.Duration
}

func (s *sent) codes() string {
	var parts []string
	for code, n := range s.byCode {
		parts = append(parts, fmt.Sprintf("%d x%d", code, n))
	}
	return strings.Join(parts, ", ")
}

// sendReports has every reporter report once a second for period (once at least), 64 at a
// time.
func sendReports(ctx context.Context, client *http.Client, reporters []reporter, period time.Duration) *sent {
	s := &sent{byCode: map[int]int{}}
	start := time.Now()
	for second := 1; second == 1 || time.Since(start) < period; second++ {
		tick := time.Now()
		_ = parallel(64, len(reporters), func(i int) error {
			body := fmt.Sprintf(`{"trainerStatus": {"metrics": [{"name": "currentStep", "value": "%d"}, {"name": "totalSteps", "value": "100000"}, {"name": "loss", "value": "0.5"}], "lastUpdatedTime": %q}}`,
				second, time.Now().UTC().Format(time.RFC3339))
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, reporters[i].url, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+reporters[i].token)
			began := time.Now()
			code := 0
			if resp, err := client.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				code = resp.StatusCode
			}
			s.mu.Lock()
			s.total++
			s.byCode[code]++
			s.took = append(s.took, time.Since(began))
			s.mu.Unlock()
			return nil
		})
		time.Sleep(time.Second - time.Since(tick))
	}
	return s
}

// The buckets of t9k_progress_report_duration_seconds (pkg/progress/metrics.go).
var reportBucketBounds = func() []float64 {
	b := []float64{}
	for v := 0.00005; len(b) < 16; v *= 2 {
		b = append(b, v)
	}
	return b
}()

func reportBuckets() []string {
	names := make([]string, len(reportBucketBounds))
	for i, b := range reportBucketBounds {
		names[i] = fmt.Sprintf("t9k_progress_report_duration_seconds_bucket{le=%q}", strconv.FormatFloat(b, 'g', -1, 64))
	}
	return names
}

// quantile is the upper bound of the bucket that holds the q-quantile of the reports'
// times between two scrapes.
func quantile(before, after map[string]float64, q float64) string {
	names := reportBuckets()
	total := after[`t9k_progress_report_duration_seconds_count`] - before[`t9k_progress_report_duration_seconds_count`]
	for i, name := range names {
		if total > 0 && after[name]-before[name] >= q*total {
			return fmt.Sprintf("<=%s", time.Duration(reportBucketBounds[i]*float64(time.Second)))
		}
	}
	return ">1.6s"
}
