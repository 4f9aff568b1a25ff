package progress

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// TestReportWritten: a pod's report is answered 200 with the request, as Kubeflow Trainer
// answers, and the job's first report is written at once: the pod's line (its UID,
// percentage, when it was received) and the job-level fields of the slowest replica.
func TestReportWritten(t *testing.T) {
	f := newFixture(t)
	sent := body(40, start)
	rec := f.post("job", f.podToken("job-worker-0"), sent)
	if rec.Code != http.StatusOK || rec.Body.String() != sent || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("answer %d %q: %s, want 200 echoing the request", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	f.waitWrites("job", 1)
	p := f.stored("job").Status.Progress
	if p == nil || len(p.Replicas) != 1 {
		t.Fatalf("status.progress %+v, want one replica's line", p)
	}
	r := p.Replicas[0]
	if r.UID != "pod-0" || *r.ProgressPercentage != 40 || !r.ReportTime.Equal(&metav1.Time{Time: start}) {
		t.Errorf("the replica's line: %+v", r)
	}
	want := batch.JobProgress{ProgressPercentage: ptr32(40), Step: ptr64(40), TotalSteps: ptr64(100),
		Metrics: []batch.ProgressMetric{{Name: "loss", Value: "0.40"}}, LastUpdatedTime: &metav1.Time{Time: start}, Replica: "job-worker-0"}
	p.Replicas = nil
	if !equality.Semantic.DeepEqual(*p, want) {
		t.Errorf("the job-level progress:\n got %+v\nwant %+v", *p, want)
	}
	if f.stored("job").Status.Phase != batch.JobRunning {
		t.Error("the write changed the phase")
	}
}

func ptr64(n int64) *int64 { return &n }

// TestRefused: every report the endpoint refuses is answered with a metav1.Status of the
// code and a message that says why, and writes nothing.
func TestRefused(t *testing.T) {
	f := newFixture(t)
	good := body(10, start)
	hour := start.Add(time.Hour)
	f.addPod("job-worker-2", "pod-2", "job-uid")
	deleted := f.token("job", "ns", "job-worker-2", "pod-2", hour)
	if rec := f.post("job", deleted, good); rec.Code != http.StatusOK {
		t.Fatalf("the pod's report before it was deleted: %d %s", rec.Code, rec.Body)
	}
	f.waitWrites("job", 1)
	f.deletePod("job-worker-2")
	f.addPod("job-worker-1-old", "pod-1-old", "job-uid")
	before := f.stored("job").Status.DeepCopy()
	patches := f.patches()
	f.clock.Step(10 * time.Second) // past the write interval: a report accepted would be written at once

	for _, tc := range []struct {
		name, method, path, token, body string
		code                            int
		message                         string
	}{
		{"no token", "POST", "", "", good, 401, "no bearer token"},
		{"a token that is no token", "POST", "", "not-a-token", good, 401, "not valid for this job"},
		{"an expired token", "POST", "", "expired", good, 401, "not valid for this job"},
		{"another job's pod's token", "POST", "", f.podToken("other-worker-0"), good, 401, "not valid for this job"},
		{"a token for this job bound to another job's pod", "POST", "", f.token("job", "ns", "other-worker-0", "other-pod-0", hour), good, 403,
			"pod other-worker-0 is not of genericjobs ns/job"},
		{"a token for a deleted pod", "POST", "", deleted, good, 403, "pod job-worker-2 (UID pod-2) is gone"},
		{"a token of an earlier pod of the replica", "POST", "", f.token("job", "ns", "job-worker-1", "pod-1-earlier", hour), good, 403, "is gone"},
		{"a token of a pod of another namespace", "POST", "", f.token("job", "elsewhere", "job-worker-0", "pod-0", hour), good, 403,
			"pod elsewhere/job-worker-0 is not of genericjobs ns/job"},
		{"a token bound to no pod", "POST", "", notBound(f), good, 403, "bound to no pod"},
		{"a job that is not there", "POST", Path(ref("missing")), f.token("missing", "ns", "job-worker-0", "pod-0", hour), good, 404,
			"genericjobs ns/missing not found"},
		{"another path", "POST", "/apis/batch.tensorstack.dev/v1beta1/namespaces/ns/pods/job-worker-0/status", f.podToken("job-worker-0"), good, 404, "no such endpoint"},
		{"a kind that is not one", "POST", "/apis/batch.tensorstack.dev/v1beta1/namespaces/ns/jobs/job/status", f.podToken("job-worker-0"), good, 404, "no such endpoint"},
		{"GET", "GET", "", f.podToken("job-worker-0"), "", 405, "only POST"},
		{"a body that is no JSON", "POST", "", f.podToken("job-worker-0"), "{trainerStatus", 422, "invalid JSON"},
		{"no trainerStatus", "POST", "", f.podToken("job-worker-0"), `{"status": {}}`, 422, "trainerStatus: required"},
		{"no lastUpdatedTime", "POST", "", f.podToken("job-worker-0"), `{"trainerStatus": {"progressPercentage": 5}}`, 422, "lastUpdatedTime: required"},
		{"a percentage past 100", "POST", "", f.podToken("job-worker-0"), `{"trainerStatus": {"progressPercentage": 101, "lastUpdatedTime": "2026-03-01T12:00:00Z"}}`, 422,
			"progressPercentage: 101 is not within 0 and 100"},
		{"a percentage that is not whole", "POST", "", f.podToken("job-worker-0"), `{"trainerStatus": {"progressPercentage": 5.5, "lastUpdatedTime": "2026-03-01T12:00:00Z"}}`, 422,
			"trainerStatus.progressPercentage: a JSON number 5.5, want a whole number"},
		{"a step that is not a number", "POST", "", f.podToken("job-worker-0"), `{"trainerStatus": {"metrics": [{"name": "currentStep", "value": "ten"}], "lastUpdatedTime": "2026-03-01T12:00:00Z"}}`, 422,
			`trainerStatus.metrics[0]: currentStep "ten" is not a whole number`},
		{"a body past 64 KiB", "POST", "", f.podToken("job-worker-0"), `{"trainerStatus": {"lastUpdatedTime": "2026-03-01T12:00:00Z", "x": "` + strings.Repeat("x", MaxBody) + `"}}`, 413, "larger than 65536 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.path
			if path == "" {
				path = Path(ref("job"))
			}
			rec := f.send(tc.method, path, tc.token, tc.body)
			s := status(t, rec)
			if rec.Code != tc.code || s.Code != int32(tc.code) || s.Status != metav1.StatusFailure || !strings.Contains(s.Message, tc.message) {
				t.Errorf("answer %d %+v, want %d saying %q", rec.Code, s, tc.code, tc.message)
			}
		})
	}
	time.Sleep(20 * time.Millisecond)
	if n := f.patches(); n != patches {
		t.Errorf("%d status writes after the refusals, want none", n-patches)
	}
	if after := f.stored("job").Status; !equality.Semantic.DeepEqual(*before, after) {
		t.Errorf("the refusals changed the status:\n%+v\n%+v", before, after)
	}
}

