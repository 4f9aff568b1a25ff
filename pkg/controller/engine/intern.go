package engine

import (
	"strings"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// Every decoded object brings its own copy of each string: the same label keys on every pod,
// the same condition types, reasons and messages on every job. The caches' transforms replace
// such strings by one shared copy, Go's unique package's. Its table holds a string while a
// unique.Handle to it lives, and the caches keep only the string: an entry lasts until the
// next garbage collection after its last use, so the objects decoded between two collections
// share one copy and a later one makes a new copy (at most one per collection, where a
// burst decodes thousands of objects). The table never fills: a controller that runs for
// months shares the strings of today's objects as it did those of its first, and a user's
// labels, which are no small set, cost the table nothing once their objects are gone. The
// label maps of pods and Services are shared whole (shareLabels), and last while used. Strings unique
// to an object (its name, its UID) are never interned; those a job's children share (the
// job's name and UID, in their labels and owner reference) are: one table entry costs less
// than the three copies a job of four pods saves.

// internMaxLen leaves long strings (a failure's message) as decoded.
const internMaxLen = 128

// messageMaxLen is internMaxLen for the messages the scheduler and the kubelet write on pods:
// longer ("0/40 nodes are available: 40 Insufficient cpu. preemption: ..."), yet the same on
// every pod of a burst that waits.
const messageMaxLen = 1024

// intern returns the shared copy of s.
func intern(s string) string { return share(s, internMaxLen) }

// internMessage returns the shared copy of a message the scheduler or the kubelet wrote on a
// pod.
func internMessage(s string) string { return share(s, messageMaxLen) }

func share(s string, maxLen int) string {
	if s == "" || len(s) > maxLen {
		return s
	}
	return unique.Make(s).Value()
}

// internKeys makes a map's keys shared copies.
func internKeys(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[intern(k)] = v
	}
	return out
}

// internChildMeta shares the common strings of a child's metadata, as the children's cache
// keeps it: its namespace and its owner references (the job's API version, kind, name and
// UID). Its labels are shared by internLabels, or as a whole map (shareLabels).
func internChildMeta(m metav1.Object) {
	m.SetNamespace(intern(m.GetNamespace()))
	refs := m.GetOwnerReferences()
	for i := range refs {
		r := &refs[i]
		r.APIVersion, r.Kind, r.Name = intern(r.APIVersion), intern(r.Kind), intern(r.Name)
		r.UID = types.UID(intern(string(r.UID)))
	}
	m.SetOwnerReferences(refs)
}

// internLabels shares a child's labels' keys and values (at most internMaxLen long).
func internLabels(m metav1.Object) {
	if old := m.GetLabels(); len(old) > 0 {
		labels := make(map[string]string, len(old))
		for k, v := range old {
			labels[intern(k)] = intern(v)
		}
		m.SetLabels(labels)
	}
}

// sinceMark is in the messages that say since when replicas wait (decision/waiting.go): each
// is its job's own, and would only fill the table.
const sinceMark = "(since "

// internStatus shares the strings of a job's status that come from small sets: conditions'
// types, statuses, reasons and messages, replicas' phases and nodes, containers' names,
// states and reasons.
func internStatus(s *batch.JobStatus) {
	s.Phase = batch.JobPhase(intern(string(s.Phase)))
	for i := range s.Conditions {
		c := &s.Conditions[i]
		c.Type, c.Status = batch.JobConditionType(intern(string(c.Type))), corev1.ConditionStatus(intern(string(c.Status)))
		c.Reason = intern(c.Reason)
		if !strings.Contains(c.Message, sinceMark) {
			c.Message = intern(c.Message)
		}
	}
	for i := range s.Tasks {
		t := &s.Tasks[i]
		t.Type = intern(t.Type)
		for j := range t.Replicas {
			r := &t.Replicas[j]
			r.Phase, r.Node = batch.ReplicaPhase(intern(string(r.Phase))), intern(r.Node)
			for k := range r.Containers {
				c := &r.Containers[k]
				c.Name, c.State, c.Reason = intern(c.Name), batch.ContainerState(intern(string(c.State))), intern(c.Reason)
			}
		}
	}
}
