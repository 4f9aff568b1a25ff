package engine

import (
	"strings"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// decoded returns a fresh copy of s, as decoding gives every object its own.
func decoded(s string) string { return strings.Clone(s) }

func sameMemory(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// Two pods' label keys, and two jobs' condition strings, end up as one copy in the caches;
// names and long messages are left as decoded.
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

	long := strings.Repeat("x", internMaxLen+1)
	jobWith := func() *batch.GenericJob {
		job := testJob(batch.JobStatus{Conditions: []batch.JobCondition{
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

// The table stops growing at its limit: a stream of distinct strings (a user's labels)
// cannot grow it without end.
func TestInternTableIsBounded(t *testing.T) {
	for i := range internLimit + 100 {
		intern(decoded(strings.Repeat("y", i%internMaxLen) + string(rune('a'+i%26)) + string(rune(i))))
	}
	for i := range messageLimit + 100 {
		internMessage(decoded(strings.Repeat("z", 200+i%800) + string(rune(i))))
	}
	for _, table := range []*stringTable{interned, internedMessages} {
		table.Lock()
		n := len(table.table)
		table.Unlock()
		if n > table.limit {
			t.Errorf("a table holds %d strings, limit %d", n, table.limit)
		}
	}
}
