package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"

	ac "github.com/t9k-jobs/t9k-jobs/pkg/client/applyconfiguration/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
)

// fieldManager names this program in the jobs' managed fields: `kubectl get -o yaml
// --show-managed-fields` says which fields it set.
const fieldManager = "t9k-example"

// Kinds are the job kinds this program submits, by the names its -kind flag takes.
var Kinds = []string{"GenericJob", "MPIJob", "ColossalAIJob", "TensorFlowTrainingJob", "XGBoostTrainingJob"}

// container is a main container that sleeps: on the local cluster's fake nodes it runs until
// deleted; on a real cluster it stands in for a training script.
func container(name string) *corev1ac.ContainerApplyConfiguration {
	return corev1ac.Container().WithName(name).WithImage("busybox:1.36").
		WithCommand("sh", "-c", "sleep 3600").
		WithResources(corev1ac.ResourceRequirements().WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}))
}

func template(name string) *corev1ac.PodTemplateSpecApplyConfiguration {
	return corev1ac.PodTemplateSpec().WithSpec(corev1ac.PodSpec().WithContainers(container(name)))
}

// Submit creates or updates the job named name of kind in namespace ns with server-side
// apply: the same call submits a job and changes the fields this program owns.
func Submit(ctx context.Context, client versioned.Interface, kind, ns, name string) error {
	jobs := client.BatchV1beta1()
	apply := metav1.ApplyOptions{FieldManager: fieldManager}
	var err error
	switch kind {
	case "GenericJob":
		_, err = jobs.GenericJobs(ns).Apply(ctx, ac.GenericJob(name, ns).WithSpec(ac.GenericJobSpec().
			WithReplicaSpecs(ac.GenericReplicaSpec().WithType("worker").WithReplicas(2).WithTemplate(template("main")))), apply)
	case "MPIJob":
		_, err = jobs.MPIJobs(ns).Apply(ctx, ac.MPIJob(name, ns).WithSpec(ac.MPIJobSpec().
			WithWorker(ac.MPIWorkerSpec().WithReplicas(2).WithCmd("./train").WithTemplate(template("mpi-worker"))).
			WithSSH(ac.SSHConfig().WithSshdPath("/usr/sbin/sshd")).WithMPIHome("/usr/local")), apply)
	case "ColossalAIJob":
		_, err = jobs.ColossalAIJobs(ns).Apply(ctx, ac.ColossalAIJob(name, ns).WithSpec(ac.ColossalAIJobSpec().
			WithSSH(ac.SSHConfig().WithAuthMountPath("/root/.ssh").WithSshdPath("/usr/sbin/sshd")).
			WithLauncher(ac.ColossalAILauncher().WithImage("hpcaitech/colossalai:0.3.0").WithWorkingDir("/workspace")).
			WithWorker(ac.ColossalAIWorkerSpec().WithReplicas(2).WithProcPerWorker(1).WithCommand("train.py").WithTemplate(template("worker")))), apply)
	case "TensorFlowTrainingJob":
		_, err = jobs.TensorFlowTrainingJobs(ns).Apply(ctx, ac.TensorFlowTrainingJob(name, ns).WithSpec(ac.TensorFlowTrainingJobSpec().
			WithReplicaSpecs(ac.TrainingReplicaSpec().WithType("worker").WithReplicas(2).
				WithRestartPolicy("OnFailure").WithTemplate(template("tensorflow")))), apply)
	case "XGBoostTrainingJob":
		_, err = jobs.XGBoostTrainingJobs(ns).Apply(ctx, ac.XGBoostTrainingJob(name, ns).WithSpec(ac.XGBoostTrainingJobSpec().
			WithReplicaSpecs(
				ac.TrainingReplicaSpec().WithType("master").WithReplicas(1).WithTemplate(template("xgboost")),
				ac.TrainingReplicaSpec().WithType("worker").WithReplicas(2).WithTemplate(template("xgboost")))), apply)
	default:
		return fmt.Errorf("unknown kind %q: want one of %v", kind, Kinds)
	}
	return err
}

// pauseManager owns spec.runMode.pause alone, so that pausing and resuming never take the
// other fields from fieldManager: an apply drops the fields its manager set before and
// leaves out now.
const pauseManager = "t9k-example-pause"

// SetPaused pauses (true) or resumes (false) a job: spec.runMode.pause.enabled, applied by
// a manager of its own (docs/changing-jobs.md).
func SetPaused(ctx context.Context, client versioned.Interface, kind, ns, name string, paused bool) error {
	jobs := client.BatchV1beta1()
	mode := ac.RunMode().WithPause(ac.PauseMode().WithEnabled(paused))
	apply := metav1.ApplyOptions{FieldManager: pauseManager}
	var err error
	switch kind {
	case "GenericJob":
		_, err = jobs.GenericJobs(ns).Apply(ctx, ac.GenericJob(name, ns).WithSpec(ac.GenericJobSpec().WithRunMode(mode)), apply)
	case "MPIJob":
		_, err = jobs.MPIJobs(ns).Apply(ctx, ac.MPIJob(name, ns).WithSpec(ac.MPIJobSpec().WithRunMode(mode)), apply)
	case "ColossalAIJob":
		_, err = jobs.ColossalAIJobs(ns).Apply(ctx, ac.ColossalAIJob(name, ns).WithSpec(ac.ColossalAIJobSpec().WithRunMode(mode)), apply)
	case "TensorFlowTrainingJob":
		_, err = jobs.TensorFlowTrainingJobs(ns).Apply(ctx, ac.TensorFlowTrainingJob(name, ns).WithSpec(ac.TensorFlowTrainingJobSpec().WithRunMode(mode)), apply)
	case "XGBoostTrainingJob":
		_, err = jobs.XGBoostTrainingJobs(ns).Apply(ctx, ac.XGBoostTrainingJob(name, ns).WithSpec(ac.XGBoostTrainingJobSpec().WithRunMode(mode)), apply)
	default:
		return fmt.Errorf("unknown kind %q: want one of %v", kind, Kinds)
	}
	return err
}

// Delete deletes a job and, in the foreground, its pods and Services first.
func Delete(ctx context.Context, client versioned.Interface, kind, ns, name string) error {
	jobs := client.BatchV1beta1()
	opts := metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}
	switch kind {
	case "GenericJob":
		return jobs.GenericJobs(ns).Delete(ctx, name, opts)
	case "MPIJob":
		return jobs.MPIJobs(ns).Delete(ctx, name, opts)
	case "ColossalAIJob":
		return jobs.ColossalAIJobs(ns).Delete(ctx, name, opts)
	case "TensorFlowTrainingJob":
		return jobs.TensorFlowTrainingJobs(ns).Delete(ctx, name, opts)
	case "XGBoostTrainingJob":
		return jobs.XGBoostTrainingJobs(ns).Delete(ctx, name, opts)
	}
	return fmt.Errorf("unknown kind %q: want one of %v", kind, Kinds)
}
