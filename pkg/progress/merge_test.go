package progress

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// TestSlowest: the line of the least percentage, of equals the one this controller holds the
// report of; lines without a percentage never. Among reports, the least step, a step before
// none, of equals the later.
func TestSlowest(t *testing.T) {
	line := func(uid string, pct *int32) batch.ReplicaProgress {
		return batch.ReplicaProgress{UID: typesUID(uid), ProgressPercentage: pct}
	}
	held := func(l *batch.ReplicaProgress) bool { return l.UID == "held" }
	for _, tc := range []struct {
		lines []batch.ReplicaProgress
		want  string
	}{
		{nil, ""},
		{[]batch.ReplicaProgress{line("a", nil)}, ""},
		{[]batch.ReplicaProgress{line("a", ptr32(50)), line("b", ptr32(20)), line("c", nil)}, "b"},
		{[]batch.ReplicaProgress{line("a", ptr32(20)), line("held", ptr32(20)), line("c", ptr32(20))}, "held"},
		{[]batch.ReplicaProgress{line("a", ptr32(20)), line("held", ptr32(21))}, "a"},
	} {
		got := ""
		if s := slowestLine(tc.lines, held); s != nil {
			got = string(s.UID)
		}
		if got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.lines, got, tc.want)
		}
	}
	at := func(step *int64, s int) *received {
		return &received{At: start.Add(time.Duration(s) * time.Second), Report: &Report{Step: step}}
	}
	for i, tc := range []struct {
		r, than *received
		want    bool
	}{
		{at(ptr64(5), 0), nil, true},
		{at(ptr64(5), 0), at(ptr64(6), 0), true},
		{at(ptr64(6), 0), at(ptr64(5), 0), false},
		{at(ptr64(9), 0), at(nil, 0), true},
		{at(nil, 0), at(ptr64(9), 0), false},
		{at(ptr64(5), 2), at(ptr64(5), 1), true},
		{at(nil, 1), at(nil, 2), false},
	} {
		if got := slower(tc.r, tc.than); got != tc.want {
			t.Errorf("%d: slower %v, want %v", i, got, tc.want)
		}
	}
}

func typesUID(s string) types.UID { return types.UID(s) }