// notBound is a token TokenReview accepts for the job's audience that is bound to no pod.
func notBound(f *fixture) string {
	token := f.token("job", "ns", "job-worker-0", "pod-0", start.Add(time.Hour))
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.tokens[token]
	s.User.Extra = nil
	f.tokens[token+"-unbound"] = s
	return token + "-unbound"
}

// TestTokenReviewsCached: a token's review is reused for 45 s to a minute, and never past
// the token's expiry; a refused token's for 10 s.
func TestTokenReviewsCached(t *testing.T) {
	f := newFixture(t)
	token := f.podToken("job-worker-0")
	for i := range 3 {
		if rec := f.post("job", token, body(i, f.clock.Now())); rec.Code != http.StatusOK {
			t.Fatalf("%d: %s", rec.Code, rec.Body)
		}
	}
	f.clock.Step(44 * time.Second)
	f.post("job", token, body(3, f.clock.Now()))
	if n := f.reviewCount(); n != 1 {
		t.Errorf("%d TokenReviews for four reports with one token within 44 s, want 1", n)
	}
	f.clock.Step(17 * time.Second)
	f.post("job", token, body(4, f.clock.Now()))
	if n := f.reviewCount(); n != 2 {
		t.Errorf("%d TokenReviews after a minute, want 2", n)
	}
	short := f.token("job", "ns", "job-worker-1", "pod-1", f.clock.Now().Add(10*time.Second))
	f.post("job", short, body(1, f.clock.Now()))
	f.clock.Step(11 * time.Second)
	f.mu.Lock()
	f.tokens[short] = f.tokens["expired"] // the API server now refuses it
	f.mu.Unlock()
	if rec := f.post("job", short, body(2, f.clock.Now())); rec.Code != http.StatusUnauthorized {
		t.Errorf("a token past its expiry: %d, want 401 (reviewed again, not taken from the cache)", rec.Code)
	}
	n := f.reviewCount()
	f.post("job", "bad", body(1, f.clock.Now()))
	f.post("job", "bad", body(1, f.clock.Now()))
	if got := f.reviewCount() - n; got != 1 {
		t.Errorf("%d TokenReviews for a refused token sent twice, want 1", got)
	}
	f.clock.Step(11 * time.Second)
	f.post("job", "bad", body(1, f.clock.Now()))
	if got := f.reviewCount() - n; got != 2 {
		t.Errorf("%d TokenReviews for a refused token 11 s later, want 2", got)
	}
}

