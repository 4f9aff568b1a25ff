package engine

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision/decisiontest"
)

// keptPod is a pod as the benchmark keeps thousands of them: a finished replica of a job of
// four, with the project's labels, as decoding gives it (every string its own copy).
func keptPod(i int) *corev1.Pod {
	job, jobUID, index := fmt.Sprintf("job-%d", i/4), fmt.Sprintf("1d76-4a65-ad59-job-uid-%012d", i/4), fmt.Sprint(i%4)
	p := full(decisiontest.Pod(decoded(job+"-worker-"+index), types.UID(fmt.Sprintf("1d76-4a65-ad59-pod-uid-%012d", i)), corev1.PodSucceeded, 0))
	p.Namespace = decoded("team-a")
	p.Labels = map[string]string{decoded(batch.LabelJobName): decoded(job),
		decoded(batch.LabelReplicaType): decoded("worker"), decoded(batch.LabelReplicaIndex): decoded(index),
		decoded(batch.LabelControllerUID): decoded(jobUID), decoded(batch.LabelAttempt): decoded("1")}
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: decoded("batch.tensorstack.dev/v1beta1"), Kind: decoded("GenericJob"),
		Name: decoded(job), UID: types.UID(decoded(jobUID)), Controller: new(bool), BlockOwnerDeletion: new(bool)}}
	return p
}

// heapPerPod is the live heap, in bytes, that the cache holds per trimmed pod: the pods are
// decoded and trimmed, and only what the trimmed copies hold stays.
func heapPerPod(newPod func(int) *corev1.Pod) uint64 {
	const n = 8000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	kept := make([]any, n)
	for i := range kept {
		kept[i], _ = TrimChild(newPod(i))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(kept)
	return (after.HeapAlloc - before.HeapAlloc) / n
}

// The size of a cached pod is the controller's memory: logged here, and bounded so that a
// field added to CachedPod for every pod is a decision, not an accident. The bound is the
// controller's as it is built (932-939 bytes in ten runs; 1,060-1,066 with a label map of
// each pod's own, 1,215 with the strings a job's pods share kept as decoded): under the race
// detector a kept pod costs some 30 bytes more, and only the size is logged.
func TestCachedPodSize(t *testing.T) {
	kept := heapPerPod(keptPod)
	t.Logf("CachedPod: %d bytes of struct; a kept, finished pod: %d bytes in the cache", unsafe.Sizeof(CachedPod{}), kept)
	if kept > 1000 && !raceDetector {
		t.Errorf("a kept pod costs %d bytes in the cache, more than 1000", kept)
	}
	waits := heapPerPod(func(i int) *corev1.Pod {
		p := decisiontest.Unschedulable(keptPod(i), burstMessage)
		p.Status.Phase, p.Status.ContainerStatuses = corev1.PodPending, nil
		return p
	})
	t.Logf("an unschedulable pod: %d bytes in the cache", waits)
}

// burstMessage is what the scheduler says of every pod of a burst it cannot place.
const burstMessage = "0/5 nodes are available: 1 node(s) had untolerated taint(s), 4 Insufficient cpu. preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling."

// The pods of a burst that wait share one copy of the scheduler's message, and a waiting
// container's message, however long (within messageMaxLen).
func TestWaitingPodsShareMessages(t *testing.T) {
	cached := func(i int) *CachedPod {
		p := decisiontest.Unschedulable(keptPod(i), burstMessage)
		p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason: decoded("ImagePullBackOff"), Message: decoded(`Back-off pulling image "registry.example.com/team/trainer:v2": ` + strings.Repeat("not found ", 20))}}
		o, _ := TrimChild(p)
		return o.(*CachedPod)
	}
	a, b := cached(0), cached(1)
	if a.Unscheduled == nil || a.Unscheduled.Message != burstMessage {
		t.Fatalf("the cached pod keeps %+v of its PodScheduled condition, want the scheduler's message", a.Unscheduled)
	}
	if !sameMemory(a.Unscheduled.Message, b.Unscheduled.Message) {
		t.Error("two pods keep their own copies of the scheduler's message")
	}
	if !sameMemory(a.Containers[0].State.Waiting.Message, b.Containers[0].State.Waiting.Message) {
		t.Error("two pods keep their own copies of a waiting container's message")
	}
}

// A condition Kubernetes does not set itself (a readiness gate's, a node problem detector's)
// survives the pod cache, so that a rule matches it.
func TestRuleOnACustomConditionThroughTheCache(t *testing.T) {
	failed := decisiontest.Pod("job-worker-0", "w0", corev1.PodFailed, 1)
	failed.Status.Conditions = append(failed.Status.Conditions,
		corev1.PodCondition{Type: "example.com/GPUHealthy", Status: corev1.ConditionFalse, Reason: "XidError", Message: "Xid 79 on GPU 3"},
		corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionFalse})
	trimmed, _ := TrimChild(failed)
	cached := asPod(trimmed)
	rule := batch.FailurePolicyRule{Name: "bad-gpu", Action: batch.RestartReplica, AvoidNode: ptr.To(true),
		OnPodConditions: []batch.PodConditionPattern{{Type: "example.com/GPUHealthy", Status: corev1.ConditionFalse}}}
	plan := &Plan{Groups: []Group{workers(1, batch.RestartNever, nil)}, FailurePolicy: &batch.FailurePolicy{Rules: []batch.FailurePolicyRule{rule}}}
	d := mustDecide(t, decisiontest.Job(decisiontest.Running("0")), plan, Children{Pods: []*corev1.Pod{cached}}, nil, now)
	if len(d.RuleDecisions) != 1 || d.RuleDecisions[0].RuleName != "bad-gpu" {
		t.Fatalf("the cached pod's conditions %+v: the rule on example.com/GPUHealthy False does not match (rule decisions %+v)", cached.Status.Conditions, d.RuleDecisions)
	}
	if rare := trimmed.(*CachedPod).Rare; rare == nil || len(rare.Others) != 1 || rare.Others[0].Message != "" {
		t.Errorf("the cache keeps %+v, want the one custom condition, without its message", rare)
	}
	plain, _ := TrimChild(decisiontest.Pod("job-worker-1", "w1", corev1.PodRunning, 0))
	if plain.(*CachedPod).Rare != nil {
		t.Error("a pod with no custom condition costs the cache a list")
	}
}
