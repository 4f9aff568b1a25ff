// Package apivalidation holds the cases of the API server's validation of the CRDs, their
// schema and CEL rules: objects it must accept or refuse. manifests' tests run them offline
// through the API server's own validators, test/e2e on a real API server.
package apivalidation

import (
	"fmt"
	"strings"
)

// MaxReplicas is the most replicas a job may have, all its replica types together: the
// CRDs' limit (pkg/apis/batch/v1beta1), chosen so that the largest job's status fits in one
// object (status_size_test.go).
const MaxReplicas = 750

// Case is one object the API server must accept or refuse at admission.
type Case struct {
	// Name says what the case checks.
	Name string
	// Example is the documented example (examples/) the object starts from.
	Example string
	// Edit changes the example into the object under test.
	Edit func(obj map[string]any)
	// Want is a piece of the error the API server answers, or "" when the object is accepted.
	Want string
}

// Cases cover every admission rule of the CRDs: one violation each, and the nearest valid
// object where the boundary matters.
var Cases = append([]Case{
	// GenericJob
	{"replicas below zero", "generic-example.yaml", func(o map[string]any) { set(o, -1, "spec", "replicaSpecs", 0, "replicas") }, "spec.replicaSpecs[0].replicas: Invalid value"},
	{"zero replicas allowed", "generic-example.yaml", func(o map[string]any) {
		set(o, 0, "spec", "replicaSpecs", 0, "replicas")
		delete(o["spec"].(map[string]any), "successRules")
		delete(o["spec"].(map[string]any), "failureRules")
	}, ""},
	// Without generateEmbeddedObjectMeta the template's labels and annotations would be
	// pruned, and strict field validation refuses pruned fields.
	{"pod template metadata kept", "generic-example.yaml", func(o map[string]any) {
		set(o, map[string]any{"labels": map[string]any{"team": "a"}, "annotations": map[string]any{"note": "b"}},
			"spec", "replicaSpecs", 0, "template", "metadata")
	}, ""},
	{"no replica specs", "generic-example.yaml", func(o map[string]any) { set(o, []any{}, "spec", "replicaSpecs") }, "spec.replicaSpecs: Invalid value"},
	{"duplicate replica type", "generic-example.yaml", func(o map[string]any) {
		r := get(o, "spec", "replicaSpecs", 0)
		set(o, []any{r, deepCopyValue(r)}, "spec", "replicaSpecs")
	}, "spec.replicaSpecs[1]: Duplicate value"},
	{"replica type not a DNS label", "generic-example.yaml", func(o map[string]any) { set(o, "Worker_1", "spec", "replicaSpecs", 0, "type") }, "spec.replicaSpecs[0].type"},
	{"unknown restart policy", "generic-example.yaml", func(o map[string]any) {
		set(o, map[string]any{"policy": "Sometimes"}, "spec", "replicaSpecs", 0, "restartPolicy")
	}, `spec.replicaSpecs[0].restartPolicy.policy: Unsupported value: "Sometimes"`},
	{"ExitCode is not a GenericJob policy", "generic-example.yaml", func(o map[string]any) {
		set(o, map[string]any{"policy": "ExitCode"}, "spec", "replicaSpecs", 0, "restartPolicy")
	}, `Unsupported value: "ExitCode"`},
	{"restart limit below zero", "generic-example.yaml", func(o map[string]any) {
		set(o, map[string]any{"policy": "OnFailure", "limit": -1}, "spec", "replicaSpecs", 0, "restartPolicy")
	}, "spec.replicaSpecs[0].restartPolicy.limit"},
	{"restart policy with limit", "generic-example.yaml", func(o map[string]any) {
		set(o, map[string]any{"policy": "OnFailure", "limit": 3}, "spec", "replicaSpecs", 0, "restartPolicy")
	}, ""},
	{"success rule names unknown type", "generic-example.yaml", func(o map[string]any) {
		set(o, []any{map[string]any{"master": []any{0}}}, "spec", "successRules")
	}, "spec.successRules may only name replica types listed in spec.replicaSpecs"},
	{"failure rule names missing rank", "generic-example.yaml", func(o map[string]any) {
		set(o, []any{map[string]any{"worker": []any{4}}}, "spec", "failureRules")
	}, "spec.failureRules names a rank that does not exist"},
	{"success rule names last rank", "generic-example.yaml", func(o map[string]any) {
		set(o, []any{map[string]any{"worker": []any{0, 3}}}, "spec", "successRules")
	}, ""},
	{"unknown clean-up policy", "generic-example.yaml", func(o map[string]any) { set(o, "Some", "spec", "cleanUpPolicy") }, `spec.cleanUpPolicy: Unsupported value: "Some"`},
	{"duplicate service port name", "generic-example.yaml", func(o map[string]any) {
		set(o, map[string]any{"ports": []any{map[string]any{"name": "http", "port": 80}, map[string]any{"name": "http", "port": 81}}}, "spec", "service")
	}, "spec.service.ports[1]: Duplicate value"},
	{"service port out of range", "generic-example.yaml", func(o map[string]any) {
		set(o, map[string]any{"ports": []any{map[string]any{"name": "http", "port": 70000}}}, "spec", "service")
	}, "spec.service.ports[0].port"},
	{"containers directly under template", "generic-example.yaml", func(o map[string]any) {
		set(o, get(o, "spec", "replicaSpecs", 0, "template", "spec"), "spec", "replicaSpecs", 0, "template")
	}, "spec.replicaSpecs[0].template.containers"},
	{"job name with a dot", "generic-example.yaml", func(o map[string]any) { set(o, "generic.example", "metadata", "name") }, "metadata.name must consist of lower-case letters"},
	{"job name too long for its replicas", "generic-example.yaml", func(o map[string]any) {
		set(o, strings.Repeat("a", 55), "metadata", "name")
	}, "the replica names <name>-<type>-<rank> (host names and Service names) must fit in 63 characters"},
	{"longest job name that fits", "generic-example.yaml", func(o map[string]any) { set(o, strings.Repeat("a", 54), "metadata", "name") }, ""},
	{"debug setting for unknown type", "generic-example.yaml", func(o map[string]any) {
		set(o, map[string]any{"enabled": true, "replicaSpecs": []any{map[string]any{"type": "master"}}}, "spec", "runMode", "debug")
	}, "spec.runMode.debug.replicaSpecs[*].type must name a replica type"},
	{"scheduler queue required", "generic-example.yaml", func(o map[string]any) {
		set(o, map[string]any{"t9kScheduler": map[string]any{"priority": 50}}, "spec", "scheduler")
	}, "spec.scheduler.t9kScheduler.queue: Required value"},
	{"scheduler as documented", "generic-example.yaml", func(o map[string]any) {
		set(o, map[string]any{"t9kScheduler": map[string]any{"queue": "default", "priority": 50}}, "spec", "scheduler")
	}, ""},

	// MPIJob
	{"no mpi-worker container", "mpi-example.yaml", func(o map[string]any) {
		set(o, "worker", "spec", "worker", "template", "spec", "containers", 0, "name")
	}, "must include a container named mpi-worker"},
	{"MPI needs a worker", "mpi-example.yaml", func(o map[string]any) { set(o, 0, "spec", "worker", "replicas") }, "spec.worker.replicas"},
	{"MPI debug type", "mpi-example.yaml", func(o map[string]any) {
		set(o, map[string]any{"enabled": true, "replicaSpecs": []any{map[string]any{"type": "ps"}}}, "spec", "runMode", "debug")
	}, "must be launcher or worker"},
	{"MPI debug as documented", "mpi-example.yaml", func(o map[string]any) {
		set(o, map[string]any{"enabled": true, "replicaSpecs": []any{map[string]any{"type": "worker", "skipInitContainer": true, "command": []any{"sleep", "inf"}}}}, "spec", "runMode", "debug")
	}, ""},
	{"MPI name too long", "mpi-example.yaml", func(o map[string]any) { set(o, strings.Repeat("m", 55), "metadata", "name") }, "the worker names <name>-worker-<rank> (host names) must fit in 63 characters"},

	// ColossalAIJob
	{"no worker container", "colossalai-example.yaml", func(o map[string]any) {
		set(o, "trainer", "spec", "worker", "template", "spec", "containers", 0, "name")
	}, "must include a container named worker"},
	{"no processes per worker", "colossalai-example.yaml", func(o map[string]any) { set(o, 0, "spec", "worker", "procPerWorker") }, "spec.worker.procPerWorker"},
	{"launcher needs an image", "colossalai-example.yaml", func(o map[string]any) { delete(get(o, "spec", "launcher").(map[string]any), "image") }, "spec.launcher.image: Required value"},

	// TensorFlowTrainingJob
	{"TF type outside chief/worker/ps/evaluator", "tensorflow-example.yaml", func(o map[string]any) { set(o, "master", "spec", "replicaSpecs", 0, "type") }, "must be chief, worker, ps or evaluator"},
	{"two chiefs", "tensorflow-example.yaml", func(o map[string]any) {
		r := deepCopyValue(get(o, "spec", "replicaSpecs", 0)).(map[string]any)
		r["type"], r["replicas"] = "chief", 2
		set(o, append(get(o, "spec", "replicaSpecs").([]any), r), "spec", "replicaSpecs")
	}, "at most one chief"},
	{"chief and workers", "tensorflow-example.yaml", func(o map[string]any) {
		r := deepCopyValue(get(o, "spec", "replicaSpecs", 0)).(map[string]any)
		r["type"], r["replicas"] = "chief", 1
		set(o, append(get(o, "spec", "replicaSpecs").([]any), r), "spec", "replicaSpecs")
	}, ""},
	{"only parameter servers", "tensorflow-example.yaml", func(o map[string]any) { set(o, "ps", "spec", "replicaSpecs", 0, "type") }, "must include a chief or a worker"},
	{"TF restart policy", "tensorflow-example.yaml", func(o map[string]any) { set(o, "Sometimes", "spec", "replicaSpecs", 0, "restartPolicy") }, `Unsupported value: "Sometimes"`},
	{"TF ExitCode policy", "tensorflow-example.yaml", func(o map[string]any) { set(o, "ExitCode", "spec", "replicaSpecs", 0, "restartPolicy") }, ""},
	{"TF backoff limit below zero", "tensorflow-example.yaml", func(o map[string]any) { set(o, -1, "spec", "runPolicy", "backoffLimit") }, "spec.runPolicy.backoffLimit"},
	{"TF run policy", "tensorflow-example.yaml", func(o map[string]any) {
		set(o, map[string]any{"cleanUpPolicy": "All", "backoffLimit": 3, "activeDeadlineSeconds": 600}, "spec", "runPolicy")
	}, ""},
	{"TensorBoard as documented", "tensorflow-example.yaml", func(o map[string]any) {
		set(o, map[string]any{"image": "t9kpublic/tensorflow-2.11.0:cpu-sdk-0.5.2", "trainingLogFilesets": []any{"t9k://pvc/tensorflow-tensorboard-pvc/log"}}, "spec", "tensorboardSpec")
	}, ""},
	{"TensorBoard fileset not a t9k URL", "tensorflow-example.yaml", func(o map[string]any) {
		set(o, map[string]any{"image": "tb", "trainingLogFilesets": []any{"/mnt/log"}}, "spec", "tensorboardSpec")
	}, "spec.tensorboardSpec.trainingLogFilesets[0]"},
	{"TensorBoard name too long", "tensorflow-example.yaml", func(o map[string]any) {
		set(o, strings.Repeat("t", 52), "metadata", "name")
		set(o, map[string]any{"image": "tb", "trainingLogFilesets": []any{"t9k://pvc/logs/x"}}, "spec", "tensorboardSpec")
	}, "may have a name of at most 51 characters"},

	// XGBoostTrainingJob
	{"no master", "xgboost-example.yaml", func(o map[string]any) { set(o, []any{get(o, "spec", "replicaSpecs", 1)}, "spec", "replicaSpecs") }, "needs exactly one master"},
	{"two masters", "xgboost-example.yaml", func(o map[string]any) { set(o, 2, "spec", "replicaSpecs", 0, "replicas") }, "needs exactly one master"},
	{"malformed TensorBoard fileset", "tensorflow-example.yaml", func(o map[string]any) {
		set(o, map[string]any{"image": "tb", "trainingLogFilesets": []any{"pvc://logs/run"}}, "spec", "tensorboardSpec")
	}, "each entry must be of the form t9k://pvc/<claim>/<path>"},
	{"TensorBoard fileset", "tensorflow-example.yaml", func(o map[string]any) {
		set(o, map[string]any{"image": "tb", "trainingLogFilesets": []any{"t9k://pvc/logs/run"}}, "spec", "tensorboardSpec")
	}, ""},
	{"XGBoost type", "xgboost-example.yaml", func(o map[string]any) { set(o, "ps", "spec", "replicaSpecs", 1, "type") }, "must be master or worker"},

	// The replica limit: MaxReplicas in all, for every kind; at the limit and one over.
	{"GenericJob with the most replicas", "generic-example.yaml", func(o map[string]any) { set(o, MaxReplicas, "spec", "replicaSpecs", 0, "replicas") }, ""},
	{"GenericJob with one replica too many", "generic-example.yaml", func(o map[string]any) { set(o, MaxReplicas+1, "spec", "replicaSpecs", 0, "replicas") }, tooManyReplicas},
	{"GenericJob with the most replicas over two types", "generic-example.yaml", func(o map[string]any) {
		set(o, MaxReplicas-10, "spec", "replicaSpecs", 0, "replicas")
		addType(o, "ps", 10)
	}, ""},
	{"GenericJob over the limit with two types", "generic-example.yaml", func(o map[string]any) {
		set(o, MaxReplicas-10, "spec", "replicaSpecs", 0, "replicas")
		addType(o, "ps", 11)
	}, tooManyReplicas},
	// A type without replicas has one.
	{"GenericJob over the limit by a type's default replica", "generic-example.yaml", func(o map[string]any) {
		set(o, MaxReplicas, "spec", "replicaSpecs", 0, "replicas")
		addType(o, "ps", nil)
	}, tooManyReplicas},
	{"MPIJob with the most workers", "mpi-example.yaml", func(o map[string]any) { set(o, MaxReplicas-1, "spec", "worker", "replicas") }, ""},
	{"MPIJob with one worker too many (the launcher counts)", "mpi-example.yaml", func(o map[string]any) { set(o, MaxReplicas, "spec", "worker", "replicas") }, tooManyWorkers},
	{"ColossalAIJob with the most workers", "colossalai-example.yaml", func(o map[string]any) { set(o, MaxReplicas-1, "spec", "worker", "replicas") }, ""},
	{"ColossalAIJob with one worker too many (the launcher counts)", "colossalai-example.yaml", func(o map[string]any) { set(o, MaxReplicas, "spec", "worker", "replicas") }, tooManyWorkers},
	{"TensorFlowTrainingJob with the most replicas", "tensorflow-example.yaml", func(o map[string]any) {
		set(o, MaxReplicas-3, "spec", "replicaSpecs", 0, "replicas")
		addType(o, "chief", 1)
		addType(o, "ps", 1)
		addType(o, "evaluator", nil)
	}, ""},
	{"TensorFlowTrainingJob with one replica too many", "tensorflow-example.yaml", func(o map[string]any) {
		set(o, MaxReplicas-2, "spec", "replicaSpecs", 0, "replicas")
		addType(o, "chief", 1)
		addType(o, "ps", 1)
		addType(o, "evaluator", nil)
	}, tooManyReplicas},
	{"XGBoostTrainingJob with the most replicas", "xgboost-example.yaml", func(o map[string]any) { set(o, MaxReplicas-1, "spec", "replicaSpecs", 1, "replicas") }, ""},
	{"XGBoostTrainingJob with one replica too many", "xgboost-example.yaml", func(o map[string]any) { set(o, MaxReplicas, "spec", "replicaSpecs", 1, "replicas") }, tooManyReplicas},
}, append(append(append(lifecycleCases(), schedulingCases()...), failurePolicyCases()...), elasticCases()...)...)

