package decision

import (
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// Retries away from bad nodes (spec.failurePolicy.avoidFailedNodes; docs/failures.md). A
// replica that fails in a way that points at its node has the node listed in
// status.excludedNodes, and every pod made from then on (a replacement, every pod of a
// restarted job, a gang's too) requires, by node affinity, a node not in the list. The list
// is bounded (maxNodes, oldest dropped first), and when a pod that avoids nodes cannot be
// placed because of it, the oldest exclusion is dropped with a Warning and the pod made
// again: the job never waits for ever because of its list. It lives in status, so it
// survives a restart of the controller and a requeue by Kueue.

// unfitGrace is how long a pod that avoids nodes may be unschedulable, with node affinity
// among the scheduler's reasons, before the oldest exclusion is dropped.
const unfitGrace = 10 * time.Second

// nodeDisruptions are the disruption reasons that point at the pod's node: its kubelet
// ended it (node pressure, shutdown), its taints evicted it, it was lost with its node, or
// Kueue's topology-aware scheduling found its node bad.
var nodeDisruptions = map[string]bool{
	"TerminationByKubelet": true, "DeletionByTaintManager": true, "DeletionByPodGC": true,
	string(TerminatedByKueue): true, "Evicted": true, "NodeLost": true, "NodeShutdown": true,
}

// avoidNode lists the node a replica's pod ended on, as t records the ending, when the job
// avoids failed nodes and the ending points at the node. It returns the list of the nodes new
// pods avoid with it (excluded, when it is not listed), and its entry (nil: not listed).
func (x *decider) avoidNode(excluded []batch.ExcludedNode, r *replica, t *batch.ReplicaTermination) ([]batch.ExcludedNode, *batch.ExcludedNode) {
	policy := x.plan.FailurePolicy
	if policy == nil || policy.AvoidFailedNodes == nil || t == nil || t.Node == "" {
		return excluded, nil
	}
	points := pointsAtNode(t)
	if r.stalled != "" {
		points = false
	}
	if r.rule != nil && r.rule.rule.AvoidNode != nil {
		points = *r.rule.rule.AvoidNode
	}
	if !points {
		return excluded, nil
	}
	reason := t.Reason
	if code := terminationExitCode(t); !t.Disrupted && code != 0 {
		reason = "exit code " + itoa(code)
	}
	excluded = slices.DeleteFunc(excluded, func(e batch.ExcludedNode) bool { return e.Node == t.Node })
	e := batch.ExcludedNode{Node: t.Node, Replica: r.status.Name, Reason: reason, Time: metav1.NewTime(x.now)}
	excluded = append(excluded, e)
	if most := maxExcluded(policy); len(excluded) > most {
		excluded = excluded[len(excluded)-most:]
	}
	return excluded, &e
}

// pointsAtNode: a disruption by the node, or a non-zero exit of a container that had run
// (not one that could not start, nor an OOM kill by the pod's own limit).
func pointsAtNode(t *batch.ReplicaTermination) bool {
	if t.Disrupted {
		return nodeDisruptions[t.Reason]
	}
	if nodeDisruptions[t.Reason] {
		return true
	}
	for _, c := range t.Containers {
		if c.ExitCode == nil || *c.ExitCode == 0 {
			continue
		}
		switch c.Reason {
		case "StartError", "ContainerCannotRun", string(batch.ReasonOOMKilled):
			continue
		}
		return true
	}
	return false
}

func terminationExitCode(t *batch.ReplicaTermination) int32 {
	for _, c := range t.Containers {
		if c.ExitCode != nil && *c.ExitCode != 0 {
			return *c.ExitCode
		}
	}
	return 0
}

func maxExcluded(policy *batch.FailurePolicy) int {
	if m := policy.AvoidFailedNodes.MaxNodes; m != nil && *m > 0 {
		return int(*m)
	}
	return batch.DefaultMaxExcludedNodes
}

// excludeNodes makes a new pod avoid the listed nodes: every term of its required node
// affinity (or one, when it has none) also requires a node not in the list.
func excludeNodes(pod *corev1.Pod, excluded []batch.ExcludedNode) {
	if len(excluded) == 0 {
		return
	}
	names := make([]string, len(excluded))
	// A node field selector takes one value per requirement: one NotIn per node.
	notIn := make([]corev1.NodeSelectorRequirement, len(excluded))
	for i, e := range excluded {
		names[i] = e.Node
		notIn[i] = corev1.NodeSelectorRequirement{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpNotIn, Values: []string{e.Node}}
	}
	spec := &pod.Spec
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	if spec.Affinity.NodeAffinity == nil {
		spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	terms := &na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(*terms) == 0 {
		*terms = append(*terms, corev1.NodeSelectorTerm{})
	}
	for i := range *terms {
		(*terms)[i].MatchFields = append((*terms)[i].MatchFields, notIn...)
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[batch.AnnotationExcludedNodes] = strings.Join(names, ",")
}

// unfit is what dropUnfit decides: the nodes new pods avoid from now on (left), the node it
// dropped ("": none), the pods it deletes to make them again without it, and how soon the
// grace of a pod that cannot be placed runs out, for a sync then (0: none runs).
type unfit struct {
	left    []batch.ExcludedNode
	dropped string
	remade  []*corev1.Pod
	wait    time.Duration
}

// dropUnfit drops the oldest exclusion when a pod made to avoid it cannot be placed, the
// scheduler naming node affinity among its reasons, for longer than unfitGrace; the pods
// that avoid it are made again without it.
func (x *decider) dropUnfit(excluded []batch.ExcludedNode, all []*replica) unfit {
	if len(excluded) == 0 {
		return unfit{left: excluded}
	}
	oldest := excluded[0].Node
	var stuck []*replica
	for _, r := range all {
		pod := r.pod
		if pod == nil || pod.DeletionTimestamp != nil || pod.Spec.NodeName != "" || r.action != noAction ||
			!slices.Contains(strings.Split(pod.Annotations[batch.AnnotationExcludedNodes], ","), oldest) {
			continue
		}
		c := podCondition(pod, corev1.PodScheduled)
		if c == nil || c.Status != corev1.ConditionFalse || c.Reason != corev1.PodReasonUnschedulable {
			continue
		}
		stuck = append(stuck, r)
	}
	if len(stuck) == 0 || !slices.ContainsFunc(all, affinityUnfit) {
		return unfit{left: excluded}
	}
	since := podCondition(stuck[0].pod, corev1.PodScheduled).LastTransitionTime.Time
	if wait := unfitGrace - x.now.Sub(since); wait > 0 {
		return unfit{left: excluded, wait: wait}
	}
	u := unfit{left: excluded[1:], dropped: oldest}
	for _, r := range stuck {
		// Made again with the shorter list; never ran: nothing to count.
		r.status.Phase, r.view = batch.ReplicaDeleted, Replica{Phase: batch.ReplicaDeleted}
		u.remade = append(u.remade, r.pod)
	}
	return u
}

// affinityUnfit: the scheduler says node affinity is among the reasons a replica's pod does
// not fit.
func affinityUnfit(r *replica) bool {
	if r.pod == nil {
		return false
	}
	c := podCondition(r.pod, corev1.PodScheduled)
	return c != nil && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, "node affinity")
}

func podCondition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }
