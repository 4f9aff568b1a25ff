package engine

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision/decisiontest"
)

// decoded returns a fresh copy of s, as decoding gives every object its own.
func decoded(s string) string { return strings.Clone(s) }

func sameMemory(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// Two pods' label keys, two pods of a job their labels' values and owner, and two jobs'
// condition strings, end up as one copy in the caches; names, UIDs and long messages are
// left as decoded.
func TestCommonStringsAreShared(t *testing.T) {
	podWith := func() *CachedPod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: decoded("job-worker-0"),
			Labels: map[string]string{decoded(batch.LabelReplicaType): decoded("worker")}}}
		o, _ := TrimChild(p)
		return o.(*CachedPod)
	}
	key := func(p *CachedPod) string {
		for k := range p.Labels {
			return k
		}
		return ""
	}
	a, b := podWith(), podWith()
	if !sameMemory(key(a), key(b)) {
		t.Error("two pods keep their own copies of a label key")
	}
	if sameMemory(a.Name, b.Name) {
		t.Error("a pod's name was interned")
	}
	// Two pods of one job share their namespace, their labels' values and their owner.
	x0, x1 := keptPod(0), keptPod(1)
	c0, _ := TrimChild(x0)
	c1, _ := TrimChild(x1)
	p0, p1 := c0.(*CachedPod), c1.(*CachedPod)
	o0, o1 := p0.OwnerReferences[0], p1.OwnerReferences[0]
	for what, pair := range map[string][2]string{
		"namespace":            {p0.Namespace, p1.Namespace},
		"job-name label":       {p0.Labels[batch.LabelJobName], p1.Labels[batch.LabelJobName]},
		"controller-uid label": {p0.Labels[batch.LabelControllerUID], p1.Labels[batch.LabelControllerUID]},
		"owner's API version":  {o0.APIVersion, o1.APIVersion},
		"owner's name":         {o0.Name, o1.Name},
	} {
		if pair[0] == "" || !sameMemory(pair[0], pair[1]) {
			t.Errorf("two pods of one job keep their own copies of the %s %q", what, pair[0])
		}
	}
	if sameMemory(string(p0.UID), string(p1.UID)) {
		t.Error("a pod's UID was interned")
	}

	long := strings.Repeat("x", internMaxLen+1)
	jobWith := func() *batch.GenericJob {
		job := decisiontest.Job(batch.JobStatus{Conditions: []batch.JobCondition{
			{Type: batch.JobConditionType(decoded("Running")), Message: decoded("The job is not paused.")},
			{Type: batch.JobConditionType(decoded("Failed")), Message: decoded(long)}}})
		o, _ := TrimJob(job)
		return o.(*batch.GenericJob)
	}
	x, y := jobWith(), jobWith()
	if !sameMemory(x.Status.Conditions[0].Message, y.Status.Conditions[0].Message) || !sameMemory(string(x.Status.Conditions[0].Type), string(y.Status.Conditions[0].Type)) {
		t.Error("two jobs keep their own copies of a condition's type and message")
	}
	if sameMemory(x.Status.Conditions[1].Message, y.Status.Conditions[1].Message) {
		t.Error("a long message was interned")
	}
}

// Sharing goes on however many distinct strings came before: a controller that has seen a
// stream of them (a user's labels, long-gone jobs' messages) shares the common strings of the
// objects it decodes now as it did at its start.
func TestStringsAreSharedAfterManyDistinctOnes(t *testing.T) {
	for i := range 20000 {
		intern(decoded(fmt.Sprintf("label-%d", i)))
		internMessage(decoded(fmt.Sprintf("%s %d", strings.Repeat("z", 200), i)))
	}
	runtime.GC() // the table lets go of what nothing uses
	for _, share := range []func(string) string{intern, internMessage} {
		a, b := share(decoded("late-common")), share(decoded("late-common"))
		if !sameMemory(a, b) {
			t.Error("a string common to two objects decoded late is kept twice")
		}
	}
}

