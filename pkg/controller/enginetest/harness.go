// Package enginetest runs a kind's controller on fake clientsets, for the adapters' tests.
package enginetest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/yaml"

	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned/fake"
	jobinformers "github.com/t9k-jobs/t9k-jobs/pkg/client/informers/externalversions"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

// Harness is a controller running on fake clientsets.
type Harness struct {
	Kube   *kubefake.Clientset
	Jobs   *fake.Clientset
	Events *record.FakeRecorder
}

// Start runs the controller of the adapter newAdapter makes until the test ends. The fake API
// server does not set UIDs; a reactor does, as the real one would.
func Start(t *testing.T, newAdapter func(versioned.Interface, jobinformers.SharedInformerFactory) engine.Adapter, jobs []runtime.Object, kubeObjects ...runtime.Object) *Harness {
	t.Helper()
	h := &Harness{Kube: kubefake.NewClientset(kubeObjects...), Jobs: fake.NewClientset(jobs...), Events: record.NewFakeRecorder(1000)}
	// Nor does it move resourceVersions, without which informers take updates for resyncs.
	// Both clientsets: the controller waits for its cache to show its own status write by
	// the resourceVersion it wrote.
	var version atomic.Int64
	for _, client := range []interface {
		PrependReactor(verb, resource string, reaction k8stesting.ReactionFunc)
	}{h.Kube, h.Jobs} {
		client.PrependReactor("create", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
			if obj, ok := action.(k8stesting.CreateAction).GetObject().(metav1.Object); ok {
				if obj.GetUID() == "" {
					obj.SetUID(uuid.NewUUID())
				}
				obj.SetResourceVersion(fmt.Sprint(version.Add(1)))
			}
			return false, nil, nil
		})
		client.PrependReactor("update", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
			if obj, ok := action.(k8stesting.UpdateAction).GetObject().(metav1.Object); ok {
				obj.SetResourceVersion(fmt.Sprint(version.Add(1)))
			}
			return false, nil, nil
		})
	}
	// And like the API server, an update of a job keeps its status as stored, and an update
	// of its status keeps the rest: a test's edit sent with a status read earlier must not
	// undo the controller's status write.
	h.Jobs.PrependReactor("update", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		update := action.(k8stesting.UpdateAction)
		stored, err := h.Jobs.Tracker().Get(update.GetResource(), update.GetNamespace(), update.GetObject().(metav1.Object).GetName())
		if err != nil {
			return false, nil, nil
		}
		keep := "Status"
		if update.GetSubresource() == "status" {
			keep = "Spec"
		}
		to, from := reflect.ValueOf(update.GetObject()).Elem(), reflect.ValueOf(stored).Elem()
		to.FieldByName(keep).Set(from.FieldByName(keep))
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	jobFactory := jobinformers.NewSharedInformerFactoryWithOptions(h.Jobs, 0, jobinformers.WithTransform(AsDecoded))
	// The children's caches keep what the controller's keep (engine.NewInformers).
	children := engine.NewInformers(h.Kube)
	kubeFactory := children.Kube
	c := engine.New(newAdapter(h.Jobs, jobFactory), engine.Clients{Kube: h.Kube}, children, h.Events, engine.Options{})
	jobFactory.Start(ctx.Done())
	kubeFactory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { c.Run(ctx, 2); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		jobFactory.Shutdown()
		kubeFactory.Shutdown()
	})
	return h
}

// WaitFor polls cond until it holds, and fails the test when it does not within 20 seconds.
func (h *Harness) WaitFor(t *testing.T, what string, cond func(ctx context.Context) bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		return cond(ctx), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// Pods lists the pods of a namespace.
func (h *Harness) Pods(t *testing.T, ns string) []corev1.Pod {
	t.Helper()
	pods, err := h.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// SetPod makes a pod run (ready or not), or end with an exit code, as a kubelet would report.
func (h *Harness) SetPod(t *testing.T, ns, name string, phase corev1.PodPhase, ready bool, exitCode int32) {
	t.Helper()
	pods := h.Kube.CoreV1().Pods(ns)
	p, err := pods.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = phase
	readiness := corev1.ConditionFalse
	if ready {
		readiness = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: readiness}}
	p.Status.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		state := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
		if phase == corev1.PodFailed || phase == corev1.PodSucceeded {
			reason := "Completed"
			if exitCode != 0 {
				reason = "Error"
			}
			state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode, Reason: reason, FinishedAt: metav1.Now()}}
		}
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, State: state})
	}
	if _, err := pods.UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// WaitEvent waits for the event want ("Normal Reason message") among those recorded, and
// fails the test when it does not come within 20 seconds. The events read before it are
// dropped.
func WaitEvent(t *testing.T, events *record.FakeRecorder, want string) {
	t.Helper()
	var seen []string
	timeout := time.After(20 * time.Second)
	for {
		select {
		case e := <-events.Events:
			if e == want {
				return
			}
			seen = append(seen, e)
		case <-timeout:
			t.Fatalf("no event %q; seen:\n%s", want, strings.Join(seen, "\n"))
		}
	}
}

// Count is how many of the actions of both clientsets have this verb and resource (for jobs,
// status writes only).
func (h *Harness) Count(verb, resource string) int {
	n := 0
	for _, a := range append(h.Kube.Actions(), h.Jobs.Actions()...) {
		if a.GetVerb() != verb || a.GetResource().Resource != resource {
			continue
		}
		if a.GetResource().Group == "batch.tensorstack.dev" && a.GetSubresource() != "status" {
			continue
		}
		n++
	}
	return n
}

// update rewrites golden files instead of comparing with them: go test ./... -args -update
var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// Golden compares objects, as YAML without their server-set fields, with testdata/<name>.yaml.
func Golden(t *testing.T, name string, objs ...metav1.Object) {
	t.Helper()
	var out []byte
	for _, o := range objs {
		o.SetUID("")
		o.SetResourceVersion("")
		o.SetCreationTimestamp(metav1.Time{})
		o.SetManagedFields(nil)
		data, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		out = append(append(out, "---\n"...), data...)
	}
	path := filepath.Join("testdata", name+".yaml")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -args -update to write it)", err)
	}
	if string(want) != string(out) {
		t.Errorf("%s differs from what the controller made (-args -update rewrites it):\n%s", path, lineDiff(string(want), string(out)))
	}
}

// lineDiff lists the lines of got that want lacks (+) and the other way round (-).
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	count := map[string]int{}
	for _, l := range w {
		count[l]++
	}
	var b strings.Builder
	for _, l := range g {
		if count[l] > 0 {
			count[l]--
			continue
		}
		b.WriteString("+ " + l + "\n")
	}
	for l, n := range count {
		for range n {
			b.WriteString("- " + l + "\n")
		}
	}
	return b.String()
}
