package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// jobsDesc is a gauge computed at scrape time from the informer caches, so that it is always
// true and costs nothing between scrapes.
var jobsDesc = prometheus.NewDesc("t9k_jobs", "Jobs in the informer cache, by kind and phase.", []string{"kind", "phase"}, nil)

type jobsCollector struct {
	mu      sync.Mutex
	sources map[string]func() []string
}

var jobs = &jobsCollector{sources: map[string]func() []string{}}

func init() { Register(jobs) }

// ReportJobs makes t9k_jobs{kind} count the phases that phases returns (one per job; "" for a
// job without a phase yet is reported as Pending).
func ReportJobs(kind string, phases func() []string) {
	jobs.mu.Lock()
	defer jobs.mu.Unlock()
	jobs.sources[kind] = phases
}

func (c *jobsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- jobsDesc }

func (c *jobsCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for kind, phases := range c.sources {
		counts := map[string]int{}
		for _, phase := range phases() {
			if phase == "" {
				phase = "Pending"
			}
			counts[phase]++
		}
		for phase, n := range counts {
			ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(n), kind, phase)
		}
	}
}