// lifecycleCases are the rules of the lifecycle controls every kind shares
// (docs/lifecycle.md): no negative TTL, a start deadline of at least a second, and a whole-job
// restart only where something restarts.
func lifecycleCases() []Case {
	examples := []string{"generic-example.yaml", "mpi-example.yaml", "colossalai-example.yaml", "tensorflow-example.yaml", "xgboost-example.yaml"}
	var cases []Case
	for _, example := range examples {
		kind := strings.TrimSuffix(example, "-example.yaml")
		cases = append(cases,
			Case{kind + ": negative TTL", example, func(o map[string]any) { set(o, -1, "spec", "ttlSecondsAfterFinished") }, "spec.ttlSecondsAfterFinished must not be negative"},
			Case{kind + ": TTL 0", example, func(o map[string]any) { set(o, 0, "spec", "ttlSecondsAfterFinished") }, ""},
			Case{kind + ": start deadline 0", example, func(o map[string]any) { set(o, 0, "spec", "startupDeadlineSeconds") }, "spec.startupDeadlineSeconds must be at least 1"},
			Case{kind + ": negative start deadline", example, func(o map[string]any) { set(o, -5, "spec", "startupDeadlineSeconds") }, "spec.startupDeadlineSeconds must be at least 1"},
			Case{kind + ": start deadline 10", example, func(o map[string]any) { set(o, 10, "spec", "startupDeadlineSeconds") }, ""},
			Case{kind + ": restart scope Replica", example, func(o map[string]any) { set(o, "Replica", "spec", "restartScope") }, ""},
			Case{kind + ": unknown restart scope", example, func(o map[string]any) { set(o, "Pod", "spec", "restartScope") }, `spec.restartScope: Unsupported value: "Pod"`},
		)
	}
	return append(cases,
		Case{"mpi: whole-job restart", "mpi-example.yaml", func(o map[string]any) { set(o, "Job", "spec", "restartScope") }, "spec.restartScope: Job cannot apply to an MPIJob"},
		Case{"colossalai: whole-job restart", "colossalai-example.yaml", func(o map[string]any) { set(o, "Job", "spec", "restartScope") }, "spec.restartScope: Job cannot apply to a ColossalAIJob"},
		Case{"generic: whole-job restart, nothing restarts", "generic-example.yaml", func(o map[string]any) { set(o, "Job", "spec", "restartScope") }, "no replica type of this job is ever restarted"},
		Case{"generic: whole-job restart with OnFailure", "generic-example.yaml", func(o map[string]any) {
			set(o, "Job", "spec", "restartScope")
			set(o, map[string]any{"policy": "OnFailure", "limit": 3}, "spec", "replicaSpecs", 0, "restartPolicy")
		}, ""},
		Case{"tensorflow: whole-job restart with OnFailure", "tensorflow-example.yaml", func(o map[string]any) { set(o, "Job", "spec", "restartScope") }, ""},
		Case{"tensorflow: whole-job restart, nothing restarts", "tensorflow-example.yaml", func(o map[string]any) {
			set(o, "Job", "spec", "restartScope")
			set(o, "Never", "spec", "replicaSpecs", 0, "restartPolicy")
		}, "no replica type of this job is ever restarted"},
		Case{"xgboost: whole-job restart with OnFailure", "xgboost-example.yaml", func(o map[string]any) { set(o, "Job", "spec", "restartScope") }, ""},
	)
}