// TestRateLimitedPerPod: a pod may send bursts of 10 and then 2 a second; past that it is
// answered 429 with Retry-After, and another pod is not held back.
func TestRateLimitedPerPod(t *testing.T) {
	f := newFixture(t)
	token := f.podToken("job-worker-0")
	for i := range 10 {
		if rec := f.post("job", token, body(i, f.clock.Now())); rec.Code != http.StatusOK {
			t.Fatalf("report %d of the burst: %d %s", i, rec.Code, rec.Body)
		}
	}
	rec := f.post("job", token, body(11, f.clock.Now()))
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" || !strings.Contains(status(t, rec).Message, "reports too often") {
		t.Fatalf("the 11th report at once: %d Retry-After %q %s, want 429 and Retry-After 1", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if rec := f.post("job", f.podToken("job-worker-1"), body(1, f.clock.Now())); rec.Code != http.StatusOK {
		t.Errorf("another pod: %d, want 200", rec.Code)
	}
	f.clock.Step(time.Second)
	for i := range 2 {
		if rec := f.post("job", token, body(12+i, f.clock.Now())); rec.Code != http.StatusOK {
			t.Errorf("report %d a second later: %d", i, rec.Code)
		}
	}
	if rec := f.post("job", token, body(14, f.clock.Now())); rec.Code != http.StatusTooManyRequests {
		t.Errorf("a third report in that second: %d, want 429", rec.Code)
	}
}

// TestRateLimitedOverall: past 2,000 requests at once, whoever sends them, the endpoint
// answers 429 before it reviews any token.
func TestRateLimitedOverall(t *testing.T) {
	f := newFixture(t)
	for i := range totalBurst {
		if rec := f.post("job", "", body(i, f.clock.Now())); rec.Code != http.StatusUnauthorized {
			t.Fatalf("request %d: %d", i, rec.Code)
		}
	}
	rec := f.post("job", f.podToken("job-worker-0"), body(1, f.clock.Now()))
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("request %d: %d %s, want 429 with Retry-After", totalBurst+1, rec.Code, rec.Body)
	}
	if n := f.reviewCount(); n != 0 {
		t.Errorf("%d TokenReviews, want none", n)
	}
}

// TestReviewsRateLimited: past 1,000 tokens to review at once (a flood of made-up tokens), a
// token not reviewed before is answered 429; one whose review is cached still reports.
func TestReviewsRateLimited(t *testing.T) {
	f := newFixture(t)
	known := f.podToken("job-worker-0")
	if rec := f.post("job", known, body(1, f.clock.Now())); rec.Code != http.StatusOK {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	for i := range reviewBurst - 1 {
		if rec := f.post("job", fmt.Sprintf("made-up-%d", i), body(1, f.clock.Now())); rec.Code != http.StatusUnauthorized {
			t.Fatalf("made-up token %d: %d", i, rec.Code)
		}
	}
	rec := f.post("job", "one-more", body(1, f.clock.Now()))
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" || !strings.Contains(status(t, rec).Message, "too many tokens to review") {
		t.Fatalf("the 1,001st token to review: %d %s, want 429", rec.Code, rec.Body)
	}
	if n := f.reviewCount(); n != reviewBurst {
		t.Errorf("%d TokenReviews, want %d", n, reviewBurst)
	}
	if rec := f.post("job", known, body(2, f.clock.Now())); rec.Code != http.StatusOK {
		t.Errorf("a token reviewed before: %d, want 200", rec.Code)
	}
}
