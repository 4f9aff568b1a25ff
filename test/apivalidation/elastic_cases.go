package apivalidation

import "strings"

// The messages of spec.elastic's rules (docs/elastic.md).
const (
	ElasticFrozen       = "spec.elastic cannot be added or removed, nor its replicaType, minReplicas or maxReplicas changed, while the job runs"
	ElasticOutOfBounds  = "outside spec.elastic.minReplicas"
	ElasticTypeReplicas = "spec.replicaSpecs[*].replicas must be left out for the elastic type"
)

// elastic makes the example's first replica type elastic: replicas 3, between lo and hi.
func elastic(lo, hi int) func(map[string]any) {
	return func(o map[string]any) {
		delete(get(o, "spec", "replicaSpecs", 0).(map[string]any), "replicas")
		set(o, map[string]any{"replicaType": "worker", "replicas": 3, "minReplicas": lo, "maxReplicas": hi}, "spec", "elastic")
	}
}

// elasticCases: a GenericJob's type may be elastic within bounds; the kinds whose framework
// cannot change its world while it runs refuse spec.elastic, saying why.
func elasticCases() []Case {
	const example = "generic-example.yaml"
	then := func(edits ...func(map[string]any)) func(map[string]any) {
		return func(o map[string]any) {
			for _, e := range edits {
				e(o)
			}
		}
	}
	noRules := func(o map[string]any) {
		delete(o["spec"].(map[string]any), "successRules")
		delete(o["spec"].(map[string]any), "failureRules")
	}
	cases := []Case{
		{"elastic: a type between 2 and 4", example, then(noRules, elastic(2, 4)), ""},
		{"elastic: the documented rules name ranks below the minimum", example, elastic(2, 4), ""},
		{"elastic: a rule names a rank that may go", example, elastic(1, 4), "below spec.elastic.minReplicas"},
		{"elastic: minimum above maximum", example, then(noRules, elastic(4, 3)), "spec.elastic.minReplicas must not be more than spec.elastic.maxReplicas"},
		{"elastic: size below the minimum", example, then(noRules, elastic(2, 4), func(o map[string]any) { set(o, 1, "spec", "elastic", "replicas") }), ElasticOutOfBounds},
		{"elastic: size above the maximum", example, then(noRules, elastic(2, 4), func(o map[string]any) { set(o, 5, "spec", "elastic", "replicas") }), ElasticOutOfBounds},
		{"elastic: the type's replicas given too", example, then(noRules, elastic(2, 4), func(o map[string]any) { set(o, 3, "spec", "replicaSpecs", 0, "replicas") }), ElasticTypeReplicas},
		{"elastic: a type the job does not have", example, then(noRules, elastic(2, 4), func(o map[string]any) { set(o, "ps", "spec", "elastic", "replicaType") }), "spec.elastic.replicaType must name a replica type listed in spec.replicaSpecs"},
		{"elastic: a maximum past the job's limit", example, then(noRules, elastic(2, 750), func(o map[string]any) { addType(o, "ps", 1) }), "lower maxReplicas"},
		{"elastic: with MultiKueue", example, then(noRules, elastic(2, 4), managedBy("kueue.x-k8s.io/multikueue")), "spec.elastic cannot go with spec.managedBy: kueue.x-k8s.io/multikueue"},
	}
	for example, why := range map[string]string{
		"mpi-example.yaml":        "cannot apply to an MPIJob",
		"colossalai-example.yaml": "cannot apply to a ColossalAIJob",
		"tensorflow-example.yaml": "cannot apply to a TensorFlowTrainingJob",
		"xgboost-example.yaml":    "cannot apply to an XGBoostTrainingJob",
	} {
		cases = append(cases, Case{strings.TrimSuffix(example, "-example.yaml") + ": elastic refused", example, func(o map[string]any) {
			set(o, map[string]any{"replicaType": "worker", "replicas": 2, "minReplicas": 1, "maxReplicas": 2}, "spec", "elastic")
		}, "spec.elastic " + why})
	}
	return cases
}

// elasticUpdateCases: an elastic job is resized at any time; its bounds change only while it
// is paused.
func elasticUpdateCases() []UpdateCase {
	const example = "generic-example.yaml"
	size := func(n int) func(map[string]any) {
		return func(o map[string]any) {
			elastic(2, 4)(o)
			set(o, n, "spec", "elastic", "replicas")
		}
	}
	paused := func(edit func(map[string]any)) func(map[string]any) {
		return func(o map[string]any) {
			edit(o)
			set(o, map[string]any{"enabled": true}, "spec", "runMode", "pause")
		}
	}
	return []UpdateCase{
		{"elastic: resized while it runs", example, size(3), size(4), ""},
		{"elastic: maximum changed while it runs", example, elastic(2, 4), elastic(2, 5), ElasticFrozen},
		{"elastic: minimum changed while paused", example, paused(elastic(2, 4)), paused(elastic(3, 4)), ""},
		{"elastic: added while it runs", example, func(map[string]any) {}, elastic(2, 4), ElasticFrozen},
	}
}
