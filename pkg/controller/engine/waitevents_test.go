package engine

import (
	"strings"
	"testing"

	"k8s.io/client-go/tools/record"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision/decisiontest"
)

// One Warning event per job and reason: none when a sync sees the same waits, one for a
// reason that joins, and again once the replicas have stopped waiting and wait anew.
func TestWaitEventsOncePerReason(t *testing.T) {
	recorder := record.NewFakeRecorder(20)
	c := &Controller{recorder: recorder}
	job := decisiontest.Job(batch.JobStatus{})
	unsched := ReplicaWait{Reason: "Unschedulable", Text: "0/4 nodes are available", Replicas: []string{"worker-0"}, Since: now}
	pull := ReplicaWait{Reason: "ImagePullBackOff", Text: "ImagePullBackOff", Replicas: []string{"worker-1"}, Since: now}
	steps := []struct {
		waits []ReplicaWait
		want  []string
	}{
		{[]ReplicaWait{unsched}, []string{"Warning Unschedulable worker-0: 0/4 nodes are available (since 12:00:00)"}},
		{[]ReplicaWait{unsched}, nil},
		{[]ReplicaWait{unsched, pull}, []string{"Warning ImagePullBackOff worker-1: ImagePullBackOff (since 12:00:00)"}},
		{[]ReplicaWait{pull}, nil},
		{nil, nil},
		{[]ReplicaWait{unsched}, []string{"Warning Unschedulable worker-0: 0/4 nodes are available (since 12:00:00)"}},
	}
	for i, step := range steps {
		c.announceWaits("ns/job", job, step.waits)
		var got []string
		for len(recorder.Events) > 0 {
			got = append(got, <-recorder.Events)
		}
		if strings.Join(got, "\n") != strings.Join(step.want, "\n") {
			t.Errorf("step %d: events %q, want %q", i, got, step.want)
		}
	}
}