// failurePolicyCases are the rules of spec.failurePolicy, which every kind has
// (docs/failures.md): each refusal names the rule (by its name, or by its index where the
// schema checks one rule alone) and says what to change; the nearest accepted object beside
// each. A rule's replica types are those of the job; the launcher kinds take FailJob only.
func failurePolicyCases() []Case {
	const example = "generic-example.yaml"
	policy := func(rules ...map[string]any) func(map[string]any) {
		return func(o map[string]any) {
			list := make([]any, len(rules))
			for i, r := range rules {
				list[i] = r
			}
			set(o, map[string]any{"rules": list}, "spec", "failurePolicy")
		}
	}
	rule := func(name, action string, fields ...any) map[string]any {
		r := map[string]any{"name": name, "action": action}
		for i := 0; i+1 < len(fields); i += 2 {
			r[fields[i].(string)] = fields[i+1]
		}
		return r
	}
	exitCodes := func(op string, codes ...any) map[string]any {
		return map[string]any{"operator": op, "values": codes}
	}
	both := func(edits ...func(map[string]any)) func(map[string]any) {
		return func(o map[string]any) {
			for _, e := range edits {
				e(o)
			}
		}
	}
	deadline := func(o map[string]any) { set(o, 600, "spec", "progressDeadlineSeconds") }
	oom := []any{"OOMKilled"}
	var cases []Case
	const launcherTypes, specTypes = "replicaTypes must be launcher or worker", "replicaTypes may only name types of spec.replicaSpecs"
	for _, k := range []struct{ example, replicaType, unknownType string }{
		{"generic-example.yaml", "worker", specTypes}, {"mpi-example.yaml", "worker", launcherTypes}, {"colossalai-example.yaml", "worker", launcherTypes},
		{"tensorflow-example.yaml", "worker", specTypes}, {"xgboost-example.yaml", "master", specTypes},
	} {
		kind := strings.TrimSuffix(k.example, "-example.yaml")
		cases = append(cases,
			Case{kind + ": a FailJob rule", k.example, policy(rule("bad-input", "FailJob", "replicaTypes", []any{k.replicaType}, "onExitCodes", exitCodes("In", 42))), ""},
			Case{kind + ": a rule naming a type the job does not have", k.example, policy(rule("bad-input", "FailJob", "onExitCodes", exitCodes("In", 42)),
				rule("ps-oom", "FailJob", "replicaTypes", []any{k.replicaType, "ps"}, "onReasons", oom)), "spec.failurePolicy.rules, rule ps-oom: " + k.unknownType},
			Case{kind + ": avoid failed nodes", k.example, func(o map[string]any) {
				set(o, map[string]any{"avoidFailedNodes": map[string]any{}}, "spec", "failurePolicy")
			}, ""},
		)
	}
	return append(cases,
		// What a launcher kind cannot do: its one mpirun is the training.
		Case{"mpi: a RestartReplica rule", "mpi-example.yaml", policy(rule("bad-input", "FailJob", "onExitCodes", exitCodes("In", 42)), rule("retry-oom", "RestartReplica", "onReasons", oom)),
			"spec.failurePolicy.rules, rule retry-oom: only action FailJob applies to an MPIJob"},
		Case{"colossalai: an Ignore rule", "colossalai-example.yaml", policy(rule("spot", "Ignore", "onExitCodes", exitCodes("In", 143))),
			"spec.failurePolicy.rules, rule spot: only action FailJob applies to a ColossalAIJob"},
		Case{"generic: every action", example, func(o map[string]any) {
			set(o, map[string]any{"policy": "OnFailure"}, "spec", "replicaSpecs", 0, "restartPolicy")
			policy(rule("bad-input", "FailJob", "onExitCodes", exitCodes("In", 42)), rule("oom", "RestartReplica", "replicaTypes", []any{"worker"}, "onReasons", oom),
				rule("nccl-timeout", "RestartJob", "ranks", []any{0, 1}, "onExitCodes", exitCodes("In", 3)),
				rule("spot", "Ignore", "onPodConditions", []any{map[string]any{"type": "DisruptionTarget"}}))(o)
		}, ""},
		Case{"generic: onReasons Stalled without a progress deadline", example, policy(rule("hung", "RestartJob", "onReasons", []any{"OOMKilled", "Stalled"})),
			"spec.failurePolicy.rules, rule hung: onReasons Stalled needs spec.progressDeadlineSeconds, which says how long a replica may go without reporting progress; set it, or drop Stalled from the rule"},
		Case{"tensorflow: onReasons Stalled without a progress deadline", "tensorflow-example.yaml", policy(rule("hung", "FailJob", "onReasons", []any{"Stalled"})),
			"spec.failurePolicy.rules, rule hung: onReasons Stalled needs spec.progressDeadlineSeconds"},
		Case{"generic: onReasons Stalled with a progress deadline", example, both(deadline, policy(rule("hung", "RestartJob", "onReasons", []any{"Stalled"}))), ""},
		Case{"generic: progress deadline 0", example, func(o map[string]any) { set(o, 0, "spec", "progressDeadlineSeconds") },
			"spec.progressDeadlineSeconds must be at least 1"},
		Case{"generic: onExitCodes In with 0", example, policy(rule("bad-input", "FailJob", "onExitCodes", exitCodes("In", 42, 0))),
			"onExitCodes.values must not hold 0 with operator In: a container that exited 0 did not fail, and is never looked at"},
		Case{"generic: onExitCodes In with 0 names the rule", example, policy(rule("spot", "Ignore", "onExitCodes", exitCodes("In", 143)), rule("bad-input", "FailJob", "onExitCodes", exitCodes("In", 0))),
			"spec.failurePolicy.rules[1].onExitCodes"},
		Case{"generic: onExitCodes NotIn with 0", example, policy(rule("not-clean", "FailJob", "onExitCodes", exitCodes("NotIn", 0, 143))), ""},
		Case{"generic: a rule with two matchers", example, policy(rule("oom-or-137", "FailJob", "onExitCodes", exitCodes("In", 137), "onReasons", oom)),
			"a failure policy rule matches on at most one of onExitCodes, onPodConditions and onReasons: split it into several rules"},
		Case{"generic: a rule with two matchers names the rule", example, policy(rule("spot", "Ignore", "onExitCodes", exitCodes("In", 143)),
			rule("oom-or-evicted", "FailJob", "onPodConditions", []any{map[string]any{"type": "DisruptionTarget"}}, "onReasons", oom)), "spec.failurePolicy.rules[1]"},
		Case{"generic: a rule without a matcher", example, policy(rule("any-failure", "FailJob")), ""},
		Case{"generic: an unknown action", example, policy(rule("retry", "Retry")), `spec.failurePolicy.rules[0].action: Unsupported value: "Retry"`},
		Case{"generic: an unknown reason", example, policy(rule("oom", "FailJob", "onReasons", []any{"OutOfMemory"})), `spec.failurePolicy.rules[0].onReasons[0]: Unsupported value: "OutOfMemory"`},
		Case{"generic: a rule name not a DNS label", example, policy(rule("Bad_Input", "FailJob")), "spec.failurePolicy.rules[0].name"},
		Case{"generic: two rules of one name", example, policy(rule("oom", "FailJob", "onReasons", oom), rule("oom", "Ignore")), "spec.failurePolicy.rules[1]: Duplicate value"},
		Case{"generic: maxNodes 0", example, func(o map[string]any) {
			set(o, map[string]any{"avoidFailedNodes": map[string]any{"maxNodes": 0}}, "spec", "failurePolicy")
		}, "spec.failurePolicy.avoidFailedNodes.maxNodes"},
	)
}

