package progress

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned/fake"
	jobinformers "github.com/t9k-jobs/t9k-jobs/pkg/client/informers/externalversions"
)

// start is the fixture's time: the fake clock starts there.
var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

var genericJobs = schema.GroupVersionResource{Group: batch.GroupName, Version: "v1beta1", Resource: "genericjobs"}

// fixture is a server on fake clientsets: two GenericJobs in ns ("job", with pods
// job-worker-0 and job-worker-1; "other", with other-worker-0), a TokenReview reactor that
// knows the tokens minted with token, and a patch reactor that refuses a patch whose
// resourceVersion is not the job's (as the API server does). The jobs' and pods' caches are
// indexers the test fills; after each write the job's cache shows it unless stale is set.
type fixture struct {
	t      testing.TB
	clock  *clocktesting.FakeClock
	jobs   *fake.Clientset
	kube   *kubefake.Clientset
	server *Server
	cancel context.CancelFunc

	jobCache cache.Indexer
	podCache cache.Indexer

	mu      sync.Mutex
	tokens  map[string]authenticationv1.TokenReviewStatus
	reviews int
	// writes are the times (on the fake clock) of the status writes that went through, by job.
	writes  map[string][]time.Time
	stale   bool
	version int
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{t: t, clock: clocktesting.NewFakeClock(start), tokens: map[string]authenticationv1.TokenReviewStatus{},
		writes: map[string][]time.Time{}}
	job := genericJob("job", "job-uid")
	other := genericJob("other", "other-uid")
	f.jobs = fake.NewClientset(job, other)
	f.kube = kubefake.NewClientset()
	factory := jobinformers.NewSharedInformerFactory(f.jobs, 0)
	kinds := Kinds(f.jobs, factory)
	f.jobCache = factory.Batch().V1beta1().GenericJobs().Informer().GetIndexer()
	for _, j := range []*batch.GenericJob{job, other} {
		if err := f.put(j.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		stored, err := f.jobs.Tracker().Get(genericJobs, "ns", j.Name)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.jobCache.Add(stored); err != nil {
			t.Fatal(err)
		}
	}
	for i := range kinds {
		kinds[i].Synced = func() bool { return true }
	}
	podInformer := cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.Pod{}, 0, cache.Indexers{"by-job": func(obj any) ([]string, error) {
		return []string{string(controllerUID(obj.(*corev1.Pod)))}, nil
	}})
	f.podCache = podInformer.GetIndexer()
	f.addPod("job-worker-0", "pod-0", "job-uid")
	f.addPod("job-worker-1", "pod-1", "job-uid")
	f.addPod("other-worker-0", "other-pod-0", "other-uid")
	pods := PodsOf(podInformer, "by-job")
	pods.Synced = func() bool { return true }

	f.kube.PrependReactor("create", "tokenreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		review := action.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		f.mu.Lock()
		defer f.mu.Unlock()
		f.reviews++
		status, ok := f.tokens[review.Spec.Token]
		if ok && len(review.Spec.Audiences) == 1 && contains(status.Audiences, review.Spec.Audiences[0]) {
			review.Status = status
			review.Status.Audiences = review.Spec.Audiences
		} else {
			review.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
		}
		return true, review, nil
	})
	f.jobs.PrependReactor("patch", "genericjobs", func(action k8stesting.Action) (bool, runtime.Object, error) {
		p := action.(k8stesting.PatchAction)
		if m := action.(k8stesting.PatchActionImpl).PatchOptions.FieldManager; m != FieldManager {
			return true, nil, fmt.Errorf("patched as field manager %q, want the endpoint's own %q", m, FieldManager)
		}
		var sent struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if err := json.Unmarshal(p.GetPatch(), &sent); err != nil {
			return true, nil, err
		}
		stored, err := f.jobs.Tracker().Get(genericJobs, p.GetNamespace(), p.GetName())
		if err != nil {
			return true, nil, err
		}
		if rv := stored.(*batch.GenericJob).ResourceVersion; sent.Metadata.ResourceVersion != rv {
			return true, nil, apierrors.NewConflict(genericJobs.GroupResource(), p.GetName(),
				fmt.Errorf("the object has been modified: resourceVersion %s, the patch's %s", rv, sent.Metadata.ResourceVersion))
		}
		var doc, patch map[string]any
		original, _ := json.Marshal(stored)
		if err := json.Unmarshal(original, &doc); err != nil {
			return true, nil, err
		}
		if err := json.Unmarshal(p.GetPatch(), &patch); err != nil {
			return true, nil, err
		}
		patched, _ := json.Marshal(mergePatch(doc, patch))
		job := &batch.GenericJob{}
		if err := json.Unmarshal(patched, job); err != nil {
			return true, nil, err
		}
		return true, job, f.put(job)
	})
	for i := range kinds {
		patch := kinds[i].Patch
		kinds[i].Patch = func(ctx context.Context, ns, name string, data []byte) error {
			if err := patch(ctx, ns, name, data); err != nil {
				return err
			}
			f.mu.Lock()
			f.writes[name] = append(f.writes[name], f.clock.Now())
			stale := f.stale
			f.mu.Unlock()
			if !stale {
				f.refreshJob(name)
			}
			return nil
		}
	}
	f.server = New(Config{Kinds: kinds, Pods: pods, TokenReviews: f.kube.AuthenticationV1().TokenReviews(), Clock: f.clock})
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	go f.server.RunWriter(ctx)
	t.Cleanup(cancel)
	return f
}

// put stores job in the fake API with a new resourceVersion, as the API server would.
func (f *fixture) put(job *batch.GenericJob) error {
	f.mu.Lock()
	f.version++
	job.ResourceVersion = fmt.Sprint(f.version)
	f.mu.Unlock()
	return f.jobs.Tracker().Update(genericJobs, job, job.Namespace)
}

