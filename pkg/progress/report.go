package progress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// The request body is Kubeflow Trainer's (KEP-2779), so that a script written for one
// reports to the other:
//
//	{"trainerStatus": {"progressPercentage": 40, "estimatedRemainingSeconds": 600,
//	  "metrics": [{"name": "loss", "value": "0.31"}, {"name": "currentStep", "value": "400"}],
//	  "lastUpdatedTime": "2026-01-02T15:04:05Z"}}
//
// Unknown fields are ignored, as Trainer ignores them.

// Limits of a report, as Trainer's API has them; MaxBody is the largest body read.
const (
	MaxBody       = 64 << 10
	maxMetrics    = 256
	maxMetricText = 64
	// keptMetrics is how many metrics, besides the step and epoch ones, the status keeps of a
	// report: status.progress.metrics holds at most 16 (the CRD's maxItems).
	keptMetrics = 16
)

// The metrics a report's step and epoch are read from (Trainer's SDK sends these names).
const (
	metricStep        = "currentStep"
	metricTotalSteps  = "totalSteps"
	metricEpoch       = "currentEpoch"
	metricTotalEpochs = "totalEpochs"
)

type request struct {
	TrainerStatus *trainerStatus `json:"trainerStatus"`
}

type trainerStatus struct {
	ProgressPercentage        *int64   `json:"progressPercentage"`
	EstimatedRemainingSeconds *int64   `json:"estimatedRemainingSeconds"`
	Metrics                   []metric `json:"metrics"`
	LastUpdatedTime           *string  `json:"lastUpdatedTime"`
}

type metric struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Report is one replica's report, checked.
type Report struct {
	// Percentage is the reported progressPercentage, else step * 100 / totalSteps, else nil.
	Percentage                           *int32
	ETA                                  *int32
	Step, TotalSteps, Epoch, TotalEpochs *int64
	// Metrics are the report's other metrics, the first keptMetrics of them (by name: the
	// last value given for a name).
	Metrics     []batch.ProgressMetric
	LastUpdated time.Time
}

// InvalidError is a report refused for its content; its message names the field.
type InvalidError struct{ msg string }

func (e *InvalidError) Error() string { return e.msg }

func invalid(format string, args ...any) error { return &InvalidError{fmt.Sprintf(format, args...)} }

// ParseReport reads and checks a request body. Every error is an *InvalidError that names
// what is wrong.
func ParseReport(body []byte) (*Report, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	var req request
	if err := dec.Decode(&req); err != nil {
		return nil, invalid("the body is not a report: %s", describeJSONError(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, invalid("the body is not a report: more than one JSON value")
	}
	s := req.TrainerStatus
	if s == nil {
		return nil, invalid("trainerStatus: required")
	}
	r := &Report{}
	if s.LastUpdatedTime == nil {
		return nil, invalid("trainerStatus.lastUpdatedTime: required")
	}
	t, err := time.Parse(time.RFC3339, *s.LastUpdatedTime)
	if t = t.UTC(); err != nil || t.Year() < 1 || t.Year() > 9999 {
		return nil, invalid("trainerStatus.lastUpdatedTime: %q is not an RFC 3339 time of the years 1 to 9999", *s.LastUpdatedTime)
	}
	r.LastUpdated = t
	if p := s.ProgressPercentage; p != nil {
		if *p < 0 || *p > 100 {
			return nil, invalid("trainerStatus.progressPercentage: %d is not within 0 and 100", *p)
		}
		r.Percentage = ptr32(*p)
	}
	if e := s.EstimatedRemainingSeconds; e != nil {
		if *e < 0 || *e > math.MaxInt32 {
			return nil, invalid("trainerStatus.estimatedRemainingSeconds: %d is not within 0 and %d", *e, math.MaxInt32)
		}
		r.ETA = ptr32(*e)
	}
	if len(s.Metrics) > maxMetrics {
		return nil, invalid("trainerStatus.metrics: %d metrics, at most %d", len(s.Metrics), maxMetrics)
	}
	index := map[string]int{}
	for i, m := range s.Metrics {
		field := fmt.Sprintf("trainerStatus.metrics[%d]", i)
		switch {
		case m.Name == "" || len(m.Name) > maxMetricText:
			return nil, invalid("%s.name: %d bytes, want 1 to %d", field, len(m.Name), maxMetricText)
		case m.Value == "" || len(m.Value) > maxMetricText:
			return nil, invalid("%s.value: %d bytes, want 1 to %d", field, len(m.Value), maxMetricText)
		}
		counter := r.counter(m.Name)
		if counter != nil {
			n, err := strconv.ParseInt(m.Value, 10, 64)
			if err != nil || n < 0 {
				return nil, invalid("%s: %s %q is not a whole number of at least 0", field, m.Name, m.Value)
			}
			*counter = &n
			continue
		}
		if j, seen := index[m.Name]; seen {
			r.Metrics[j].Value = m.Value
			continue
		}
		if len(r.Metrics) < keptMetrics {
			index[m.Name] = len(r.Metrics)
			r.Metrics = append(r.Metrics, batch.ProgressMetric{Name: m.Name, Value: m.Value})
		}
	}
	if r.Percentage == nil && r.Step != nil && r.TotalSteps != nil && *r.TotalSteps > 0 {
		r.Percentage = ptr32(min(*r.Step, *r.TotalSteps) * 100 / *r.TotalSteps)
	}
	return r, nil
}

// counter is the field a step or epoch metric sets (nil for another metric).
func (r *Report) counter(name string) **int64 {
	switch name {
	case metricStep:
		return &r.Step
	case metricTotalSteps:
		return &r.TotalSteps
	case metricEpoch:
		return &r.Epoch
	case metricTotalEpochs:
		return &r.TotalEpochs
	}
	return nil
}

// describeJSONError names where a body's JSON went wrong.
func describeJSONError(err error) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "the body"
		}
		return fmt.Sprintf("%s: a JSON %s, want %s", field, typeErr.Value, jsonKind(typeErr.Type.String()))
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("invalid JSON at byte %d: %v", syntaxErr.Offset, syntaxErr)
	case errors.Is(err, io.EOF):
		return "empty"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the JSON ends early"
	}
	return err.Error()
}

func jsonKind(goType string) string {
	switch goType {
	case "int64":
		return "a whole number"
	case "string":
		return "a string"
	case "[]progress.metric":
		return "a list of metrics"
	case "progress.metric", "progress.trainerStatus", "progress.request":
		return "an object"
	}
	return goType
}

func ptr32(n int64) *int32 { v := int32(n); return &v }
