package v1beta2

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The labels by which a job opts in to Kueue, as Kueue's own integrations read them.
const (
	// LabelQueueName names the LocalQueue, in the job's namespace, the job waits in.
	LabelQueueName = "kueue.x-k8s.io/queue-name"
	// LabelPriorityClass names the WorkloadPriorityClass that orders the job in its queue.
	LabelPriorityClass = "kueue.x-k8s.io/priority-class"
	// LabelJobUID, on a Workload, holds the UID of the job it stands for: Kueue names the
	// preempting job by it in a preempted workload's message.
	LabelJobUID = "kueue.x-k8s.io/job-uid"
	// LabelPrebuiltWorkload, on a job, names the Workload made for it beforehand (by
	// MultiKueue, on a worker cluster): the job runs under that Workload, adopted, never
	// under one of its own.
	LabelPrebuiltWorkload = "kueue.x-k8s.io/prebuilt-workload-name"
	// AnnotationPrebuiltWorkload is the same, as an annotation: where MultiKueue names the
	// Workload since Kueue v0.18 (feature gate WorkloadIdentifierAnnotations, on by
	// default), and for a name too long for a label. It wins over the label.
	AnnotationPrebuiltWorkload = "kueue.x-k8s.io/prebuilt-workload-name"
	// LabelMultiKueueOrigin, on a job (and its Workload) on a worker cluster, names the
	// MultiKueue manager that made it there: the copy is MultiKueue's to remove.
	LabelMultiKueueOrigin = "kueue.x-k8s.io/multikueue-origin"
)

// Topology-aware scheduling (TAS): how a pod set asks to be placed, and what its pods carry
// so that Kueue's topology ungater places them in the domains it assigned.
const (
	// The annotations of a pod template that ask for a placement: all of the pod set's pods
	// in one domain of the level named (required), in as few as can be (preferred), or
	// anywhere the topology has room ("true": unconstrained); slices of
	// AnnotationSliceSize pods, each within one domain of AnnotationSliceRequiredTopology's
	// level.
	AnnotationRequiredTopology      = "kueue.x-k8s.io/podset-required-topology"
	AnnotationPreferredTopology     = "kueue.x-k8s.io/podset-preferred-topology"
	AnnotationUnconstrainedTopology = "kueue.x-k8s.io/podset-unconstrained-topology"
	AnnotationSliceRequiredTopology = "kueue.x-k8s.io/podset-slice-required-topology"
	AnnotationSliceSize             = "kueue.x-k8s.io/podset-slice-size"
	// AnnotationSliceRequiredTopologyConstraints is up to three slice layers, as JSON:
	// [{"topology": <level>, "size": <pods>}, ...].
	AnnotationSliceRequiredTopologyConstraints = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
	// AnnotationPodSetGroupName places two pod sets of the same name together.
	AnnotationPodSetGroupName = "kueue.x-k8s.io/podset-group-name"

	// TopologySchedulingGate holds a pod until Kueue's ungater gives it its domain: it
	// removes the gate and adds the domain's node labels to the pod's nodeSelector.
	TopologySchedulingGate = "kueue.x-k8s.io/topology"
	// LabelPodSet, on a pod, names its pod set; AnnotationWorkload its Workload. The ungater
	// finds a pod set's pods by both.
	LabelPodSet        = "kueue.x-k8s.io/podset"
	AnnotationWorkload = "kueue.x-k8s.io/workload"
)

// Workload condition types Kueue sets, and those the job's controller sets.
const (
	// WorkloadQuotaReserved: the ClusterQueue holds quota for the workload (status.admission).
	WorkloadQuotaReserved = "QuotaReserved"
	// WorkloadAdmitted: quota is reserved and every admission check passed; the job may run.
	WorkloadAdmitted = "Admitted"
	// WorkloadEvicted: the job must stop (preempted, its pods not ready in time, deactivated).
	WorkloadEvicted = "Evicted"
	// WorkloadPreempted: the eviction was a preemption; its reason says by what.
	WorkloadPreempted = "Preempted"
	// WorkloadPodsReady, set by the job's controller: every pod of the job is ready (Kueue's
	// waitForPodsReady waits for it).
	WorkloadPodsReady = "PodsReady"
	// WorkloadFinished, set by the job's controller: the job ended; its quota is released.
	WorkloadFinished = "Finished"
	// WorkloadDeactivationTarget: Kueue is about to deactivate the workload (spec.active
	// false), for the reason and message it gives (an admission check rejected it, say).
	WorkloadDeactivationTarget = "DeactivationTarget"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// Workload is Kueue's unit of admission: what a job needs, as pod sets, and the queue it
// waits in. Kueue admits it whole, or not at all.
type Workload struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WorkloadSpec   `json:"spec"`
	Status WorkloadStatus `json:"status,omitempty"`
}

