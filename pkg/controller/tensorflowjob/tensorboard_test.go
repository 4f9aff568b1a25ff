package tensorflowjob

import (
	"context"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
	jobinformers "github.com/t9k-jobs/t9k-jobs/pkg/client/informers/externalversions"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/enginetest"
)

// TensorBoard: a Deployment and a Service owned by the job, over the filesets' claims mounted
// read-only; status.tensorboard ready once its pod is; both outlive the job's end and its
// replicas' clean-up.
func TestTensorBoard(t *testing.T) {
	job := &batch.TensorFlowTrainingJob{ObjectMeta: metav1.ObjectMeta{Name: "mnist", Namespace: "ns", UID: "tf-uid"},
		Spec: batch.TensorFlowTrainingJobSpec{
			ReplicaSpecs:    []batch.TrainingReplicaSpec{spec("worker", 1)},
			RunPolicy:       batch.TrainingRunPolicy{CleanUpPolicy: batch.CleanUpAll},
			TensorboardSpec: &batch.TensorBoardSpec{Image: "tb:1", TrainingLogFilesets: []string{"t9k://pvc/logs/run1", "t9k://pvc/logs/run2"}},
		}}
	h := enginetest.Start(t, func(c versioned.Interface, f jobinformers.SharedInformerFactory) engine.Adapter {
		return New(c, f.Batch().V1beta1().TensorFlowTrainingJobs())
	}, []runtime.Object{job})
	get := func(ctx context.Context) *batch.TensorFlowTrainingJob {
		j, err := h.Jobs.BatchV1beta1().TensorFlowTrainingJobs("ns").Get(ctx, "mnist", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	h.WaitFor(t, "the TensorBoard reported, not ready", func(ctx context.Context) bool {
		tb := get(ctx).Status.Tensorboard
		return tb != nil && tb.Dependent != nil && !tb.Ready && tb.Reason == "DependentNotReady"
	})
	d, err := h.Kube.AppsV1().Deployments("ns").Get(context.Background(), "mnist-tensorboard", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if want := []string{"tensorboard", "--logdir_spec", "fileset0:/t9k/pvc/logs/run1,fileset1:/t9k/pvc/logs/run2", "--bind_all", "--port=6006"}; !reflect.DeepEqual(c.Command, want) {
		t.Errorf("command %q", c.Command)
	}
	if v := d.Spec.Template.Spec.Volumes; len(v) != 1 || v[0].PersistentVolumeClaim.ClaimName != "logs" || !v[0].PersistentVolumeClaim.ReadOnly || !c.VolumeMounts[0].ReadOnly {
		t.Errorf("volumes %+v, mounts %+v: want the claim once, read-only", v, c.VolumeMounts)
	}
	if _, err := h.Kube.CoreV1().Services("ns").Get(context.Background(), "mnist-tensorboard", metav1.GetOptions{}); err != nil {
		t.Errorf("no TensorBoard Service: %v", err)
	}

	d.Status.ReadyReplicas = 1
	if _, err := h.Kube.AppsV1().Deployments("ns").UpdateStatus(context.Background(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.WaitFor(t, "the TensorBoard ready", func(ctx context.Context) bool {
		tb := get(ctx).Status.Tensorboard
		return tb != nil && tb.Ready && tb.Note == "TensorBoard [mnist-tensorboard] is ready" && tb.Dependent.Kind == "Deployment"
	})

	h.WaitFor(t, "the worker", func(context.Context) bool { return len(h.Pods(t, "ns")) == 1 })
	h.SetPod(t, "ns", "mnist-worker-0", corev1.PodSucceeded, false, 0)
	h.WaitFor(t, "the job succeeded and cleaned up", func(ctx context.Context) bool {
		return get(ctx).Status.Phase == batch.JobSucceeded && len(h.Pods(t, "ns")) == 0
	})
	if _, err := h.Kube.AppsV1().Deployments("ns").Get(context.Background(), "mnist-tensorboard", metav1.GetOptions{}); err != nil {
		t.Errorf("the TensorBoard went with the replicas: %v", err)
	}
	if _, err := h.Kube.CoreV1().Services("ns").Get(context.Background(), "mnist-tensorboard", metav1.GetOptions{}); err != nil {
		t.Errorf("the TensorBoard Service went with the replicas: %v", err)
	}
}

// A change of tensorboardSpec updates the TensorBoard Deployment; taking it out of the spec
// deletes the Deployment and its Service.
func TestTensorBoardFollowsTheSpec(t *testing.T) {
	job := &batch.TensorFlowTrainingJob{ObjectMeta: metav1.ObjectMeta{Name: "mnist", Namespace: "ns", UID: "tf-uid"},
		Spec: batch.TensorFlowTrainingJobSpec{
			ReplicaSpecs:    []batch.TrainingReplicaSpec{spec("worker", 1)},
			TensorboardSpec: &batch.TensorBoardSpec{Image: "tb:1", TrainingLogFilesets: []string{"t9k://pvc/logs/run1"}},
		}}
	h := enginetest.Start(t, func(c versioned.Interface, f jobinformers.SharedInformerFactory) engine.Adapter {
		return New(c, f.Batch().V1beta1().TensorFlowTrainingJobs())
	}, []runtime.Object{job})
	deployment := func(ctx context.Context) (*appsv1.Deployment, error) {
		return h.Kube.AppsV1().Deployments("ns").Get(ctx, "mnist-tensorboard", metav1.GetOptions{})
	}
	h.WaitFor(t, "the TensorBoard", func(ctx context.Context) bool { _, err := deployment(ctx); return err == nil })
	edit := func(change func(*batch.TensorFlowTrainingJob)) {
		t.Helper()
		j, err := h.Jobs.BatchV1beta1().TensorFlowTrainingJobs("ns").Get(context.Background(), "mnist", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		change(j)
		if _, err := h.Jobs.BatchV1beta1().TensorFlowTrainingJobs("ns").Update(context.Background(), j, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	edit(func(j *batch.TensorFlowTrainingJob) {
		j.Spec.TensorboardSpec.Image = "tb:2"
		j.Spec.TensorboardSpec.TrainingLogFilesets = []string{"t9k://pvc/logs/run2"}
	})
	h.WaitFor(t, "the TensorBoard on the new image and fileset", func(ctx context.Context) bool {
		d, err := deployment(ctx)
		if err != nil {
			return false
		}
		c := d.Spec.Template.Spec.Containers[0]
		return c.Image == "tb:2" && reflect.DeepEqual(c.Command[:3], []string{"tensorboard", "--logdir", "/t9k/pvc/logs/run2"})
	})
	edit(func(j *batch.TensorFlowTrainingJob) { j.Spec.TensorboardSpec = nil })
	h.WaitFor(t, "the TensorBoard gone with its spec", func(ctx context.Context) bool {
		_, errD := deployment(ctx)
		_, errS := h.Kube.CoreV1().Services("ns").Get(ctx, "mnist-tensorboard", metav1.GetOptions{})
		return apierrors.IsNotFound(errD) && apierrors.IsNotFound(errS)
	})
}
