// Package tensorflowjob is the TensorFlowTrainingJob adapter of the job engine: chief,
// worker, ps and evaluator replicas with TF_CONFIG (docs/training-kinds.md).
package tensorflowjob

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
	informers "github.com/t9k-jobs/t9k-jobs/pkg/client/informers/externalversions/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/training"
)

const (
	container = "tensorflow"
	portName  = "tfjob-port"
	// DefaultPort is TensorFlow's port when the main container names none tfjob-port.
	DefaultPort = 2222
)

// New returns the TensorFlowTrainingJob adapter.
func New(client versioned.Interface, informer informers.TensorFlowTrainingJobInformer) engine.Adapter {
	return engine.NewAdapter[*batch.TensorFlowTrainingJob]("TensorFlowTrainingJob", informer.Informer(), informer.Lister().TensorFlowTrainingJobs, client.BatchV1beta1().TensorFlowTrainingJobs, Plan)
}

// Plan describes a defaulted TensorFlowTrainingJob: the chief (else worker 0) decides the outcome;
// a worker or ps failing for good fails the job, an evaluator does not.
func Plan(job *batch.TensorFlowTrainingJob) (*engine.Plan, error) {
	spec := &job.Spec
	tfConfig, err := TFConfigs(job.Name, job.Namespace, spec.ReplicaSpecs)
	if err != nil {
		return nil, err
	}
	main := "worker"
	if training.Replicas(spec.ReplicaSpecs, "chief") > 0 {
		main = "chief"
	}
	plan := training.Layout{
		Name: job.Name, Specs: spec.ReplicaSpecs, Order: []string{"chief", "ps", "worker", "evaluator"},
		RunPolicy: spec.RunPolicy, RunMode: spec.RunMode, Scheduler: spec.Scheduler,
		PortName: portName, Port: port(spec.ReplicaSpecs, main),
		Env: func(t string, rank int32) []corev1.EnvVar {
			return []corev1.EnvVar{{Name: "TF_CONFIG", Value: tfConfig(t, rank)}}
		},
		Container: container, MainType: main, Essential: []string{"chief", "worker", "ps"},
	}.Plan()
	if tb := spec.TensorboardSpec; tb != nil {
		if _, err := tensorboardPod(tb); err != nil {
			return nil, err
		}
		plan.Objects = tensorboardObjects(job.Name, tb)
	}
	plan.KindStatus = func(children engine.Children) engine.KindStatus {
		return tensorboardStatus(job.Name, spec.TensorboardSpec, children)
	}
	return plan, nil
}

// TFConfigs returns TF_CONFIG for each replica: every chief, worker and ps by host and port
// (the evaluator is not part of the cluster), the replica's own task, environment cloud.
func TFConfigs(job, namespace string, specs []batch.TrainingReplicaSpec) (func(replicaType string, rank int32) string, error) {
	cluster := map[string][]string{}
	for _, s := range specs {
		if s.Type == "evaluator" {
			continue
		}
		p := port(specs, s.Type)
		hosts := []string{}
		for i := range *s.Replicas {
			hosts = append(hosts, fmt.Sprintf("%s:%d", training.Host(job, namespace, s.Type, i), p))
		}
		cluster[s.Type] = hosts
	}
	type task struct {
		Type  string `json:"type"`
		Index int32  `json:"index"`
	}
	type config struct {
		Cluster     map[string][]string `json:"cluster"`
		Task        task                `json:"task"`
		Environment string              `json:"environment"`
	}
	if _, err := json.Marshal(config{Cluster: cluster}); err != nil {
		return nil, err
	}
	return func(t string, rank int32) string {
		data, _ := json.Marshal(config{Cluster: cluster, Task: task{Type: t, Index: rank}, Environment: "cloud"}) // checked above
		return string(data)
	}, nil
}

// port is a type's TensorFlow port: its main container's port named tfjob-port, else 2222.
func port(specs []batch.TrainingReplicaSpec, replicaType string) int32 {
	for _, s := range specs {
		if s.Type == replicaType {
			return training.Port(s.Template, training.MainContainer(s.Template, container), portName, DefaultPort)
		}
	}
	return DefaultPort
}
