package metrics

import (
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/t9k-jobs/t9k-jobs/pkg/version"
)

func TestBuildInfoNamesTheRunningBuild(t *testing.T) {
	families, err := Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "t9k_build_info" {
			continue
		}
		if len(f.GetMetric()) != 1 {
			t.Fatalf("t9k_build_info has %d series, want 1", len(f.GetMetric()))
		}
		m := f.GetMetric()[0]
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		want := version.Get()
		if labels["version"] != want.Version || labels["revision"] != want.Revision || labels["goversion"] != runtime.Version() || m.GetGauge().GetValue() != 1 {
			t.Errorf("t9k_build_info = %v %v, want version %q revision %q goversion %q and 1", labels, m.GetGauge().GetValue(), want.Version, want.Revision, runtime.Version())
		}
		return
	}
	t.Fatal("no t9k_build_info in the registry")
}

func TestSeriesNamesIncludeVectorsWithoutSeries(t *testing.T) {
	names, err := SeriesNames()
	if err != nil {
		t.Fatal(err)
	}
	// Stalls has no series in this test process, yet a dashboard may name it; a histogram
	// is named with its three series, and the Go collector's metrics are there too.
	for _, want := range []string{"t9k_job_stalls_total", "t9k_jobs", "t9k_job_sync_duration_seconds_bucket",
		"t9k_job_sync_duration_seconds_count", "workqueue_queue_duration_seconds_sum", "go_goroutines", "process_resident_memory_bytes"} {
		if !names[want] {
			t.Errorf("SeriesNames has no %s", want)
		}
	}
	for _, unknown := range []string{"t9k_job_stalls", "t9k_job_stalls_total_bucket", "t9k_jobs_sum"} {
		if names[unknown] {
			t.Errorf("SeriesNames has %s, which the controller never serves", unknown)
		}
	}
}

// Requests are counted by verb and resource (with subresource), and a dry run, which writes
// nothing, apart from the writes.
func TestRequestsNamedByVerbAndResource(t *testing.T) {
	for _, tc := range []struct {
		method, url    string
		verb, resource string
	}{
		{"POST", "/api/v1/namespaces/ns/pods", "create", "pods"},
		{"PUT", "/apis/batch.tensorstack.dev/v1beta1/namespaces/ns/genericjobs/job/status", "update", "genericjobs/status"},
		{"GET", "/api/v1/namespaces/ns/pods", "list", "pods"},
		{"GET", "/api/v1/pods?watch=true", "watch", "pods"},
		{"POST", "/apis/scheduling.k8s.io/v1beta1/namespaces/ns/podgroups?dryRun=All", "dryrun-create", "podgroups"},
		{"GET", "/version", "get", "other"},
	} {
		req := httptest.NewRequest(tc.method, tc.url, nil)
		if verb, resource := describe(req); verb != tc.verb || resource != tc.resource {
			t.Errorf("%s %s: %q %q, want %q %q", tc.method, tc.url, verb, resource, tc.verb, tc.resource)
		}
	}
}