// mergePatch applies a JSON merge patch (RFC 7386).
func mergePatch(doc, patch map[string]any) map[string]any {
	for k, v := range patch {
		sub, isMap := v.(map[string]any)
		switch cur, _ := doc[k].(map[string]any); {
		case v == nil:
			delete(doc, k)
		case isMap && cur != nil:
			doc[k] = mergePatch(cur, sub)
		case isMap:
			doc[k] = mergePatch(map[string]any{}, sub)
		default:
			doc[k] = v
		}
	}
	return doc
}

func genericJob(name string, uid types.UID) *batch.GenericJob {
	return &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid},
		Status: batch.JobStatus{Phase: batch.JobRunning}}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// addPod puts a pod of the job whose UID is jobUID in the pods' cache.
func (f *fixture) addPod(name string, uid, jobUID types.UID) {
	f.t.Helper()
	job := genericJob("", jobUID)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batch.SchemeGroupVersion.WithKind("GenericJob"))}}}
	if err := f.podCache.Add(pod); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) deletePod(name string) {
	f.t.Helper()
	obj, ok, _ := f.podCache.GetByKey("ns/" + name)
	if !ok {
		f.t.Fatalf("no pod %s", name)
	}
	if err := f.podCache.Delete(obj); err != nil {
		f.t.Fatal(err)
	}
}

// refreshJob makes the job's cache show what the API holds.
func (f *fixture) refreshJob(name string) {
	f.t.Helper()
	stored, err := f.jobs.Tracker().Get(genericJobs, "ns", name)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.jobCache.Update(stored); err != nil {
		f.t.Fatal(err)
	}
}

// stored is the job as the API holds it.
func (f *fixture) stored(name string) *batch.GenericJob {
	f.t.Helper()
	stored, err := f.jobs.Tracker().Get(genericJobs, "ns", name)
	if err != nil {
		f.t.Fatal(err)
	}
	return stored.(*batch.GenericJob)
}

// token mints a token of audience job's, bound to pod (of namespace ns, UID uid), valid until
// expires; the TokenReview reactor accepts it for that audience only.
func (f *fixture) token(job, ns, pod string, uid types.UID, expires time.Time) string {
	payload, _ := json.Marshal(map[string]any{"exp": expires.Unix(), "sub": pod})
	f.mu.Lock()
	defer f.mu.Unlock()
	token := "eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString(payload) + "." + fmt.Sprintf("%s-%s-%d", uid, job, len(f.tokens))
	f.tokens[token] = authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: []string{Audience(ref(job))},
		User: authenticationv1.UserInfo{Username: "system:serviceaccount:" + ns + ":default",
			Extra: map[string]authenticationv1.ExtraValue{extraPodName: {pod}, extraPodUID: {string(uid)}}}}
	return token
}

// podToken is the token of one of the fixture's pods for its own job.
func (f *fixture) podToken(pod string) string {
	job, uid := "job", types.UID("pod-0")
	switch pod {
	case "job-worker-1":
		uid = "pod-1"
	case "other-worker-0":
		job, uid = "other", "other-pod-0"
	}
	return f.token(job, "ns", pod, uid, f.clock.Now().Add(time.Hour))
}

func ref(job string) JobRef { return JobRef{Resource: "genericjobs", Namespace: "ns", Name: job} }

// body is a report of step (of 100 steps) and a loss.
func body(step int, at time.Time) string {
	return fmt.Sprintf(`{"trainerStatus": {"metrics": [{"name": "currentStep", "value": "%d"}, {"name": "totalSteps", "value": "100"},
		{"name": "loss", "value": "0.%d"}], "lastUpdatedTime": %q}}`, step, step, at.UTC().Format(time.RFC3339))
}

// post sends a report to job's endpoint with token ("" for none) and returns the answer.
func (f *fixture) post(job, token, data string) *httptest.ResponseRecorder {
	return f.send(http.MethodPost, Path(ref(job)), token, data)
}

func (f *fixture) send(method, path, token, data string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, bytes.NewBufferString(data))
	req.RemoteAddr = "10.0.0.9:40000"
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	f.server.Handler().ServeHTTP(rec, req)
	return rec
}

// status decodes a refusal's metav1.Status.
func status(t *testing.T, rec *httptest.ResponseRecorder) metav1.Status {
	t.Helper()
	var s metav1.Status
	if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil {
		t.Fatalf("the answer %d is not a Status: %v: %s", rec.Code, err, rec.Body)
	}
	return s
}

// writesOf is how many status writes of job went through.
func (f *fixture) writesOf(job string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.writes[job])
}

// writeTimes are the fake clock's times of job's status writes.
func (f *fixture) writeTimes(job string) []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.writes[job]...)
}

// writtenWithin reports whether job's status was written n times within d of real time.
func (f *fixture) writtenWithin(job string, n int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for f.writesOf(job) < n {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
	return true
}

// waitWrites waits (in real time) until job's status was written n times, and a little
// longer to see that no more come.
func (f *fixture) waitWrites(job string, n int) {
	f.t.Helper()
	f.writtenWithin(job, n, 5*time.Second)
	time.Sleep(10 * time.Millisecond)
	if got := f.writesOf(job); got != n {
		f.t.Fatalf("at %s: %d status writes of %s, want %d", f.clock.Now().Sub(start), got, job, n)
	}
}

// patches counts the patch requests sent, accepted or not.
func (f *fixture) patches() int {
	n := 0
	for _, a := range f.jobs.Actions() {
		if a.GetVerb() == "patch" {
			n++
		}
	}
	return n
}

func (f *fixture) reviewCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reviews
}

func lines(s string) string { return strings.TrimSpace(s) }
