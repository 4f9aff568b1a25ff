// Package features holds the controller's feature gates (--feature-gates).
package features

import (
	"k8s.io/component-base/featuregate"
)

const (
	// BatchedPodStatusUpdates coalesces the status writes that pod phase changes cause into
	// one per job per second, instead of one per change.
	BatchedPodStatusUpdates featuregate.Feature = "BatchedPodStatusUpdates"
)

var defaults = map[featuregate.Feature]featuregate.FeatureSpec{
	BatchedPodStatusUpdates: {Default: true, PreRelease: featuregate.Beta},
}

// Gates is the controller's feature gate, set from --feature-gates.
var Gates featuregate.MutableFeatureGate = featuregate.NewFeatureGate()

func init() {
	if err := Gates.Add(defaults); err != nil {
		panic(err)
	}
}

// Enabled reports whether a feature is on.
func Enabled(f featuregate.Feature) bool { return Gates.Enabled(f) }