// The pods of one replica type and attempt of a job keep one label map, less their rank, as
// do its Services of one type; another type's pods have their own; and the table forgets a
// map once the objects that used it are gone.
func TestLabelsSharedByAJobsPods(t *testing.T) {
	trimmed := func(o any) metav1.Object {
		kept, _ := TrimChild(o)
		return kept.(metav1.Object)
	}
	labelsOf := func(o metav1.Object) map[string]string { return o.GetLabels() }
	// Job 90,000's pods (keptPod: jobs of four), a replica of another type, and two Services.
	p0, p1 := trimmed(keptPod(360000)), trimmed(keptPod(360001))
	launcher := keptPod(360002)
	launcher.Labels[batch.LabelReplicaType] = "launcher"
	other := trimmed(launcher)
	service := func(rank string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: decoded("job-90000-worker-" + rank), Labels: map[string]string{
			decoded(batch.LabelJobName): decoded("job-90000"), decoded(batch.LabelReplicaType): decoded("worker"),
			decoded(batch.LabelReplicaIndex): decoded(rank), decoded(batch.LabelControllerUID): decoded("1d76-4a65-ad59-job-uid-000000090000")}}}
	}
	s0, s1 := trimmed(service("0")), trimmed(service("1"))

	if !sameMap(labelsOf(p0), labelsOf(p1)) || !sameMap(labelsOf(s0), labelsOf(s1)) {
		t.Error("two pods (or two Services) of one replica type keep a label map each")
	}
	if sameMap(labelsOf(p0), labelsOf(other)) || labelsOf(other)[batch.LabelReplicaType] != "launcher" {
		t.Errorf("a launcher's labels %v are the workers' map", labelsOf(other))
	}
	want := map[string]string{batch.LabelJobName: "job-90000", batch.LabelReplicaType: "worker",
		batch.LabelControllerUID: "1d76-4a65-ad59-job-uid-000000090000", batch.LabelAttempt: "1"}
	if got := labelsOf(p1); !maps.Equal(got, want) {
		t.Errorf("a cached pod's labels: %v, want %v (its own but the rank)", got, want)
	}
	if _, ok := labelsOf(s1)[batch.LabelReplicaIndex]; ok {
		t.Errorf("a cached Service keeps its rank: %v", labelsOf(s1))
	}

	held := func() bool {
		sharedLabels.Lock()
		defer sharedLabels.Unlock()
		_, ok := sharedLabels.byKey[labelsKey(want)]
		return ok
	}
	if !held() {
		t.Fatal("the table does not hold the workers' map while their pods use it")
	}
	runtime.KeepAlive([]any{p0, p1, other, s0, s1})
	deadline := time.Now().Add(10 * time.Second)
	for held() && time.Now().Before(deadline) {
		runtime.GC() // a freed object's release runs after the collection that freed it
		runtime.Gosched()
	}
	if held() {
		t.Error("the table still holds the workers' map 10s after the pods that used it were freed")
	}
}

// sameMap says whether a and b are one map.
func sameMap(a, b map[string]string) bool {
	return a != nil && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// The informers' caches share the label maps as the transform does: two pods and two
// Services of one job, listed through NewInformers, keep one map per kind.
func TestInformersShareAJobsLabels(t *testing.T) {
	var objs []kruntime.Object
	for rank := range 2 {
		labels := map[string]string{batch.LabelJobName: "job", batch.LabelReplicaType: "worker",
			batch.LabelReplicaIndex: fmt.Sprint(rank), batch.LabelControllerUID: "job-uid"}
		name := fmt.Sprintf("job-worker-%d", rank)
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: maps.Clone(labels)}},
			&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: maps.Clone(labels)}})
	}
	kube := fake.NewClientset(objs...)
	f := NewInformers(kube).Kube
	pods, services := f.Core().V1().Pods().Informer().GetIndexer(), f.Core().V1().Services().Informer().GetIndexer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	for kind, store := range map[string]cache.Indexer{"pods": pods, "Services": services} {
		a, _, _ := store.GetByKey("ns/job-worker-0")
		b, _, _ := store.GetByKey("ns/job-worker-1")
		if a == nil || b == nil {
			t.Fatalf("the %s' cache holds %v and %v", kind, a, b)
		}
		if la, lb := a.(metav1.Object).GetLabels(), b.(metav1.Object).GetLabels(); !sameMap(la, lb) {
			t.Errorf("the two %s of the job keep a label map each: %v, %v", kind, la, lb)
		}
	}
}
