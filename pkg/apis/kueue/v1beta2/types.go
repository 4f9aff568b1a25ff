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
	// PodSets are the job's groups of alike pods (at most 8); Kueue sums their requests.
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
}

// WorkloadStatus is what Kueue decided.
type WorkloadStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Admission, once quota is reserved: the ClusterQueue and the flavor of each pod set's
	// resources.
	Admission *Admission `json:"admission,omitempty"`
	// AdmissionChecks may add labels, annotations, node selectors and tolerations to pod sets.
	AdmissionChecks []AdmissionCheckState `json:"admissionChecks,omitempty"`
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

// PodSetAssignment is the flavor of each resource of one pod set.
type PodSetAssignment struct {
	Name    string                         `json:"name"`
	Flavors map[corev1.ResourceName]string `json:"flavors,omitempty"`
	Count   *int32                         `json:"count,omitempty"`
}

// AdmissionCheckState is one admission check's verdict.
type AdmissionCheckState struct {
	Name          string         `json:"name"`
	State         string         `json:"state"`
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
