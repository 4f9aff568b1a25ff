package progress

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/t9k-jobs/t9k-jobs/pkg/controller/metrics"
)

var (
	reports = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "t9k_progress_reports_total",
		Help: "Progress reports received, by the HTTP status code of the answer (200 accepted; 401, 403, 404, 413, 422, 429 refused).",
	}, []string{"code"})
	reportDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "t9k_progress_report_duration_seconds",
		Help:    "Time to answer a progress report, its TokenReview included when not cached.",
		Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16), // 50 µs to 1.6 s
	})
	statusWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "t9k_progress_status_writes_total",
		Help: "Status writes of jobs' progress, by result (written, conflict: retried at the next interval, error).",
	}, []string{"result"})
	tokenReviews = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "t9k_progress_token_reviews_total",
		Help: "TokenReviews sent for progress reports (cached answers are not counted), by result (accepted, refused, error).",
	}, []string{"result"})
)

func init() {
	metrics.Register(reports, reportDuration, statusWrites, tokenReviews)
}
