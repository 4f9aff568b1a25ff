// Package xgboostjob is the XGBoostTrainingJob adapter of the job engine: one master and
// workers, with the addresses of the master's tracker in every container's env
// (docs/training-kinds.md).
package xgboostjob

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
	informers "github.com/t9k-jobs/t9k-jobs/pkg/client/informers/externalversions/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/training"
)

const (
	portName = "xgboostjob-port"
	// DefaultPort is the master's port when its main container names none xgboostjob-port.
	DefaultPort = 9999
)

// New returns the XGBoostTrainingJob adapter.
func New(client versioned.Interface, informer informers.XGBoostTrainingJobInformer) engine.Adapter {
	return engine.NewAdapter[*batch.XGBoostTrainingJob]("XGBoostTrainingJob", informer.Informer(), informer.Lister().XGBoostTrainingJobs, client.BatchV1beta1().XGBoostTrainingJobs, Plan)
}

// Plan describes a defaulted XGBoostTrainingJob: the master decides the outcome; a worker failing for
// good fails the job too.
func Plan(job *batch.XGBoostTrainingJob) (*engine.Plan, error) {
	spec := &job.Spec
	p := int32(DefaultPort)
	for _, s := range spec.ReplicaSpecs {
		if s.Type == "master" {
			p = training.Port(s.Template, training.MainContainer(s.Template, ""), portName, DefaultPort)
		}
	}
	return training.Layout{
		Name: job.Name, Specs: spec.ReplicaSpecs, Order: []string{"master", "worker"},
		RunPolicy: spec.RunPolicy, RunMode: spec.RunMode, Scheduler: spec.Scheduler,
		PortName: portName, Port: p, Env: Env(job.Name, job.Namespace, training.Replicas(spec.ReplicaSpecs, "worker"), p),
		MainType: "master", Essential: []string{"master", "worker"},
	}.Plan(), nil
}

// Env is what every container of a replica gets: the master's address and port, the world
// size and the replica's rank (master 0, worker i is i+1), the workers' addresses, and the
// same under the names DMLC's tracker uses, so that images written for either work.
func Env(job, namespace string, workers, port int32) func(replicaType string, rank int32) []corev1.EnvVar {
	master := training.Host(job, namespace, "master", 0)
	addrs := make([]string, 0, workers)
	for i := range workers {
		addrs = append(addrs, training.Host(job, namespace, "worker", i))
	}
	world := fmt.Sprint(workers + 1)
	return func(t string, rank int32) []corev1.EnvVar {
		r := rank
		if t == "worker" {
			r = rank + 1
		}
		return []corev1.EnvVar{
			{Name: "MASTER_ADDR", Value: master}, {Name: "MASTER_PORT", Value: fmt.Sprint(port)},
			{Name: "WORLD_SIZE", Value: world}, {Name: "RANK", Value: fmt.Sprint(r)},
			{Name: "WORKER_ADDRS", Value: strings.Join(addrs, ",")}, {Name: "WORKER_PORT", Value: fmt.Sprint(port)},
			{Name: "DMLC_TRACKER_URI", Value: master}, {Name: "DMLC_TRACKER_PORT", Value: fmt.Sprint(port)},
			{Name: "DMLC_TASK_ID", Value: fmt.Sprint(r)}, {Name: "DMLC_NUM_WORKER", Value: world},
		}
	}
}
