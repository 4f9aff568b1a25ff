package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned/fake"
)

// These tests use the generated fake clientset, as a program that submits jobs tests its
// own code: the fake stores objects and serves watches, but runs no controller and no
// admission, so a test plays the controller's part (it writes the status) and the API
// server's refusals (a reactor).

// TestSubmitEveryKind: each kind is applied with this program's field manager and reads
// back as submitted.
func TestSubmitEveryKind(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	for _, kind := range Kinds {
		if err := Submit(ctx, client, kind, "ns", "demo"); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
	}
	g, err := client.BatchV1beta1().GenericJobs("ns").Get(ctx, "demo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := g.Spec.ReplicaSpecs; len(r) != 1 || r[0].Type != "worker" || *r[0].Replicas != 2 || r[0].Template.Spec.Containers[0].Name != "main" {
		t.Errorf("GenericJob replicaSpecs %+v, want 2 workers with container main", r)
	}
	x, err := client.BatchV1beta1().XGBoostTrainingJobs("ns").Get(ctx, "demo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := x.Spec.ReplicaSpecs; len(r) != 2 || r[0].Type != "master" || r[1].Type != "worker" {
		t.Errorf("XGBoostTrainingJob replicaSpecs %+v, want a master and workers", r)
	}
	if err := Submit(ctx, client, "PyTorchJob", "ns", "demo"); err == nil || !strings.Contains(err.Error(), "unknown kind") {
		t.Errorf("submitting an unknown kind: %v, want an error naming the kinds", err)
	}
}

// TestPauseKeepsTheSpec: pausing is applied by a field manager of its own, so the spec the
// program submitted stays whole.
func TestPauseKeepsTheSpec(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	if err := Submit(ctx, client, "MPIJob", "ns", "demo"); err != nil {
		t.Fatal(err)
	}
	if err := SetPaused(ctx, client, "MPIJob", "ns", "demo", true); err != nil {
		t.Fatal(err)
	}
	j, err := client.BatchV1beta1().MPIJobs("ns").Get(ctx, "demo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if j.Spec.RunMode == nil || j.Spec.RunMode.Pause == nil || !j.Spec.RunMode.Pause.Enabled {
		t.Errorf("runMode %+v, want pause enabled", j.Spec.RunMode)
	}
	if j.Spec.Worker.Replicas == nil || *j.Spec.Worker.Replicas != 2 {
		t.Errorf("after the pause the worker spec is %+v, want the 2 workers submitted", j.Spec.Worker)
	}
}

// TestWaitForSeesTheStatusWritten: WaitFor returns once the status says Running, with the
// job as it was then, and not before.
func TestWaitForSeesTheStatusWritten(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := fake.NewClientset()
	if err := Submit(ctx, client, "GenericJob", "ns", "demo"); err != nil {
		t.Fatal(err)
	}
	// Another job in the namespace, Running already: the fake ignores field selectors, and
	// WaitFor must not take it for "demo".
	other := &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "ns"}, Status: batch.JobStatus{Phase: batch.JobRunning}}
	if _, err := client.BatchV1beta1().GenericJobs("ns").Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The controller's part, once WaitFor watches: the job runs with two replicas and
	// reports 40%.
	watching := make(chan struct{})
	var once sync.Once
	client.PrependWatchReactor("genericjobs", func(action k8stesting.Action) (bool, watch.Interface, error) {
		once.Do(func() { close(watching) })
		return false, nil, nil
	})
	go func() {
		<-watching
		j, err := client.BatchV1beta1().GenericJobs("ns").Get(ctx, "demo", metav1.GetOptions{})
		if err != nil {
			return
		}
		j.Status.Phase = batch.JobRunning
		j.Status.Aggregate.Running = 2
		j.Status.Progress = &batch.JobProgress{ProgressPercentage: ptr.To[int32](40)}
		_, _ = client.BatchV1beta1().GenericJobs("ns").UpdateStatus(ctx, j, metav1.UpdateOptions{})
	}()

	j, err := WaitFor(ctx, client, "GenericJob", "ns", "demo", InPhase(batch.JobRunning))
	if err != nil {
		t.Fatal(err)
	}
	if j.GetName() != "demo" {
		t.Fatalf("WaitFor returned %s, want demo", j.GetName())
	}
	if got, want := Describe(j.JobStatus()), "Running; replicas: 2 running, 0 succeeded, 0 failed; 40% done"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
}

// TestWaitForAJobAlreadyGone returns at once: no event would ever come.
func TestWaitForAJobAlreadyGone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := WaitFor(ctx, fake.NewClientset(), "TensorFlowTrainingJob", "ns", "never", Gone); err != nil {
		t.Fatal(err)
	}
}

// TestRefusalNamesTheField: what the program prints for the API server's 422, made here by a
// reactor as the real server makes it for a field its schema refuses.
func TestRefusalNamesTheField(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("create", "genericjobs", func(action k8stesting.Action) (bool, runtime.Object, error) {
		path := field.NewPath("spec", "replicaSpecs").Index(0).Child("replicas")
		return true, nil, apierrors.NewInvalid(schema.GroupKind{Group: batch.GroupName, Kind: "GenericJob"}, "example-refused",
			field.ErrorList{field.Invalid(path, -1, "should be greater than or equal to 0")})
	})
	var out bytes.Buffer
	if err := ShowRefusal(context.Background(), &out, client, "ns"); err != nil {
		t.Fatal(err)
	}
	want := `refused (Invalid, 422): GenericJob "example-refused"
  spec.replicaSpecs[0].replicas: Invalid value: -1: should be greater than or equal to 0
`
	if out.String() != want {
		t.Errorf("printed:\n%s\nwant:\n%s", out.String(), want)
	}
	// Any other refusal is one line with the reason.
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: batch.GroupName, Resource: "genericjobs"}, "x", nil)
	if got := Refusal(forbidden); len(got) != 1 || !strings.HasPrefix(got[0], "refused (Forbidden, 403)") {
		t.Errorf("Refusal(forbidden) = %q", got)
	}
}