// schedulingCases are the rules of spec.scheduling, which every kind has (docs/gang.md): one
// variant of each union, a positive minCount, claims with one source and names that are DNS
// labels, a topology key that is a label key, and the lists' limits. Every kind gets the
// documented block; the other rules are the same schema on each, checked on GenericJob.
func schedulingCases() []Case {
	const example = "generic-example.yaml"
	claim := func(name string, source ...string) map[string]any {
		c := map[string]any{"name": name}
		for i := 0; i+1 < len(source); i += 2 {
			c[source[i]] = source[i+1]
		}
		return c
	}
	var cases []Case
	for _, example := range []string{"generic-example.yaml", "mpi-example.yaml", "colossalai-example.yaml", "tensorflow-example.yaml", "xgboost-example.yaml"} {
		kind := strings.TrimSuffix(example, "-example.yaml")
		cases = append(cases, Case{kind + ": scheduling as documented", example, func(o map[string]any) { set(o, DocumentedScheduling(), "spec", "scheduling") }, ""})
	}
	return append(cases,
		Case{"scheduling: empty", example, func(o map[string]any) { set(o, map[string]any{}, "spec", "scheduling") }, ""},
		Case{"scheduling: basic policy", example, func(o map[string]any) {
			set(o, map[string]any{"basic": map[string]any{}}, "spec", "scheduling", "schedulingPolicy")
		}, ""},
		Case{"scheduling: gang without minCount", example, func(o map[string]any) {
			set(o, map[string]any{"gang": map[string]any{}}, "spec", "scheduling", "schedulingPolicy")
		}, ""},
		Case{"scheduling: neither basic nor gang", example, func(o map[string]any) {
			set(o, map[string]any{}, "spec", "scheduling", "schedulingPolicy")
		}, "spec.scheduling.schedulingPolicy must set exactly one of basic"},
		Case{"scheduling: both basic and gang", example, func(o map[string]any) {
			set(o, map[string]any{"basic": map[string]any{}, "gang": map[string]any{"minCount": 2}}, "spec", "scheduling", "schedulingPolicy")
		}, "spec.scheduling.schedulingPolicy must set exactly one of basic"},
		Case{"scheduling: minCount 0", example, func(o map[string]any) {
			set(o, map[string]any{"gang": map[string]any{"minCount": 0}}, "spec", "scheduling", "schedulingPolicy")
		}, "spec.scheduling.schedulingPolicy.gang.minCount must be at least 1"},
		Case{"scheduling: minCount 1", example, func(o map[string]any) {
			set(o, map[string]any{"gang": map[string]any{"minCount": 1}}, "spec", "scheduling", "schedulingPolicy")
		}, ""},
		Case{"scheduling: neither single nor all", example, func(o map[string]any) {
			set(o, map[string]any{}, "spec", "scheduling", "disruptionMode")
		}, "spec.scheduling.disruptionMode must set exactly one of single"},
		Case{"scheduling: both single and all", example, func(o map[string]any) {
			set(o, map[string]any{"single": map[string]any{}, "all": map[string]any{}}, "spec", "scheduling", "disruptionMode")
		}, "spec.scheduling.disruptionMode must set exactly one of single"},
		Case{"scheduling: disruption mode single", example, func(o map[string]any) {
			set(o, map[string]any{"single": map[string]any{}}, "spec", "scheduling", "disruptionMode")
		}, ""},
		Case{"scheduling: unknown disruption mode", example, func(o map[string]any) {
			set(o, map[string]any{"some": map[string]any{}}, "spec", "scheduling", "disruptionMode")
		}, "spec.scheduling.disruptionMode.some"},
		Case{"scheduling: topology key not a label key", example, func(o map[string]any) {
			set(o, []any{map[string]any{"key": "rack name"}}, "spec", "scheduling", "schedulingConstraints", "topology")
		}, "spec.scheduling.schedulingConstraints.topology[*].key must be a valid label key"},
		Case{"scheduling: topology key with a bad prefix", example, func(o map[string]any) {
			set(o, []any{map[string]any{"key": "Example.com/rack"}}, "spec", "scheduling", "schedulingConstraints", "topology")
		}, "spec.scheduling.schedulingConstraints.topology[*].key must be a valid label key"},
		Case{"scheduling: topology key without a prefix", example, func(o map[string]any) {
			set(o, []any{map[string]any{"key": "rack"}}, "spec", "scheduling", "schedulingConstraints", "topology")
		}, ""},
		Case{"scheduling: two topology constraints", example, func(o map[string]any) {
			set(o, []any{map[string]any{"key": "example.com/rack"}, map[string]any{"key": "example.com/block"}}, "spec", "scheduling", "schedulingConstraints", "topology")
		}, "spec.scheduling.schedulingConstraints.topology: Too many: 2: must have at most 1 item"},
		Case{"scheduling: claim without a source", example, func(o map[string]any) {
			set(o, []any{claim("gpus")}, "spec", "scheduling", "resourceClaims")
		}, "spec.scheduling.resourceClaims[*] must set exactly one of resourceClaimName"},
		Case{"scheduling: claim with two sources", example, func(o map[string]any) {
			set(o, []any{claim("gpus", "resourceClaimName", "a", "resourceClaimTemplateName", "b")}, "spec", "scheduling", "resourceClaims")
		}, "spec.scheduling.resourceClaims[*] must set exactly one of resourceClaimName"},
		Case{"scheduling: claim by name", example, func(o map[string]any) {
			set(o, []any{claim("gpus", "resourceClaimName", "shared-gpus")}, "spec", "scheduling", "resourceClaims")
		}, ""},
		Case{"scheduling: claim name not a DNS label", example, func(o map[string]any) {
			set(o, []any{claim("GPUs.a", "resourceClaimName", "a")}, "spec", "scheduling", "resourceClaims")
		}, "spec.scheduling.resourceClaims[*].name must be a DNS label"},
		Case{"scheduling: claim source not a DNS subdomain", example, func(o map[string]any) {
			set(o, []any{claim("gpus", "resourceClaimTemplateName", "GPU_template")}, "spec", "scheduling", "resourceClaims")
		}, "spec.scheduling.resourceClaims[*].resourceClaimTemplateName must be a DNS subdomain"},
		Case{"scheduling: duplicate claim name", example, func(o map[string]any) {
			set(o, []any{claim("gpus", "resourceClaimName", "a"), claim("gpus", "resourceClaimName", "b")}, "spec", "scheduling", "resourceClaims")
		}, `spec.scheduling.resourceClaims[1]: Duplicate value`},
		Case{"scheduling: 4 claims", example, func(o map[string]any) {
			set(o, []any{claim("a", "resourceClaimName", "a"), claim("b", "resourceClaimName", "b"), claim("c", "resourceClaimName", "c"), claim("d", "resourceClaimName", "d")},
				"spec", "scheduling", "resourceClaims")
		}, ""},
		Case{"scheduling: 5 claims", example, func(o map[string]any) {
			set(o, []any{claim("a", "resourceClaimName", "a"), claim("b", "resourceClaimName", "b"), claim("c", "resourceClaimName", "c"), claim("d", "resourceClaimName", "d"),
				claim("e", "resourceClaimName", "e")}, "spec", "scheduling", "resourceClaims")
		}, "spec.scheduling.resourceClaims: Too many: 5: must have at most 4 items"},
	)
}

