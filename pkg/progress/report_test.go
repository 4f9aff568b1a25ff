package progress

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// TestParseReport: Kubeflow Trainer's request, its step and epoch metrics read into their
// fields, a percentage from the steps when none is reported, unknown fields ignored, and the
// metrics kept to 16.
func TestParseReport(t *testing.T) {
	r, err := ParseReport([]byte(`{"trainerStatus": {"progressPercentage": 40, "estimatedRemainingSeconds": 600,
		"metrics": [{"name": "loss", "value": "0.31"}, {"name": "currentStep", "value": "400"}, {"name": "totalSteps", "value": "1000"},
		{"name": "currentEpoch", "value": "2"}, {"name": "totalEpochs", "value": "5"}, {"name": "loss", "value": "0.30"}],
		"lastUpdatedTime": "2026-01-02T15:04:05.5Z", "somethingNew": true}, "other": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	want := &Report{Percentage: ptr32(40), ETA: ptr32(600), Step: ptr64(400), TotalSteps: ptr64(1000), Epoch: ptr64(2), TotalEpochs: ptr64(5),
		Metrics: []batch.ProgressMetric{{Name: "loss", Value: "0.30"}}, LastUpdated: time.Date(2026, 1, 2, 15, 4, 5, 5e8, time.UTC)}
	if !r.LastUpdated.Equal(want.LastUpdated) || r.LastUpdated.Location() != time.UTC {
		t.Errorf("lastUpdatedTime %s, want %s in UTC", r.LastUpdated, want.LastUpdated)
	}
	r.LastUpdated = want.LastUpdated
	if !reflect.DeepEqual(r, want) {
		t.Errorf("got %+v\nwant %+v", r, want)
	}

	r, err = ParseReport([]byte(`{"trainerStatus": {"metrics": [{"name": "currentStep", "value": "250"}, {"name": "totalSteps", "value": "1000"}], "lastUpdatedTime": "2026-01-02T15:04:05+08:00"}}`))
	if err != nil || *r.Percentage != 25 {
		t.Errorf("a percentage from the steps: %+v %v, want 25", r, err)
	}
	r, _ = ParseReport([]byte(`{"trainerStatus": {"metrics": [{"name": "currentStep", "value": "1200"}, {"name": "totalSteps", "value": "1000"}], "lastUpdatedTime": "2026-01-02T15:04:05Z"}}`))
	if *r.Percentage != 100 {
		t.Errorf("a step past the total: %d%%, want 100", *r.Percentage)
	}

	var metrics []string
	for i := range 40 {
		metrics = append(metrics, fmt.Sprintf(`{"name": "m%d", "value": "%d"}`, i, i))
	}
	r, err = ParseReport([]byte(`{"trainerStatus": {"metrics": [` + strings.Join(metrics, ",") + `], "lastUpdatedTime": "2026-01-02T15:04:05Z"}}`))
	if err != nil || len(r.Metrics) != keptMetrics || r.Metrics[15].Name != "m15" {
		t.Errorf("40 metrics: kept %d (%v), want the first 16", len(r.Metrics), err)
	}
}

// TestParseReportRefuses: what Trainer's API refuses, and what the step metrics cannot be,
// each named.
func TestParseReportRefuses(t *testing.T) {
	at := `"lastUpdatedTime": "2026-01-02T15:04:05Z"`
	many := strings.TrimSuffix(strings.Repeat(`{"name": "a", "value": "1"},`, 257), ",")
	for body, want := range map[string]string{
		``:                        "empty",
		`[]`:                      "the body: a JSON array, want an object",
		`{} {}`:                   "more than one JSON value",
		`{"trainerStatus": null}`: "trainerStatus: required",
		`{"trainerStatus": {}}`:   "trainerStatus.lastUpdatedTime: required",
		`{"trainerStatus": {"lastUpdatedTime": "yesterday"}}`:                                                     `"yesterday" is not an RFC 3339 time`,
		`{"trainerStatus": {"progressPercentage": -1, ` + at + `}}`:                                               "progressPercentage: -1 is not within 0 and 100",
		`{"trainerStatus": {"progressPercentage": "50", ` + at + `}}`:                                             "trainerStatus.progressPercentage: a JSON string, want a whole number",
		`{"trainerStatus": {"estimatedRemainingSeconds": -5, ` + at + `}}`:                                        "estimatedRemainingSeconds: -5 is not within 0 and 2147483647",
		`{"trainerStatus": {"estimatedRemainingSeconds": 4294967296, ` + at + `}}`:                                "estimatedRemainingSeconds: 4294967296 is not within",
		`{"trainerStatus": {"metrics": {}, ` + at + `}}`:                                                          "trainerStatus.metrics: a JSON object, want a list of metrics",
		`{"trainerStatus": {"metrics": [` + many + `], ` + at + `}}`:                                              "257 metrics, at most 256",
		`{"trainerStatus": {"metrics": [{"name": "", "value": "1"}], ` + at + `}}`:                                "trainerStatus.metrics[0].name: 0 bytes, want 1 to 64",
		`{"trainerStatus": {"metrics": [{"name": "a", "value": "` + strings.Repeat("9", 65) + `"}], ` + at + `}}`: "trainerStatus.metrics[0].value: 65 bytes",
		`{"trainerStatus": {"metrics": [{"name": "totalEpochs", "value": "-2"}], ` + at + `}}`:                    `totalEpochs "-2" is not a whole number of at least 0`,
		`{"trainerStatus": {"metrics": [{"name": "currentEpoch", "value": "1.5"}], ` + at + `}}`:                  `currentEpoch "1.5" is not a whole number`,
	} {
		_, err := ParseReport([]byte(body))
		if _, ok := err.(*InvalidError); !ok || !strings.Contains(err.Error(), want) {
			t.Errorf("%.80s: %v, want an InvalidError saying %q", body, err, want)
		}
	}
}
