package engine

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
		"namespace":                {p0.Namespace, p1.Namespace},
		"job-name label":           {p0.Labels[batch.LabelJobName], p1.Labels[batch.LabelJobName]},
		"controller-uid label":     {p0.Labels[batch.LabelControllerUID], p1.Labels[batch.LabelControllerUID]},
		"owner's API version":      {o0.APIVersion, o1.APIVersion},
		"owner's name":             {o0.Name, o1.Name},
		"owner's UID as the label": {string(o0.UID), p1.Labels[batch.LabelControllerUID]},
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