// DocumentedScheduling is the spec.scheduling of docs/gang.md's worked example: a gang of 4
// in one rack, disrupted only whole, sharing a claim made from a template.
func DocumentedScheduling() map[string]any {
	return map[string]any{
		"schedulingPolicy":      map[string]any{"gang": map[string]any{"minCount": 4}},
		"schedulingConstraints": map[string]any{"topology": []any{map[string]any{"key": "topology.kubernetes.io/rack"}}},
		"disruptionMode":        map[string]any{"all": map[string]any{}},
		"resourceClaims":        []any{map[string]any{"name": "gpus", "resourceClaimTemplateName": "gpus"}},
	}
}

// The messages of the replica limit.
var (
	tooManyReplicas = fmt.Sprintf("spec.replicaSpecs[*].replicas add up to more than %d", MaxReplicas)
	tooManyWorkers  = fmt.Sprintf("spec.worker.replicas is more than %d", MaxReplicas-1)
)

// addType adds a replica type made from the first one, with replicas (none when nil).
func addType(o map[string]any, replicaType string, replicas any) {
	r := deepCopyValue(get(o, "spec", "replicaSpecs", 0)).(map[string]any)
	r["type"] = replicaType
	delete(r, "replicas")
	if replicas != nil {
		r["replicas"] = replicas
	}
	set(o, append(get(o, "spec", "replicaSpecs").([]any), r), "spec", "replicaSpecs")
}

