package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/t9k-jobs/t9k-jobs/examples"
	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// TestTensorFlowExample: the documented example's worker 0 (there is no chief) ends the job
// Succeeded; every replica has TF_CONFIG naming the 4 workers.
func TestTensorFlowExample(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	job := &batch.TensorFlowTrainingJob{}
	if err := examples.Decode("tensorflow-example.yaml", job); err != nil {
		t.Fatal(err)
	}
	annotate(&job.Spec.ReplicaSpecs[0].Template, "0", "1s")
	if _, err := env.jobs.BatchV1beta1().TensorFlowTrainingJobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "worker 2's pod", jobTimeout, func(ctx context.Context) (bool, error) {
		p, err := env.kube.CoreV1().Pods(ns).Get(ctx, "tensorflow-example-worker-2", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		var config struct {
			Cluster map[string][]string
			Task    struct {
				Type  string
				Index int
			}
		}
		for _, e := range p.Spec.Containers[0].Env {
			if e.Name == "TF_CONFIG" {
				if err := json.Unmarshal([]byte(e.Value), &config); err != nil {
					t.Fatal(err)
				}
			}
		}
		if len(config.Cluster["worker"]) != 4 || config.Cluster["worker"][3] != "tensorflow-example-worker-3."+ns+".svc:2222" || config.Task.Type != "worker" || config.Task.Index != 2 {
			t.Fatalf("TF_CONFIG of worker 2: %+v", config)
		}
		return true, nil
	})
	s := waitStatus(t, "success", tfStatus(ns, job.Name), func(s *batch.JobStatus) bool { return s.Phase == batch.JobSucceeded })
	if c := s.Condition(batch.JobConditionCompleted); !strings.Contains(c.Message, "tensorflow-example-worker-0 succeeded") {
		t.Errorf("Completed %+v", c)
	}
}

// TestExitCodeRestarts: under ExitCode, exit code 137 restarts a replica, counted against the
// backoff limit shared by all replicas; exit code 1 fails the job at once.
func TestExitCodeRestarts(t *testing.T) {
	parallel(t)
	for _, tc := range []struct {
		code     string
		restarts int32
	}{{"137", 2}, {"1", 0}} {
		t.Run("exit "+tc.code, func(t *testing.T) {
			ns := namespace(t)
			w := batch.TrainingReplicaSpec{Type: "worker", Replicas: ptr.To[int32](1), RestartPolicy: batch.RestartExitCode,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "tensorflow", Image: "tf", Command: []string{"train"}}}}}}
			annotate(&w.Template, tc.code, "200ms")
			job := &batch.TensorFlowTrainingJob{ObjectMeta: metav1.ObjectMeta{Name: "exits"}, Spec: batch.TensorFlowTrainingJobSpec{
				ReplicaSpecs: []batch.TrainingReplicaSpec{w}, RunPolicy: batch.TrainingRunPolicy{BackoffLimit: ptr.To[int32](2)}}}
			if _, err := env.jobs.BatchV1beta1().TensorFlowTrainingJobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			s := waitStatus(t, "failure", tfStatus(ns, job.Name), func(s *batch.JobStatus) bool { return s.Phase == batch.JobFailed })
			if got := s.Tasks[0].RestartCount; got != tc.restarts {
				t.Errorf("restarts %d, want %d", got, tc.restarts)
			}
			if c := s.Condition(batch.JobConditionFailed); !strings.Contains(c.Message, "exits-worker-0 (the main replica) failed with exit code "+tc.code) {
				t.Errorf("Failed %+v", c)
			}
		})
	}
}

// TestDeadlineExceeded: a job past runPolicy.activeDeadlineSeconds fails with reason
// DeadlineExceeded, and its running replicas are cleaned up.
func TestDeadlineExceeded(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	w := batch.TrainingReplicaSpec{Type: "worker", Replicas: ptr.To[int32](2),
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "tensorflow", Image: "tf", Command: []string{"train"}}}}}}
	job := &batch.TensorFlowTrainingJob{ObjectMeta: metav1.ObjectMeta{Name: "slow"}, Spec: batch.TensorFlowTrainingJobSpec{
		ReplicaSpecs: []batch.TrainingReplicaSpec{w}, RunPolicy: batch.TrainingRunPolicy{ActiveDeadlineSeconds: ptr.To[int64](3)}}}
	if _, err := env.jobs.BatchV1beta1().TensorFlowTrainingJobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := waitStatus(t, "the deadline", tfStatus(ns, job.Name), func(s *batch.JobStatus) bool { return s.Phase == batch.JobFailed })
	if c := s.Condition(batch.JobConditionFailed); c.Reason != "DeadlineExceeded" || !strings.Contains(c.Message, "activeDeadlineSeconds (3 s)") {
		t.Errorf("Failed %+v", c)
	}
	if s.StartTime == nil {
		t.Error("no startTime in status")
	}
	waitFor(t, "the replicas cleaned up", jobTimeout, func(context.Context) (bool, error) { return len(podNames(t, ns)) == 0, nil })
}