// WorkloadSpec is what the job asks for.
type WorkloadSpec struct {
	// PodSets are the job's groups of alike pods (at most 18 since Kueue 0.19, 8 before);
	// Kueue sums their requests.
	PodSets []PodSet `json:"podSets"`
	// QueueName is the LocalQueue, in the workload's namespace.
	QueueName string `json:"queueName,omitempty"`
	// PriorityClassRef names the priority class Priority comes from.
	PriorityClassRef *PriorityClassRef `json:"priorityClassRef,omitempty"`
	// Priority orders workloads in a ClusterQueue and decides preemption.
	Priority *int32 `json:"priority,omitempty"`
	// Active false deactivates the workload: Kueue evicts it and admits it no more.
	Active *bool `json:"active,omitempty"`
}

// PriorityClassRef names a WorkloadPriorityClass (group kueue.x-k8s.io) or a pod
// PriorityClass (group scheduling.k8s.io).
type PriorityClassRef struct {
	Group string `json:"group,omitempty"`
	Kind  string `json:"kind,omitempty"`
	Name  string `json:"name,omitempty"`
}

// PodSet is a group of pods alike: Count pods like Template.
type PodSet struct {
	// Name is a DNS label, unique in the workload.
	Name     string                 `json:"name"`
	Template corev1.PodTemplateSpec `json:"template"`
	Count    int32                  `json:"count"`
	// MinCount, when set, lets Kueue admit the pod set with fewer pods, down to it (partial
	// admission); the admission's podSetAssignments[].count says how many.
	MinCount *int32 `json:"minCount,omitempty"`
	// TopologyRequest asks for a placement by topology (TAS), and says which pod label
	// holds a pod's rank.
	TopologyRequest *PodSetTopologyRequest `json:"topologyRequest,omitempty"`
}

// PodSetTopologyRequest is how a pod set asks Kueue to place its pods by topology. At most
// one of Required, Preferred and Unconstrained; the slice fields may come with any of them.
type PodSetTopologyRequest struct {
	Required      *string `json:"required,omitempty"`
	Preferred     *string `json:"preferred,omitempty"`
	Unconstrained *bool   `json:"unconstrained,omitempty"`
	// PodIndexLabel is the pod label that holds a pod's rank in its pod set: the ungater
	// gives rank r the r-th pod slot of the assignment, so that neighbouring ranks land in
	// neighbouring domains.
	PodIndexLabel   *string `json:"podIndexLabel,omitempty"`
	PodSetGroupName *string `json:"podSetGroupName,omitempty"`
	// PodSetSliceRequiredTopology and PodSetSliceSize: slices of that many pods, each in
	// one domain of the level.
	PodSetSliceRequiredTopology *string `json:"podSetSliceRequiredTopology,omitempty"`
	PodSetSliceSize             *int32  `json:"podSetSliceSize,omitempty"`
	// PodsetSliceRequiredTopologyConstraints: up to three layers of slices (Kueue's
	// spelling).
	PodsetSliceRequiredTopologyConstraints []SliceTopologyConstraint `json:"podsetSliceRequiredTopologyConstraints,omitempty"`
}

// SliceTopologyConstraint is one layer of slices: Size pods in one domain of Topology's level.
type SliceTopologyConstraint struct {
	Topology string `json:"topology"`
	Size     int32  `json:"size"`
}

// WorkloadStatus is what Kueue decided.
type WorkloadStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Admission, once quota is reserved: the ClusterQueue and the flavor of each pod set's
	// resources.
	Admission *Admission `json:"admission,omitempty"`
	// AdmissionChecks may add labels, annotations, node selectors and tolerations to pod sets.
	AdmissionChecks []AdmissionCheckState `json:"admissionChecks,omitempty"`
	// UnhealthyNodes are the nodes of the topology assignment Kueue found failed (NotReady,
	// gone, or tainted once no pod of the workload runs there): it moves their pods to other
	// nodes (a new TopologyAssignment) and clears the list.
	UnhealthyNodes []UnhealthyNode `json:"unhealthyNodes,omitempty"`
	// ReclaimablePods, set by the job's controller, are the pods of each pod set that need no
	// quota any more (they ended and will not run again): Kueue counts the rest. While the
	// workload holds quota a count may only grow (Kueue's webhook refuses less).
	ReclaimablePods []ReclaimablePod `json:"reclaimablePods,omitempty"`
}

