package metrics

import (
	"regexp"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// registered are the collectors Register added to Registry, for SeriesNames.
var registered struct {
	sync.Mutex
	collectors []prometheus.Collector
}

// Register adds collectors to Registry, as MustRegister does, and remembers them: a vector
// that has seen no label values yet serves nothing, and SeriesNames must still name it.
func Register(collectors ...prometheus.Collector) {
	Registry.MustRegister(collectors...)
	registered.Lock()
	defer registered.Unlock()
	registered.collectors = append(registered.collectors, collectors...)
}

// fqName reads a metric's name from its description: prometheus.Desc keeps it unexported,
// and its String form has been `Desc{fqName: "name", ...}` since client_golang's first release.
var fqName = regexp.MustCompile(`^Desc\{fqName: "([^"]+)"`)

// SeriesNames returns the name of every series the controller can serve on /metrics: each
// metric's own name and, for histograms and summaries, its _bucket, _sum and _count series.
// It is what a dashboard panel or an alert rule may name (docs/monitoring.md).
func SeriesNames() (map[string]bool, error) {
	names := map[string]bool{}
	add := func(name string, histogram, summary bool) {
		names[name] = true
		if histogram {
			names[name+"_bucket"] = true
		}
		if histogram || summary {
			names[name+"_sum"] = true
			names[name+"_count"] = true
		}
	}
	// What is served now, with each family's type: the Go and process collectors' metrics
	// are only known this way.
	families, err := Registry.Gather()
	if err != nil {
		return nil, err
	}
	for _, f := range families {
		add(f.GetName(), f.GetType() == dto.MetricType_HISTOGRAM, f.GetType() == dto.MetricType_SUMMARY)
	}
	// What may be served once a vector has a series.
	registered.Lock()
	defer registered.Unlock()
	for _, c := range registered.collectors {
		var histogram, summary bool
		switch c.(type) {
		case *prometheus.HistogramVec, prometheus.Histogram:
			histogram = true
		case *prometheus.SummaryVec, prometheus.Summary:
			summary = true
		}
		descs := make(chan *prometheus.Desc)
		go func() {
			c.Describe(descs)
			close(descs)
		}()
		for d := range descs {
			if m := fqName.FindStringSubmatch(d.String()); m != nil {
				add(m[1], histogram, summary)
			}
		}
	}
	return names, nil
}
