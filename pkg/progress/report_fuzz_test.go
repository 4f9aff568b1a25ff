package progress

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// FuzzParseReport reads any body. What the code promises (report.go, ParseReport):
//   - no panic;
//   - either a report or an *InvalidError, never both, never another error;
//   - a report holds what the status may: a percentage within 0 and 100, an estimate of at
//     least 0, steps and epochs of at least 0, at most 16 metrics, each named, name and value
//     of 1 to 64 bytes, none of them a step or epoch metric, no name twice; a percentage
//     whenever steps and a total above 0 were given;
//   - its status patch can be made (the JSON the API server is sent).
func FuzzParseReport(f *testing.F) {
	f.Add([]byte(`{"trainerStatus": {"progressPercentage": 40, "estimatedRemainingSeconds": 600, "metrics": [{"name": "loss", "value": "0.31"}, {"name": "currentStep", "value": "400"}, {"name": "totalSteps", "value": "1000"}], "lastUpdatedTime": "2026-01-02T15:04:05Z"}}`))
	f.Add([]byte(`{"trainerStatus": {"metrics": [{"name": "currentEpoch", "value": "2"}, {"name": "totalEpochs", "value": "0"}, {"name": "a", "value": "1"}, {"name": "a", "value": "2"}], "lastUpdatedTime": "2026-01-02T15:04:05.999999999+14:00"}}`))
	f.Add([]byte(`{"trainerStatus": {"progressPercentage": 101, "lastUpdatedTime": "2026-01-02T15:04:05Z"}}`))
	f.Add([]byte(`{"trainerStatus": {"metrics": [{"name": "currentStep", "value": "9223372036854775807"}, {"name": "totalSteps", "value": "1"}], "lastUpdatedTime": "0001-01-01T00:00:00Z"}}`))
	f.Add([]byte(`{"trainerStatus": null}`))
	f.Add([]byte(`[1, 2`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseReport(body)
		if err != nil {
			if _, ok := err.(*InvalidError); !ok || r != nil {
				t.Fatalf("%T %v with report %v", err, err, r)
			}
			return
		}
		if r.Percentage != nil && (*r.Percentage < 0 || *r.Percentage > 100) {
			t.Errorf("percentage %d", *r.Percentage)
		}
		if r.ETA != nil && *r.ETA < 0 {
			t.Errorf("estimate %d", *r.ETA)
		}
		for _, n := range []*int64{r.Step, r.TotalSteps, r.Epoch, r.TotalEpochs} {
			if n != nil && *n < 0 {
				t.Errorf("a step or epoch of %d", *n)
			}
		}
		if r.Step != nil && r.TotalSteps != nil && *r.TotalSteps > 0 && r.Percentage == nil {
			t.Error("steps and a total, and no percentage")
		}
		if len(r.Metrics) > keptMetrics {
			t.Errorf("%d metrics", len(r.Metrics))
		}
		seen := map[string]bool{}
		for _, m := range r.Metrics {
			if m.Name == "" || len(m.Name) > 64 || m.Value == "" || len(m.Value) > 64 || seen[m.Name] || r.counter(m.Name) != nil {
				t.Errorf("metric %+v", m)
			}
			seen[m.Name] = true
		}
		held := map[types.UID]*received{"u": {Pod: "p", UID: "u", Report: r}}
		m := merge(nil, held, func(types.UID) bool { return true })
		if _, err := statusPatch("1", m); err != nil {
			t.Errorf("the status patch: %v", err)
		}
	})
}