// TestXGBoostExample: the corrected example succeeds when its master does; the workers,
// still running, are cleaned up (Unfinished).
func TestXGBoostExample(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	job := &batch.XGBoostTrainingJob{}
	if err := examples.Decode("xgboost-example.yaml", job); err != nil {
		t.Fatal(err)
	}
	annotate(&job.Spec.ReplicaSpecs[0].Template, "0", "1s")
	if _, err := env.jobs.BatchV1beta1().XGBoostTrainingJobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, "success", func(ctx context.Context) (*batch.JobStatus, error) {
		j, err := env.jobs.BatchV1beta1().XGBoostTrainingJobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return &j.Status, nil
	}, func(s *batch.JobStatus) bool { return s.Phase == batch.JobSucceeded })
	waitFor(t, "the workers cleaned up", jobTimeout, func(context.Context) (bool, error) {
		names := podNames(t, ns)
		return len(names) == 1 && names[0] == "training-iris-xgb-master-0", nil
	})
	out, err := kubectl("get", "t9k", "-n", ns)
	if err != nil || !strings.Contains(out, "training-iris-xgb") || !strings.Contains(out, "Succeeded") {
		t.Errorf("kubectl get t9k (%v):\n%s", err, out)
	}
}

// TestTensorBoard: the TensorBoard of a TensorFlowTrainingJob becomes ready, is reported in
// status.tensorboard, and stays after the job's replicas are cleaned up.
func TestTensorBoard(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	boundClaim(t, ns, "tensorflow-tensorboard-pvc")
	w := batch.TrainingReplicaSpec{Type: "worker", Replicas: ptr.To[int32](1),
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "tensorflow", Image: "tf", Command: []string{"train"}}}}}}
	annotate(&w.Template, "0", "3s")
	job := &batch.TensorFlowTrainingJob{ObjectMeta: metav1.ObjectMeta{Name: "boarded"}, Spec: batch.TensorFlowTrainingJobSpec{
		ReplicaSpecs: []batch.TrainingReplicaSpec{w}, RunPolicy: batch.TrainingRunPolicy{CleanUpPolicy: batch.CleanUpAll},
		TensorboardSpec: &batch.TensorBoardSpec{Image: "t9kpublic/tensorflow-2.11.0:cpu-sdk-0.5.2", TrainingLogFilesets: []string{"t9k://pvc/tensorflow-tensorboard-pvc/log"}}}}
	if _, err := env.jobs.BatchV1beta1().TensorFlowTrainingJobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the TensorBoard ready, the job succeeded and its replicas gone", jobTimeout, func(ctx context.Context) (bool, error) {
		j, err := env.jobs.BatchV1beta1().TensorFlowTrainingJobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		tb := j.Status.Tensorboard
		pods, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batch.LabelReplicaType})
		return err == nil && tb != nil && tb.Ready && j.Status.Phase == batch.JobSucceeded && len(pods.Items) == 0, nil
	})
	j, _ := env.jobs.BatchV1beta1().TensorFlowTrainingJobs(ns).Get(context.Background(), job.Name, metav1.GetOptions{})
	if tb := j.Status.Tensorboard; tb.Dependent == nil || tb.Dependent.Name != "boarded-tensorboard" || tb.Reason != "DependentReady" || tb.Note != "TensorBoard [boarded-tensorboard] is ready" {
		t.Errorf("status.tensorboard %+v", tb)
	}
	if _, err := env.kube.AppsV1().Deployments(ns).Get(context.Background(), "boarded-tensorboard", metav1.GetOptions{}); err != nil {
		t.Errorf("the TensorBoard went with the replicas: %v", err)
	}
}
