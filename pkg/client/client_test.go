package client_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/tools/cache"

	batchv1beta1 "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	batchac "github.com/t9k-jobs/t9k-jobs/pkg/client/applyconfiguration/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned/fake"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/informers/externalversions"
)

// TestFakeClientsetApply: the generated fake clientset takes apply configurations for a job
// and its status, as the controller's unit tests will need; this rests on the OpenAPI models
// hack/update-codegen.sh feeds applyconfiguration-gen.
func TestFakeClientsetApply(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	job := batchac.GenericJob("demo", "ns").WithSpec(batchac.GenericJobSpec().
		WithReplicaSpecs(batchac.GenericReplicaSpec().
			WithType("worker").
			WithReplicas(2).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(map[string]string{"team": "a"}).
				WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().WithName("main").WithImage("busybox"))))))
	if _, err := client.BatchV1beta1().GenericJobs("ns").Apply(ctx, job, metav1.ApplyOptions{FieldManager: "test"}); err != nil {
		t.Fatalf("apply: %v", err)
	}
	status := batchac.GenericJob("demo", "ns").WithStatus(batchac.JobStatus().
		WithPhase(batchv1beta1.JobRunning).
		WithConditions(batchac.JobCondition().WithType(batchv1beta1.JobConditionInitialized).WithStatus(corev1.ConditionTrue).WithReason("-")))
	if _, err := client.BatchV1beta1().GenericJobs("ns").ApplyStatus(ctx, status, metav1.ApplyOptions{FieldManager: "controller"}); err != nil {
		t.Fatalf("apply status: %v", err)
	}
	got, err := client.BatchV1beta1().GenericJobs("ns").Get(ctx, "demo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := got.Spec.ReplicaSpecs[0]
	if r.Type != "worker" || *r.Replicas != 2 || r.Template.Labels["team"] != "a" || r.Template.Spec.Containers[0].Image != "busybox" {
		t.Errorf("spec after apply: %+v", r)
	}
	if got.Status.Phase != batchv1beta1.JobRunning || len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != batchv1beta1.JobConditionInitialized {
		t.Errorf("status after apply: %+v", got.Status)
	}
}

// TestInformerAndLister: the generated informers fill the generated listers.
func TestInformerAndLister(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := fake.NewClientset(&batchv1beta1.TensorFlowTrainingJob{ObjectMeta: metav1.ObjectMeta{Name: "tf", Namespace: "ns"}})
	factory := externalversions.NewSharedInformerFactory(client, 0)
	informer := factory.Batch().V1beta1().TensorFlowTrainingJobs()
	lister := informer.Lister()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.Informer().HasSynced) {
		t.Fatal("cache did not sync")
	}
	if _, err := lister.TensorFlowTrainingJobs("ns").Get("tf"); err != nil {
		t.Fatalf("lister: %v", err)
	}
	cancel()
	factory.Shutdown()
}
