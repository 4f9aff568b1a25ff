package engine

import (
	"runtime"
	"slices"
	"strings"
	"sync"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// The children's label maps, shared by content (docs/install.md, "Memory"). A job's pods
// carry the same labels but for their rank (batch.LabelReplicaIndex), and so do its
// Services; nothing reads the rank from the cache (a sync finds a replica's pod and Service
// by name; the label is for users' selectors and Kueue's, which read the API). Without it,
// the pods of one replica type and attempt have equal labels, as have the Services of one
// type, and the cache keeps one map for each such group instead of one per object: a Go map
// of up to eight entries takes some 300 bytes however few it holds, and at 10,000 jobs of
// four the pods' and Services' maps were 80,000 of them.
//
// A shared map lives while a cached object uses it: the object that takes one releases it
// once the garbage collector has freed the object (runtime.AddCleanup), and the table
// forgets a map no object uses, so that the maps of deleted jobs do not stay.

// sharedLabels is the table of shared maps, by their content (labelsKey).
var sharedLabels = struct {
	sync.Mutex
	byKey map[string]*labelMap
}{byKey: map[string]*labelMap{}}

// labelMap is a shared map and how many cached objects use it.
type labelMap struct {
	key    string
	labels map[string]string
	users  int
}

// shareLabels returns the shared map of labels, less batch.LabelReplicaIndex, with its keys
// and values interned, for obj, a cached object that keeps it: obj releases it when freed.
// Only the caches' transforms call it, on objects nothing else holds yet. The map is shared:
// it must never be written to.
func shareLabels[T any](obj *T, labels map[string]string) map[string]string {
	if len(labels) == 0 {
		return labels
	}
	key := labelsKey(labels)
	sharedLabels.Lock()
	m := sharedLabels.byKey[key]
	if m == nil {
		m = &labelMap{key: key, labels: make(map[string]string, len(labels))}
		for k, v := range labels {
			if k != batch.LabelReplicaIndex {
				m.labels[intern(k)] = intern(v)
			}
		}
		sharedLabels.byKey[key] = m
	}
	m.users++
	sharedLabels.Unlock()
	runtime.AddCleanup(obj, releaseLabels, m)
	return m.labels
}

// releaseLabels is a freed object's release of its map.
func releaseLabels(m *labelMap) {
	sharedLabels.Lock()
	defer sharedLabels.Unlock()
	if m.users--; m.users == 0 {
		delete(sharedLabels.byKey, m.key)
	}
}

// labelsKey is the table's key for labels: each key and value but the rank's, sorted, with a
// byte no label holds between them.
func labelsKey(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		if k != batch.LabelReplicaIndex {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(labels[k])
		b.WriteByte(0)
	}
	return b.String()
}