// UpdateCase is an update the API server must accept or refuse.
type UpdateCase struct {
	Name     string
	Example  string
	Old, New func(obj map[string]any)
	// Want is a piece of the error the API server answers, or "" when the update is accepted.
	Want string
}

// ResumeSpecsImmutable is the message of the resumeSpecs rule.
const ResumeSpecsImmutable = "spec.runMode.pause.resumeSpecs cannot be changed once set"

// ManagedByImmutable is the message of the managedBy rule.
const ManagedByImmutable = "spec.managedBy cannot be set, changed or removed once the job exists"

// managedBy sets spec.managedBy.
func managedBy(name string) func(map[string]any) {
	return func(o map[string]any) { set(o, name, "spec", "managedBy") }
}

// The messages of spec.scheduling's update rules.
const (
	SchedulingAddedOrRemoved   = "spec.scheduling cannot be added or removed once the job exists"
	SchedulingPolicyFrozen     = "spec.scheduling.schedulingPolicy cannot be added, removed or switched between basic and gang"
	SchedulingConstraintsFixed = "spec.scheduling.schedulingConstraints cannot change once the job exists"
	DisruptionModeFixed        = "spec.scheduling.disruptionMode cannot change once the job exists"
	ResourceClaimsFixed        = "spec.scheduling.resourceClaims cannot change once the job exists"
)

