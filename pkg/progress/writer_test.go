package progress

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// TestWritesCoalesced: two replicas of a job report every second for a minute; the job's
// status is written at once for the first report, then once every 5 s (the interval) while
// reports come, 13 writes where 120 reports came; another job's writes are its own.
//
// One step of slack: the writer's delaying queue arms its timer on a goroutine of its own,
// from a time it read just before; when this test steps the fake clock in between, the timer
// fires one step (1 s) late, and the writes after it follow from there. A write that has not
// come when it is due gets one more step, once in the run; the writes must never be closer
// than the interval, nor later than one step past it.
func TestWritesCoalesced(t *testing.T) {
	f := newFixture(t)
	tokens := []string{f.podToken("job-worker-0"), f.podToken("job-worker-1")}
	other := f.podToken("other-worker-0")
	late := 0
	for s := range 61 {
		if s > 0 {
			f.clock.Step(time.Second)
		}
		if s < 60 {
			for i, token := range tokens {
				if rec := f.post("job", token, body(s+i, f.clock.Now())); rec.Code != http.StatusOK {
					t.Fatalf("at %ds: %d %s", s, rec.Code, rec.Body)
				}
			}
		}
		if s == 30 {
			f.post("other", other, body(1, f.clock.Now()))
		}
		writes := f.writeTimes("job")
		if len(writes) == 0 {
			f.waitWrites("job", 1) // the first report is written at once
			continue
		}
		due := writes[len(writes)-1].Add(DefaultWriteInterval)
		switch now := f.clock.Now(); {
		case now.Before(due):
			f.waitWrites("job", len(writes)) // none before the interval
		case now.Equal(due) && late == 0 && !f.writtenWithin("job", len(writes)+1, time.Second):
			late++
			t.Logf("at %ds: the write due now waits for the next step", s)
		default:
			f.waitWrites("job", len(writes)+1)
		}
	}
	writes := f.writeTimes("job")
	for i := 1; i < len(writes); i++ {
		if gap := writes[i].Sub(writes[i-1]); gap < DefaultWriteInterval || gap > DefaultWriteInterval+time.Second {
			t.Errorf("writes %d and %d %s apart, want %s (or one step more)", i-1, i, gap, DefaultWriteInterval)
		}
	}
	if want := 13 - late; len(writes) != want {
		t.Errorf("%d writes of the job, want %d", len(writes), want)
	}
	if n := f.writesOf("other"); n != 1 {
		t.Errorf("%d writes of the other job, want 1", n)
	}
	p := f.stored("job").Status.Progress
	if len(p.Replicas) != 2 || p.Replicas[0].UID != "pod-0" || *p.Replicas[0].ProgressPercentage != 59 || *p.Replicas[1].ProgressPercentage != 60 {
		t.Fatalf("the pods' lines: %+v", p.Replicas)
	}
	if p.Replica != "job-worker-0" || *p.Step != 59 || *p.ProgressPercentage != 59 {
		t.Errorf("the job-level progress is not the slowest replica's (worker-0 at 59): %s %d %d%%", p.Replica, *p.Step, *p.ProgressPercentage)
	}
}

// TestSlowWriteDoesNotDelayTheNext: a write that takes 2 s (the fake clock moves while the
// API answers) is followed by the next 5 s after it was sent, not 5 s after it returned.
// Measured from the return, the next write also came late whenever the writer's goroutine
// ran late after a write, as under a loaded CI.
func TestSlowWriteDoesNotDelayTheNext(t *testing.T) {
	f := newFixture(t)
	f.jobs.PrependReactor("patch", "genericjobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		f.clock.Step(2 * time.Second)
		return false, nil, nil // on to the fixture's reactor, which writes
	})
	token := f.podToken("job-worker-0")
	f.post("job", token, body(1, f.clock.Now()))
	f.waitWrites("job", 1)
	f.post("job", token, body(2, f.clock.Now())) // at 2 s
	f.clock.Step(DefaultWriteInterval - 2*time.Second)
	waitFor(t, func() bool { return f.writesOf("job") == 2 })
}

