package harness

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Metrics is a /metrics page in Prometheus' text format.
type Metrics string

// ReadMetrics reads the /metrics page at url.
func ReadMetrics(url string) (Metrics, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s", url, resp.Status)
	}
	return Metrics(body), err
}

// Sample is one line of a page: a series and its value.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Samples are the page's samples of metric (every sample when metric is empty).
func (m Metrics) Samples(metric string) []Sample {
	var out []Sample
	for _, line := range strings.Split(string(m), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		s, ok := parseSample(line)
		if ok && (metric == "" || s.Name == metric) {
			out = append(out, s)
		}
	}
	return out
}

// parseSample reads `name{a="x",b="y, \"z\""} 1.5`: label values are quoted, and may hold
// spaces, commas and escaped quotes.
func parseSample(line string) (Sample, bool) {
	s := Sample{Labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, false
	}
	s.Name, line = line[:i], line[i:]
	if line[0] == '{' {
		line = line[1:]
		for len(line) > 0 && line[0] != '}' {
			key, rest, ok := strings.Cut(line, `="`)
			if !ok {
				return s, false
			}
			var value strings.Builder
			j := 0
			for ; j < len(rest) && rest[j] != '"'; j++ {
				if rest[j] == '\\' && j+1 < len(rest) {
					j++
				}
				value.WriteByte(rest[j])
			}
			if j == len(rest) {
				return s, false
			}
			s.Labels[key] = value.String()
			line = strings.TrimPrefix(rest[j+1:], ",")
		}
		line = strings.TrimPrefix(line, "}")
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(line), 64)
	s.Value = v
	return s, err == nil
}

// Value is the value of one series, named as the text format spells it:
// go_memstats_heap_inuse_bytes, workqueue_depth{name="GenericJob"}.
func (m Metrics) Value(series string) (float64, bool) {
	for _, line := range strings.Split(string(m), "\n") {
		if name, value, ok := strings.Cut(line, " "); ok && name == series {
			v, err := strconv.ParseFloat(value, 64)
			return v, err == nil
		}
	}
	return 0, false
}

// Has tells whether the page has a line that starts with series, e.g.
// `t9k_job_phase_transitions_total{from="Pending",kind="GenericJob",to="Running"}`.
func (m Metrics) Has(series string) bool {
	for _, line := range strings.Split(string(m), "\n") {
		if strings.HasPrefix(line, series) {
			return true
		}
	}
	return false
}