// schedulingUpdateCases: spec.scheduling is immutable as a batch Job's is: it cannot be
// added or removed, and only schedulingPolicy.gang.minCount changes in it.
func schedulingUpdateCases() []UpdateCase {
	const example = "generic-example.yaml"
	scheduling := func(edits ...func(s map[string]any)) func(map[string]any) {
		return func(o map[string]any) {
			s := DocumentedScheduling()
			for _, e := range edits {
				e(s)
			}
			set(o, s, "spec", "scheduling")
		}
	}
	minCount := func(n int) func(map[string]any) {
		return func(s map[string]any) { s["schedulingPolicy"] = map[string]any{"gang": map[string]any{"minCount": n}} }
	}
	without := func(field string) func(map[string]any) { return func(s map[string]any) { delete(s, field) } }
	with := func(field string, value any) func(map[string]any) { return func(s map[string]any) { s[field] = value } }
	unchanged := func(map[string]any) {}
	var cases []UpdateCase
	for _, example := range []string{"generic-example.yaml", "mpi-example.yaml", "colossalai-example.yaml", "tensorflow-example.yaml", "xgboost-example.yaml"} {
		kind := strings.TrimSuffix(example, ".yaml")
		cases = append(cases,
			UpdateCase{kind + ": scheduling added", example, unchanged, scheduling(), SchedulingAddedOrRemoved},
			UpdateCase{kind + ": scheduling removed", example, scheduling(), unchanged, SchedulingAddedOrRemoved},
			UpdateCase{kind + ": gang minCount changed", example, scheduling(), scheduling(minCount(2)), ""},
		)
	}
	return append(cases,
		UpdateCase{"scheduling: minCount given later", example, scheduling(with("schedulingPolicy", map[string]any{"gang": map[string]any{}})), scheduling(minCount(1)), ""},
		UpdateCase{"scheduling: policy added", example, scheduling(without("schedulingPolicy")), scheduling(), SchedulingPolicyFrozen},
		UpdateCase{"scheduling: policy removed", example, scheduling(), scheduling(without("schedulingPolicy")), SchedulingPolicyFrozen},
		UpdateCase{"scheduling: gang switched to basic", example, scheduling(), scheduling(with("schedulingPolicy", map[string]any{"basic": map[string]any{}})), SchedulingPolicyFrozen},
		UpdateCase{"scheduling: topology changed", example, scheduling(),
			scheduling(with("schedulingConstraints", map[string]any{"topology": []any{map[string]any{"key": "topology.kubernetes.io/zone"}}})), SchedulingConstraintsFixed},
		UpdateCase{"scheduling: topology removed", example, scheduling(), scheduling(without("schedulingConstraints")), SchedulingConstraintsFixed},
		UpdateCase{"scheduling: disruption mode changed", example, scheduling(), scheduling(with("disruptionMode", map[string]any{"single": map[string]any{}})), DisruptionModeFixed},
		UpdateCase{"scheduling: claim added", example, scheduling(), scheduling(with("resourceClaims", []any{
			map[string]any{"name": "gpus", "resourceClaimTemplateName": "gpus"}, map[string]any{"name": "nics", "resourceClaimName": "nics"}})), ResourceClaimsFixed},
		UpdateCase{"scheduling: claims removed", example, scheduling(), scheduling(without("resourceClaims")), ResourceClaimsFixed},
		UpdateCase{"scheduling: kept, TTL set later", example, scheduling(), func(o map[string]any) {
			scheduling()(o)
			set(o, 60, "spec", "ttlSecondsAfterFinished")
		}, ""},
	)
}