// TestConflictRetried: a write whose resourceVersion the API no longer holds (the engine
// wrote the status meanwhile, and the cache has yet to show it) conflicts; it is tried again
// at the next interval, from the cache then, and keeps what the engine wrote.
func TestConflictRetried(t *testing.T) {
	f := newFixture(t)
	token := f.podToken("job-worker-0")
	f.post("job", token, body(1, f.clock.Now()))
	f.waitWrites("job", 1)

	engine := f.stored("job").DeepCopy() // the engine's status write, not yet in the cache
	engine.Status.Phase = batch.JobSucceeded
	if err := f.put(engine); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(DefaultWriteInterval)
	patches := f.patches()
	f.post("job", token, body(2, f.clock.Now()))
	waitFor(t, func() bool { return f.patches() == patches+1 })
	f.waitWrites("job", 1) // refused
	f.refreshJob("job")
	f.clock.Step(DefaultWriteInterval - time.Millisecond)
	time.Sleep(10 * time.Millisecond)
	if f.patches() != patches+1 {
		t.Fatal("tried again before the interval")
	}
	f.clock.Step(time.Millisecond)
	f.waitWrites("job", 2)
	job := f.stored("job")
	if job.Status.Phase != batch.JobSucceeded || *job.Status.Progress.Step != 2 {
		t.Errorf("after the retry: phase %s, step %d; want the engine's Succeeded and step 2", job.Status.Phase, *job.Status.Progress.Step)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestReplicasMerged: a write keeps the lines another controller replica wrote (and the
// job-level fields, when the slowest replica's report is not this replica's to tell), and
// drops the line of a pod that is no longer the job's.
func TestReplicasMerged(t *testing.T) {
	f := newFixture(t)
	job := f.stored("job").DeepCopy()
	at := metav1.NewTime(start.Add(-time.Minute))
	job.Status.Progress = &batch.JobProgress{Step: ptr64(3), ProgressPercentage: ptr32(3), Replica: "job-worker-1", Metrics: []batch.ProgressMetric{{Name: "loss", Value: "9"}},
		Replicas: []batch.ReplicaProgress{
			{UID: "pod-1", ProgressPercentage: ptr32(3), ReportTime: at},         // another controller's
			{UID: "pod-9", ProgressPercentage: ptr32(1), ReportTime: at},         // a pod that is gone
			{UID: "pod-0-earlier", ProgressPercentage: ptr32(0), ReportTime: at}, // an earlier pod of worker-0
		}}
	if err := f.put(job); err != nil {
		t.Fatal(err)
	}
	f.refreshJob("job")
	f.post("job", f.podToken("job-worker-0"), body(7, f.clock.Now()))
	f.waitWrites("job", 1)
	p := f.stored("job").Status.Progress
	if len(p.Replicas) != 2 || p.Replicas[0].UID != "pod-0" || *p.Replicas[0].ProgressPercentage != 7 || p.Replicas[1].UID != "pod-1" || *p.Replicas[1].ProgressPercentage != 3 {
		t.Fatalf("the lines: %+v", p.Replicas)
	}
	if p.Replica != "job-worker-1" || *p.Step != 3 || p.Metrics[0].Value != "9" {
		t.Errorf("the job-level fields are the slowest replica's, which another controller wrote: %+v", p)
	}
	f.clock.Step(DefaultWriteInterval)
	f.post("job", f.podToken("job-worker-1"), body(20, f.clock.Now()))
	f.waitWrites("job", 2)
	p = f.stored("job").Status.Progress
	if p.Replica != "job-worker-0" || *p.Step != 7 || p.Metrics[0].Value != "0.7" || p.LastUpdatedTime == nil {
		t.Errorf("worker-1 past worker-0: the job-level fields are worker-0's: %+v", p)
	}
}

// TestFinishedJobKeepsNoLines: a report that comes once the job has ended counts at the
// job's level; the pods' lines, which only the stall check reads, are not written back.
func TestFinishedJobKeepsNoLines(t *testing.T) {
	f := newFixture(t)
	job := f.stored("job").DeepCopy()
	job.Status.Phase = batch.JobSucceeded
	job.Status.Conditions = []batch.JobCondition{{Type: batch.JobConditionCompleted, Status: "True"}}
	if err := f.put(job); err != nil {
		t.Fatal(err)
	}
	f.refreshJob("job")
	if !f.stored("job").Status.Finished() {
		t.Fatal("the fixture's job has not finished")
	}
	f.post("job", f.podToken("job-worker-0"), body(100, f.clock.Now()))
	f.waitWrites("job", 1)
	p := f.stored("job").Status.Progress
	if len(p.Replicas) != 0 || *p.ProgressPercentage != 100 {
		t.Errorf("the progress of the finished job: %+v", p)
	}
}

// TestPatchNamesEveryJobLevelField: a merge patch keeps what it leaves out, so a field the
// slowest replica's report lacks is sent as null.
func TestPatchNamesEveryJobLevelField(t *testing.T) {
	m := merged{Top: true, Progress: &batch.JobProgress{Step: ptr64(1), Replica: "a",
		Replicas: []batch.ReplicaProgress{{UID: "u", ProgressPercentage: ptr32(1)}}}}
	data, err := statusPatch("42", m)
	if err != nil {
		t.Fatal(err)
	}
	var patch struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
		Status   struct {
			Progress map[string]json.RawMessage `json:"progress"`
		} `json:"status"`
	}
	if err := json.Unmarshal(data, &patch); err != nil {
		t.Fatal(err)
	}
	if patch.Metadata.ResourceVersion != "42" {
		t.Errorf("the patch's resourceVersion: %q", patch.Metadata.ResourceVersion)
	}
	for _, name := range []string{"progressPercentage", "estimatedRemainingSeconds", "totalSteps", "epoch", "totalEpochs", "metrics", "lastUpdatedTime"} {
		if v, ok := patch.Status.Progress[name]; !ok || string(v) != "null" {
			t.Errorf("%s: %s, want null", name, v)
		}
	}
	if string(patch.Status.Progress["step"]) != "1" || string(patch.Status.Progress["replica"]) != `"a"` {
		t.Errorf("the patch: %s", data)
	}
	m.Top = false
	data, _ = statusPatch("42", m)
	if want := `{"metadata":{"resourceVersion":"42"},"status":{"progress":{"replicas":[{"uid":"u","progressPercentage":1,"reportTime":null}]}}}`; string(data) != want {
		t.Errorf("without the job-level fields:\n got %s\nwant %s", data, want)
	}
}
