// Package training is what the training kinds (TensorFlowTrainingJob, XGBoostTrainingJob)
// share (docs/training-kinds.md): replica groups from spec.replicaSpecs with their restart policies, a
// headless Service per replica, the framework's variables in every container's env, the run
// policy (clean-up, backoff limit, deadline), and the outcome from a main replica. Each
// kind's adapter says only which replica is main and what the env is.
package training

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

// Layout is a training job as its adapter describes it.
type Layout struct {
	Name  string
	Specs []batch.TrainingReplicaSpec // defaulted
	// Order is the order of the replica types in status.
	Order     []string
	RunPolicy batch.TrainingRunPolicy
	RunMode   *batch.RunMode
	Scheduler *batch.SchedulePolicy
	// Port is the framework's port, named PortName on every replica's Service.
	PortName string
	Port     int32
	// Env is what every container of a replica gets, unless it sets the variable itself.
	Env func(replicaType string, rank int32) []corev1.EnvVar
	// Container names the main container (debug and resume change it); the first when no
	// container has that name.
	Container string
	// MainType is the type whose replica 0 ends the job.
	MainType string
	// Essential are the types whose failure, with no restart left, fails the job; the others
	// (a TensorFlow evaluator) only set ReplicaFailure.
	Essential []string
}

// Plan describes the job to the engine.
func (j Layout) Plan() *engine.Plan {
	plan := &engine.Plan{
		ServicePorts: []corev1.ServicePort{{Name: j.PortName, Port: j.Port, TargetPort: intstr.FromInt32(j.Port)}},
		CleanUp:      j.RunPolicy.CleanUpPolicy,
		BackoffLimit: j.RunPolicy.BackoffLimit,
		Judge:        j.judge,
	}
	if d := j.RunPolicy.ActiveDeadlineSeconds; d != nil {
		plan.Deadline = engine.Seconds(*d)
	}
	for _, t := range j.Order {
		for i := range j.Specs {
			s := &j.Specs[i]
			if s.Type != t {
				continue
			}
			g := engine.Group{Type: s.Type, Replicas: *s.Replicas, Restart: s.RestartPolicy, MainContainer: MainContainer(s.Template, j.Container),
				Template: func(rank int32) corev1.PodTemplateSpec {
					tmpl := *s.Template.DeepCopy()
					env := j.Env(s.Type, rank)
					for c := range tmpl.Spec.Containers {
						tmpl.Spec.Containers[c].Env = withEnv(tmpl.Spec.Containers[c].Env, env)
					}
					return tmpl
				}}
			plan.Groups = append(plan.Groups, g)
		}
	}
	plan.SetRunMode(j.RunMode, j.Scheduler)
	return plan
}

// judge: the main replica succeeding ends the job with success; it, or an essential
// replica, failing with no restart left ends it with failure.
func (j Layout) judge(rs engine.Replicas) *engine.Outcome {
	main := engine.ChildName(j.Name, j.MainType, 0)
	if ms := rs[j.MainType]; len(ms) > 0 && ms[0].Final && ms[0].Phase == batch.ReplicaSucceeded {
		return &engine.Outcome{Succeeded: true, Message: fmt.Sprintf("The job has finished successfully: %s succeeded.", main)}
	}
	for _, t := range j.Essential {
		for rank, r := range rs[t] {
			if r.Final && r.Phase == batch.ReplicaFailed {
				name := engine.ChildName(j.Name, t, int32(rank))
				role := ""
				if name == main {
					role = " (the main replica)"
				}
				return &engine.Outcome{Message: fmt.Sprintf("The job failed: %s%s failed%s and has no restart left.", name, role, engine.ExitText(r.ExitCode))}
			}
		}
	}
	return nil
}

// withEnv adds env to a container's, keeping what the container sets itself.
func withEnv(own, add []corev1.EnvVar) []corev1.EnvVar {
	set := map[string]bool{}
	for _, e := range own {
		set[e.Name] = true
	}
	out := append([]corev1.EnvVar(nil), own...)
	for _, e := range add {
		if !set[e.Name] {
			out = append(out, e)
		}
	}
	return out
}

// MainContainer is the template's container named name, else its first.
func MainContainer(t corev1.PodTemplateSpec, name string) string {
	for _, c := range t.Spec.Containers {
		if c.Name == name {
			return name
		}
	}
	if len(t.Spec.Containers) > 0 {
		return t.Spec.Containers[0].Name
	}
	return ""
}

// Port is the port named name of a template's main container, else def.
func Port(t corev1.PodTemplateSpec, mainContainer, name string, def int32) int32 {
	for _, c := range t.Spec.Containers {
		if c.Name != mainContainer {
			continue
		}
		for _, p := range c.Ports {
			if p.Name == name {
				return p.ContainerPort
			}
		}
	}
	return def
}

// Host is the name a replica resolves by in the cluster: its Service, <job>-<type>-<rank>.<ns>.svc.
func Host(job, namespace, replicaType string, rank int32) string {
	return strings.Join([]string{engine.ChildName(job, replicaType, rank), namespace, "svc"}, ".")
}

// Replicas is the count of a type's replicas (0 when the job has none).
func Replicas(specs []batch.TrainingReplicaSpec, replicaType string) int32 {
	for _, s := range specs {
		if s.Type == replicaType {
			return *s.Replicas
		}
	}
	return 0
}