// UpdateCases: pause.enabled may be switched at will; resumeSpecs may be set once and never
// changed or removed afterwards (every kind has the rule). What a GenericJob's replicas are
// made from changes only while the job is paused; rules and clean-up change at any time.
func UpdateCases() []UpdateCase {
	resume := []any{map[string]any{"type": "worker", "skipInitContainer": true, "command": []any{"/usr/bin/sshd"}}}
	changed := []any{map[string]any{"type": "worker", "command": []any{"python", "resume.py"}}}
	pause := func(enabled bool, specs []any) func(map[string]any) {
		return func(obj map[string]any) {
			p := map[string]any{"enabled": enabled}
			if specs != nil {
				p["resumeSpecs"] = deepCopyValue(specs)
			}
			set(obj, p, "spec", "runMode", "pause")
		}
	}
	unchanged := func(map[string]any) {}
	var cases []UpdateCase
	for _, example := range []string{"generic-example.yaml", "mpi-example.yaml", "colossalai-example.yaml", "tensorflow-example.yaml", "xgboost-example.yaml"} {
		kind := strings.TrimSuffix(example, ".yaml")
		cases = append(cases,
			UpdateCase{kind + ": pause switched on, resumeSpecs kept", example, pause(false, resume), pause(true, resume), ""},
			UpdateCase{kind + ": pause switched off, resumeSpecs kept", example, pause(true, resume), pause(false, resume), ""},
			UpdateCase{kind + ": resumeSpecs set for the first time", example, pause(false, nil), pause(true, resume), ""},
			UpdateCase{kind + ": resumeSpecs changed", example, pause(true, resume), pause(true, changed), ResumeSpecsImmutable},
			UpdateCase{kind + ": resumeSpecs removed", example, pause(true, resume), pause(true, nil), ResumeSpecsImmutable},
			UpdateCase{kind + ": pause removed with its resumeSpecs", example, pause(true, resume), unchanged, ResumeSpecsImmutable},
			UpdateCase{kind + ": managedBy set later", example, unchanged, managedBy("kueue.x-k8s.io/multikueue"), ManagedByImmutable},
			UpdateCase{kind + ": managedBy changed", example, managedBy("kueue.x-k8s.io/multikueue"), managedBy("batch.tensorstack.dev/job-controller"), ManagedByImmutable},
			UpdateCase{kind + ": managedBy kept, TTL set later", example, managedBy("kueue.x-k8s.io/multikueue"),
				func(o map[string]any) {
					managedBy("kueue.x-k8s.io/multikueue")(o)
					set(o, 60, "spec", "ttlSecondsAfterFinished")
				}, ""},
		)
	}
	return append(append(append(cases, liveChangeCases()...), schedulingUpdateCases()...), elasticUpdateCases()...)
}

// liveChangeCases: a GenericJob's replicas, their services, scheduler and debug mode change
// only while it is paused (the pods were made from them); rules and clean-up at any time.
func liveChangeCases() []UpdateCase {
	const example = "generic-example.yaml"
	edit := func(path []any, value any) func(map[string]any) {
		return func(o map[string]any) { set(o, value, path...) }
	}
	both := func(edits ...func(map[string]any)) func(map[string]any) {
		return func(o map[string]any) {
			for _, e := range edits {
				e(o)
			}
		}
	}
	running, paused := edit([]any{"spec", "runMode", "pause"}, map[string]any{"enabled": false}), edit([]any{"spec", "runMode", "pause"}, map[string]any{"enabled": true})
	replicas := edit([]any{"spec", "replicaSpecs", 0, "replicas"}, 6)
	command := edit([]any{"spec", "replicaSpecs", 0, "template", "spec", "containers", 0, "command"}, []any{"sleep", "10"})
	service := func(port int) func(map[string]any) {
		return edit([]any{"spec", "service"}, map[string]any{"ports": []any{map[string]any{"name": "http", "port": port}}})
	}
	scheduler := edit([]any{"spec", "scheduler"}, map[string]any{"t9kScheduler": map[string]any{"queue": "default"}})
	debug := edit([]any{"spec", "runMode", "debug"}, map[string]any{"enabled": true})
	const (
		replicaSpecs = "spec.replicaSpecs cannot change while the job runs"
		services     = "spec.service cannot change while the job runs"
		schedulers   = "spec.scheduler cannot change while the job runs"
		debugMode    = "spec.runMode.debug cannot change while the job runs"
	)
	cases := []UpdateCase{
		{"live GenericJob: replicas changed", example, running, both(running, replicas), replicaSpecs},
		{"live GenericJob: command changed", example, running, both(running, command), replicaSpecs},
		{"live GenericJob: service added", example, running, both(running, service(80)), services},
		{"live GenericJob: service port changed", example, both(running, service(80)), both(running, service(8080)), services},
		{"live GenericJob: scheduler added", example, running, both(running, scheduler), schedulers},
		{"live GenericJob: debug switched on", example, running, both(running, debug), debugMode},
		{"live GenericJob: clean-up policy changed", example, running, both(running, edit([]any{"spec", "cleanUpPolicy"}, "All")), ""},
		{"live GenericJob: success rules changed", example, running, both(running, edit([]any{"spec", "successRules"}, []any{map[string]any{"worker": []any{1}}})), ""},
		{"paused GenericJob: replicas and command changed", example, paused, both(paused, replicas, command), ""},
		{"paused GenericJob: service, scheduler and debug changed", example, paused, both(paused, service(80), scheduler, debug), ""},
		{"GenericJob paused and changed at once", example, running, both(paused, replicas), ""},
		{"GenericJob changed and resumed at once", example, paused, both(running, replicas, debug), ""},
	}
	// The other kinds: what their pods are made from, likewise.
	for _, k := range []struct {
		example, field string
		path           []any
	}{
		{"mpi-example.yaml", "spec.worker", []any{"spec", "worker", "cmd"}},
		{"colossalai-example.yaml", "spec.worker", []any{"spec", "worker", "command"}},
		{"tensorflow-example.yaml", "spec.replicaSpecs", []any{"spec", "replicaSpecs", 0, "template", "spec", "containers", 0, "command"}},
		{"xgboost-example.yaml", "spec.replicaSpecs", []any{"spec", "replicaSpecs", 0, "template", "spec", "containers", 0, "command"}},
	} {
		kind := strings.TrimSuffix(k.example, ".yaml")
		command := edit(k.path, []any{"train", "--again"})
		cases = append(cases,
			UpdateCase{"live " + kind + ": command changed", k.example, running, both(running, command), k.field + " cannot change while the job runs"},
			UpdateCase{"live " + kind + ": debug switched on", k.example, running, both(running, debug), debugMode},
			UpdateCase{"paused " + kind + ": command and debug changed", k.example, paused, both(paused, command, debug), ""},
		)
	}
	return cases
}