// ReclaimablePod is how many pods of one pod set need no quota any more.
type ReclaimablePod struct {
	Name  string `json:"name"`
	Count int32  `json:"count"`
}

// Admission is where the workload was admitted.
type Admission struct {
	ClusterQueue      string             `json:"clusterQueue"`
	PodSetAssignments []PodSetAssignment `json:"podSetAssignments"`
}

// UnhealthyNode is a node of the topology assignment that Kueue found failed.
type UnhealthyNode struct {
	Name string `json:"name"`
}

// PodSetAssignment is the flavor of each resource of one pod set, and its pods' domains
// when it was placed by topology.
type PodSetAssignment struct {
	Name    string                         `json:"name"`
	Flavors map[corev1.ResourceName]string `json:"flavors,omitempty"`
	Count   *int32                         `json:"count,omitempty"`
	// TopologyAssignment: the pod set was placed by topology, and its pods wait for Kueue's
	// ungater (the TopologySchedulingGate) to be given their domains.
	TopologyAssignment *TopologyAssignment `json:"topologyAssignment,omitempty"`
}

// TopologyAssignment is where a pod set's pods go: domains, each a value per level (node
// label), and a pod count per domain, in rank order. Slices encode runs of domains compactly;
// the whole assignment is their concatenation.
type TopologyAssignment struct {
	Levels []string                  `json:"levels"`
	Slices []TopologyAssignmentSlice `json:"slices,omitempty"`
}

// TopologyAssignmentSlice is DomainCount domains: each level's value is the universal one,
// or prefix + root + suffix; each domain's pod count the universal one or its own.
type TopologyAssignmentSlice struct {
	DomainCount    int32                           `json:"domainCount"`
	ValuesPerLevel []TopologyAssignmentLevelValues `json:"valuesPerLevel"`
	PodCounts      TopologyAssignmentPodCounts     `json:"podCounts"`
}

// TopologyAssignmentLevelValues is one level's values in a slice.
type TopologyAssignmentLevelValues struct {
	Universal  *string                   `json:"universal,omitempty"`
	Individual *TopologyAssignmentValues `json:"individual,omitempty"`
}

// TopologyAssignmentValues are a slice's values of one level, a root per domain.
type TopologyAssignmentValues struct {
	Prefix *string  `json:"prefix,omitempty"`
	Suffix *string  `json:"suffix,omitempty"`
	Roots  []string `json:"roots"`
}

// TopologyAssignmentPodCounts are a slice's pod counts.
type TopologyAssignmentPodCounts struct {
	Universal  *int32  `json:"universal,omitempty"`
	Individual []int32 `json:"individual,omitempty"`
}

// AdmissionCheckState is one admission check's verdict.
type AdmissionCheckState struct {
	Name  string `json:"name"`
	State string `json:"state"`
	// Message is the check's own word on its state (why it rejected the workload, say).
	Message       string         `json:"message,omitempty"`
	PodSetUpdates []PodSetUpdate `json:"podSetUpdates,omitempty"`
}

// PodSetUpdate is what an admission check adds to a pod set's pods.
type PodSetUpdate struct {
	Name         string              `json:"name"`
	Labels       map[string]string   `json:"labels,omitempty"`
	Annotations  map[string]string   `json:"annotations,omitempty"`
	NodeSelector map[string]string   `json:"nodeSelector,omitempty"`
	Tolerations  []corev1.Toleration `json:"tolerations,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// WorkloadList is a list of Workloads.
type WorkloadList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Workload `json:"items"`
}

// +genclient
// +genclient:nonNamespaced
// +genclient:onlyVerbs=get,list,watch
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ResourceFlavor is a kind of node: the pods of a pod set admitted with a flavor go to nodes
// with its labels, tolerating its taints.
type ResourceFlavor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ResourceFlavorSpec `json:"spec,omitempty"`
}

// ResourceFlavorSpec is what a flavor adds to the pods admitted with it.
type ResourceFlavorSpec struct {
	NodeLabels  map[string]string   `json:"nodeLabels,omitempty"`
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ResourceFlavorList is a list of ResourceFlavors.
type ResourceFlavorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceFlavor `json:"items"`
}

// +genclient
// +genclient:nonNamespaced
// +genclient:onlyVerbs=get,list,watch
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// WorkloadPriorityClass gives the workloads that name it a priority.
type WorkloadPriorityClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Value int32 `json:"value"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// WorkloadPriorityClassList is a list of WorkloadPriorityClasses.
type WorkloadPriorityClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WorkloadPriorityClass `json:"items"`
}
