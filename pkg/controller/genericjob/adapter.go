// Package genericjob is the GenericJob adapter of the job engine: replica groups straight from
// spec.replicaSpecs, $(...) variables, and success and failure rules.
package genericjob

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
	informers "github.com/t9k-jobs/t9k-jobs/pkg/client/informers/externalversions/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

// New returns the GenericJob adapter.
func New(client versioned.Interface, informer informers.GenericJobInformer) engine.Adapter {
	return engine.NewAdapter[*batch.GenericJob]("GenericJob", informer.Informer(), informer.Lister().GenericJobs,
		client.BatchV1beta1().GenericJobs, Plan)
}

// Plan describes a defaulted GenericJob: one group per replica spec. Every template's
// variables are resolved here once, so a job with a variable that cannot be resolved fails
// before anything is created.
func Plan(job *batch.GenericJob) (*engine.Plan, error) {
	spec := &job.Spec
	vars := newVariables(job)
	plan := &engine.Plan{CleanUp: spec.CleanUpPolicy}
	for i := range spec.ReplicaSpecs {
		r := &spec.ReplicaSpecs[i]
		field := fmt.Sprintf("spec.replicaSpecs[%d].template", i)
		if _, err := vars.resolveTemplate(&r.Template, field, r.Type, 0); err != nil {
			return nil, err
		}
		g := engine.Group{
			Type:     r.Type,
			Replicas: *r.Replicas,
			Restart:  r.RestartPolicy.Policy,
			Limit:    r.RestartPolicy.Limit,
			Template: func(rank int32) corev1.PodTemplateSpec {
				t, _ := vars.resolveTemplate(&r.Template, field, r.Type, rank) // checked above
				return t
			},
		}
		plan.Groups = append(plan.Groups, g)
	}
	if spec.Service != nil {
		plan.ServicePorts = servicePorts(spec.Service)
	}
	plan.SetRunMode(spec.RunMode, spec.Scheduler)
	plan.Judge = judge(spec.SuccessRules, spec.FailureRules, job.Name)
	return plan, nil
}

// judge applies the success and failure rules: failure rules first, a rule holding when all
// its replicas failed with no restart left; then success rules, a rule holding when all its
// replicas succeeded. Without failure rules any replica that failed for good fails the job;
// without success rules the job succeeds once every replica has.
func judge(successRules, failureRules []batch.ReplicaRule, jobName string) func(engine.Replicas) *engine.Outcome {
	// A rank that does not exist never holds: the API server refuses negative ranks and
	// those past a type's replicas, but the judge runs in every decision of the controller
	// and must not panic on a job an older CRD let in.
	holds := func(rule batch.ReplicaRule, replicas engine.Replicas, phase batch.ReplicaPhase) bool {
		for t, ranks := range rule {
			for _, rank := range ranks {
				rs := replicas[t]
				if rank < 0 || int(rank) >= len(rs) || !rs[rank].Final || rs[rank].Phase != phase {
					return false
				}
			}
		}
		return true
	}
	return func(replicas engine.Replicas) *engine.Outcome {
		for _, rule := range failureRules {
			if holds(rule, replicas, batch.ReplicaFailed) {
				return &engine.Outcome{Message: "The job is failed with rule: " + formatRule(rule)}
			}
		}
		if len(failureRules) == 0 {
			// The first replica, by type name and rank, that failed for good: the message
			// does not depend on the order a map is read in.
			types := make([]string, 0, len(replicas))
			for t := range replicas {
				types = append(types, t)
			}
			sort.Strings(types)
			for _, t := range types {
				for rank, r := range replicas[t] {
					if r.Final && r.Phase == batch.ReplicaFailed {
						return &engine.Outcome{Message: fmt.Sprintf("The job is failed: replica %s failed%s and has no restart left.",
							engine.ChildName(jobName, t, int32(rank)), engine.ExitText(r.ExitCode))}
					}
				}
			}
		}
		for _, rule := range successRules {
			if holds(rule, replicas, batch.ReplicaSucceeded) {
				return &engine.Outcome{Succeeded: true, Message: "The job has finished successfully with rule: " + formatRule(rule)}
			}
		}
		if len(successRules) == 0 {
			for _, rs := range replicas {
				for _, r := range rs {
					if !r.Final || r.Phase != batch.ReplicaSucceeded {
						return nil
					}
				}
			}
			return &engine.Outcome{Succeeded: true, Message: "The job has finished successfully: every replica has succeeded."}
		}
		return nil
	}
}

// formatRule writes a rule the way the docs do: {"master": [2], "worker": [0, 1]}.
func formatRule(rule batch.ReplicaRule) string {
	types := make([]string, 0, len(rule))
	for t := range rule {
		types = append(types, t)
	}
	sort.Strings(types)
	parts := make([]string, 0, len(types))
	for _, t := range types {
		ranks := make([]string, 0, len(rule[t]))
		for _, r := range rule[t] {
			ranks = append(ranks, fmt.Sprint(r))
		}
		parts = append(parts, fmt.Sprintf("%q: [%s]", t, strings.Join(ranks, ", ")))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func servicePorts(s *batch.ServiceOption) []corev1.ServicePort {
	ports := make([]corev1.ServicePort, 0, len(s.Ports))
	for _, p := range s.Ports {
		ports = append(ports, corev1.ServicePort{Name: p.Name, Port: p.Port, Protocol: p.Protocol, TargetPort: intstr.FromInt32(p.Port)})
	}
	return ports
}
